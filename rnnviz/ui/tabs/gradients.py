"""The Gradients tab: ‖∂L/∂carry_t‖ at every step (pinned runs overlaid), the theory next to
it, and how much each input affects the loss."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.base.analysis import Analysis
from rnnviz.base.theory import simple_cell_theory
from rnnviz.frames.gradients import (
    bound_frame,
    config_label,
    gradient_long_frame,
    input_grad_frame,
    timestep_frame,
)
from rnnviz.serve.requests import Request
from rnnviz.tables.cells import cell_spec
from rnnviz.ui.tabs.common import csv_button, model_charts
from rnnviz.ui.tabs.context import TabContext

if TYPE_CHECKING:
    from rnnviz.ui.tabs.context import BlockContext

TITLE = "Gradients"


def requests(ctx: TabContext) -> list[Request]:
    """Nothing: the tab draws the page's analysis and the pins."""
    return []


def render(ctx: TabContext) -> None:
    """The gradient chart, its notes, the connectivity chart and the per-timestep table."""
    a, overlays = ctx.analysis, ctx.pins.overlays
    label = config_label(a)
    df = pd.concat([gradient_long_frame(a, label), *map(gradient_long_frame, overlays)], ignore_index=True)
    bound = bound_frame(a) if not overlays else None
    st.plotly_chart(charts.gradient_figure(df, bound), key="chart_gradients")
    _notes(a, bound is not None)
    conn = pd.concat([input_grad_frame(a, label), *map(input_grad_frame, overlays)], ignore_index=True)
    title = "Connectivity ‖∂L/∂x_t‖: how much each input affects the loss"
    figure = charts.line_figure(conn, title, "‖∂L/∂x_t‖ (log)", log_y=True)
    st.plotly_chart(figure, key="chart_connectivity")
    table = timestep_frame(a)
    csv_button(table, "rnnviz_timesteps.csv", "csv_timesteps", "Download per-timestep table (CSV)")


def _notes(a: Analysis, bound: bool) -> None:
    """The theory (simple cell), the closed form (diagonal cells), true zeros and underflow."""
    theory = simple_cell_theory(a)
    if theory is not None:
        cond = (
            "< 1: vanishing is guaranteed (sufficient condition)"
            if theory.product < 1
            else "≥ 1: exploding is possible (necessary condition met)"
        )
        st.markdown(
            f"Theory (Pascanu et al., 2013): σ₁(W_h) = **{theory.sigma1:.4f}**, γ = max|φ′| = "
            f"{theory.gamma:g}, so σ₁·γ = **{theory.product:.4f}** {cond}."
        )
        if theory.bound is None:
            st.caption(
                "The bound curve is drawn for loss = last only (with loss = all each step also feeds the "
                "loss directly)."
            )
    spec = cell_spec(a.config.cell)
    others = [c for c in spec.components if c != spec.output]
    if others and a.config.loss == "last":
        names = ", ".join(f"∂L/∂{c}_T" for c in others)
        st.caption(
            f"{names} is exactly 0 with loss = last (a true zero): the carry is taken as handed on, holding "
            f"{spec.output}_T fixed; the chart leaves it out."
        )
    elif bound and a.config.cell != "simple":
        st.caption(
            f"Closed form ({spec.description.split(';')[0]}): the step Jacobian is diagonal, so the dashed "
            "curve is exact; "
            "it should lie on the measured total."
        )
    if spec.display.state_note:
        st.caption(spec.display.state_note)
    true_zero = np.isneginf(a.log10_grad_norms)
    under = (a.grad_norms == 0) & np.isfinite(a.log10_grad_norms)
    if under.any():
        st.caption(
            f"At {int(under.sum())} steps the {a.config.dtype} gradient underflows to 0 (t ≤ "
            f"{int(np.flatnonzero(under).max())}); "
            "the curve shows its exact magnitude from the log-magnitude reverse pass (δ rescaled by powers "
            "of two each step)."
        )
    if true_zero.any():
        st.caption(
            f"{int(true_zero.sum())} steps have a gradient of exactly 0 (no dependence of the loss on that "
            "carry): gaps in the curve."
        )


def block_requests(ctx: BlockContext) -> list[Request]:
    """Nothing: the views draw the page's analysis."""
    return []


def render_block(ctx: BlockContext) -> None:
    """A reference block's view across its layers: the layer × step heatmap with a line per
    layer, each recurrent layer's state gradients, and the connectivity over the inputs."""
    model_charts(ctx.analysis, ctx.summary)

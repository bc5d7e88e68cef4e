"""The Gradients, Carry and Compare tabs: per-step gradient norms, carry trajectories, pinned runs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from rnnviz import charts, frames
from rnnviz.analysis import Analysis
from rnnviz.engine.cells import cell_spec
from rnnviz.engine.cells.theory import simple_cell_theory
from rnnviz.frames.verdicts import verdict
from rnnviz.ui.views.common import csv_button


def gradients_view(a: Analysis, overlays: list[Analysis]) -> None:
    label = frames.config_label(a)
    df = pd.concat(
        [frames.gradient_long_frame(a, label)] + [frames.gradient_long_frame(o) for o in overlays],
        ignore_index=True,
    )
    bound = frames.bound_frame(a) if not overlays else None
    st.plotly_chart(charts.gradient_figure(df, bound), key="chart_gradients")
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
    elif bound is not None and a.config.cell != "simple":
        st.caption(
            f"Closed form ({spec.description.split(';')[0]}): the step Jacobian is diagonal, so the dashed "
            "curve is exact; "
            "it should lie on the measured total."
        )
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
    conn = pd.concat(
        [frames.input_grad_frame(a, label)] + [frames.input_grad_frame(o) for o in overlays],
        ignore_index=True,
    )
    st.plotly_chart(
        charts.line_figure(
            conn,
            "Connectivity ‖∂L/∂x_t‖: how much each input affects the loss",
            "‖∂L/∂x_t‖ (log)",
            log_y=True,
        ),
        key="chart_connectivity",
    )
    csv_button(
        frames.timestep_frame(a), "rnnviz_timesteps.csv", "csv_timesteps", "Download per-timestep table (CSV)"
    )


def carry_view(a: Analysis, overlays: list[Analysis]) -> None:
    norms = pd.concat(
        [frames.carry_norm_frame(a)] + [frames.carry_norm_frame(o) for o in overlays], ignore_index=True
    )
    spans = charts.decades(norms["value"].tolist())
    st.plotly_chart(
        charts.line_figure(norms, "Carry norm over time", "‖carry_t‖", log_y=spans > 2),
        key="chart_carry_norms",
    )
    comps = a.config.carry_components
    c1, c2 = st.columns(2)
    comp = c1.radio("Component", comps, index=len(comps) - 1, horizontal=True, key="carry_component")
    n_ex = a.config.batch_size or 1
    example = c2.number_input("Example", 0, n_ex - 1, 0, key="carry_example", disabled=n_ex == 1)
    heat = frames.carry_heatmap_frame(a, comp, int(min(example, n_ex - 1)))
    st.plotly_chart(
        charts.heatmap_figure(heat, f"{comp}_t: units × time (example {example})", colorbar=comp),
        key="chart_carry_heatmap",
    )
    proj, explained = frames.projection_frame(a, component=comp)
    st.plotly_chart(
        charts.projection_figure(
            proj,
            f"Path of {comp}_t in its top two principal components ({explained[0]:.0%} + "
            f"{explained[1]:.0%} of variance)",
        ),
        key="chart_projection",
    )
    gates = frames.gates_frame(a)
    if not gates.empty:
        st.plotly_chart(
            charts.line_figure(gates, "Mean gate activation over time", "mean activation"), key="chart_gates"
        )
        if "f" in cell_spec(a.config.cell).gates:
            f = gates[gates["series"] == "gate f"]["value"]
            st.caption(
                f"Forget gate mean {f.mean():.3f} (range {f.min():.3f}–{f.max():.3f}); a gate near 1 lets "
                "∂L/∂c pass almost unchanged."
            )
    csv_button(norms, "rnnviz_carry_norms.csv", "csv_carry")


def compare_view(
    a: Analysis,
    pins: list[Analysis],
    overlays: list[Analysis],
    on_pin: Callable[[], None],
    on_remove: Callable[[int], None],
    on_clear: Callable[[], None],
) -> None:
    st.markdown("Pin runs to overlay them on the Gradients and Carry charts; change any setting, pin again.")
    c1, c2 = st.columns(2)
    c1.button("📌 Pin current run", key="pin", on_click=on_pin, type="primary")
    c2.button("Clear all pins", key="clear_pins", on_click=on_clear, disabled=not pins)
    if not pins:
        st.info("No pinned runs yet.")
        return
    for i, p in enumerate(pins):
        cols = st.columns([6, 1])
        current = " (current)" if p.config == a.config else ""
        cols[0].markdown(f"`{frames.config_label(p)}`{current} — {verdict(p).text}")
        cols[1].button("Remove", key=f"unpin_{i}", on_click=on_remove, args=(i,))
    runs = [a] + overlays
    df = pd.concat([frames.gradient_long_frame(r) for r in runs], ignore_index=True)
    df = df[~df["series"].str.startswith("example")]
    st.plotly_chart(
        charts.gradient_figure(df[df["series"] == "total"], title="‖∂L/∂carry_t‖: current and pinned"),
        key="chart_compare_gradients",
    )
    table = pd.concat(
        [frames.timestep_frame(r).assign(run=frames.config_label(r)) for r in runs], ignore_index=True
    )
    csv_button(table, "rnnviz_compare.csv", "csv_compare", "Download all runs (CSV)")

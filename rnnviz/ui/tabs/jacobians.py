"""The Jacobians tab: the singular values of every step Jacobian, the leading Lyapunov
exponents and their convergence, and λ₁ next to the measured decay of the gradient."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.analysis import Analysis
from rnnviz.base.readings import decay_fit, regime
from rnnviz.frames.dynamics import decay_frame, running_frame, singular_values_frame, spectrum_frame
from rnnviz.serve import budget
from rnnviz.studies.jacobians import Jacobians, carry_dim
from rnnviz.studies.lyapunov import Lyapunov
from rnnviz.ui.tabs.common import csv_button, interleaved_parts, prose, within_budget
from rnnviz.ui.tabs.context import TabContext

TITLE = "Jacobians"


def render(ctx: TabContext) -> None:
    """Singular values of each step Jacobian, then (within the budget) the Lyapunov
    spectrum, its convergence, and λ₁ next to the measured gradient decay."""
    a, dynamics = ctx.analysis, ctx.compute.dynamics
    cfg = a.config
    n_examples = cfg.batch_size or 1
    k, example = _controls(n_examples, carry_dim(cfg))
    steps, plan = budget.jacobians_plans(cfg, ctx.compute.cost(a), k)
    if not within_budget(steps, "jacobians"):
        return
    parts = budget.jacobians_parts(steps)
    got: list[Jacobians] = []

    def part_of(part: int) -> pd.DataFrame:
        got.append(dynamics.jacobians(cfg, k, example, steps.settings["steps"], part, parts))
        return singular_values_frame(got[-1])

    def draw(rows: pd.DataFrame, final: bool) -> None:
        title = f"Singular values of J_t = ∂carry_t/∂carry_(t−1), example {example}"
        figure = charts.singular_values_figure(rows, title)  # its pivot puts the parts' steps in order
        st.plotly_chart(figure, key="chart_singular_values" if final else None)

    # in interleaved parts when it takes a while: the whole sequence at once, then the steps between
    interleaved_parts(parts, part_of, draw, "step")
    jac = got[-1]
    how = (
        "exact: J_t built with jax.jacfwd, then its SVD"
        if jac.method == "exact"
        else "matrix-free: block power iteration with Jacobian-vector products (J_t is never built)"
    )
    every = (
        f", at every {jac.stride}th step (a cap for the dashboard; the library computes every step)"
        if jac.stride > 1
        else ""
    )
    st.markdown(prose(__name__, "intro"))  # under the chart: the chart stays above the fold
    st.caption(prose(__name__, "singular values", how=how, every=every))
    if not within_budget(plan, "lyapunov"):
        return
    ly = dynamics.lyapunov(cfg, plan.settings["k"])
    _exponents(a, ly, n_examples)
    csv_button(spectrum_frame(ly), "rnnviz_lyapunov.csv", "csv_lyapunov", "Download the spectrum (CSV)")


def _controls(n_examples: int, carry_dim: int) -> tuple[int, int]:
    """``(k, example)``: the widgets read session state only (no default argument), clamped
    to what this config allows."""
    c1, c2 = st.columns(2)
    k_max = min(carry_dim, 64)
    st.session_state["jac_k"] = min(st.session_state.get("jac_k", 8), k_max)
    st.session_state["jac_example"] = min(st.session_state.get("jac_example", 0), n_examples - 1)
    k = int(
        c1.number_input(
            "exponents / singular values k",
            1,
            k_max,
            step=1,
            key="jac_k",
            help=f"1 … min(D, 64); D = {carry_dim} is the carry size (all components)",
        )
    )
    example = int(
        c2.number_input(
            "example (for σ_i(J_t))",
            0,
            max(n_examples - 1, 0),
            step=1,
            key="jac_example",
            disabled=n_examples == 1,
        )
    )
    return k, example


def _exponents(a: Analysis, ly: Lyapunov, n_examples: int) -> None:
    """λ₁ and the measured decay as metrics, the regime, the spectrum, its convergence and
    the decay chart."""
    lam1 = ly.lambda1
    cols = st.columns(3)
    cols[0].metric(
        "λ₁ (per step)",
        f"{lam1:+.4f}",
        help=f"mean over {n_examples} example(s) ± {ly.exponents_spread[0]:.4f}",
    )
    cols[1].metric("factor e^λ₁ per step", f"{np.exp(lam1):.4f}")
    fit = decay_fit(a.log10_grad_norms)
    if fit is not None:
        cols[2].metric(
            "measured gradient decay",
            f"{fit.slope:+.4f}",
            delta=f"{fit.slope - lam1:+.4f} vs λ₁",
            delta_color="off",
            help=f"slope of ln‖∂L/∂carry_(T−k)‖ over lags {fit.lag_lo}…{fit.lag_hi} (the ends left out)",
        )
    st.markdown(f"**Regime:** {regime(lam1)}.")
    left, right = st.columns(2)
    with left:
        st.plotly_chart(charts.spectrum_figure(spectrum_frame(ly)), key="chart_spectrum")
    with right:
        st.plotly_chart(charts.running_figure(running_frame(ly)), key="chart_running")
    st.caption(prose(__name__, "qr method", k=ly.k, warmup=ly.warmup))
    st.plotly_chart(charts.decay_figure(decay_frame(a, ly)), key="chart_decay")
    st.caption(prose(__name__, "measured and predicted"))

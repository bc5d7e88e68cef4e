"""The Jacobians / Lyapunov and Phase diagram tabs: step Jacobians' singular values, the leading
exponents, and λ₁ and the gradient's decay against the gain."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from rnnviz import charts, frames
from rnnviz.analysis import Analysis
from rnnviz.base.readings import decay_fit, regime
from rnnviz.config import RunConfig
from rnnviz.ui import budget
from rnnviz.ui.views.common import cost_of, csv_button, within_budget


def jacobians_view(
    a: Analysis,
    compute_lyapunov: Callable[[RunConfig, int], object],
    compute_jacobians: Callable[[RunConfig, int, int], object],
    carry_dim: int,
) -> None:
    """Singular values of each step Jacobian, the Lyapunov spectrum, its convergence, and
    λ₁ next to the measured gradient decay."""
    cfg = a.config
    st.markdown(
        "The gradient reaching step t is a product of step Jacobians J = ∂carry_t/∂carry_{t−1}. Their "
        "singular values say "
        "how much one step can stretch or shrink a direction; the Lyapunov exponents say how fast the "
        "*product* does, on "
        "average per step (see Learn → Jacobians and Lyapunov exponents)."
    )
    c1, c2 = st.columns(2)
    n_examples, k_max = cfg.batch_size or 1, min(carry_dim, 64)
    # Widgets read session state only (no default argument), clamped to what this config allows.
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
    jac = compute_jacobians(cfg, k, example)
    st.plotly_chart(
        charts.line_figure(
            frames.singular_values_frame(jac),
            f"Singular values of J_t = ∂carry_t/∂carry_(t−1), example {example}",
            "σ_i(J_t) (log)",
            log_y=True,
        ),
        key="chart_singular_values",
    )
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
    st.caption(
        "σ₁ > 1 means that step can stretch some direction; the product's growth is what the exponents "
        f"below measure. Method: {how}{every}."
    )
    plan = budget.lyapunov_plan(cfg, cost_of(a), k)
    if not within_budget(plan, "lyapunov"):
        return
    ly = compute_lyapunov(cfg, plan.settings["k"])
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
        st.plotly_chart(charts.spectrum_figure(frames.spectrum_frame(ly)), key="chart_spectrum")
    with right:
        st.plotly_chart(charts.running_figure(frames.running_frame(ly)), key="chart_running")
    st.caption(
        f"QR method: {ly.k} tangent directions pushed through every step with jax.jvp inside the forward "
        "scan and "
        f"re-orthonormalised; exponent = average log of R's diagonal after {ly.warmup} warm-up steps. "
        "Bars: ±1 std over examples."
    )
    st.plotly_chart(charts.decay_figure(frames.decay_frame(a, ly)), key="chart_decay")
    st.caption(
        "Why measured and predicted differ: λ₁ is the growth rate of the *most* stretched direction, in "
        "the limit of long "
        "trajectories; the gradient is one particular direction (set by the loss) over a finite T, pulled "
        "by the inputs "
        "along the way, so it only aligns with the leading direction after some steps. With loss = all "
        "each step also adds "
        "its own term, which flattens the measured curve."
    )
    csv_button(
        frames.spectrum_frame(ly), "rnnviz_lyapunov.csv", "csv_lyapunov", "Download the spectrum (CSV)"
    )


def phase_view(
    cfg: RunConfig,
    compute: Callable[[RunConfig, float, float, int, int], tuple[pd.DataFrame, float | None]],
    compute_lyapunov: Callable[[RunConfig, float, float, int, int], tuple[pd.DataFrame, float | None]],
    cost: budget.Cost,
) -> None:
    """The gain × lag phase diagram and λ₁ over the gain; ``cost`` (what the config's
    analysis took here) sizes the work to the view's budget."""
    st.markdown(
        "Every recurrent gain at once: one compiled, vmapped call evaluates the whole grid (sharded over "
        "all devices). "
        "Colour is log₁₀ of how much of the gradient at T survives back to lag T − t; the black line is "
        "the smallest gain "
        "at which at least 1 % survives each lag (grey band: range over seeds)."
    )
    c1, c2, c3, c4 = st.columns(4)
    lo = c1.number_input("gain from", 0.0, 10.0, 0.5, 0.05, key="phase_lo")
    hi = c2.number_input("gain to", 0.0, 10.0, 1.5, 0.05, key="phase_hi")
    n = c3.number_input("gains", 2, 256, 41, 1, key="phase_n")
    seeds = c4.number_input("seeds", 1, 16, 3, 1, key="phase_seeds")
    if hi <= lo:
        st.error(f"'gain to' ({hi:g}) must be larger than 'gain from' ({lo:g}).")
        return
    plan = budget.phase_plan(cfg, cost, int(n), int(seeds))
    if not within_budget(plan, "phase"):
        return
    n, seeds = plan.settings["gains"], plan.settings["seeds"]
    df, boundary = compute(cfg, float(lo), float(hi), int(n), int(seeds))
    matrix, survival = frames.phase_frames(df)
    st.plotly_chart(charts.phase_figure(matrix, survival, boundary), key="chart_phase")
    if boundary is not None:
        st.caption(
            f"Dashed: the Pascanu boundary σ₁(W_h)·γ = 1 at g = {boundary:.3f}; left of it vanishing is "
            "guaranteed."
        )
    csv_button(df, "rnnviz_sweep.csv", "csv_sweep")
    lam, edge = compute_lyapunov(cfg, float(lo), float(hi), int(n), int(seeds))
    st.plotly_chart(charts.lyapunov_phase_figure(lam, edge), key="chart_lyapunov_phase")
    where = (
        f"λ₁ crosses 0 at g ≈ {edge:.3f}: below it the trajectory is ordered and gradients vanish, above "
        "it nearby "
        "trajectories separate (chaos) and gradients explode."
        if edge is not None
        else "λ₁ does not cross 0 in this range"
        + (" (it stays below 0: ordered everywhere)." if (lam["lyapunov"] < 0).all() else ".")
    )
    st.caption(
        "The largest Lyapunov exponent λ₁ for every gain and seed, in one vmapped compiled call (QR "
        "method, after T/10 "
        f"warm-up steps). {where} The inputs drive the network and tame chaos: the edge moves with the "
        "input scale."
    )
    csv_button(lam, "rnnviz_lyapunov_phase.csv", "csv_lyapunov_phase", "Download λ₁ vs gain (CSV)")

"""The Jacobians tab: the singular values of every step Jacobian, the leading Lyapunov
exponents and their convergence, and λ₁ next to the measured decay of the gradient."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.base.analysis import Analysis
from rnnviz.base.dynamics import Jacobians, Lyapunov
from rnnviz.base.readings import decay_fit, regime
from rnnviz.charts.models import layer_sigma_lines
from rnnviz.config import carry_size
from rnnviz.frames.dynamics import decay_frame, running_frame, singular_values_frame, spectrum_frame
from rnnviz.frames.models import layer_lyapunov_frame, layer_sigma_frame
from rnnviz.serve import budget
from rnnviz.serve.requests import Request, jobs
from rnnviz.ui.tabs.common import asked, cost, csv_button, interleaved_parts, prose, within_budget
from rnnviz.ui.tabs.context import BlockContext, TabContext

TITLE = "Jacobians"
#: k (exponents and singular values) and the example, as the tab opens.
K, EXAMPLE = 8, 0


def _asked(ctx: TabContext) -> tuple[int, int]:
    """``(k, example)`` as the tab's inputs are set, clamped to what this config allows."""
    k = min(int(ctx.state.get("jac_k", K)), carry_size(ctx.config), 64)
    return k, min(int(ctx.state.get("jac_example", EXAMPLE)), (ctx.config.batch_size or 1) - 1)


def _passes(ctx: TabContext) -> tuple[budget.Plan, budget.Plan, list[Request], Request]:
    """The two plans (σ_i(J_t) at up to its steps, the Lyapunov spectrum at its k), the
    singular values' interleaved parts and the spectrum's request."""
    k, example = _asked(ctx)
    steps, spectrum = budget.jacobians_plans(ctx.config, cost(ctx), k)
    n, parts = steps.settings["steps"], budget.jacobians_parts(steps)
    what = f"the step Jacobians' top {k} singular values"
    singular = [ctx.request(jobs.jacobians, k, example, n, p, parts, what=what) for p in range(parts)]
    lam_k = spectrum.settings["k"]
    return steps, spectrum, singular, ctx.request(jobs.lyapunov, lam_k, what=f"{lam_k} Lyapunov exponents")


def requests(ctx: TabContext) -> list[Request]:
    """σ_i(J_t) of one example (in parts when it takes a while), then the Lyapunov spectrum,
    each within its budget."""
    steps, spectrum, singular, lam = _passes(ctx)
    if not asked(ctx, steps, "jacobians"):
        return []
    return singular + ([lam] if asked(ctx, spectrum, "lyapunov") else [])


def render(ctx: TabContext) -> None:
    """Singular values of each step Jacobian, then (within the budget) the Lyapunov
    spectrum, its convergence, and λ₁ next to the measured gradient decay."""
    n_examples, dim = ctx.config.batch_size or 1, carry_size(ctx.config)
    c1, c2 = st.columns(2)
    k, example = _asked(ctx)  # the inputs clamped first to what this config allows
    st.session_state["jac_k"], st.session_state["jac_example"] = k, example
    help_k = f"1 … min(D, 64); D = {dim} is the carry size (all components)"
    c1.number_input("exponents / singular values k", 1, min(dim, 64), step=1, key="jac_k", help=help_k)
    last, one = max(n_examples - 1, 0), n_examples == 1
    c2.number_input("example (for σ_i(J_t))", 0, last, step=1, key="jac_example", disabled=one)
    steps, plan, singular, lam = _passes(ctx)
    if not within_budget(steps, "jacobians"):
        return
    got: list[Jacobians] = []

    def part_of(part: int) -> pd.DataFrame:
        got.append(ctx.get(singular[part]))
        return singular_values_frame(got[-1])

    def draw(rows: pd.DataFrame, final: bool) -> None:
        title = f"Singular values of J_t = ∂carry_t/∂carry_(t−1), example {example}"
        figure = charts.singular_values_figure(rows, title)  # its pivot puts the parts' steps in order
        st.plotly_chart(figure, key="chart_singular_values" if final else None)

    # in interleaved parts when it takes a while: the whole sequence at once, then the steps between
    interleaved_parts(len(singular), part_of, draw, "step")
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
    ly = ctx.get(lam)
    _exponents(ctx.analysis, ly, n_examples)
    csv_button(spectrum_frame(ly), "rnnviz_lyapunov.csv", "csv_lyapunov", "Download the spectrum (CSV)")


def _exponents(a: Analysis, ly: Lyapunov, n_examples: int) -> None:
    """λ₁ and the measured decay as metrics, the regime, the spectrum, its convergence and
    the decay chart."""
    lam1 = ly.lambda1
    cols = st.columns(3)
    spread = f"mean over {n_examples} example(s) ± {ly.exponents_spread[0]:.4f}"
    cols[0].metric("λ₁ (per step)", f"{lam1:+.4f}", help=spread)
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
    left.plotly_chart(charts.spectrum_figure(spectrum_frame(ly)), key="chart_spectrum")
    right.plotly_chart(charts.running_figure(running_frame(ly)), key="chart_running")
    st.caption(prose(__name__, "qr method", k=ly.k, warmup=ly.warmup))
    st.plotly_chart(charts.decay_figure(decay_frame(a, ly)), key="chart_decay")
    st.caption(prose(__name__, "measured and predicted"))


#: k of a block's step-Jacobian spectra: σ₁ is drawn, the rest are in the record.
BLOCK_K = 4


def block_requests(ctx: BlockContext) -> list[Request]:
    """The top singular values of each recurrent layer's step Jacobians, and its λ₁."""
    return [
        ctx.request(jobs.block_jacobians, BLOCK_K, what="the step Jacobians of each layer"),
        ctx.request(jobs.block_lyapunov, what="λ₁ of each layer"),
    ]


def render_block(ctx: BlockContext) -> None:
    """A reference block's recurrent layers: σ₁ of each one's step Jacobian over t, and the
    mean of ln σ₁ per layer (an upper bound on its top Lyapunov exponent)."""
    jacobians, lyapunov = block_requests(ctx)
    j = ctx.get(jacobians)
    if not j.layers:
        st.info("This block has no recurrent layer: no step Jacobian to take.")
        return
    st.plotly_chart(layer_sigma_lines(layer_sigma_frame(j)), key="chart_block_sigma")
    means = ", ".join(f"layer {layer + 1}: {m:+.4f}" for layer, m in zip(j.layers, j.mean_log_sigma1))
    st.markdown(
        f"Mean ln σ₁(J_t) per step ({j.method}, D = {j.state_dim} per layer, {len(j.steps)} steps of example "
        f"{j.example}): {means}. Below 0, every step of that layer shrinks every direction of its state; "
        "the mean bounds the layer's top Lyapunov exponent from above."
    )
    ly = ctx.get(lyapunov)
    running = layer_lyapunov_frame(ly)
    title = "λ₁ of each recurrent layer: the running mean of ln ‖J_t v_{t−1}‖ after the warm-up"
    st.plotly_chart(charts.line_figure(running, title, "λ₁ per step (estimate)"), key="chart_block_lyapunov")
    lams = ", ".join(f"layer {layer + 1}: {lam:+.4f}" for layer, lam in zip(ly.layers, ly.lambda1))
    st.markdown(
        f"Top Lyapunov exponent λ₁ per step over the run of example {ly.example} (a unit vector carried "
        f"through every step's Jacobian, its log-growth averaged after a warm-up of {ly.warmup} steps): "
        f"{lams}. Below 0, any perturbation of that layer's state, and the gradient through the state "
        "alone, dies out at that rate per step. No step grows the vector by more than its own σ₁."
    )
    csv_button(running, "rnnviz_block_lyapunov.csv", "csv_block_lyapunov")

"""The Phase diagram tab: how much of the gradient survives each lag at every recurrent gain
(one vmapped call over the grid), and λ₁ against the gain; for a reference block, the same over
its design's memory knob (:data:`~rnnviz.tables.block_knobs.BLOCK_KNOBS`), at model level."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.charts.models import block_phase_figure
from rnnviz.config import FIELD_SPECS
from rnnviz.frames import models as block_frames
from rnnviz.frames.dynamics import phase_frames, survival_sentence
from rnnviz.serve import budget
from rnnviz.serve.requests import Request, job_key, jobs
from rnnviz.tables.block_knobs import BLOCK_KNOBS
from rnnviz.tables.blocks import BLOCK_DESIGNS
from rnnviz.tables.cells import cell_spec
from rnnviz.ui.tabs.common import asked, cost, csv_button, interleaved_parts, prose, within_budget
from rnnviz.ui.tabs.context import BlockContext, TabContext

TITLE = "Phase diagram"
#: The grid as the tab opens: gains from, to, how many, and seeds.
LO, HI, GAINS, SEEDS = 0.5, 1.5, 41, 3
#: A block's sweep as the tab opens (each point one analysis of the whole block): values, seeds.
BLOCK_VALUES, BLOCK_SEEDS = 9, 1


def _sweeps(ctx: TabContext) -> tuple[budget.Plan, list[Request], Request] | None:
    """The plan, the gradient sweep's parts and the λ₁ sweep over the gains the tab's inputs ask
    for (None: an empty range), keyed at gain 1: the sweep sets the gain (one executable)."""
    state = ctx.state
    lo, hi = float(state.get("phase_lo", LO)), float(state.get("phase_hi", HI))
    if hi <= lo:
        return None
    plan = budget.phase_plan(
        ctx.config, cost(ctx), int(state.get("phase_n", GAINS)), int(state.get("phase_seeds", SEEDS))
    )
    n, seeds, parts = plan.settings["gains"], plan.settings["seeds"], budget.phase_parts(plan)
    at_one, grid = ctx.config.replace(recurrent_gain=1.0), (lo, hi, n, seeds)
    what = f"the phase diagram, {n} gains × {seeds} seeds"
    gradients = [ctx.request(jobs.phase, *grid, p, parts, cfg=at_one, what=what) for p in range(parts)]
    lam = ctx.request(jobs.lyapunov_phase_table, *grid, cfg=at_one, what=f"λ₁ over {n} gains × {seeds} seeds")
    return plan, gradients, lam


def requests(ctx: TabContext) -> list[Request]:
    """The gain × lag sweep (in parts when it takes a while) and λ₁ over the gains."""
    sweeps = _sweeps(ctx)
    if sweeps is None or not asked(ctx, sweeps[0], "phase"):
        return []
    return [*sweeps[1], sweeps[2]]


def render(ctx: TabContext) -> None:
    """The gain × lag phase diagram and λ₁ over the gain, sized to the tab's budget."""
    cfg, gain = ctx.config, FIELD_SPECS["recurrent_gain"]
    c1, c2, c3, c4 = st.columns(4)
    lo = c1.number_input("gain from", gain.lo, gain.hi, LO, gain.step, key="phase_lo")
    hi = c2.number_input("gain to", gain.lo, gain.hi, HI, gain.step, key="phase_hi")
    c3.number_input("gains", 2, 256, GAINS, 1, key="phase_n")
    c4.number_input("seeds", 1, 16, SEEDS, 1, key="phase_seeds")
    sweeps = _sweeps(ctx)
    if sweeps is None:
        st.error(f"'gain to' ({hi:g}) must be larger than 'gain from' ({lo:g}).")
        return
    plan, gradients, lam_request = sweeps
    if not within_budget(plan, "phase"):
        return
    found: list[float | None] = []  # the boundary each part's job returns (the same each time)

    def part_of(part: int) -> pd.DataFrame:
        df, found_boundary = ctx.get(gradients[part])
        found.append(found_boundary)
        return df

    drawn: list[pd.DataFrame] = []  # the last part's matrix and survival line

    def draw(rows: pd.DataFrame, final: bool) -> None:
        drawn[:] = phase_frames(rows)
        figure = charts.phase_figure(*drawn, found[-1])
        st.plotly_chart(figure, key="chart_phase" if final else None)

    # in interleaved parts when it takes a while: the whole gain range at once, then finer
    df = interleaved_parts(len(gradients), part_of, draw, "gain")
    # what the picture means, under it: above it, on a 1366×768 projector, it pushed the chart off
    st.markdown(prose(__name__, "intro"))
    gain = f"For the {cfg.cell} cell the gain {cell_spec(cfg.cell).display.gain_meaning()}."
    st.caption(f"{gain} {survival_sentence(*drawn)}".strip())
    if found[-1] is not None:
        st.caption(
            f"Dashed: the Pascanu boundary σ₁(W_h)·γ = 1 at g = {found[-1]:.3f}; left of it vanishing is "
            "guaranteed."
        )
    csv_button(df, "rnnviz_sweep.csv", "csv_sweep")
    lam, edge = ctx.get(lam_request)
    st.plotly_chart(charts.lyapunov_phase_figure(lam, edge), key="chart_lyapunov_phase")
    where = (
        f"λ₁ crosses 0 at g ≈ {edge:.3f}: below it the trajectory is ordered and gradients vanish, above "
        "it nearby trajectories separate (chaos) and gradients explode."
        if edge is not None
        else "λ₁ does not cross 0 in this range"
        + (" (it stays below 0: ordered everywhere)." if (lam["lyapunov"] < 0).all() else ".")
    )
    st.caption(prose(__name__, "lyapunov", where=where))
    csv_button(lam, "rnnviz_lyapunov_phase.csv", "csv_lyapunov_phase", "Download λ₁ vs gain (CSV)")


def _block_sweep(ctx: BlockContext) -> tuple[budget.Plan, Request] | None:
    """The block's sweep at the widgets' values (its design's own range until they are set for
    it), sized to a view's budget; None for an empty range."""
    knob, state = BLOCK_KNOBS[BLOCK_DESIGNS[ctx.config.cell].design], ctx.state
    own = state.get("block_phase_knob") == knob.name and "block_phase_lo" in state
    lo, hi = (float(state["block_phase_lo"]), float(state["block_phase_hi"])) if own else knob.view
    if hi <= lo:
        return None
    unit = budget.Cost(ctx.analysis.run_s, ctx.analysis.compile_s)
    asked_n, asked_seeds = (
        state.get("block_phase_n", BLOCK_VALUES),
        state.get("block_phase_seeds", BLOCK_SEEDS),
    )
    plan = budget.block_phase_plan(unit, int(asked_n), int(asked_seeds))
    n, seeds = plan.settings["values"], plan.settings["seeds"]
    what = f"the phase diagram, {n} values of its {knob.name} × {seeds} seeds"
    fresh = ctx._replace(key=job_key(ctx.config, ctx.data_source))  # it draws fresh blocks: no weights
    return plan, fresh.request(jobs.block_phase, lo, hi, n, seeds, what=what)


def block_requests(ctx: BlockContext) -> list[Request]:
    """The knob × lag sweep, within the budget (or once asked anyway)."""
    sweep = _block_sweep(ctx)
    return [sweep[1]] if sweep is not None and asked(ctx, sweep[0], "block_phase") else []


def render_block(ctx: BlockContext) -> None:
    """A reference block's phase diagram: its design's memory knob × lag, how much of the
    gradient reaching the last input reaches each earlier one (the knob's range inputs, the
    heatmap, what the knob is and its reference default, the CSV)."""
    cfg = ctx.config
    knob = BLOCK_KNOBS[BLOCK_DESIGNS[cfg.cell].design]
    # the range is the design's own: set it (never a value= beside it) when the design changes
    if st.session_state.get("block_phase_knob") != knob.name or "block_phase_lo" not in st.session_state:
        st.session_state["block_phase_knob"] = knob.name
        st.session_state["block_phase_lo"], st.session_state["block_phase_hi"] = knob.view
    c1, c2, c3, c4 = st.columns(4)
    lo = c1.number_input(f"{knob.symbol} from", knob.lo, knob.hi, format="%g", key="block_phase_lo")
    hi = c2.number_input(f"{knob.symbol} to", knob.lo, knob.hi, format="%g", key="block_phase_hi")
    c3.number_input("values", 2, 64, BLOCK_VALUES, 1, key="block_phase_n")
    c4.number_input("seeds", 1, 8, BLOCK_SEEDS, 1, key="block_phase_seeds")
    sweep = _block_sweep(ctx)
    if sweep is None:
        st.error(f"'{knob.symbol} to' ({hi:g}) must be larger than '{knob.symbol} from' ({lo:g}).")
        return
    plan, request = sweep
    if not within_budget(plan, "block_phase"):
        return
    p = ctx.get(request)
    df = block_frames.block_phase_frame(p)
    axis = f"{knob.name} {knob.symbol}"
    matrix = block_frames.block_phase_matrix(df)
    reach = block_frames.block_phase_reach(matrix)
    figure = block_phase_figure(matrix, axis, log_x=knob.spacing == "log", reach=reach)
    st.plotly_chart(figure, key="chart_block_phase")
    st.caption(
        f"The {cfg.cell} block's memory knob: the {knob.name} {knob.symbol}, {knob.setting}; the reference's "
        f"default {knob.reference}. Each value draws the block anew with the knob changed (every other "
        "tensor as the reference draws it) and reads how much of the gradient reaching the last input "
        "x_{T−1} reaches the input lag steps before it, mean over the seeds; the line, the furthest "
        "lag at which 1 % of it still arrives. "
        + block_frames.phase_reach_sentence(reach, knob.symbol, int(matrix.index.max()))
        + (
            " The knob is the initialisation's: a trained run's weights are not swept."
            if ctx.weights_source
            else ""
        )
    )
    csv_button(df, "rnnviz_block_phase.csv", "csv_block_phase")

"""The Phase diagram tab: how much of the gradient survives each lag at every recurrent gain
(one vmapped call over the grid), and λ₁ against the gain."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.config import FIELD_SPECS
from rnnviz.engine.cells import cell_spec
from rnnviz.frames.dynamics import phase_frames
from rnnviz.serve import budget
from rnnviz.ui.tabs.common import csv_button, interleaved_parts, prose, within_budget
from rnnviz.ui.tabs.context import TabContext

TITLE = "Phase diagram"


def render(ctx: TabContext) -> None:
    """The gain × lag phase diagram and λ₁ over the gain, sized to the tab's budget from
    what the config's analysis took here."""
    cfg, dynamics = ctx.config, ctx.compute.dynamics
    c1, c2, c3, c4 = st.columns(4)
    gain = FIELD_SPECS["recurrent_gain"]
    lo = c1.number_input("gain from", gain.lo, gain.hi, 0.5, gain.step, key="phase_lo")
    hi = c2.number_input("gain to", gain.lo, gain.hi, 1.5, gain.step, key="phase_hi")
    n = c3.number_input("gains", 2, 256, budget.PHASE_GAINS, 1, key="phase_n")
    seeds = c4.number_input("seeds", 1, 16, budget.PHASE_SEEDS, 1, key="phase_seeds")
    if hi <= lo:
        st.error(f"'gain to' ({hi:g}) must be larger than 'gain from' ({lo:g}).")
        return
    plan = budget.phase_plan(cfg, ctx.compute.cost(ctx.analysis), int(n), int(seeds))
    if not within_budget(plan, "phase"):
        return
    n, seeds = plan.settings["gains"], plan.settings["seeds"]
    parts = budget.phase_parts(plan)
    found: list[float | None] = []  # the boundary each part's job returns (the same each time)

    def part_of(part: int) -> pd.DataFrame:
        df, found_boundary = dynamics.phase(cfg, float(lo), float(hi), int(n), int(seeds), part, parts)
        found.append(found_boundary)
        return df

    def draw(rows: pd.DataFrame, final: bool) -> None:
        matrix, survival = phase_frames(rows)
        st.plotly_chart(
            charts.phase_figure(matrix, survival, found[-1]), key="chart_phase" if final else None
        )

    # in interleaved parts when it takes a while: the whole gain range at once, then finer
    df = interleaved_parts(parts, part_of, draw, "gain")
    boundary = found[-1]
    # what the picture means, under it: above it, on a 1366×768 projector, it pushed the chart off
    st.markdown(prose(__name__, "intro"))
    st.caption(f"For the {cfg.cell} cell the gain {cell_spec(cfg.cell).display.gain_meaning()}.")
    if boundary is not None:
        st.caption(
            f"Dashed: the Pascanu boundary σ₁(W_h)·γ = 1 at g = {boundary:.3f}; left of it vanishing is "
            "guaranteed."
        )
    csv_button(df, "rnnviz_sweep.csv", "csv_sweep")
    lam, edge = dynamics.lyapunov_phase(cfg, float(lo), float(hi), int(n), int(seeds))
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

"""The Strategies tab: what each gradient strategy costs here (compile, run, memory), how far
its ∂L/∂W is from the accumulator's, each step's contribution, and the scaling with T; for a
reference block, each way of computing its per-step gradients against plain ``jax.grad``."""

from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.base.analysis import Analysis
from rnnviz.charts.models import way_bars
from rnnviz.config import MAX_SEQ_LEN, max_seq_len_within_budget
from rnnviz.frames.gradients import contributions_frame
from rnnviz.frames.models import ROUNDING, way_frame
from rnnviz.serve import budget
from rnnviz.serve.requests import Request, jobs
from rnnviz.serve.settings import BLOCK_STRATEGY_REPEATS, BLOCK_STRATEGY_S
from rnnviz.tables.strategies import contributions_source, strategy_rules
from rnnviz.ui.tabs.common import (
    asked,
    available,
    csv_button,
    per_strategy,
    rows_as_they_arrive,
    timing_note,
    within_budget,
)
from rnnviz.ui.tabs.context import BlockContext, TabContext

TITLE = "Strategies"
#: The table's columns.
COLUMNS = "strategy compile_s run_ms run_pm_ms repeats peak_MB max_abs_diff rel_diff device".split()


def _measured(ctx: TabContext) -> tuple[budget.Plan, dict[str, Request]]:
    plan_of = functools.partial(budget.strategies_plan, ctx.config)
    return per_strategy(ctx, jobs.strategies_table, plan_of, "{}, at most {} runs")


def _by_step(ctx: TabContext, source: str) -> Request:
    cfg = ctx.config.replace(strategy=source)
    return ctx.request(jobs.analysis, cfg=cfg, what="the per-step contributions", timed=True)


def _lens(a: Analysis) -> tuple[int, ...]:
    top = min(MAX_SEQ_LEN, max_seq_len_within_budget(a.config, strategy="per_step"))
    return tuple(t for t in (25, 50, 100, 200, 400, 800) if t <= top)


def _scaling(ctx: TabContext) -> Request | None:
    """Every strategy over T, once the user asked for it at this config (any seed)."""
    if ctx.state.get("scaling_for") != ctx.config.replace(seed=0):
        return None
    lens = _lens(ctx.analysis)
    return ctx.request(jobs.scaling_table, lens, what=f"every strategy at T ∈ {list(lens)}", timed=True)


def requests(ctx: TabContext) -> list[Request]:
    """A row per offered strategy (timed, within the budget), the per-step contributions'
    analysis, and the scaling over T once the user asked for it."""
    plan, rows = _measured(ctx)
    if not asked(ctx, plan, "strategies"):
        return []
    source = contributions_source(tuple(rows))
    by_step = None if source is None else _by_step(ctx, source)
    return [r for r in (*rows.values(), by_step, _scaling(ctx)) if r is not None]


def render(ctx: TabContext) -> None:
    """The cost bars and table (within the budget), the contributions heatmap, the scaling."""
    names, hidden = available(ctx)
    plan, rows = _measured(ctx)
    if not within_budget(plan, "strategies"):
        _about(names, hidden)
        return
    df = rows_as_they_arrive(names, lambda name: ctx.get(rows[name]), _bars)
    missing = [s for s in names if s not in set(df.get("strategy", ()))]
    if missing:
        st.info(f"Left out, over the memory or FLOP budget for this configuration: {', '.join(missing)}.")
    _about(names, hidden)  # under the bars: above them it pushed them off a 1366×768 screen
    pm = st.column_config.NumberColumn("± run_ms (90 %)", format="%.2f")
    table = _shown(df)[COLUMNS]
    st.dataframe(table, hide_index=True, key="table_strategies", column_config={"run_pm_ms": pm})
    st.caption(timing_note(plan.settings["repeats"], df))
    worst = float(df["rel_diff"].max())
    rounding = " — equal to float rounding." if worst < 1e-4 else ""
    st.caption(f"Largest relative difference of ∂L/∂W from the accumulator: {worst:.2e}{rounding}")
    csv_button(df, "rnnviz_strategies.csv", "csv_strategies")
    source = contributions_source([s for s in names if s not in missing])
    if source is None:
        st.info(
            "The per-step contribution heatmap needs the fused or per-step strategy within the budget: "
            "shorten T or H to see it."
        )
        return
    _contributions(ctx.get(_by_step(ctx, source)), source)
    _draw_scaling(ctx)


def _shown(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(
        run_ms=df["run_s"] * 1e3, run_pm_ms=df["run_halfwidth_s"] * 1e3, peak_MB=df["peak_bytes"] / 2**20
    )


def _bars(df: pd.DataFrame, final: bool) -> None:
    """The cost bars of the strategies measured so far (keyed once all are)."""
    panels = [("compile_s", "compile (s)"), ("run_ms", "run, median (ms)"), ("peak_MB", "peak memory (MB)")]
    title = "Cost of each strategy (full analysis)"
    figure = charts.bar_panels(_shown(df), "strategy", panels, title, color="strategy")
    st.plotly_chart(figure, key="chart_strategy_bars" if final else None)


def _contributions(by_step: Analysis, source: str) -> None:
    how = (
        "fused: from the stored gate cotangents, ‖Σ_b h_{t−1,b} dz_{t,b}ᵀ‖ by the O(T·B²) Gram identity"
        if source == "fused"
        else "per-step tangents: one [T, …] copy of the parameter gradient"
    )
    title = f"Per-step contributions to ∂L/∂W ({how})"
    figure = charts.heatmap_figure(
        contributions_frame(by_step), title, y_title="parameter group", colorbar="‖contribution‖", log10=True
    )
    st.plotly_chart(figure, key="chart_contributions")


def _draw_scaling(ctx: TabContext) -> None:
    """Every strategy over T, measured on request (one compile per length and strategy)."""
    a = ctx.analysis
    st.subheader("Scaling with sequence length")
    if a.data is not None:
        st.caption(
            f"Measured on synthetic inputs of the same B, I and H: {a.data} fixes T = {a.config.seq_len}, "
            "and run times do not depend on the input values."
        )
    if st.button(f"Measure T ∈ {list(_lens(a))} for every strategy", key="run_scaling"):
        st.session_state["scaling_for"] = a.config.replace(seed=0)
    request = _scaling(ctx)
    if request is None:
        st.caption("One compile per length and strategy (a few seconds); results are cached.")
        return
    sc = ctx.get(request)
    st.plotly_chart(charts.scaling_figure(sc), key="chart_scaling")
    csv_button(sc, "rnnviz_scaling.csv", "csv_scaling")


def _about(names: tuple[str, ...], hidden: dict[str, str]) -> None:
    """What the strategies are, and why any is not offered for this configuration."""
    summaries = " ".join(f"**{name}**: {strategy_rules(name).summary}." for name in names)
    st.markdown(f"Every strategy gives the same ∂L/∂W; they differ in memory and speed. {summaries}")
    for name, why in hidden.items():
        st.caption(f"{name} is not offered: {why}.")


#: The block view's table: its columns and their headers.
BLOCK_COLUMNS = {
    "way": "way",
    "compile_s": "compile (s)",
    "run_ms": "run, median (ms)",
    "repeats": "runs",
    "ratio": "× plain jax.grad",
    "loss_rel_diff": "loss vs plain (rel.)",
    "max_rel_diff": "per-step norms vs one pass (rel.)",
    "agrees": "agrees",
}


def block_requests(ctx: BlockContext) -> list[Request]:
    """Each way of computing the block's per-step gradients, timed."""
    what = "each way of computing the gradients, timed"
    return [ctx.request(jobs.block_strategies, BLOCK_STRATEGY_REPEATS, what=what, timed=True)]


def render_block(ctx: BlockContext) -> None:
    """A reference block's ways of computing its per-step gradients: the median run of each
    as a bar (its ratio to plain ``jax.grad`` on it), a table of the times, ratios and whether
    the results agree, and what each way computes."""
    s = ctx.get(*block_requests(ctx))
    df = way_frame(s)
    st.plotly_chart(way_bars(df), key="chart_block_strategies")
    table = df[list(BLOCK_COLUMNS)].rename(columns=BLOCK_COLUMNS)
    st.dataframe(table, hide_index=True, key="table_block_strategies")
    st.markdown(" ".join(f"**{w.name}**: {w.description}." for w in s.ways))
    st.caption(
        f"B = {s.batch}, T = {s.steps}, {s.n_params:,} parameters. Each way was compiled once beforehand "
        "(compile seconds apart), run once for the values compared, then timed in the same rounds, one run "
        f"of each per round (at most {BLOCK_STRATEGY_REPEATS} rounds, fewer, at least 3, once a way's runs "
        f"pass {BLOCK_STRATEGY_S:g} s): the ratio compares runs made under the same load."
    )
    worst = float(df["max_rel_diff"].max())
    verdict = "equal to float rounding" if df["agrees"].all() else f"NOT within float rounding ({ROUNDING:g})"
    st.caption(
        f"Every way's loss against plain jax.grad's, and the model loss's per-step norms of the two analyses "
        f"(every layer and state, every step where float32 holds them, ≥ 2⁻¹⁰⁰): largest relative difference "
        f"{worst:.2e} — {verdict}."
    )
    csv_button(df, "rnnviz_block_strategies.csv", "csv_block_strategies")

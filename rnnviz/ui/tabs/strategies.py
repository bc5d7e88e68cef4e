"""The Strategies tab: what each gradient strategy costs here (compile, run, memory), how far
its ∂L/∂W is from the accumulator's, each step's contribution, and the scaling with T."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.base.analysis import Analysis
from rnnviz.config import MAX_SEQ_LEN, max_seq_len_within_budget
from rnnviz.frames.gradients import contributions_frame
from rnnviz.serve import budget
from rnnviz.serve.requests import Request, jobs
from rnnviz.tables.strategies import contributions_source, strategy_rules
from rnnviz.ui.tabs.common import asked, cost, csv_button, rows_as_they_arrive, timing_note, within_budget
from rnnviz.ui.tabs.context import TabContext

TITLE = "Strategies"


def requests(ctx: TabContext) -> list[Request]:
    """A row per offered strategy (timed, within the budget), the per-step contributions'
    analysis, and the scaling over T once the user asked for it."""
    available = _available(ctx)[0]
    plan = _plan(ctx, available)
    if not asked(ctx, plan, "strategies"):
        return []
    source = contributions_source(available)
    return (
        _rows(ctx, plan, available)
        + ([_by_step(ctx, source)] if source is not None else [])
        + ([_scaling_request(ctx)] if _scaling_asked(ctx) else [])
    )


def _available(ctx: TabContext) -> tuple[tuple[str, ...], dict[str, str]]:
    return ctx.get(ctx.request(jobs.strategy_availability, what="which strategies apply"))


def _rows(ctx: TabContext, plan: budget.Plan, available: tuple[str, ...]) -> list[Request]:
    repeats = plan.settings["repeats"]
    return [
        ctx.request(jobs.strategies_table, repeats, (s,), what=f"{s}, at most {repeats} runs", timed=True)
        for s in available
    ]


def _by_step(ctx: TabContext, source: str) -> Request:
    cfg = ctx.config.replace(strategy=source)
    return ctx.request(jobs.analysis, cfg=cfg, what="the per-step contributions", timed=True)


def _plan(ctx: TabContext, available: tuple[str, ...]) -> budget.Plan:
    """The budget's plan; idle time plans as if every strategy were compiled (it compiles
    them as it goes), and so does the page once those rows are there."""
    c = cost(ctx)
    ahead = budget.strategies_plan(ctx.config, c, available, compiled=available)
    if ctx.idle or all(ctx.has(r) for r in _rows(ctx, ahead, available)):
        return ahead
    compiled = ctx.get(ctx.request(jobs.compiled_strategies, what="a cache look-up", cached=False))
    return budget.strategies_plan(ctx.config, c, available, compiled=compiled)


def render(ctx: TabContext) -> None:
    """The cost bars and table (within the budget), the contributions heatmap, the scaling."""
    available, hidden = _available(ctx)
    plan = _plan(ctx, available)
    if not within_budget(plan, "strategies"):
        _about(available, hidden)
        return
    repeats = plan.settings["repeats"]
    rows = dict(zip(available, _rows(ctx, plan, available), strict=True))
    df = rows_as_they_arrive(available, lambda name: ctx.get(rows[name]), _bars)
    missing = [s for s in available if s not in set(df.get("strategy", ()))]
    if missing:
        st.info(f"Left out, over the memory or FLOP budget for this configuration: {', '.join(missing)}.")
    show = _shown(df)
    _about(available, hidden)  # under the bars: above them it pushed them off a 1366×768 screen
    st.dataframe(
        show[
            [
                "strategy",
                "compile_s",
                "run_ms",
                "run_pm_ms",
                "repeats",
                "peak_MB",
                "max_abs_diff",
                "rel_diff",
                "device",
            ]
        ],
        hide_index=True,
        key="table_strategies",
        column_config={"run_pm_ms": st.column_config.NumberColumn("± run_ms (90 %)", format="%.2f")},
    )
    st.caption(timing_note(repeats, df))
    worst = float(df["rel_diff"].max())
    st.caption(
        f"Largest relative difference of ∂L/∂W from the accumulator: {worst:.2e}"
        + (" — equal to float rounding." if worst < 1e-4 else "")
    )
    csv_button(df, "rnnviz_strategies.csv", "csv_strategies")
    source = contributions_source([s for s in available if s not in missing])
    if source is None:
        st.info(
            "The per-step contribution heatmap needs the fused or per-step strategy within the budget: "
            "shorten T or H to see it."
        )
        return
    _contributions(ctx.get(_by_step(ctx, source)), source)
    _scaling(ctx)


def _shown(df: pd.DataFrame) -> pd.DataFrame:
    return df.assign(
        run_ms=df["run_s"] * 1e3, run_pm_ms=df["run_halfwidth_s"] * 1e3, peak_MB=df["peak_bytes"] / 2**20
    )


def _bars(df: pd.DataFrame, final: bool) -> None:
    """The cost bars of the strategies measured so far (keyed once all are)."""
    st.plotly_chart(
        charts.bar_panels(
            _shown(df),
            "strategy",
            [("compile_s", "compile (s)"), ("run_ms", "run, median (ms)"), ("peak_MB", "peak memory (MB)")],
            "Cost of each strategy (full analysis)",
            color="strategy",
        ),
        key="chart_strategy_bars" if final else None,
    )


def _contributions(by_step: Analysis, source: str) -> None:
    how = (
        "fused: from the stored gate cotangents, ‖Σ_b h_{t−1,b} dz_{t,b}ᵀ‖ by the O(T·B²) Gram identity"
        if source == "fused"
        else "per-step tangents: one [T, …] copy of the parameter gradient"
    )
    st.plotly_chart(
        charts.heatmap_figure(
            contributions_frame(by_step),
            f"Per-step contributions to ∂L/∂W ({how})",
            y_title="parameter group",
            colorbar="‖contribution‖",
            log10=True,
        ),
        key="chart_contributions",
    )


def _lens(a: Analysis) -> tuple[int, ...]:
    top = min(MAX_SEQ_LEN, max_seq_len_within_budget(a.config, strategy="per_step"))
    return tuple(t for t in (25, 50, 100, 200, 400, 800) if t <= top)


def _scaling_request(ctx: TabContext) -> Request:
    lens = _lens(ctx.analysis)
    return ctx.request(jobs.scaling_table, lens, what=f"every strategy at T ∈ {list(lens)}", timed=True)


def _scaling_asked(ctx: TabContext) -> bool:
    return ctx.state.get("scaling_for") == ctx.config.replace(seed=0)


def _scaling(ctx: TabContext) -> None:
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
    if _scaling_asked(ctx):
        sc = ctx.get(_scaling_request(ctx))
        st.plotly_chart(charts.scaling_figure(sc), key="chart_scaling")
        csv_button(sc, "rnnviz_scaling.csv", "csv_scaling")
    else:
        st.caption("One compile per length and strategy (a few seconds); results are cached.")


def _about(available: tuple[str, ...], hidden: dict[str, str]) -> None:
    """What the strategies are, and why any is not offered for this configuration."""
    st.markdown(
        "Every strategy gives the same ∂L/∂W; they differ in memory and speed. "
        + " ".join(f"**{name}**: {strategy_rules(name).summary}." for name in available)
    )
    for name, why in hidden.items():
        st.caption(f"{name} is not offered: {why}.")

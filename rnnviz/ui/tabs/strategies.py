"""The Strategies tab: what each gradient strategy costs here (compile, run, memory), how far
its ∂L/∂W is from the accumulator's, each step's contribution, and the scaling with T."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.analysis import Analysis
from rnnviz.config import MAX_SEQ_LEN, max_seq_len_within_budget
from rnnviz.frames.gradients import contributions_frame
from rnnviz.serve import budget
from rnnviz.tables.strategies import contributions_source, strategy_rules
from rnnviz.ui.tabs.common import csv_button, rows_as_they_arrive, timing_note, within_budget
from rnnviz.ui.tabs.context import Compute, TabContext

TITLE = "Strategies"


def render(ctx: TabContext) -> None:
    """The cost bars and table (within the budget), the contributions heatmap, the scaling."""
    a, costs = ctx.analysis, ctx.compute.costs
    available, hidden = costs.availability(a.config)
    plan = budget.strategies_plan(a.config, ctx.compute.cost(a), available, compiled=costs.compiled(a.config))
    if not within_budget(plan, "strategies"):
        _about(available, hidden)
        return
    repeats = plan.settings["repeats"]
    df = rows_as_they_arrive(available, lambda name: costs.strategies(a.config, repeats, (name,)), _bars)
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
    _contributions(ctx.compute.analysis(a.config.replace(strategy=source)), source)
    _scaling(a, ctx.compute)


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


def _scaling(a: Analysis, compute: Compute) -> None:
    """Every strategy over T, measured on request (one compile per length and strategy)."""
    st.subheader("Scaling with sequence length")
    if a.data is not None:
        st.caption(
            f"Measured on synthetic inputs of the same B, I and H: {a.data} fixes T = {a.config.seq_len}, "
            "and run times do not depend on the input values."
        )
    top = min(MAX_SEQ_LEN, max_seq_len_within_budget(a.config, strategy="per_step"))
    lens = tuple(t for t in (25, 50, 100, 200, 400, 800) if t <= top)
    if st.button(f"Measure T ∈ {list(lens)} for every strategy", key="run_scaling"):
        st.session_state["scaling_for"] = a.config.replace(seed=0)
    if st.session_state.get("scaling_for") == a.config.replace(seed=0):
        sc = compute.costs.scaling(a.config, lens)
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

"""The Strategies and Devices tabs: what each strategy costs, and CPU against GPU (live or recorded)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from rnnviz import charts, frames
from rnnviz.analysis import Analysis
from rnnviz.config import MAX_SEQ_LEN, RunConfig, max_seq_len_within_budget
from rnnviz.tables.strategies import strategy_rules
from rnnviz.ui import budget
from rnnviz.ui.views.common import cost_of, csv_button, within_budget


def strategies_view(
    a: Analysis,
    compare: Callable[[RunConfig, int], pd.DataFrame],
    by_step: Callable[[RunConfig], Analysis],
    scaling: Callable[[RunConfig, tuple[int, ...]], pd.DataFrame],
    available: tuple[str, ...],
    hidden: dict[str, str],
) -> None:
    st.markdown(
        "Every strategy gives the same ∂L/∂W; they differ in memory and speed. "
        + " ".join(f"**{name}**: {strategy_rules(name).summary}." for name in available)
    )
    for name, why in hidden.items():
        st.caption(f"{name} is not offered: {why}.")
    plan = budget.strategies_plan(cost_of(a), len(available))
    if not within_budget(plan, "strategies"):
        return
    df = compare(a.config, plan.settings["repeats"])
    missing = [s for s in available if s not in set(df["strategy"])]
    if missing:
        st.info(f"Left out, over the memory or FLOP budget for this configuration: {', '.join(missing)}.")
    show = df.assign(run_ms=df["run_s"] * 1e3, peak_MB=df["peak_bytes"] / 2**20)
    st.plotly_chart(
        charts.bar_panels(
            show,
            "strategy",
            [("compile_s", "compile (s)"), ("run_ms", "run, median (ms)"), ("peak_MB", "peak memory (MB)")],
            "Cost of each strategy (full analysis)",
            color="strategy",
        ),
        key="chart_strategy_bars",
    )
    st.dataframe(
        show[["strategy", "compile_s", "run_ms", "peak_MB", "max_abs_diff", "rel_diff", "device"]],
        hide_index=True,
        key="table_strategies",
    )
    worst = float(df["rel_diff"].max())
    st.caption(
        f"Largest relative difference of ∂L/∂W from the accumulator: {worst:.2e}"
        + (" — equal to float rounding." if worst < 1e-4 else "")
    )
    csv_button(df, "rnnviz_strategies.csv", "csv_strategies")
    source = next((name for name in ("fused", "per_step") if name in available and name not in missing), None)
    if source is None:
        st.info(
            "The per-step contribution heatmap needs the fused or per-step strategy within the budget: "
            "shorten T or H to see it."
        )
        return
    contrib = frames.contributions_frame(by_step(a.config.replace(strategy=source)))
    how = (
        "fused: from the stored gate cotangents, ‖Σ_b h_{t−1,b} dz_{t,b}ᵀ‖ by the O(T·B²) Gram identity"
        if source == "fused"
        else "per-step tangents: one [T, …] copy of the parameter gradient"
    )
    st.plotly_chart(
        charts.heatmap_figure(
            contrib,
            f"Per-step contributions to ∂L/∂W ({how})",
            y_title="parameter group",
            colorbar="‖contribution‖",
            log10=True,
        ),
        key="chart_contributions",
    )
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
        sc = scaling(a.config, lens)
        st.plotly_chart(charts.scaling_figure(sc), key="chart_scaling")
        csv_button(sc, "rnnviz_scaling.csv", "csv_scaling")
    else:
        st.caption("One compile per length and strategy (a few seconds); results are cached.")


def devices_view(
    live_runs: Callable[[int], pd.DataFrame],
    n_runs: int,
    cost: budget.Cost,
    recorded: pd.DataFrame,
    skipped: list[tuple[str, str]],
    gpu_reason: str | None,
) -> None:
    """Live runs (``live_runs(repeats)``: ``n_runs`` device × strategy pairs, sized to the
    budget from the analysis's ``cost``) next to the recorded ones."""
    st.markdown(
        "Live runs of the current configuration on every device JAX sees, next to recorded runs (shipped "
        "in `rnnviz/data/runs/`, plus `RNNVIZ_RUNS_DIR` when set)."
    )
    if gpu_reason:
        st.info(f"No GPU here ({gpu_reason}); the GPU numbers below, if any, are recorded runs.")
    plan = budget.devices_plan(cost, n_runs)
    if within_budget(plan, "devices"):
        _live_runs(live_runs(plan.settings["repeats"]))
    _recorded_runs(recorded, skipped)


def _live_runs(live: pd.DataFrame) -> None:
    live = live.assign(
        run_ms=live["run_s"] * 1e3, device=live["device_kind"] + " · " + live["device_name"] + " (live)"
    )
    st.plotly_chart(
        charts.bar_panels(
            live,
            "device",
            [("compile_s", "compile (s)"), ("run_ms", "run (ms)")],
            "This configuration, live",
            color="strategy",
        ),
        key="chart_devices_live",
    )
    st.dataframe(live, hide_index=True, key="table_devices_live")


def _recorded_runs(recorded: pd.DataFrame, skipped: list[tuple[str, str]]) -> None:
    if skipped:
        st.warning(
            f"Skipped {len(skipped)} unreadable record lines: "
            + "; ".join(f"{w}: {r}" for w, r in skipped[:5])
        )
    if recorded.empty:
        st.info("No recorded runs (shipped or in RNNVIZ_RUNS_DIR).")
        return
    st.subheader("Recorded runs")
    st.caption("Sources: " + ", ".join(sorted(set(recorded["device"] + " — " + recorded["source"]))))
    suites = sorted(set(recorded["suite"]))
    suite = st.selectbox(
        "Suite", suites, index=suites.index("devices") if "devices" in suites else 0, key="devices_suite"
    )
    rec = recorded[(recorded["suite"] == suite) & (recorded["strategy"] != "plain_grad")]
    for over in ("seq_len", "hidden_size"):
        sp = frames.speedup_frame(rec, over)
        if not sp.empty:
            st.plotly_chart(
                charts.speedup_figure(sp, over, f"GPU speed-up over CPU vs {over} (above 1: GPU faster)"),
                key=f"chart_speedup_{over}",
            )
    measure = st.radio(
        "Measure",
        ["analyze", "grad"],
        horizontal=True,
        key="devices_measure",
        help="analyze: the full analysis (accumulator); grad: the parameter gradient alone",
    )
    strategy = (
        st.selectbox("Strategy", sorted(set(rec["strategy"])), key="devices_strategy")
        if measure == "grad"
        else "accumulate"
    )
    sel = rec[(rec["measure"] == measure) & (rec["strategy"] == strategy)]
    agg = sel.groupby(["device", "hidden_size", "batch_size", "seq_len"], as_index=False, dropna=False)[
        "run_s"
    ].median()
    lines = pd.DataFrame(
        {
            "seq_len": agg["seq_len"],
            "value": agg["run_s"] * 1e3,
            "series": agg["device"]
            + " · H="
            + agg["hidden_size"].astype(str)
            + " B="
            + agg["batch_size"].astype(str),
        }
    )
    st.plotly_chart(
        charts.line_figure(
            lines,
            f"Recorded run time vs sequence length ({measure}, {strategy})",
            "run, median (ms, log)",
            log_y=True,
            x="seq_len",
            x_title="seq_len T",
        ),
        key="chart_devices_recorded",
    )
    csv_button(recorded, "rnnviz_recorded_runs.csv", "csv_recorded")

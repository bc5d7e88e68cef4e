"""The Devices tab: the current configuration run live on every device JAX sees, next to the
recorded runs (shipped in ``rnnviz/data/runs/``, the data folder's ``runs/``, and
``RNNVIZ_RUNS_DIR`` when set); for a reference block, each way of computing its gradients on
every device. The worked example of ``docs/dev/adding-a-tab.md``."""

from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.charts.models import device_way_bars
from rnnviz.frames.costs import recorded_selection, recorded_times_frame, speedup_frame
from rnnviz.frames.models import device_way_frame
from rnnviz.serve import budget
from rnnviz.serve.requests import Request, jobs
from rnnviz.serve.settings import BLOCK_STRATEGY_REPEATS
from rnnviz.ui.tabs.common import (
    asked,
    csv_button,
    per_strategy,
    rows_as_they_arrive,
    timing_note,
    within_budget,
)
from rnnviz.ui.tabs.context import BlockContext, TabContext

TITLE = "Devices"


def _measured(ctx: TabContext) -> tuple[budget.Plan, dict[str, Request]]:
    """A live request per offered strategy, on every device (each compiled there, but on the
    default device those already compiled)."""
    n_devices = 1 + len(ctx.environment.gpus)
    plan_of = functools.partial(budget.devices_plan, ctx.config, n_devices=n_devices)
    return per_strategy(ctx, jobs.devices_live, plan_of, "live runs on every device: {}, at most {} runs")


def requests(ctx: TabContext) -> list[Request]:
    """A live row per offered strategy on every device, within the budget."""
    plan, rows = _measured(ctx)
    return list(rows.values()) if asked(ctx, plan, "devices") else []


def render(ctx: TabContext) -> None:
    """Live runs (device × strategy pairs, sized to the budget) next to the recorded ones."""
    plan, rows = _measured(ctx)
    if within_budget(plan, "devices"):
        live = rows_as_they_arrive(tuple(rows), lambda name: ctx.get(rows[name]), _live_chart)
        st.dataframe(_with_labels(live), hide_index=True, key="table_devices_live")
        st.caption(timing_note(plan.settings["repeats"], live))
    # under the live chart: above it, on a 1366×768 projector, the text pushed it off the screen
    st.markdown(
        "Live runs of the current configuration on every device JAX sees, next to recorded runs (shipped "
        "in `rnnviz/data/runs/`, plus `RNNVIZ_RUNS_DIR` when set)."
    )
    if ctx.environment.gpu_reason:
        st.info(
            f"No GPU here ({ctx.environment.gpu_reason}); the GPU numbers below, if any, are recorded runs."
        )
    _recorded_runs(*ctx.recorded())


def _with_labels(live: pd.DataFrame) -> pd.DataFrame:
    return live.assign(
        run_ms=live["run_s"] * 1e3,
        run_pm_ms=live["run_halfwidth_s"] * 1e3,
        device=live["device_kind"] + " · " + live["device_name"] + " (live)",
    )


def _live_chart(live: pd.DataFrame, final: bool) -> None:
    """Compile and run time per device, a bar per strategy measured so far (keyed once all are)."""
    panels = [("compile_s", "compile (s)"), ("run_ms", "run (ms)")]
    figure = charts.bar_panels(
        _with_labels(live), "device", panels, "This configuration, live", color="strategy"
    )
    st.plotly_chart(figure, key="chart_devices_live" if final else None)


def _recorded_runs(recorded: pd.DataFrame, skipped: list[tuple[str, str]]) -> None:
    """The recorded runs: GPU speed-ups and run times against T, of a suite, a measure and a strategy."""
    if skipped:
        lines = "; ".join(f"{w}: {r}" for w, r in skipped[:5])
        st.warning(f"Skipped {len(skipped)} unreadable record lines: {lines}")
    if recorded.empty:
        st.info("No recorded runs (shipped or in RNNVIZ_RUNS_DIR).")
        return
    st.subheader("Recorded runs")
    st.caption("Sources: " + ", ".join(sorted(set(recorded["device"] + " — " + recorded["source"]))))
    suites = sorted(set(recorded["suite"]))
    first = suites.index("devices") if "devices" in suites else 0
    suite = st.selectbox("Suite", suites, index=first, key="devices_suite")
    rec = recorded[(recorded["suite"] == suite) & (recorded["strategy"] != "plain_grad")]
    for over in ("seq_len", "hidden_size"):
        sp = speedup_frame(rec, over)
        if not sp.empty:
            title = f"GPU speed-up over CPU vs {over} (above 1: GPU faster)"
            st.plotly_chart(charts.speedup_figure(sp, over, title), key=f"chart_speedup_{over}")
    measure = st.radio(
        "Measure",
        ["analyze", "grad"],
        horizontal=True,
        key="devices_measure",
        help="analyze: the full analysis (accumulator); grad: the parameter gradient alone",
    )
    strategy = "accumulate"
    if measure == "grad":
        strategy = st.selectbox("Strategy", sorted(set(rec["strategy"])), key="devices_strategy")
    times = recorded_times_frame(recorded_selection(recorded, suite, measure, strategy))
    title = f"Recorded run time vs sequence length ({measure}, {strategy})"
    figure = charts.line_figure(
        times, title, "run, median (ms, log)", log_y=True, x="seq_len", x_title="seq_len T"
    )
    st.plotly_chart(figure, key="chart_devices_recorded")
    csv_button(recorded, "rnnviz_recorded_runs.csv", "csv_recorded")


#: The block view's table: its columns and their headers.
BLOCK_COLUMNS = {
    "device": "device",
    "way": "way",
    "compile_s": "compile (s)",
    "run_ms": "run, median (ms)",
    "ratio": "× plain jax.grad",
    "speedup": "× faster than the first device",
    "agrees": "agrees",
}


def block_requests(ctx: BlockContext) -> list[Request]:
    """Each way of computing the block's per-step gradients on every device, timed."""
    what = "each way of computing the gradients on every device, timed"
    return [ctx.request(jobs.block_devices, BLOCK_STRATEGY_REPEATS, what=what, timed=True)]


def render_block(ctx: BlockContext) -> None:
    """A reference block's ways of computing its per-step gradients on every device the
    workers' JAX sees: bars per device × way, a table, and which devices those were."""
    d = ctx.get(*block_requests(ctx))
    df = device_way_frame(d)
    st.plotly_chart(device_way_bars(df), key="chart_block_devices")
    table = df[list(BLOCK_COLUMNS)].rename(columns=BLOCK_COLUMNS)
    st.dataframe(table, hide_index=True, key="table_block_devices")
    why = (
        d.gpu_reason and f" No GPU here ({d.gpu_reason}): a GPU's rows need this page on a machine with one."
    )
    st.caption(
        f"Devices JAX sees: {', '.join(r.device for r in d.runs)}. On each, the block's weights and inputs "
        "were put there and its ways timed in their own rounds, as on the Strategies tab. Agrees: the loss "
        "within float rounding of plain jax.grad's there and on the first device, the per-step norms of "
        f"the one-pass analysis's there.{why or ''}"
    )
    csv_button(df, "rnnviz_block_devices.csv", "csv_block_devices")

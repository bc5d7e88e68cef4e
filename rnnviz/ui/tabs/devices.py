"""The Devices tab: the current configuration run live on every device JAX sees, next to the
recorded runs (shipped in ``rnnviz/data/runs/``, the data folder's ``runs/``, and
``RNNVIZ_RUNS_DIR`` when set).

The worked example of ``docs/dev/adding-a-tab.md``: a title, ``requests(ctx)`` that sizes
its work to the budget and names each computation, and ``render(ctx)`` that draws their
answers (``ctx.get``) as frames (:mod:`rnnviz.frames.costs`) with charts
(:mod:`rnnviz.charts.costs`).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.frames.costs import recorded_selection, recorded_times_frame, speedup_frame
from rnnviz.serve import budget
from rnnviz.serve.requests import Request, jobs
from rnnviz.ui.tabs.common import asked, cost, csv_button, rows_as_they_arrive, timing_note, within_budget
from rnnviz.ui.tabs.context import TabContext

TITLE = "Devices"


def requests(ctx: TabContext) -> list[Request]:
    """A live row per offered strategy on every device, within the budget."""
    available = _available(ctx)
    plan = _plan(ctx, available)
    return _rows(ctx, plan, available) if asked(ctx, plan, "devices") else []


def _available(ctx: TabContext) -> tuple[str, ...]:
    return ctx.get(ctx.request(jobs.strategy_availability, what="which strategies apply"))[0]


def _rows(ctx: TabContext, plan: budget.Plan, available: tuple[str, ...]) -> list[Request]:
    repeats = plan.settings["repeats"]
    what = "live runs on every device: {}, at most {} runs"
    return [
        ctx.request(jobs.devices_live, repeats, (s,), what=what.format(s, repeats), timed=True)
        for s in available
    ]


def _plan(ctx: TabContext, available: tuple[str, ...]) -> budget.Plan:
    """The budget's plan over every device; idle time plans as if every strategy were
    compiled on the default device, and so does the page once those rows are there."""
    c, n_devices = cost(ctx), 1 + len(ctx.environment.gpus)
    ahead = budget.devices_plan(ctx.config, c, available, n_devices, compiled=available)
    if ctx.idle or all(ctx.has(r) for r in _rows(ctx, ahead, available)):
        return ahead
    compiled = ctx.get(ctx.request(jobs.compiled_strategies, what="a cache look-up", cached=False))
    return budget.devices_plan(ctx.config, c, available, n_devices, compiled=compiled)


def render(ctx: TabContext) -> None:
    """Live runs (device × strategy pairs, sized to the budget from the analysis's cost)
    next to the recorded ones."""
    env = ctx.environment
    available = _available(ctx)
    plan = _plan(ctx, available)
    if within_budget(plan, "devices"):
        rows = dict(zip(available, _rows(ctx, plan, available), strict=True))
        live = rows_as_they_arrive(available, lambda name: ctx.get(rows[name]), _live_chart)
        st.dataframe(_with_labels(live), hide_index=True, key="table_devices_live")
        st.caption(timing_note(plan.settings["repeats"], live))
    # under the live chart: above it, on a 1366×768 projector, the text pushed it off the screen
    st.markdown(
        "Live runs of the current configuration on every device JAX sees, next to recorded runs (shipped "
        "in `rnnviz/data/runs/`, plus `RNNVIZ_RUNS_DIR` when set)."
    )
    if env.gpu_reason:
        st.info(f"No GPU here ({env.gpu_reason}); the GPU numbers below, if any, are recorded runs.")
    _recorded_runs(*ctx.recorded())


def _with_labels(live: pd.DataFrame) -> pd.DataFrame:
    return live.assign(
        run_ms=live["run_s"] * 1e3,
        run_pm_ms=live["run_halfwidth_s"] * 1e3,
        device=live["device_kind"] + " · " + live["device_name"] + " (live)",
    )


def _live_chart(live: pd.DataFrame, final: bool) -> None:
    """Compile and run time per device, a bar per strategy measured so far (keyed once all are)."""
    st.plotly_chart(
        charts.bar_panels(
            _with_labels(live),
            "device",
            [("compile_s", "compile (s)"), ("run_ms", "run (ms)")],
            "This configuration, live",
            color="strategy",
        ),
        key="chart_devices_live" if final else None,
    )


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
        sp = speedup_frame(rec, over)
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
    _recorded_times(recorded_selection(recorded, suite, measure, strategy), measure, strategy)
    csv_button(recorded, "rnnviz_recorded_runs.csv", "csv_recorded")


def _recorded_times(sel: pd.DataFrame, measure: str, strategy: str) -> None:
    """The median recorded run time against T, one line per device and size."""
    st.plotly_chart(
        charts.line_figure(
            recorded_times_frame(sel),
            f"Recorded run time vs sequence length ({measure}, {strategy})",
            "run, median (ms, log)",
            log_y=True,
            x="seq_len",
            x_title="seq_len T",
        ),
        key="chart_devices_recorded",
    )

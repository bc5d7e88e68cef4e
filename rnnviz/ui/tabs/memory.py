"""The Memory tab: what the network remembers of one sequence — the connectivity of one
output to every earlier input drawn on the input itself (shaded characters, a shaded digit,
a shaded band under a series), for the chosen weights and, side by side, for other trained
runs on the same data; its exact magnitude against the lag; and the gates along the way."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from rnnviz import charts
from rnnviz.base.connectivity import Connectivity
from rnnviz.charts.models import layer_reach_bars
from rnnviz.config import ConfigError
from rnnviz.frames.connectivity import connectivity_frame, sequence_gates_frame
from rnnviz.frames.models import layer_reach_frame, reach_sentence
from rnnviz.serve import trained_runs
from rnnviz.serve.requests import Request, jobs
from rnnviz.ui.tabs.common import csv_button, prose
from rnnviz.ui.tabs.context import BlockContext, TabContext

TITLE = "Memory"
MEASURES = {"auto": None, "log p(target)": "target", "‖∂y_τ/∂x_t‖": "output"}
#: Columns of side-by-side runs.
MAX_SIDE_BY_SIDE = 3


def comparable_runs(ctx: TabContext) -> dict[str, str]:
    """Bare cells' saved runs trained on the session's data (same source and input size), other
    than the one whose weights are chosen: the side-by-side choices, ``{path: label}``."""
    source, chosen = ctx.data_source or {}, (ctx.weights_source or {}).get("path")
    out = {}
    for path, header in trained_runs.saved_runs().items():
        same_data = (header.get("data_source") or {}).get("name") == source.get("name")
        same_kind = header["config"].get("block", "cell") == "cell"
        if (
            path != chosen
            and same_data
            and same_kind
            and header["config"].get("input_size") == ctx.config.input_size
        ):
            out[path] = trained_runs.run_label(header)
    return out


def _connectivity(ctx: TabContext, run: str | None) -> Request:
    """The connectivity of the sequence, output step and measure the tab's inputs ask for, at
    the session's weights (``run`` None) or at the last kept step of a saved run (its own
    network: its cell and sizes, and the gain and forget bias it was trained at)."""
    state, cfg, weights = ctx.state, ctx.config, None
    index, step = int(state.get("memory_index", 0)), int(state.get("memory_step", 0)) or None
    measure = MEASURES[state.get("memory_measure", next(iter(MEASURES)))]
    if run is not None:
        run_cfg = trained_runs.run_config(run)
        if run_cfg is None:
            raise ConfigError("run", Path(run).name, "a readable saved run")
        own = (*trained_runs.FOLLOWS_RUN, "recurrent_gain", "forget_bias")
        cfg = cfg.replace(**{f: getattr(run_cfg, f) for f in own})
        steps = trained_runs.saved_runs().get(run, {}).get("kept_steps") or [0]
        weights = {"path": run, "step": steps[-1], "_version": Path(run).stat().st_mtime_ns}
    what = f"the connectivity of sequence {index}"
    return ctx.request(jobs.connectivity_job, index, step, measure, cfg=cfg, weights=weights, what=what)


def requests(ctx: TabContext) -> list[Request]:
    """The connectivity of the chosen sequence at the session's weights and at each run
    chosen beside them (nothing without a data set)."""
    if ctx.data_source is None:
        return []
    return [_connectivity(ctx, run) for run in [None, *ctx.state.get("memory_compare", ())]]


def render(ctx: TabContext) -> None:
    """The connectivity of the chosen sequence for the session's weights and the runs chosen
    beside them, against the lag, and the gates along the sequence."""
    if ctx.data_source is None:
        st.info(
            "Connectivity is read on a real sequence: choose digits, text or a file under *Data* in the "
            "sidebar."
        )
        st.markdown(prose(__name__, "intro"))
        return
    current = ctx.analysis.weights or "initial weights (from the seed)"
    compare_with = comparable_runs(ctx)
    controls(compare_with)
    labels = [current] + [compare_with[k] for k in ctx.state.get("memory_compare", ())]
    shown: list[tuple[str, Connectivity]] = []
    cols = st.columns(len(labels))
    for i, (request, label, col) in enumerate(zip(requests(ctx), labels, cols, strict=True)):
        with col:
            shown.append((label, ctx.get(request)))
            _draw_on_input(shown[-1][1], label, str(i))
    st.markdown(prose(__name__, "intro"))  # under the pictures: above, it pushed them off the screen
    _along_the_sequence(shown, current)


def block_requests(ctx: BlockContext) -> list[Request]:
    """Nothing: the reach is read from the page's analysis."""
    return []


def render_block(ctx: BlockContext) -> None:
    """A reference block's memory across its layers: how far back the gradient entering each
    block still reaches, from its own analysis (the connectivity over the inputs is on the
    Gradients tab)."""
    reaches = layer_reach_frame(ctx.analysis)
    st.plotly_chart(layer_reach_bars(reaches), key="chart_block_reach")
    st.markdown(
        f"Steps back from the last step over which ‖∂L/∂x_t^(l)‖ stays at least 10 % and 1 % of its "
        f"largest, for the inputs (row 0) and the stream after each block; T = {ctx.config.seq_len}. "
        + reach_sentence(ctx.analysis, reaches)
    )
    csv_button(reaches, "rnnviz_block_reach.csv", "csv_block_reach")


def controls(n_compare: dict[str, str]) -> None:
    """The sequence, the output step, the measure and the runs to compare."""
    c1, c2, c3 = st.columns(3)
    c1.number_input("Sequence", 0, 10**6, step=1, key="memory_index", help="its index in the data")
    c2.number_input(
        "Output step τ (0: the last real step)",
        0,
        100_000,
        step=1,
        key="memory_step",
        help="the output whose dependence on every earlier input is measured",
    )
    c3.radio(
        "Measure",
        list(MEASURES),
        key="memory_measure",
        horizontal=True,
        help="log p(target): the gradient of the log-probability the trained readout gives the right "
        "class or next character; ‖∂y_τ/∂x_t‖: the Frobenius norm of the cell output's Jacobian "
        "(any weights). auto: the first where it can.",
    )
    st.multiselect(
        "Side by side with other trained runs on these data",
        list(n_compare),
        format_func=lambda k: n_compare[k],
        key="memory_compare",
        max_selections=MAX_SIDE_BY_SIDE - 1,
    )


def _draw_on_input(c: Connectivity, label: str, key: str) -> None:
    st.markdown(f"**{label}**  \nreaches back {c.reach(0.1)} steps above 10 %, {c.reach(0.01)} above 1 %")
    title = f"sequence {c.index}"
    if c.text is not None:
        st.markdown(charts.shaded_text_html(c.text, c.log10, c.step), unsafe_allow_html=True)
    elif c.image is not None:
        figure = charts.digit_connectivity_figure(c.image, c.pixel_steps, c.log10, title)
        st.plotly_chart(figure, key=f"chart_memory_digit_{key}")
    else:
        figure = charts.series_connectivity_figure(c.inputs, c.log10, c.step, title)
        st.plotly_chart(figure, key=f"chart_memory_series_{key}")


def _along_the_sequence(shown: list[tuple[str, Connectivity]], current: str) -> None:
    """The connectivity of every shown run against the lag, and the first run's gates."""
    df = connectivity_frame(shown)
    c0 = shown[0][1]
    what = "log p(target)" if c0.measure == "target" else "y_τ"
    title = f"‖∂ {what} / ∂x_t‖ of sequence {c0.index}, τ = {c0.step}"
    st.plotly_chart(charts.connectivity_figure(df, title), key="chart_memory_lag")
    if c0.log_prob is not None:
        st.caption(f"log p(target) at τ = {c0.log_prob:.3f} (target {c0.target}).")
    gates = sequence_gates_frame(c0)
    if not gates.empty:
        title = f"Mean gate activations along sequence {c0.index} ({current})"
        st.plotly_chart(charts.line_figure(gates, title, "mean"), key="chart_memory_gates")
        st.caption("A forget (LSTM f) or update (GRU z) gate near 1 keeps the carry: memory.")
    csv_button(df, "rnnviz_connectivity.csv", "csv_memory", "Download the connectivity (CSV)")

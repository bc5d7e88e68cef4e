"""The Memory tab: what the network remembers of one sequence — the connectivity of one
output to every earlier input drawn on the input itself (shaded characters, a shaded digit,
a shaded band under a series), for the chosen weights and, side by side, for other trained
runs on the same data; its exact magnitude against the lag; and the gates along the way."""

from __future__ import annotations

import streamlit as st

from rnnviz import charts
from rnnviz.frames.connectivity import connectivity_frame, sequence_gates_frame
from rnnviz.studies.connectivity import Connectivity
from rnnviz.ui.tabs.common import csv_button, prose
from rnnviz.ui.tabs.context import TabContext

TITLE = "Memory"
MEASURES = {
    "auto": None,
    "log p(target)": "target",
    "‖∂y_τ/∂x_t‖": "output",
}
#: Columns of side-by-side runs.
MAX_SIDE_BY_SIDE = 3


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
    calls, cfg = ctx.compute.connectivity, ctx.config
    current = ctx.analysis.weights or "initial weights (from the seed)"
    compare_with = calls.comparable_runs(cfg)
    index, step, measure, compare = controls(compare_with)
    runs = [(None, current)] + [(k, compare_with[k]) for k in compare]
    shown: list[tuple[str, Connectivity]] = []
    cols = st.columns(len(runs))
    for i, ((run, label), col) in enumerate(zip(runs, cols)):
        with col:
            c = calls.connectivity(cfg, run, index, step, measure)
            _draw_on_input(c, label, str(i))
            shown.append((label, c))
    st.markdown(prose(__name__, "intro"))  # under the pictures: above, it pushed them off the screen
    _along_the_sequence(shown, current)


def controls(n_compare: dict[str, str]) -> tuple[int, int | None, str | None, list[str]]:
    """``(index, τ or None for the last real step, measure or None, runs to compare)``."""
    c1, c2, c3 = st.columns(3)
    index = int(
        c1.number_input("Sequence", 0, 10**6, step=1, key="memory_index", help="its index in the data")
    )
    step = int(
        c2.number_input(
            "Output step τ (0: the last real step)",
            0,
            100_000,
            step=1,
            key="memory_step",
            help="the output whose dependence on every earlier input is measured",
        )
    )
    measure = c3.radio(
        "Measure",
        list(MEASURES),
        key="memory_measure",
        horizontal=True,
        help="log p(target): the gradient of the log-probability the trained readout gives the right "
        "class or next character; ‖∂y_τ/∂x_t‖: the Frobenius norm of the cell output's Jacobian "
        "(any weights). auto: the first where it can.",
    )
    compare = st.multiselect(
        "Side by side with other trained runs on these data",
        list(n_compare),
        format_func=lambda k: n_compare[k],
        key="memory_compare",
        max_selections=MAX_SIDE_BY_SIDE - 1,
    )
    return index, (step or None), MEASURES[measure], compare


def _draw_on_input(c: Connectivity, label: str, key: str) -> None:
    st.markdown(f"**{label}**  \nreaches back {c.reach(0.1)} steps above 10 %, {c.reach(0.01)} above 1 %")
    if c.text is not None:
        st.markdown(charts.shaded_text_html(c.text, c.log10, c.step), unsafe_allow_html=True)
    elif c.image is not None:
        st.plotly_chart(
            charts.digit_connectivity_figure(c.image, c.pixel_steps, c.log10, f"sequence {c.index}"),
            key=f"chart_memory_digit_{key}",
        )
    else:
        st.plotly_chart(
            charts.series_connectivity_figure(c.inputs, c.log10, c.step, f"sequence {c.index}"),
            key=f"chart_memory_series_{key}",
        )


def _along_the_sequence(shown: list[tuple[str, Connectivity]], current: str) -> None:
    """The connectivity of every shown run against the lag, and the first run's gates."""
    df = connectivity_frame(shown)
    c0 = shown[0][1]
    what = "log p(target)" if c0.measure == "target" else "y_τ"
    st.plotly_chart(
        charts.connectivity_figure(df, f"‖∂ {what} / ∂x_t‖ of sequence {c0.index}, τ = {c0.step}"),
        key="chart_memory_lag",
    )
    if c0.log_prob is not None:
        st.caption(f"log p(target) at τ = {c0.log_prob:.3f} (target {c0.target}).")
    gates = sequence_gates_frame(c0)
    if not gates.empty:
        st.plotly_chart(
            charts.line_figure(gates, f"Mean gate activations along sequence {c0.index} ({current})", "mean"),
            key="chart_memory_gates",
        )
        st.caption("A forget (LSTM f) or update (GRU z) gate near 1 keeps the carry: memory.")
    csv_button(df, "rnnviz_connectivity.csv", "csv_memory", "Download the connectivity (CSV)")

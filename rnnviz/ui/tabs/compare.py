"""The Compare tab: pin the current run, list the pinned ones with their verdicts, draw
their gradients together, and download them as one self-contained HTML report
(:mod:`rnnviz.report`, built from the analyses in hand: no computation). On a reference
block's page, the pinned designs side by side, and their report made in a worker."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.charts.models import layer_lines
from rnnviz.frames.gradients import config_label, gradient_long_frame, timestep_frame
from rnnviz.frames.models import designs_frame, designs_stream_frame
from rnnviz.frames.verdicts import verdict
from rnnviz.report.html import model_report_html, report_html
from rnnviz.report.numbers import comparison_of, unique_labels
from rnnviz.serve.requests import Request, config_of, describe, jobs, route
from rnnviz.ui.tabs.common import csv_button, download
from rnnviz.ui.tabs.context import BlockContext, Pins, TabContext

TITLE = "Compare"


def requests(ctx: TabContext) -> list[Request]:
    """Nothing: the tab draws the page's analysis and the pins."""
    return []


def _pin_buttons(pins: Pins, what: str) -> bool:
    """The pin and clear buttons; False (and a line saying so) when nothing is pinned."""
    st.markdown(f"Pin runs to {what}; change any setting, pin again.")
    c1, c2 = st.columns(2)
    c1.button("📌 Pin current run", key="pin", on_click=pins.add, type="primary")
    c2.button("Clear all pins", key="clear_pins", on_click=pins.clear, disabled=not pins.analyses)
    if not pins.analyses:
        st.info("No pinned runs yet.")
    return bool(pins.analyses)


def _pinned_line(i: int, pins: Pins, text: str) -> None:
    cols = st.columns([6, 1])
    cols[0].markdown(text)
    cols[1].button("Remove", key=f"unpin_{i}", on_click=pins.remove, args=(i,))


def render(ctx: TabContext) -> None:
    """The pin buttons, one line per pinned run, and the current and pinned gradients."""
    a, pins = ctx.analysis, ctx.pins
    if not _pin_buttons(pins, "overlay them on the Gradients and Carry charts"):
        return
    for i, p in enumerate(pins.analyses):
        current = " (current)" if p.config == a.config else ""
        _pinned_line(i, pins, f"`{config_label(p)}`{current} — {verdict(p).text}")
    runs = [a, *pins.overlays]
    df = pd.concat([gradient_long_frame(r) for r in runs], ignore_index=True)
    df = df[~df["series"].str.startswith("example")]
    figure = charts.gradient_figure(df[df["series"] == "total"], title="‖∂L/∂carry_t‖: current and pinned")
    st.plotly_chart(figure, key="chart_compare_gradients")
    table = pd.concat([timestep_frame(r).assign(run=config_label(r)) for r in runs], ignore_index=True)
    csv_button(table, "rnnviz_compare.csv", "csv_compare", "Download all runs (CSV)")

    def report() -> bytes:  # built when clicked
        return report_html(comparison_of(runs, env=ctx.environment)).encode()

    about = (
        "One self-contained file (opens offline): the gradients, the decay per step, every config and the "
        "versions. λ₁ is not computed here: `rnnviz compare --cells …` adds it."
    )
    download(
        "Download this comparison (HTML)", report, "rnnviz_compare.html", "html_compare", "text/html", about
    )


def block_requests(ctx: BlockContext) -> list[Request]:
    """Nothing ahead: the pins' analyses are the page's; the report is made when asked."""
    return []


def render_block(ctx: BlockContext) -> None:
    """Designs as their reference blocks side by side: the pinned ones (and the current) listed
    with their sizes, what reaches each one's inputs drawn together, their numbers, and the
    HTML report of them (:func:`~rnnviz.report.models.block_comparison`, made in a worker)."""
    pins = ctx.pins
    if not _pin_buttons(pins, "draw them side by side (the sidebar's Size sets equal parameter counts)"):
        return
    for i, (key, (summary, _)) in enumerate(zip(pins.keys, pins.analyses)):
        current = " (current)" if key == ctx.key else ""
        _pinned_line(i, pins, f"`{describe(config_of(key))}`{current} — {summary.n_params:,} parameters")
    keys = (ctx.key, *(k for k in pins.keys if k != ctx.key))
    runs = [(ctx.summary, ctx.analysis), *(r for k, r in zip(pins.keys, pins.analyses) if k != ctx.key)]
    labels = unique_labels([describe(config_of(k)) for k in keys])
    analyses = [a for _, a in runs]
    title = "‖∂L/∂x_t‖ at the inputs: the current and the pinned designs"
    st.plotly_chart(layer_lines(designs_stream_frame(analyses, labels), title), key="chart_compare_blocks")
    table = designs_frame(analyses, labels, [s.n_params for s, _ in runs])
    counts = {"parameters": st.column_config.NumberColumn(format="localized")}  # 41,184, as listed above
    st.dataframe(table, hide_index=True, key="table_compare_blocks", column_config=counts)
    st.caption(
        "decades: how far ‖∂L/∂x_t‖ at the inputs falls from the last step to the first (log₁₀). Each design "
        "reads its own inputs: the same x for designs that differ only in the cell and the width."
    )
    csv_button(table, "rnnviz_compare_blocks.csv", "csv_compare_blocks", "Download the numbers (CSV)")
    if st.session_state.get("compare_block_report") != list(keys):
        st.button(
            "Make the HTML report of these designs",
            key="compare_make_report",
            on_click=lambda: st.session_state.update(compare_block_report=list(keys)),
            help="One self-contained file (opens offline): each design's layer × step heatmap, its lines, "
            "state gradients, connectivity and reach, every config and the versions. Made in a worker, once.",
        )
        return
    request = Request(jobs.block_report, (keys,), route(ctx.config), f"the report of {len(keys)} designs")
    html = model_report_html(ctx.get(request)).encode()
    download(
        "Download this comparison (HTML)",
        html,
        "rnnviz_compare_blocks.html",
        "html_compare_blocks",
        "text/html",
    )

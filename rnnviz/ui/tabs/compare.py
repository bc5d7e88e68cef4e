"""The Compare tab: pin the current run, list the pinned ones with their verdicts, draw
their gradients together, and download them as one self-contained HTML report
(:mod:`rnnviz.report`, built from the analyses in hand: no computation)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.frames.gradients import config_label, gradient_long_frame, timestep_frame
from rnnviz.frames.verdicts import verdict
from rnnviz.report.html import report_html
from rnnviz.report.numbers import comparison_of
from rnnviz.serve.requests import Request
from rnnviz.ui.tabs.common import csv_button, download
from rnnviz.ui.tabs.context import TabContext

TITLE = "Compare"


def requests(ctx: TabContext) -> list[Request]:
    """Nothing: the tab draws the page's analysis and the pins."""
    return []


def render(ctx: TabContext) -> None:
    """The pin buttons, one line per pinned run, and the current and pinned gradients."""
    a, pins = ctx.analysis, ctx.pins
    st.markdown("Pin runs to overlay them on the Gradients and Carry charts; change any setting, pin again.")
    c1, c2 = st.columns(2)
    c1.button("📌 Pin current run", key="pin", on_click=pins.add, type="primary")
    c2.button("Clear all pins", key="clear_pins", on_click=pins.clear, disabled=not pins.analyses)
    if not pins.analyses:
        st.info("No pinned runs yet.")
        return
    for i, p in enumerate(pins.analyses):
        cols = st.columns([6, 1])
        current = " (current)" if p.config == a.config else ""
        cols[0].markdown(f"`{config_label(p)}`{current} — {verdict(p).text}")
        cols[1].button("Remove", key=f"unpin_{i}", on_click=pins.remove, args=(i,))
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

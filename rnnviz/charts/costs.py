"""What computing costs: bar panels per strategy, cost over sequence length, speed-ups."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rnnviz.charts.base import LAYOUT, OKABE_ITO, new_figure, positive_finite


def bar_panels(
    df: pd.DataFrame,
    x: str,
    panels: Sequence[tuple[str, str]],
    title: str,
    *,
    color: str | None = None,
    log_y: bool = False,
    text: str | None = None,
) -> go.Figure:
    """Side-by-side bar panels: one per ``(column, panel title)``; bars along ``x``,
    grouped by ``color`` when given, each labelled with its row's ``text`` column when given.
    A legend only where ``color`` is not ``x``: there the x labels already name each bar (and
    a legend under narrow panels would cover their slanted labels)."""
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[1] for p in panels])
    legend = dict(
        orientation="h", yanchor="top", y=-0.12, xanchor="left", x=0
    )  # below: the panel titles sit on top
    fig.update_layout(
        **{**LAYOUT, "title": {**LAYOUT["title"], "text": title}, "hovermode": "closest", "legend": legend},
        barmode="group",
    )
    if df.empty:
        return fig
    groups = list(dict.fromkeys(df[color])) if color else [None]
    for col_i, (column, _) in enumerate(panels, start=1):
        for g_i, g in enumerate(groups):
            s = df if g is None else df[df[color] == g]
            fig.add_trace(
                go.Bar(
                    x=s[x].astype(str),
                    y=s[column],
                    name=str(g if g is not None else column),
                    marker_color=OKABE_ITO[g_i % len(OKABE_ITO)],
                    showlegend=col_i == 1 and g is not None and color != x,
                    legendgroup=str(g),
                    hovertemplate="%{x}<br>%{y:.4g}<extra>" + str(g or "") + "</extra>",
                    text=None if text is None else s[text].astype(str),
                    textposition="outside" if text is not None else None,
                ),
                row=1,
                col=col_i,
            )
        if log_y:
            fig.update_yaxes(type="log", row=1, col=col_i)
    return fig


def scaling_figure(df: pd.DataFrame, title: str = "Cost over sequence length") -> go.Figure:
    """``strategy, seq_len, run_s, peak_bytes`` → run time and peak memory vs T (log–log)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["run time (ms)", "peak memory (MB)"])
    fig.update_layout(**{**LAYOUT, "title": {**LAYOUT["title"], "text": title}})
    for i, (strategy, s) in enumerate(df.groupby("strategy", sort=False) if not df.empty else []):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        s = s.sort_values("seq_len")
        fig.add_trace(
            go.Scatter(
                x=s["seq_len"],
                y=s["run_s"] * 1e3,
                name=strategy,
                mode="lines+markers",
                line=dict(color=colour),
                legendgroup=strategy,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=s["seq_len"],
                y=s["peak_bytes"] / 2**20,
                name=strategy,
                mode="lines+markers",
                line=dict(color=colour),
                legendgroup=strategy,
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(type="log", title_text="seq_len T")
    fig.update_yaxes(type="log")
    return fig


def speedup_figure(df: pd.DataFrame, x: str, title: str) -> go.Figure:
    """``<x>, strategy, speedup`` → GPU speed-up over CPU vs a size; the line y = 1 is the crossover."""
    fig = new_figure(title, x, "CPU time / GPU time (log)", log_y=True)
    if df.empty:
        return fig
    for strategy, s in df.groupby("strategy", sort=False):
        s = s.sort_values(x)
        fig.add_trace(
            go.Scatter(x=s[x], y=positive_finite(s["speedup"]), mode="lines+markers", name=str(strategy))
        )
    fig.add_hline(
        y=1.0,
        line=dict(color="#000000", dash="dot"),
        annotation_text="same speed",
        annotation_position="bottom right",
    )
    fig.update_xaxes(type="log")
    return fig

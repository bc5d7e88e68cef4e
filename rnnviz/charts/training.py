"""Training curves: loss and metric against steps, and where the gradient was clipped."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from rnnviz.charts.base import OKABE_ITO, positive_finite
from rnnviz.charts.lines import line_figure


def training_figure(
    df: pd.DataFrame,
    column: str,
    title: str,
    y_title: str,
    *,
    baseline: float | None = None,
    log_y: bool = True,
) -> go.Figure:
    """``run, step, <column>`` → one line per run over training steps; ``baseline`` as a
    dashed line (the trivial predictor's loss)."""
    fig = line_figure(
        df.rename(columns={column: "value"}).assign(series=df["run"])[["step", "series", "value"]]
        if not df.empty
        else df,
        title,
        y_title,
        log_y=log_y,
        x="step",
        x_title="training step",
    )
    if baseline is not None:
        fig.add_hline(y=baseline, line=dict(color="#000000", dash="dash"))
        # On a log axis an annotation's y is log₁₀ of the value (a shape's is the value itself):
        # at the value it would sit at 10^baseline, and the autorange would stretch to reach it.
        at = math.log10(baseline) if log_y and baseline > 0 else baseline
        fig.add_annotation(
            text=f"baseline {baseline:.3g} (trivial predictor)",
            x=1,
            xref="x domain",
            xanchor="right",
            y=at,
            yref="y",
            yanchor="bottom",
            showarrow=False,
        )
    return fig


def clipping_figure(
    df: pd.DataFrame, clip: float | None, title: str = "Global gradient norm ‖∇L‖ (before clipping)"
) -> go.Figure:
    """``run, step, grad_norm, clipped`` → the norm per run, clipped steps as vermilion
    markers, the threshold as a dotted line."""
    fig = training_figure(df, "grad_norm", title, "‖∇L‖ (log)")
    if df.empty:
        return fig
    hit = df[df["clipped"].astype(bool)]
    if not hit.empty:
        fig.add_trace(
            go.Scatter(
                x=hit["step"],
                y=positive_finite(hit["grad_norm"]),
                mode="markers",
                name=f"clipped ({len(hit)} steps)",
                marker=dict(color=OKABE_ITO[5], size=5, symbol="x"),
            )
        )
    if clip is not None:
        fig.add_hline(
            y=clip,
            line=dict(color=OKABE_ITO[5], dash="dot"),
            annotation_text=f"clip at {clip:g}",
            annotation_position="bottom right",
        )
    return fig

"""Your own model, drawn: the gradient over layers × steps (a heatmap and one line per
layer), each recurrent layer's state gradient, and the connectivity over the tokens.

Every magnitude is drawn as its exact log₁₀ with 10ⁿ ticks; a true zero is a gap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rnnviz.charts.base import (
    HEATMAP_SCALE,
    OKABE_ITO,
    POW10_HOVER,
    drawable,
    empty_figure,
    new_figure,
    pow10_parts,
    pow10_ticks,
)


def _tick_labels(df: pd.DataFrame) -> dict:
    """The x axis labelled by the positions' tokens (at most about 40 labels)."""
    steps = df.drop_duplicates("t").sort_values("t")
    every = max(1, len(steps) // 40)
    shown = steps.iloc[::every]
    return dict(tickmode="array", tickvals=shown["t"].tolist(), ticktext=shown["token"].tolist())


def layer_heatmap(df: pd.DataFrame, title: str = "‖∂L/∂x_t‖ through every layer") -> go.Figure:
    """A layer × step heatmap of log₁₀ ‖∂L/∂x_t^{(l)}‖ (rows bottom up: embeddings to the final
    norm). Columns: ``row, layer, t, token, log10`` (:func:`~rnnviz.frames.models.layer_frame`)."""
    if df.empty:
        return empty_figure(title, "no gradients to draw")
    grid = df.pivot(index="layer", columns="t", values="log10").sort_index()
    names = df.drop_duplicates("layer").sort_values("layer")["row"].tolist()
    z = drawable(grid.to_numpy(np.float64))
    finite = z[np.isfinite(z)]
    fig = new_figure(title, "position t", "residual stream entering")
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    ticks, labels = pow10_ticks(lo, hi)
    fig.add_trace(
        go.Heatmap(
            x=grid.columns.to_numpy(),
            y=names,
            z=z,
            colorscale=HEATMAP_SCALE,
            colorbar=dict(title="‖∂L/∂x‖", tickvals=ticks, ticktext=labels),
            customdata=np.stack([pow10_parts(r) for r in grid.to_numpy(np.float64)]),
            hovertemplate="%{y}, t=%{x}: " + POW10_HOVER + "<extra></extra>",
        )
    )
    fig.update_xaxes(**_tick_labels(df))
    return fig


def _log_lines(df: pd.DataFrame, series: str, title: str, x_title: str, y_title: str) -> go.Figure:
    """One line of log₁₀ values per ``series`` over ``t``, on a 10ⁿ axis."""
    if df.empty:
        return empty_figure(title, "nothing to draw")
    fig = new_figure(title, x_title, y_title)
    logs = df["log10"].to_numpy(np.float64)
    finite = logs[np.isfinite(logs)]
    for i, (name, s) in enumerate(df.groupby(series, sort=False)):
        values = s["log10"].to_numpy(np.float64)
        fig.add_trace(
            go.Scatter(
                x=s["t"].to_numpy(),
                y=drawable(values),
                mode="lines",
                name=str(name),
                line=dict(color=OKABE_ITO[i % len(OKABE_ITO)]),
                customdata=pow10_parts(values),
                hovertemplate=f"{name}, t=%{{x}}: " + POW10_HOVER + "<extra></extra>",
            )
        )
    if finite.size:
        ticks, labels = pow10_ticks(float(finite.min()), float(finite.max()))
        # the range reaches the outer ticks, so a span of less than a decade still shows two
        fig.update_yaxes(tickmode="array", tickvals=ticks, ticktext=labels, range=[ticks[0], ticks[-1]])
    if "token" in df.columns:
        fig.update_xaxes(**_tick_labels(df))
    return fig


def layer_lines(df: pd.DataFrame, title: str = "‖∂L/∂x_t‖ per layer") -> go.Figure:
    """One line per row of the residual stream: log₁₀ ‖∂L/∂x_t^{(l)}‖ against t."""
    return _log_lines(df, "row", title, "position t", "‖∂L/∂x_t‖ (log scale)")


def state_lines(df: pd.DataFrame, title: str = "‖∂L/∂state_t‖ of each recurrent layer") -> go.Figure:
    """One line per recurrent layer and state leaf (:func:`~rnnviz.frames.models.state_frame`)."""
    return _log_lines(df, "series", title, "step t", "‖∂L/∂state_t‖ (log scale)")


def layer_sigma_lines(
    df: pd.DataFrame, title: str = "σ₁ of each recurrent layer's step Jacobian"
) -> go.Figure:
    """One line per recurrent layer: log₁₀ σ₁(J_t) against t
    (:func:`~rnnviz.frames.models.layer_sigma_frame`); above 10⁰ a step stretches its state."""
    return _log_lines(df, "series", title, "step t", "σ₁(J_t) (log scale)")


def token_connectivity(
    df: pd.DataFrame, title: str = "How much the last prediction reads each token"
) -> go.Figure:
    """Bars of log₁₀ ‖∂ℓ_p/∂x_t‖ over the tokens up to p
    (:func:`~rnnviz.frames.models.token_connectivity_frame`)."""
    if df.empty:
        return empty_figure(title, "no tokens")
    logs = df["log10"].to_numpy(np.float64)
    finite = logs[np.isfinite(logs)]
    floor = float(finite.min()) - 1 if finite.size else 0.0
    fig = new_figure(title, "token", "‖∂ℓ_p/∂x_t‖ (log scale)")
    fig.add_trace(
        go.Bar(
            x=df["t"].to_numpy(),
            y=np.where(np.isfinite(logs), logs - floor, 0.0),
            base=floor,
            marker_color=OKABE_ITO[0],
            customdata=pow10_parts(logs),
            hovertemplate="t=%{x}: " + POW10_HOVER + "<extra></extra>",
            name="connectivity",
        )
    )
    if finite.size:
        ticks, labels = pow10_ticks(floor, float(finite.max()))
        fig.update_yaxes(tickmode="array", tickvals=ticks, ticktext=labels)
    fig.update_xaxes(**_tick_labels(df))
    return fig

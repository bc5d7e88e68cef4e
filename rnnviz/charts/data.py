"""One sequence of a data set, drawn (:class:`rnnviz.dataset.describe.Preview`): a digit as
its 8×8 image in grey, other data as one line per feature over its real steps. A text is
shown as its characters (no figure)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rnnviz.charts.base import OKABE_ITO, base_layout, empty_figure, new_figure, thin

if TYPE_CHECKING:  # a record of plain arrays: charts read its fields, never import the data layer
    from rnnviz.dataset.describe import Preview

#: Features drawn as lines in a series preview (the first ones).
MAX_FEATURES = 8


def preview_figure(p: Preview) -> go.Figure:
    """The sequence of ``p``: a heatmap (image) or lines (series); an empty figure with a
    message for a text (its characters are the preview)."""
    if p.image is not None:
        fig = go.Figure(
            go.Heatmap(
                z=np.asarray(p.image)[::-1],  # row 0 at the top
                colorscale="Greys",
                zmin=0.0,
                zmax=1.0,
                showscale=False,
                hovertemplate="row %{customdata}<br>col %{x}<br>ink %{z:.2f}<extra></extra>",
                customdata=np.repeat(np.arange(8)[::-1, None], 8, axis=1),
            )
        )
        theme = base_layout()
        title = {**theme["title"], "text": f"{p.label} — {p.title}"}
        fig.update_layout(**{**theme, "title": title, "height": 260})
        fig.update_xaxes(showticklabels=False, constrain="domain")
        fig.update_yaxes(showticklabels=False, scaleanchor="x")
        return fig
    if p.series is None:
        return empty_figure(f"{p.label} — {p.title}", "a text: shown as its characters")
    series = np.asarray(p.series, np.float64)
    title = f"{p.label} — {p.title}"
    n = min(series.shape[1], MAX_FEATURES)
    if n < series.shape[1]:
        title += f" (first {n} of {series.shape[1]} features)"
    fig = new_figure(title, "step t", "value")
    df = pd.DataFrame(
        {
            "t": np.tile(np.arange(1, len(series) + 1), n),
            "series": np.repeat(np.arange(n), len(series)),
            "value": series[:, :n].T.reshape(-1),
        }
    )
    drawn, _ = thin(df)
    for i, part in drawn.groupby("series", sort=True):
        fig.add_trace(
            go.Scatter(
                x=part["t"],
                y=part["value"],
                mode="lines",
                name=p.feature_names[i],
                line=dict(color=OKABE_ITO[i % len(OKABE_ITO)]),
            )
        )
    fig.update_layout(height=260)
    return fig

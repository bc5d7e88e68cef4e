"""Figures into a standalone HTML page: plotly.js's source and one figure's ``<div>``.

The report (:mod:`rnnviz.report.html`) reaches plotly only through :mod:`rnnviz.charts`: it
puts these strings into its page without knowing how a figure is drawn.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

#: The figure type every chart of :mod:`rnnviz.charts` returns, for the layers above to name
#: without importing plotly themselves (the report's :class:`~rnnviz.report.html.Figure`).
PlotlyFigure = go.Figure


def plotly_js() -> str:
    """plotly.js's whole source (about 4.7 MB), to inline once in a page that must work
    offline.

    Example:
        >>> from rnnviz.charts.embed import plotly_js
        >>> len(plotly_js()) > 1_000_000
        True
    """
    return get_plotlyjs()


def figure_div(figure: go.Figure, div_id: str, config: dict, height: str = "480px") -> str:
    """One figure as a ``<div id=div_id>`` and the script that draws it, without plotly.js
    (the page inlines :func:`plotly_js` once). The div is the page's full width.

    Example:
        >>> import plotly.graph_objects as go
        >>> from rnnviz.charts.embed import figure_div
        >>> html = figure_div(go.Figure(go.Scatter(y=[1, 2])), "rnnviz-x", {"displaylogo": False})
        >>> 'id="rnnviz-x"' in html, "<script src" in html
        (True, False)
    """
    return figure.to_html(
        include_plotlyjs=False,
        full_html=False,
        div_id=div_id,
        default_width="100%",
        default_height=height,
        config=config,
    )

"""One self-contained teaching page over a precomputed grid (``rnnviz explorable``).

The page holds its data (:func:`rnnviz.report.explorable_data.page_data`: every grid point's
view, stored compactly) and plotly.js, both gzip-compressed and base64-encoded in
``<script>`` elements; its script (``explorable.js`` beside this module) decompresses them
with the browser's ``DecompressionStream`` and redraws three charts from a lookup whenever a
slider or menu moves. Nothing is computed in the page and nothing is requested from
anywhere: the file works from a USB stick.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rnnviz.charts.base import OKABE_ITO, POW10_HOVER, base_layout
from rnnviz.charts.embed import plotly_js
from rnnviz.config import ConfigError
from rnnviz.report.explorable_data import estimate_data_bytes, page_data

if TYPE_CHECKING:
    from rnnviz.studies.explorable import ExplorableGrid

#: The largest page :func:`explorable_html` writes; a grid whose estimate is over it is refused
#: before anything is computed (:func:`check_page_size`).
MAX_PAGE_BYTES = 20_000_000
#: Plotly's options for every chart (no logo link; the modebar's image export works offline).
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em auto; max-width: 1280px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } .lesson { max-width: 60em; }
#rnnviz-controls { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(330px, 100%), 1fr));
                   gap: 0.4em 1.5em;
                   margin: 1em 0; padding: 0.8em 1em; background: #f6f8fa; border-radius: 6px; }
.control { display: grid; grid-template-columns: 10.5em minmax(0, 1fr) 4.5em; align-items: center;
           gap: 0.6em; }
.control input, .control select { min-width: 0; width: 100%; }
.control .name { font-weight: 600; } .control .value { font-variant-numeric: tabular-nums; }
#rnnviz-verdict { font-weight: 600; font-size: 1.1em; margin: 0.6em 0 0.2em; }
#rnnviz-numbers, .note { color: #555; font-size: 0.9em; }
/* min(…, 100%): on a phone one column of the page's width, not a column wider than it */
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(480px, 100%), 1fr)); gap: 0 1em; }
.chart { min-height: 380px; } .chart.wide { grid-column: 1 / -1; min-height: 520px; }
"""


def estimate_page_bytes(points: int, seq_lens: Sequence[int]) -> int:
    """What a page of ``points`` grid points takes, before computing them (it errs high):
    plotly.js and :func:`~rnnviz.report.explorable_data.estimate_data_bytes`.

    >>> 2.0e6 < estimate_page_bytes(132, [25, 50, 100, 200]) < 5.0e6
    True
    """
    return len(_plotly_gz()) + estimate_data_bytes(points, seq_lens)


def check_page_size(over: Mapping[str, Sequence[Any]], seq_len: int, max_bytes: int = MAX_PAGE_BYTES) -> None:
    """Refuse a grid whose page would be over ``max_bytes``, naming the size it would have.

    Raises:
        ConfigError: over the cap.
    """
    points = math.prod(len(v) for v in over.values())
    seq_lens = [int(t) for t in over.get("seq_len", [seq_len])]
    size = estimate_page_bytes(points, seq_lens)
    if size > max_bytes:
        raise ConfigError(
            "grid",
            f"{points} points",
            f"a page of at most {max_bytes / 1e6:.0f} MB; this grid's would be about {size / 1e6:.0f} MB "
            "(fewer values, or shorter sequences)",
        )


@functools.cache
def _plotly_gz() -> str:
    return base64.b64encode(gzip.compress(plotly_js().encode(), 9, mtime=0)).decode("ascii")


@functools.cache
def fit_js() -> str:
    """``fit.js``: each chart's title wrapped to its width and clear of its legend, in the
    browser (Plotly does neither); shared by these pages and the comparison reports."""
    return resources.files("rnnviz.report").joinpath("fit.js").read_text(encoding="utf-8")


@functools.cache
def _script() -> str:
    return resources.files("rnnviz.report").joinpath("explorable.js").read_text(encoding="utf-8")


def explorable_html(data: Mapping[str, Any]) -> str:
    """The page over a grid's data: its controls, three charts in the house theme, the verdict
    and the numbers.

    Args:
        data: :func:`~rnnviz.report.explorable_data.page_data` of the grid.

    Returns:
        The HTML text.
    """
    theme = {k: v for k, v in base_layout().items() if k not in ("height", "title")}
    page = {
        **data["page"],
        "hover": POW10_HOVER,
        "colours": list(OKABE_ITO),
        "theme": theme,
        "config": PLOTLY_CONFIG,
    }
    stored = {"page": page, "points": data["points"]}
    payload = base64.b64encode(
        gzip.compress(json.dumps(stored, separators=(",", ":"), allow_nan=False).encode(), 9, mtime=0)
    ).decode("ascii")
    title = html.escape(data["title"])
    body = f"""<div id="rnnviz-app" data-ready="0">
<h1>{title}</h1>
<p class="lesson">{html.escape(data["lesson"])}</p>
<div id="rnnviz-controls"></div>
<label class="note"><input type="checkbox" id="rnnviz-fixed" checked>
Keep the axes fixed over the whole grid</label>
<p id="rnnviz-verdict">Loading…</p>
<p id="rnnviz-numbers"></p>
<div class="charts">
<div class="chart" id="rnnviz-gradients"></div>
<div class="chart" id="rnnviz-jacobians"></div>
<div class="chart wide" id="rnnviz-carry"></div>
</div>
<p class="note">Every point of the grid ({len(data["points"])} configurations) was computed beforehand by
rnnviz: this page only looks them up, and works offline. The other fields: {html.escape(data["others"])}.</p>
<noscript>This page draws its charts with JavaScript.</noscript>
</div>"""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} — rnnviz</title>
<style>{_STYLE}</style>
</head>
<body>
{body}
<script type="application/octet-stream" id="rnnviz-plotly-gz">{_plotly_gz()}</script>
<script type="application/octet-stream" id="rnnviz-data-gz">{payload}</script>
<script>{fit_js()}</script>
<script>{_script()}</script>
</body>
</html>
"""


def grid_html(
    grid: ExplorableGrid, title: str, lesson: str = "", start: Mapping[str, Any] | None = None
) -> str:
    """:func:`explorable_html` of :func:`~rnnviz.report.explorable_data.page_data`: the page over ``grid``."""
    return explorable_html(page_data(grid, title, lesson, start))


def write_explorable(text: str, path: str | Path) -> Path:
    """Write the page ``text`` to ``path`` (which must end in ``.html``); the path written.

    Raises:
        ConfigError: a path that does not end in ``.html``.
    """
    path = Path(path)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ConfigError("out", str(path), "a file name ending in .html")
    path.write_text(text, encoding="utf-8")
    return path

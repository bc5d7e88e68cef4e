"""One self-contained teaching page over a precomputed grid (``rnnviz explorable``).

The page holds every grid point's view (:func:`rnnviz.frames.explorable.point_view`) and
plotly.js, both gzip-compressed and base64-encoded in ``<script>`` elements; its script
(``explorable.js`` beside this module) decompresses them with the browser's
``DecompressionStream`` and redraws four charts from a lookup whenever a slider or menu
moves. Nothing is computed in the page and nothing is requested from anywhere: the file
works from a USB stick.

Compact by construction: log-magnitudes are stored as integers in steps of
:data:`LOG_STEP` decades (far below a pixel of any chart), each series as the differences
between neighbours, so gzip packs a smooth curve into about a byte per step; linear
series (the carry's units) in steps of 1/:data:`LINEAR_LEVELS` of their largest magnitude.
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

import numpy as np

from rnnviz.base.formatting import pow10_text
from rnnviz.charts.base import OKABE_ITO, POW10_HOVER, base_layout
from rnnviz.charts.embed import plotly_js
from rnnviz.config import FIELD_SPECS, ConfigError
from rnnviz.frames.explorable import UNITS_SHOWN, PointView, point_view

if TYPE_CHECKING:
    from rnnviz.base.presets import PagePreset
    from rnnviz.studies.explorable import ExplorableGrid

#: Log-magnitudes are stored to this many decades (0.23 % in the value).
LOG_STEP = 1e-3
#: A linear series is stored to 1/LINEAR_LEVELS of its largest magnitude.
LINEAR_LEVELS = 1000
#: The largest page :func:`explorable_html` writes; a grid whose estimate is over it is refused
#: before anything is computed (:func:`check_page_size`).
MAX_PAGE_BYTES = 20_000_000
#: Bytes one step of a series takes in the page, gzip and base64 included, measured on 20
#: seeds of a tanh RNN at T = 1000: a log-magnitude (smooth) 1.2, a unit of the carry (as
#: noisy as the inputs) 2.6.
LOG_STEP_BYTES, UNIT_STEP_BYTES = 1.2, 2.6
#: Plotly's options for every chart (no logo link; the modebar's image export works offline).
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em auto; max-width: 1280px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } .lesson { max-width: 60em; }
#rnnviz-controls { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr));
                   gap: 0.4em 1.5em;
                   margin: 1em 0; padding: 0.8em 1em; background: #f6f8fa; border-radius: 6px; }
.control { display: grid; grid-template-columns: 9em 1fr 5em; align-items: center; gap: 0.6em; }
.control .name { font-weight: 600; } .control .value { font-variant-numeric: tabular-nums; }
#rnnviz-verdict { font-weight: 600; font-size: 1.1em; margin: 0.6em 0 0.2em; }
#rnnviz-numbers, .note { color: #555; font-size: 0.9em; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 0 1em; }
.chart { min-height: 380px; }
"""


def _codes(values: np.ndarray, step: float) -> list[int | None]:
    """``values`` as integers in units of ``step``, each the difference to the previous one
    within a run of finite values (the first of a run absolute), None for −inf, NaN and inf
    (a gap in the chart)."""
    out: list[int | None] = []
    previous = None
    for v in np.asarray(values, np.float64).tolist():
        if not math.isfinite(v):
            out.append(None)
            previous = None
            continue
        q = int(round(v / step))
        out.append(q if previous is None else q - previous)
        previous = q
    return out


def _encode_logs(values: np.ndarray) -> list[int | None]:
    """log₁₀ values in steps of :data:`LOG_STEP` (:func:`_codes`)."""
    return _codes(values, LOG_STEP)


def _encode_linear(values: np.ndarray) -> dict[str, Any]:
    """A linear series as ``{"step": s, "codes": …}``, s = max|v| / :data:`LINEAR_LEVELS`."""
    v = np.asarray(values, np.float64)
    finite = v[np.isfinite(v)]
    top = float(np.abs(finite).max()) if finite.size else 0.0
    step = top / LINEAR_LEVELS if top > 0 else 1.0
    return {"step": step, "codes": _codes(v, step)}


def decode(codes: Sequence[int | None], step: float) -> np.ndarray:
    """The values :func:`_encode_logs` (``step = LOG_STEP``) or :func:`_encode_linear` stored
    (NaN for a gap): what the page's ``decode`` computes, for tests and readers.

    >>> decode(_encode_logs(np.array([-1.0, -1.5, -np.inf, 2.0])), LOG_STEP).tolist()
    [-1.0, -1.5, nan, 2.0]
    """
    out = np.full(len(codes), np.nan)
    run = None
    for i, c in enumerate(codes):
        if c is None:
            run = None
            continue
        run = c if run is None else run + c
        out[i] = run * step
    return out


#: The smallest normal number of each dtype (bfloat16 has float32's exponent range).
SMALLEST_NORMAL = {"float32": 2.0**-126, "bfloat16": 2.0**-126, "float16": 2.0**-14}


def floor_of(dtype: str) -> float:
    """log₁₀ of ``dtype``'s smallest normal number (float32 and bfloat16: 1.2·10⁻³⁸; float16: 6.1·10⁻⁵)."""
    return math.log10(SMALLEST_NORMAL[dtype])


def _numbers(v: PointView) -> str:
    first = pow10_text(float(v.grad["total"][0]))
    lam = f"{v.lyapunov:+.4f}" if math.isfinite(v.lyapunov) else "not finite"
    source = "float32's own norms" if v.log10_source == "float32" else "the log-magnitude pass"
    return f"‖∂L/∂carry_0‖ = {first} (exact, from {source}); loss {v.loss:.4g}; λ₁ = {lam} per step"


def point_json(v: PointView) -> dict[str, Any]:
    """One grid point as the page stores it."""
    floor = floor_of(v.dtype)
    return {
        "T": v.seq_len,
        "verdict": v.verdict,
        "kind": v.kind,
        "numbers": _numbers(v),
        "floor": floor,
        "floor_label": f"smallest normal {v.dtype}: {pow10_text(floor, 2)}",
        "grad": {name: _encode_logs(series) for name, series in v.grad.items()},
        "bound": None if v.bound is None else _encode_logs(v.bound),
        "bound_label": v.bound_label,
        "carry": {name: _encode_logs(series) for name, series in v.carry_norms.items()},
        "units": [_encode_linear(u) for u in v.units],
        "unit_label": v.unit_label,
        "steps": v.jacobian_steps.astype(int).tolist(),
        "sv": [_encode_logs(s) for s in v.log10_singular_values],
        "lambda1_text": f"{v.lyapunov:+.4f} per step" if math.isfinite(v.lyapunov) else "not finite",
    }


def _value_text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def controls_json(over: Mapping[str, Sequence[Any]], start: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One control per swept field: a slider over numbers, a menu over names; each starts at
    ``start``'s value where it is on the grid, else at its first value."""
    out = []
    for name, values in over.items():
        spec = FIELD_SPECS[name]
        values = list(values)
        out.append(
            {
                "name": name,
                "label": name.replace("_", " "),
                "help": spec.help,
                "kind": "menu" if isinstance(values[0], str) else "slider",
                "values": values,
                "text": [_value_text(v) for v in values],
                "start": values.index(start[name]) if start.get(name) in values else 0,
            }
        )
    return out


def estimate_page_bytes(points: int, seq_lens: Sequence[int], components: int = 2, k: int = 4) -> int:
    """What a page of ``points`` grid points takes, before computing them (it errs high):
    plotly.js, and per point its log-magnitude series (the total, each of ``components``
    gradients and carry norms, the bound), :data:`UNITS_SHOWN` units of the carry, and k
    singular values at ≤ 50 steps.

    >>> 2.0e6 < estimate_page_bytes(132, [25, 50, 100, 200]) < 5.0e6
    True
    """
    per_t = sum(seq_lens) / max(len(seq_lens), 1) + 1
    logs = 2 + 2 * components
    per_point = (
        per_t * (logs * LOG_STEP_BYTES + UNITS_SHOWN * UNIT_STEP_BYTES) + 50 * k * LOG_STEP_BYTES + 150
    )
    return int(len(_plotly_gz()) + points * per_point)


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
def _script() -> str:
    return resources.files("rnnviz.report").joinpath("explorable.js").read_text(encoding="utf-8")


def explorable_html(
    grid: ExplorableGrid, title: str, lesson: str = "", start: Mapping[str, Any] | None = None
) -> str:
    """The page over ``grid``: its controls, four charts, the verdict and the numbers.

    Args:
        grid: the computed grid (:func:`rnnviz.studies.explorable.explorable_grid`).
        title: the page's heading.
        lesson: what to try, shown under it.
        start: where the controls start (default: each field's value in ``grid.config``,
            else its first value).

    Returns:
        The HTML text.
    """
    start = {name: getattr(grid.config, name) for name in grid.over} if start is None else start
    theme = {k: v for k, v in base_layout().items() if k not in ("height", "title")}
    page = {
        "controls": controls_json(grid.over, start),
        "log_step": LOG_STEP,
        "hover": POW10_HOVER,
        "colours": list(OKABE_ITO),
        "theme": theme,
        "config": PLOTLY_CONFIG,
        "titles": {
            "grad": "‖∂L/∂carry_t‖ through time",
            "carry": "‖carry_t‖",
            "units": "The carry's first units",
            "sv": "Step-Jacobian spectrum σᵢ(∂carry_t/∂carry_{t−1})",
        },
    }
    data = {"page": page, "points": [point_json(point_view(p)) for p in grid.points]}
    payload = base64.b64encode(
        gzip.compress(json.dumps(data, separators=(",", ":"), allow_nan=False).encode(), 9, mtime=0)
    ).decode("ascii")
    base = ", ".join(f"{k}={_value_text(v)}" for k, v in grid.config.to_dict().items() if k not in grid.over)
    body = f"""<div id="rnnviz-app" data-ready="0">
<h1>{html.escape(title)}</h1>
<p class="lesson">{html.escape(lesson)}</p>
<div id="rnnviz-controls"></div>
<label class="note"><input type="checkbox" id="rnnviz-fixed" checked>
Keep the axes fixed over the whole grid</label>
<p id="rnnviz-verdict">Loading…</p>
<p id="rnnviz-numbers"></p>
<div class="charts">
<div class="chart" id="rnnviz-gradients"></div>
<div class="chart" id="rnnviz-jacobians"></div>
<div class="chart" id="rnnviz-carry"></div>
<div class="chart" id="rnnviz-units"></div>
</div>
<p class="note">Every point of the grid ({len(grid.points)} configurations) was computed beforehand by rnnviz:
this page only looks them up, and works offline. The other fields: {html.escape(base)}.</p>
<noscript>This page draws its charts with JavaScript.</noscript>
</div>"""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} — rnnviz</title>
<style>{_STYLE}</style>
</head>
<body>
{body}
<script type="application/octet-stream" id="rnnviz-plotly-gz">{_plotly_gz()}</script>
<script type="application/octet-stream" id="rnnviz-data-gz">{payload}</script>
<script>{_script()}</script>
</body>
</html>
"""


def preset_html(preset: PagePreset, grid: ExplorableGrid) -> str:
    """:func:`explorable_html` for a teaching preset's grid, with its title and lesson."""
    return explorable_html(grid, preset.title, preset.lesson)


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

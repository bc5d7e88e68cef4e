"""The data of a teaching page (:mod:`rnnviz.report.explorable`): every grid point's view,
stored compactly, and the page's controls, as plain JSON values. NumPy only: a worker
process computes it without plotly, and the page is put together where plotly.js is.

Compact by construction: log-magnitudes are stored as integers in steps of
:data:`LOG_STEP` decades (far below a pixel of any chart), each series as the differences
between neighbours, so gzip packs a smooth curve into about a byte per step; linear
series (the carry's units) in steps of 1/:data:`LINEAR_LEVELS` of their largest magnitude.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rnnviz.base.formatting import pow10_text
from rnnviz.config import FIELD_SPECS
from rnnviz.frames.explorable import UNITS_SHOWN, PointView, point_view

if TYPE_CHECKING:
    from rnnviz.base.presets import PagePreset
    from rnnviz.studies.explorable import ExplorableGrid

#: Log-magnitudes are stored to this many decades (far below a pixel of any chart).
LOG_STEP = 1e-3
#: A linear series is stored to 1/LINEAR_LEVELS of its largest magnitude.
LINEAR_LEVELS = 1000
#: Bytes one step of a series takes in the page, gzip and base64 included: a log-magnitude is
#: smooth, a unit of the carry as noisy as the inputs (measured: docs/dev/benchmarks.md,
#: "Teaching pages").
LOG_STEP_BYTES, UNIT_STEP_BYTES = 1.2, 2.6
#: The charts' titles.
TITLES = {
    "grad": "‖∂L/∂carry_t‖ through time",
    "carry": "The carry: ‖carry_t‖, and its first units",
    "sv": "Step-Jacobian spectrum σᵢ(∂carry_t/∂carry_{t−1})",
}


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
                "label": spec.title,
                "help": spec.help,
                "kind": "menu" if isinstance(values[0], str) else "slider",
                "values": values,
                "text": [_value_text(v) for v in values],
                "start": values.index(start[name]) if start.get(name) in values else 0,
            }
        )
    return out


def estimate_data_bytes(points: int, seq_lens: Sequence[int], components: int = 2, k: int = 4) -> int:
    """What the data of ``points`` grid points takes in a page, before computing them (it
    errs high): per point its log-magnitude series (the total, each of ``components``
    gradients and carry norms, the bound), :data:`UNITS_SHOWN` units of the carry, and k
    singular values at ≤ 50 steps.

    >>> 0.1e6 < estimate_data_bytes(132, [25, 50, 100, 200]) < 1e6
    True
    """
    per_t = sum(seq_lens) / max(len(seq_lens), 1) + 1
    logs = 2 + 2 * components
    per_point = (
        per_t * (logs * LOG_STEP_BYTES + UNITS_SHOWN * UNIT_STEP_BYTES) + 50 * k * LOG_STEP_BYTES + 150
    )
    return int(points * per_point)


def page_data(
    grid: ExplorableGrid, title: str, lesson: str = "", start: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Everything a teaching page shows, as JSON values
    (:func:`rnnviz.report.explorable.explorable_html` puts it in the page).

    Args:
        grid: the computed grid (:func:`rnnviz.studies.explorable.explorable_grid`).
        title: the page's heading.
        lesson: what to try, shown under it.
        start: where the controls start (default: each field's value in ``grid.config``,
            else its first value).

    Returns:
        ``{"title", "lesson", "others", "page": {controls, log_step, titles}, "points": [...]}``:
        ``others`` names the fields the grid does not sweep, with their values.
    """
    start = {name: getattr(grid.config, name) for name in grid.over} if start is None else start
    others = ", ".join(
        f"{k}={_value_text(v)}" for k, v in grid.config.to_dict().items() if k not in grid.over
    )
    return {
        "title": title,
        "lesson": lesson,
        "others": others,
        "page": {"controls": controls_json(grid.over, start), "log_step": LOG_STEP, "titles": TITLES},
        "points": [point_json(point_view(p)) for p in grid.points],
    }


def preset_data(preset: PagePreset, grid: ExplorableGrid) -> dict[str, Any]:
    """:func:`page_data` for a teaching preset's grid, with its title and lesson."""
    return page_data(grid, preset.title, preset.lesson)

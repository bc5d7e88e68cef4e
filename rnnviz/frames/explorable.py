"""What a teaching page draws at one grid point, as plain NumPy series and sentences.

:func:`point_view` reads one :class:`~rnnviz.studies.explorable.LessonPoint` the way the
dashboard's Gradients, Carry and Jacobians tabs do (the same verdict, the same closed-form
curve, the same exact magnitudes); :mod:`rnnviz.report.explorable` stores the views compactly
and the page only looks them up.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from rnnviz.frames.gradients import bound_frame
from rnnviz.frames.verdicts import verdict
from rnnviz.tables.cells import cell_spec

if TYPE_CHECKING:
    from rnnviz.studies.explorable import LessonPoint

#: How many units of the carry's output component (example 0) the trajectory chart draws.
UNITS_SHOWN = 3


class PointView(NamedTuple):
    """One grid point as the page draws it (``T+1`` series index t = 0..T).

    Attributes:
        seq_len: T.
        dtype: the point's dtype (its smallest normal number is the floor marked on the chart).
        verdict: the dashboard's sentence over the gradient chart; ``kind`` its one word.
        loss: L.
        grad: ``{"total" | component: log₁₀ ‖∂L/∂carry_t‖ [T+1]}``, exact (−inf: a true zero).
        bound_label, bound: the cell's closed-form curve (the Pascanu bound for the simple
            cell) as log₁₀ ``[T+1]``, or None where the cell has none.
        carry_norms: ``{component: log₁₀ ‖carry_t‖ [T+1]}`` over batch and units.
        units: ``[U, T+1]`` the first U units of the output component, example 0.
        unit_label: which component those units are (``h``).
        jacobian_steps: ``[S]``; log10_singular_values ``[k, S]``: log₁₀ σ_i(J_t).
        lyapunov: λ₁ per step.
        log10_source: ``"float32"`` or ``"log pass"`` (:attr:`Analysis.log10_source`).
    """

    seq_len: int
    dtype: str
    verdict: str
    kind: str
    loss: float
    grad: dict[str, np.ndarray]
    bound_label: str | None
    bound: np.ndarray | None
    carry_norms: dict[str, np.ndarray]
    units: np.ndarray
    unit_label: str
    jacobian_steps: np.ndarray
    log10_singular_values: np.ndarray
    lyapunov: float
    log10_source: str


def _log10(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log10(np.asarray(x, np.float64))


def point_view(point: LessonPoint) -> PointView:
    """The page's view of one grid point.

    Example:
        >>> from rnnviz import RunConfig
        >>> from rnnviz.studies.explorable import explorable_grid
        >>> g = explorable_grid(RunConfig(hidden_size=4, seq_len=6), {"recurrent_gain": [0.5]}, k=2)
        >>> v = point_view(g.points[0])
        >>> v.kind, v.grad["total"].shape, v.log10_singular_values.shape  # [T+1], [k, S]
        ('vanishing', (7,), (2, 6))
    """
    a = point.analysis
    cfg = a.config
    said = verdict(a)
    grad = {"total": np.asarray(a.log10_grad_norms, np.float64)}
    if len(cfg.carry_components) > 1:
        grad.update({c: np.asarray(v, np.float64) for c, v in a.log10_component_grad_norms.items()})
    bound = bound_frame(a)
    out = cell_spec(cfg.cell).carry.output
    units = np.asarray(a.carries[out], np.float64)  # [T+1, (B,) H]
    units = units.reshape(units.shape[0], -1, units.shape[-1])[:, 0, :UNITS_SHOWN].T
    return PointView(
        seq_len=cfg.seq_len,
        dtype=cfg.dtype,
        verdict=said.text,
        kind=said.kind,
        loss=float(a.loss),
        grad=grad,
        bound_label=None if bound is None else str(bound["label"].iloc[0]),
        bound=None if bound is None else bound["log10_value"].to_numpy(np.float64),
        carry_norms={c: _log10(v) for c, v in a.component_carry_norms.items()},
        units=units,
        unit_label=out,
        jacobian_steps=np.asarray(point.jacobian_steps),
        log10_singular_values=_log10(point.singular_values).T,
        lyapunov=float(point.lyapunov) if math.isfinite(point.lyapunov) else math.nan,
        log10_source=a.log10_source,
    )

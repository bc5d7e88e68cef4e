"""Readings of measured curves, in NumPy: the gradient's decay rate, the norm of several
log₁₀ magnitudes, where a curve crosses zero, and what a leading Lyapunov exponent says in words.

No JAX: the studies (:mod:`rnnviz.studies.lyapunov`), the frames and the dashboard all read these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np


class DecayFit(NamedTuple):
    """The measured side of "predicted vs measured": ``slope`` of ln‖∂L/∂carry_{T−k}‖ per
    step of lag k (least squares over lags ``lag_lo..lag_hi``), ``intercept`` its value at
    k = 0, ``points`` how many lags were fitted."""

    slope: float
    intercept: float
    lag_lo: int
    lag_hi: int
    points: int


def decay_fit(log10_grad_norms: np.ndarray, trim: float = 0.1) -> DecayFit | None:
    """Fit ln‖∂L/∂carry_{T−k}‖ ≈ a + s·k over the lags between ``trim·T`` and ``(1 − trim)·T``.

    ``log10_grad_norms`` ``[T+1]`` (index t, so lag k = T − t; exact, e.g.
    ``Analysis.log10_grad_norms``). The first steps back from T (the loss's own direction
    settling onto the dominant one) and the last (the initial carry's transient) are left
    out. None when fewer than 3 finite points remain.
    """
    logs = np.asarray(log10_grad_norms, np.float64)[::-1] * math.log(10.0)  # index = lag
    t_len = logs.size - 1
    lo, hi = max(1, int(round(trim * t_len))), min(t_len - 1, int(round((1 - trim) * t_len)))
    lags = np.arange(lo, hi + 1)
    y = logs[lo : hi + 1]
    ok = np.isfinite(y)
    if ok.sum() < 3:
        return None
    slope, intercept = np.polyfit(lags[ok], y[ok], 1)
    return DecayFit(float(slope), float(intercept), int(lo), int(hi), int(ok.sum()))


def reduced_axes(ndim: int, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    """The axes ``axis`` names in an array of ``ndim`` axes, as non-negative indices (None: all).

    >>> reduced_axes(3, -1), reduced_axes(2, None), reduced_axes(3, (0, -2))
    ((2,), (0, 1), (0, 1))
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % ndim for a in axes) if ndim else ()


def log10_combine(logs: np.ndarray, axis: int | Sequence[int]) -> np.ndarray:
    """log₁₀ sqrt(Σ 10^(2·l)) over ``axis`` of float64 log₁₀ magnitudes (−inf terms add
    nothing; all −inf gives −inf; NaN propagates)."""
    logs = np.asarray(logs, np.float64)
    axes = reduced_axes(logs.ndim, axis)
    top = np.max(logs, axis=axes, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        s = np.sum(10.0 ** (2.0 * (logs - safe)), axis=axes, keepdims=True)
        out = safe + 0.5 * np.log10(s)
    out = np.where(np.isfinite(top), out, top)
    return np.squeeze(out, axis=axes)


def zero_crossing(x: np.ndarray, y: np.ndarray) -> float | None:
    """The first x where y changes sign (linear interpolation), or None."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    for i in range(len(x) - 1):
        if np.isfinite(y[i]) and np.isfinite(y[i + 1]) and (y[i] < 0) != (y[i + 1] < 0):
            return float(x[i] + (x[i + 1] - x[i]) * (-y[i]) / (y[i + 1] - y[i]))
    return None


#: |λ₁| below this is "at the edge of chaos" (:func:`regime`).
EDGE_TOLERANCE = 1e-3


def regime(lambda1: float) -> str:
    """The dynamical regime λ₁ says the trajectory is in, in words."""
    if lambda1 < -EDGE_TOLERANCE:
        return "ordered (λ₁ < 0): every direction shrinks, gradients vanish"
    if lambda1 > EDGE_TOLERANCE:
        return "chaotic (λ₁ > 0): some direction grows, gradients can explode"
    return (
        f"at the edge of chaos (|λ₁| < {EDGE_TOLERANCE:g}): gradients neither vanish nor explode on average"
    )

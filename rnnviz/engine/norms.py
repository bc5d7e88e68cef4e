"""Norms that neither underflow nor overflow, and magnitudes beyond float32's range.

Squaring float32 values below ~1e-19 underflows (and above ~1e19 overflows), so a plain
``sqrt(sum(x²))`` reports 0 (or inf) for gradients that float32 holds perfectly well.
:func:`robust_norm` scales by ``max|x|`` before squaring, as BLAS's ``nrm2`` does.

Below ~1.2e-38 float32 cannot hold the gradient itself (XLA on CPU flushes subnormals to
zero). A :class:`Scaled` value keeps such magnitudes exactly: a float32 mantissa and an
int32 power-of-two exponent, ``value = mantissa · 2^exponent``. Scaling by powers of two is
exact, so a recursion that renormalises every step (:mod:`rnnviz.engine.logpass`) loses nothing
to the exponent however many steps it runs; :func:`log10` turns it into float64 on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.readings import log10_combine, reduced_axes

#: Exponent of an exact zero. Far below any real exponent (float32's smallest is −149,
#: and 5000 steps of 10⁻¹⁰ each are −1.7e5), and far from int32's limits so sums of two stay valid.
ZERO_EXPONENT = -(1 << 28)
_LOG10_2 = float(np.log10(2.0))


def robust_norm(x, axis: int | Sequence[int] | None = None):
    """‖x‖₂ over ``axis`` (all axes when None) without underflow or overflow of the squares.

    ``2^e · sqrt(Σ (x · 2^−e)²)`` with ``2^e ≥ max|x|``; exactly 0 for an all-zero slice,
    inf when an element is ±inf, NaN when one is NaN. Works on NumPy arrays (in float64,
    returned as NumPy) and on JAX arrays (in float32 or wider, traceable). The scale is a
    power of two applied in two steps, never a reciprocal: XLA on CPU flushes subnormals
    to zero, so ``1 / 3e38`` would be 0.
    """
    if isinstance(x, np.ndarray):
        x = np.abs(x.astype(np.float64))
        axes = reduced_axes(x.ndim, axis)
        m = np.max(x, axis=axes, keepdims=True) if x.size else np.zeros((1,) * x.ndim)
        with np.errstate(invalid="ignore"):
            safe = np.where((m > 0) & np.isfinite(m), m, 1.0)
            norm = np.squeeze(safe, axis=axes) * np.sqrt(np.sum((x / safe) ** 2, axis=axes))
        m = np.squeeze(m, axis=axes)
        return np.where(np.isfinite(m), norm, m)
    wide = jnp.float32 if jnp.dtype(x.dtype).itemsize < 4 else x.dtype
    a = jnp.abs(x.astype(wide))
    axes = reduced_axes(a.ndim, axis)
    m = jnp.max(a, axis=axes, keepdims=True)
    e = jnp.where((m > 0) & jnp.isfinite(m), jnp.frexp(m)[1], 0)
    r = pow2_scale(a, -e)
    norm = pow2_scale(jnp.sqrt(jnp.sum(r * r, axis=axes)), jnp.squeeze(e, axis=axes))
    m = jnp.squeeze(m, axis=axes)
    return jnp.where(jnp.isfinite(m), norm, m)


class Scaled(NamedTuple):
    """A non-negative magnitude ``mantissa · 2^exponent`` (float32, int32, same shape).

    An exact zero has mantissa 0 and exponent :data:`ZERO_EXPONENT`; NaN/Inf live in the
    mantissa.
    """

    mantissa: jax.Array
    exponent: jax.Array


def pow2_scale(x: jax.Array, k: jax.Array) -> jax.Array:
    """``x · 2^k`` exactly for integer ``k`` (in float32, cast back to ``x``'s dtype).

    ``k`` may be far outside float32's exponent range: the result is then 0 (k ≪ 0) or
    inf (k ≫ 0), as the true value would round to. Two factors keep each power normal.
    """
    k = jnp.clip(k, -300, 300).astype(jnp.int32)
    k1 = k // 2
    wide = jnp.float32 if jnp.dtype(x.dtype).itemsize < 4 else x.dtype
    f1 = jnp.exp2(k1.astype(wide))
    f2 = jnp.exp2((k - k1).astype(wide))
    return (x.astype(wide) * f1 * f2).astype(x.dtype)


def frexp_max(x: jax.Array, axes: tuple[int, ...]) -> jax.Array:
    """int32 ``e`` with ``max|x| = m · 2^e``, m ∈ [0.5, 1), over ``axes`` (keepdims);
    :data:`ZERO_EXPONENT` where the slice is all zero, 0 where it holds NaN/Inf."""
    m = jnp.max(jnp.abs(x.astype(jnp.float32)), axis=axes, keepdims=True)
    _, e = jnp.frexp(m)
    return jnp.where(m > 0, e, ZERO_EXPONENT).astype(jnp.int32)


def normalise(x: jax.Array, axes: tuple[int, ...]) -> tuple[jax.Array, jax.Array]:
    """``(x̂, e)`` with ``x = x̂ · 2^e`` exactly and ``max|x̂|`` ∈ [0.5, 1) over ``axes``
    (``e`` squeezed over ``axes``). All-zero slices give ``x̂ = 0``, ``e = ZERO_EXPONENT``."""
    e = frexp_max(x, axes)
    x_hat = pow2_scale(x, jnp.where(e == ZERO_EXPONENT, 0, -e))
    return x_hat, jnp.squeeze(e, axis=axes)


def scaled_norm(x_hat: jax.Array, exponent: jax.Array, axes: tuple[int, ...]) -> Scaled:
    """‖x̂ · 2^exponent‖ over ``axes`` as a :class:`Scaled`; ``exponent`` has x̂'s shape
    with ``axes`` removed."""
    n = robust_norm(x_hat, axes)
    return Scaled(n.astype(jnp.float32), jnp.where(n > 0, exponent, ZERO_EXPONENT).astype(jnp.int32))


def combine(values: Scaled, axis: int | Sequence[int]) -> Scaled:
    """``sqrt(Σ v²)`` over ``axis`` of :class:`Scaled` magnitudes, without leaving float32:
    every term is shifted to the largest exponent first (terms 2¹⁵⁰ times smaller vanish,
    as they would in any float32 sum)."""
    axes = reduced_axes(values.mantissa.ndim, axis)
    top = jnp.max(values.exponent, axis=axes, keepdims=True)
    shifted = pow2_scale(values.mantissa, values.exponent - top)
    n = robust_norm(shifted, axes)
    top = jnp.squeeze(top, axis=axes)
    return Scaled(n, jnp.where(n > 0, top, ZERO_EXPONENT).astype(jnp.int32))


def log10(values: Scaled) -> np.ndarray:
    """log₁₀ of :class:`Scaled` magnitudes in float64 on the host: −inf for an exact zero,
    NaN/inf where the mantissa is."""
    m = np.asarray(values.mantissa, np.float64)
    e = np.asarray(values.exponent, np.float64)
    with np.errstate(divide="ignore"):
        out = np.log10(m) + np.where(m > 0, e, 0.0) * _LOG10_2
    return np.where(np.isfinite(m), out, m)


__all__ = [
    "ZERO_EXPONENT",
    "Scaled",
    "combine",
    "frexp_max",
    "log10",
    "log10_combine",
    "normalise",
    "pow2_scale",
    "robust_norm",
    "scaled_norm",
]

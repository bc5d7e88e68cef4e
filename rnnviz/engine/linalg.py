r"""Orthogonal factors without LAPACK: the QR that initialisation needs, in plain JAX.

Why not ``jnp.linalg.qr``: on the CPU, jaxlib 0.10.2 runs a *batched* LAPACK call by
scheduling its batch on XLA's intra-op thread pool and blocking until that work is done.
When an executable holds two such calls with no data dependency between them (the four
orthogonal recurrent kernels of an LSTM, under ``vmap`` in a sweep), XLA:CPU may start both
at once; each occupies a pool thread and waits for work queued behind the other, and with
as many calls as pool threads (2 on a 2-core machine) the process deadlocks for good.
Initialisation is cheap enough to do in plain JAX, so it makes no LAPACK call at all;
:mod:`rnnviz.base.hlo` checks every executable rnnviz compiles for the calls that remain.

The factorisation is Householder's (Golub & Van Loan, *Matrix Computations*, §5.2):

.. math::

    H_k = I - 2 v_k v_k^\top,\quad v_k \propto x - \alpha e_k,\quad \alpha = -\operatorname{sign}(x_k)\,\|x\|,
    \qquad H_{n-1}\cdots H_0\,A = R,\qquad Q = H_0 \cdots H_{n-1}\,I_{[:, :n]},

with ``x`` the k-th column of the partly reduced matrix below row k. Columns of Q are then
flipped so that R's diagonal is positive, which makes Q unique: it equals LAPACK's
``geqrf``/``orgqr`` result with the same sign fix (as in ``jax.random.orthogonal``) up to
float rounding, so the initial weights are the same draws as Flax's orthogonal
initialiser's.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def householder_q(a: jax.Array) -> jax.Array:
    """The orthonormal factor of ``a = QR`` with ``diag(R) ≥ 0``, in plain JAX.

    Args:
      a: ``[m, n]`` with m ≥ n (float32 or float64).

    Returns:
      Q ``[m, n]`` with ``QᵀQ = I``; column k is flipped when ``R_kk < 0``, then one
      Newton–Schulz step ``Q(3I − QᵀQ)/2`` removes most of the rounding's non-orthogonality.

    Cost: 2n rank-one updates of ``[m, n]`` (reduce) and ``[m, n]`` (accumulate), ``~4mn²``
    FLOPs in two ``fori_loop``\\ s.

    >>> import jax, jax.numpy as jnp
    >>> q = householder_q(jax.random.normal(jax.random.key(0), (5, 3)))
    >>> q.shape, bool(jnp.allclose(q.T @ q, jnp.eye(3), atol=1e-5))
    ((5, 3), True)
    """
    m, n = a.shape
    if m < n:
        raise ValueError(f"householder_q needs at least as many rows as columns, got {a.shape}")
    one = jnp.ones((), a.dtype)
    r, q = _reflect(a)
    q = q * jnp.where(jnp.diagonal(r) < 0, -one, one)[None, :]
    # One Newton–Schulz step towards the nearest orthonormal matrix, Q(3I − QᵀQ)/2: it squares
    # the rounding's departure from QᵀQ = I (about 1e-7 left instead of 5e-7 at 16×16, below
    # LAPACK's 3e-7), which matters when W = g·Q is applied 5000 times; Q moves by ~1e-7.
    # Inside a loop body of its own, like the two loops of _reflect: XLA compiles a loop body alone,
    # so every executable (eager or jitted, vmapped or not) rounds this step the same way,
    # where outside it a fused epilogue or another dot emitter would change the last bit.
    eye3 = 3 * jnp.eye(n, dtype=a.dtype)
    return lax.fori_loop(0, 1, lambda _, q: 0.5 * (q @ (eye3 - q.T @ q)), q)


def _reflect(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(R, Q)`` of ``a`` ``[m, n]`` (m ≥ n) by n Householder reflections, R's diagonal of
    either sign: R ``[m, n]`` (zero below its diagonal up to rounding) and Q ``[m, n]``."""
    m, n = a.shape
    rows = jnp.arange(m)
    one, zero = jnp.ones((), a.dtype), jnp.zeros((), a.dtype)

    def reduce(k, state):
        r, vs = state
        x = jnp.where(rows >= k, lax.dynamic_index_in_dim(r, k, axis=1, keepdims=False), zero)
        alpha = jnp.where(x[k] >= 0, -one, one) * jnp.sqrt(jnp.sum(x * x))
        v = x - jnp.where(rows == k, alpha, zero)
        length = jnp.sqrt(jnp.sum(v * v))
        v = jnp.where(
            length > 0, v / jnp.where(length > 0, length, one), zero
        )  # a zero column needs no reflection
        return r - 2 * jnp.outer(v, v @ r), vs.at[k].set(v)

    r, vs = lax.fori_loop(0, n, reduce, (a, jnp.zeros((n, m), a.dtype)))

    def accumulate(i, q):
        v = vs[n - 1 - i]
        return q - 2 * jnp.outer(v, v @ q)

    return r, lax.fori_loop(0, n, accumulate, jnp.eye(m, n, dtype=a.dtype))


def thin_qr(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""The thin QR of a batch of tall matrices, ``a = QR`` with ``diag(R) ≥ 0``, in plain JAX.

    What the Lyapunov exponents and the matrix-free Jacobian need each step: k tangent
    directions of a D-entry carry re-orthonormalised. ``jnp.linalg.qr`` there is a batched
    LAPACK call (see above) and, measured here on jaxlib 0.10.2, slow for tall matrices
    (:func:`tall_qr`), where these k reflections cost only their ``~4·D·k²`` FLOPs.

    Args:
      a: ``[..., m, n]`` with m ≥ n.

    Returns:
      ``(Q [..., m, n], R [..., n, n])``: ``QᵀQ = I``, R upper triangular with a
      non-negative diagonal (a column that is zero gets ``R_kk = 0``), ``QR = a`` up to rounding.

    >>> import jax, jax.numpy as jnp
    >>> a = jax.random.normal(jax.random.key(0), (2, 6, 3))
    >>> q, r = thin_qr(a)
    >>> q.shape, r.shape, bool(jnp.allclose(q @ r, a, atol=1e-5))
    ((2, 6, 3), (2, 3, 3), True)
    """
    m, n = a.shape[-2:]
    if m < n:
        raise ValueError(f"thin_qr needs at least as many rows as columns, got {a.shape}")

    def one_matrix(x):
        r, q = _reflect(x)
        sign = jnp.where(jnp.diagonal(r) < 0, -jnp.ones((), x.dtype), jnp.ones((), x.dtype))
        return q * sign[None, :], jnp.triu(r[:n]) * sign[:, None]

    return jnp.vectorize(one_matrix, signature="(m,n)->(m,n),(n,n)")(a)


#: Entries per matrix above which :func:`tall_qr` reflects in plain JAX rather than call LAPACK.
LAPACK_QR_MAX_ENTRIES = 8192


def tall_qr(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(Q, R)`` of a batch of tall matrices ``[..., m, n]``: LAPACK's (``jnp.linalg.qr``)
    up to :data:`LAPACK_QR_MAX_ENTRIES` entries per matrix, where it is the faster,
    :func:`thin_qr` above, where LAPACK's falls off a cliff (measured here, ``[4, m, n]``:
    LAPACK's is the faster at 512×8, many times slower at 2048×8 and 1024×16; docs/dev/benchmarks.md).
    R's diagonal may be negative in the first case; use ``|R_kk|`` or the singular values.

    >>> import jax
    >>> q, r = tall_qr(jax.random.normal(jax.random.key(0), (4096, 4)))
    >>> q.shape, r.shape
    ((4096, 4), (4, 4))
    """
    m, n = a.shape[-2:]
    return jnp.linalg.qr(a) if m * n <= LAPACK_QR_MAX_ENTRIES else thin_qr(a)


def orthonormal(key: jax.Array, m: int, n: int, dtype=jnp.float32) -> jax.Array:
    """A Haar-random ``[m, n]`` matrix with orthonormal columns (m ≥ n) or rows (m < n).

    The same draw as ``jax.random.orthogonal(key, m, (), dtype, n)``: a standard normal
    ``[max, min]`` matrix, its Q factor with R's diagonal made positive (Mezzadri 2007),
    transposed when m < n — computed by :func:`householder_q` instead of LAPACK.

    >>> import jax
    >>> orthonormal(jax.random.key(1), 2, 4).shape
    (2, 4)
    """
    z = jax.random.normal(key, (max(m, n), min(m, n)), dtype)
    q = householder_q(z)
    return q.T if m < n else q


def orthogonal(scale: float = 1.0, column_axis: int = -1) -> Callable[..., jax.Array]:
    """A drop-in for ``flax.linen.initializers.orthogonal`` that calls no LAPACK routine.

    Args:
      scale: multiplies the orthogonal matrix.
      column_axis: the axis whose columns are orthonormal (the last, as in Flax).

    Returns:
      ``init(key, shape, dtype=float32) -> [shape]``, equal to Flax's initialiser's output
      for the same key up to float rounding.

    >>> import jax, jax.numpy as jnp
    >>> w = orthogonal()(jax.random.key(0), (4, 4))
    >>> bool(jnp.allclose(w @ w.T, jnp.eye(4), atol=1e-5))
    True
    """

    def init(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
        if len(shape) < 2:
            raise ValueError("the orthogonal initializer needs at least a 2-D shape")
        n_rows, n_cols = math.prod(shape) // shape[column_axis], shape[column_axis]
        draws = _DRAWS.get()
        q = (
            orthonormal(key, n_rows, n_cols, dtype)
            if draws is None
            else draws.draw(key, n_rows, n_cols, dtype)
        )
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (shape[column_axis],))
        return jnp.asarray(scale, dtype) * jnp.moveaxis(q, -1, column_axis)

    return init


class _Draws:
    """The :func:`orthogonal` draws of one traced function, made together: the first trace
    notes each ``(key, m, n, dtype)`` (and draws it, for when no two share a shape);
    :meth:`make` then draws every one of a shape in one vmapped :func:`orthonormal`; the
    second trace takes them in the order it asks."""

    def __init__(self) -> None:
        self.asked: list[tuple[Any, int, int, Any]] = []
        self.made: list[jax.Array] | None = None

    def draw(self, key: jax.Array, m: int, n: int, dtype: Any) -> jax.Array:
        if self.made is None:
            self.asked.append((key, m, n, dtype))
            return orthonormal(key, m, n, dtype)  # the first trace's, kept when none is shared
        return self.made.pop(0)

    def shared(self) -> bool:
        """Whether two or more draws share a shape (so that drawing them together helps)."""
        return len({(m, n, jnp.dtype(dtype)) for _, m, n, dtype in self.asked}) < len(self.asked)

    def make(self) -> None:
        groups: dict[tuple, list[int]] = {}
        for i, (_, m, n, dtype) in enumerate(self.asked):
            groups.setdefault((m, n, jnp.dtype(dtype)), []).append(i)
        made: list[Any] = [None] * len(self.asked)
        for (m, n, dtype), which in groups.items():
            keys = jnp.stack([self.asked[i][0] for i in which])
            qs = jax.vmap(lambda k, m=m, n=n, dtype=dtype: orthonormal(k, m, n, dtype))(keys)
            for j, i in enumerate(which):
                made[i] = qs[j]
        self.made = made


_DRAWS: contextvars.ContextVar[_Draws | None] = contextvars.ContextVar(
    "rnnviz_orthogonal_draws", default=None
)


def drawing_together() -> bool:
    """Whether :func:`orthogonal` draws are being gathered (inside
    :func:`orthogonal_draws_together`): an initialiser that would ``vmap`` its own draws
    asks for each one instead, so that they join the others."""
    return _DRAWS.get() is not None


def orthogonal_draws_together(fn: Callable[[], Any]) -> Any:
    """``fn()`` with its :func:`orthogonal` draws of one shape made in one vmapped
    :func:`orthonormal` instead of one each: the same values, bit for bit (a draw rounds
    alike vmapped or not: tests/engine/test_never_hang.py checks the cells that gather draws), and one
    Householder factorisation to compile instead of one per kernel (an LSTM's four recurrent
    kernels, an sLSTM's sixteen blocks: one). Where two draws share a shape, ``fn`` is traced
    a second time, taking the gathered draws in the order it asks for them: it must ask for
    the same draws both times, and be traced (under ``jit``), where the first trace's draws
    are dropped as unused.

    >>> import jax
    >>> init = orthogonal()
    >>> def both(k):
    ...     return [init(kk, (4, 4)) for kk in jax.random.split(k)]
    >>> key = jax.random.key(0)
    >>> together = jax.jit(lambda k: orthogonal_draws_together(lambda: both(k)))(key)
    >>> bool(all((a == b).all() for a, b in zip(together, jax.jit(both)(key))))
    True
    """
    draws = _Draws()
    token = _DRAWS.set(draws)
    try:
        first = fn()
        if not draws.shared():
            return first  # one draw per shape, made in place: nothing to gather
        draws.make()
        return fn()
    finally:
        _DRAWS.reset(token)


__all__ = [
    "LAPACK_QR_MAX_ENTRIES",
    "drawing_together",
    "householder_q",
    "orthogonal",
    "orthogonal_draws_together",
    "orthonormal",
    "tall_qr",
    "thin_qr",
]

r"""The Real-Gated Linear Recurrent Unit (RG-LRU) of Griffin (De et al. 2024, "Griffin: Mixing
Gated Linear Recurrences with Local Attention for Efficient Language Models"), as a Flax cell
honouring ``RNNCellBase``'s contract (carry ``h`` ``[(B,) H]``; the output y equals h).

The recurrence is diagonal and linear in h given the gates, and the gates read only the input:
``∂h_t/∂h_{t−1} = diag(a_t)`` with ``ln a_t`` known in closed form (:func:`rglru_log_a`), so
``ln |∂h_T/∂h_0|`` per unit is ``Σ_t ln a_t`` exactly.

Checked against ``google-deepmind/recurrentgemma``, ``recurrentgemma/jax/layers.py`` (``RGLRU``,
``rnn_param_init``, ``sqrt_bound_derivative``).
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.engine.cells.modern import Initializer, _Cell
from rnnviz.engine.cells.shared import affine, dense

Params = dict[str, Any]

#: The cap on d√u/du in :func:`bounded_sqrt` (recurrentgemma's ``max_gradient``).
MAX_SQRT_GRADIENT = 1000.0


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def bounded_sqrt(u: jax.Array, max_gradient: float = MAX_SQRT_GRADIENT) -> jax.Array:
    r"""√u whose derivative is capped: :math:`\frac{d}{du} = \frac{1}{2\sqrt{\max(u,\ 1/(4M^2))}} ≤ M`.

    The value is the plain square root; only the derivative is bounded, so that at a_t → 1 (u =
    1 − a_t² → 0) the gradient through √(1 − a_t²) stays finite where plain autodiff gives
    inf (and then nan). recurrentgemma writes this as a ``jax.custom_vjp``; here it is a
    ``jax.custom_jvp`` (its tangent is linear, so reverse mode transposes it, and forward-mode
    Jacobians work too).

    Args:
        u: the argument, ≥ 0.
        max_gradient: M, the largest derivative (1000, as recurrentgemma).

    Returns:
        √u, of ``u``'s shape and dtype.

    >>> import jax
    >>> float(bounded_sqrt(4.0)), float(jax.grad(bounded_sqrt)(4.0))
    (2.0, 0.25)
    >>> round(float(jax.grad(bounded_sqrt)(0.0)), 2)  # plain autodiff: inf
    1000.0
    """
    del max_gradient
    return jnp.sqrt(u)


@bounded_sqrt.defjvp
def _bounded_sqrt_jvp(max_gradient: float, primals: tuple, tangents: tuple) -> tuple[jax.Array, jax.Array]:
    (u,), (du,) = primals, tangents
    floor = 1.0 / (4.0 * max_gradient**2)
    return jnp.sqrt(u), du * (0.5 / jnp.sqrt(jnp.maximum(u, floor)))


def a_param_init(c: float = 8.0, r_min: float = 0.9, r_max: float = 0.999) -> Initializer:
    r"""Λ such that a = exp(−c·softplus(Λ)) (a_t at r_t = 1) has a² uniform on [r_min², r_max²].

    .. math::
        a^2 ∼ U(r_{min}^2, r_{max}^2),\quad
        Λ = \mathrm{softplus}^{-1}(−\ln(a)/c) = \ln(\exp(−\ln(a)/c) − 1)

    recurrentgemma's ``rnn_param_init`` draws the same ring but sets softplus(Λ) = −ln a, without
    the 1/c: its a_t at r_t = 1 is a^c. Here the paper's reading is kept: "a^c uniform on the
    ring", i.e. the decay at a fully open recurrence gate lies on [0.9, 0.999].

    >>> import jax, jax.numpy as jnp
    >>> lam = a_param_init()(jax.random.key(0), (1000,))
    >>> a2 = jnp.exp(-2 * 8.0 * jax.nn.softplus(lam))
    >>> bool(a2.min() >= 0.9**2 - 1e-6), bool(a2.max() <= 0.999**2 + 1e-6)
    (True, True)
    """

    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        u = jax.random.uniform(key, shape, jnp.float32)
        log_a = 0.5 * jnp.log(u * (r_max**2 - r_min**2) + r_min**2)
        return jnp.log(jnp.expm1(-log_a / c)).astype(dtype)

    return init


def rglru_log_a(params: Params, x: jax.Array, c: float = 8.0) -> jax.Array:
    r"""ln a_t ``[(B,) H]`` (float32) of the RG-LRU at input ``x`` ``[(B,) I]``: the log of the
    diagonal of ∂h_t/∂h_{t−1}.

    .. math::
        \tilde x = W_{in} x + b_{in},\quad r_t = σ(W_a \tilde x + b_a),\quad
        \ln a_t = −c·r_t·\mathrm{softplus}(Λ)

    The projections run in ``x``'s dtype, the log decay in float32.
    """
    x_tilde = dense(params["in_proj"], x)
    r = jax.nn.sigmoid(dense(params["a_gate"], x_tilde)).astype(jnp.float32)
    lam = jax.nn.softplus(params["a_param"].astype(jnp.float32))
    return -c * r * jnp.broadcast_to(lam, r.shape)


def rglru_step(
    params: Params, h: jax.Array, x: jax.Array, c: float = 8.0, max_gradient: float = MAX_SQRT_GRADIENT
) -> jax.Array:
    """One RG-LRU step: the new h ``[(B,) H]`` in ``h``'s dtype, computed in ``x``'s dtype (the
    decay a_t and √(1 − a_t²) in float32, then cast), the maths of :class:`RGLRUCell`."""
    dt = x.dtype
    x_tilde = dense(params["in_proj"], x)
    gate_x = jax.nn.sigmoid(dense(params["input_gate"], x_tilde))
    log_a = rglru_log_a(params, x, c)
    # 1 − exp(2 ln a), as recurrentgemma: a² from ln a directly, not a rounded a squared
    multiplier = bounded_sqrt(1.0 - jnp.exp(2.0 * log_a), max_gradient)
    new = jnp.exp(log_a).astype(dt) * h.astype(dt) + multiplier.astype(dt) * (gate_x * x_tilde)
    return new.astype(h.dtype)


class RGLRUCell(_Cell):
    r"""RG-LRU (De et al. 2024): a diagonal linear recurrence whose decay is gated by the input.

    .. math::
        \tilde x_t = W_{in} x_t + b_{in},\quad r_t = σ(W_a \tilde x_t + b_a),\quad
        i_t = σ(W_x \tilde x_t + b_x),

        \ln a_t = −c·r_t ⊙ \mathrm{softplus}(Λ),\quad
        h_t = a_t ⊙ h_{t−1} + \sqrt{1 − a_t^2} ⊙ (i_t ⊙ \tilde x_t),\quad y_t = h_t

    Shapes: x ``[(B,) I]``; h, y ``[(B,) H]``; params ``in_proj`` ``[I, H]`` (+ bias),
    ``a_gate`` and ``input_gate`` ``[H, H]`` (+ bias), ``a_param`` (Λ) ``[H]``.

    Choices (checked against recurrentgemma ``recurrentgemma/jax/layers.py``):

    * x̃ is always a Dense projection I → H (also when I = H), standing for the linear branch
      that feeds the RG-LRU in Griffin's recurrent block (its Conv1D and GeLU gate are left
      out); both gates read x̃, as the reference's gates read the RG-LRU's own input.
    * The gates are full Dense layers (the reference's ``BlockDiagonalLinear`` with one block),
      initialised with ``kernel_init`` (lecun normal, the reference's variance scaling 1) and
      ``bias_init`` (zeros).
    * Λ starts so that a² = exp(−2c·softplus(Λ)) is uniform on [r_min², r_max²]
      (:func:`a_param_init`; the reference omits the 1/c, see there).
    * √(1 − a_t²) is :func:`bounded_sqrt`: the reference's gradient bound (``max_gradient``
      1000), written with ``jax.custom_jvp``. The reference's document-boundary reset is left out.
    * Dtypes: the projections and the state update run in the compute dtype ``dtype``; ln a_t,
      a_t and √(1 − a_t²) are computed in float32 and cast, as ``LRUCell`` does (in bfloat16
      a_t = 0.999 rounds to 1; the reference keeps its state in float32 for that reason).

    ∂h_t/∂h_{t−1} = diag(a_t) (:func:`rglru_log_a`); the recurrence gate r_t scales the decay
    rate, the input gate i_t only what enters.

    Attributes:
        c: the constant c (8).
        r_min, r_max: the ring a starts on (0.9, 0.999).
        max_gradient: the bound on the square root's derivative (1000).
        The other fields as ``_Cell`` (``recurrent_kernel_init`` is unused: no recurrent matrix).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from rnnviz.engine.cells.rglru import RGLRUCell
        >>> cell = RGLRUCell(features=4)
        >>> x = jnp.ones((2, 3))  # [B, I]
        >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
        >>> variables = cell.init(jax.random.key(1), carry, x)
        >>> carry, y = cell.apply(variables, carry, x)
        >>> carry.shape, y.shape  # [B, H]
        ((2, 4), (2, 4))
    """

    c: float = 8.0
    r_min: float = 0.9
    r_max: float = 0.999
    max_gradient: float = MAX_SQRT_GRADIENT

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        h_dim = self.features
        params = {
            "in_proj": affine(self, "in_proj", x.shape[-1], h_dim),
            "a_gate": affine(self, "a_gate", h_dim, h_dim),
            "input_gate": affine(self, "input_gate", h_dim, h_dim),
            "a_param": self.param(
                "a_param", a_param_init(self.c, self.r_min, self.r_max), (h_dim,), self.param_dtype
            ),
        }
        dt = self.dtype if self.dtype is not None else jnp.result_type(x.dtype, self.param_dtype)
        h = rglru_step(params, carry, x.astype(dt), self.c, self.max_gradient)
        return h, h


__all__ = ["MAX_SQRT_GRADIENT", "RGLRUCell", "a_param_init", "bounded_sqrt", "rglru_log_a", "rglru_step"]

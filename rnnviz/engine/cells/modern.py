"""Recurrent cells from the post-2017 answers to vanishing gradients, as Flax modules
honouring ``RNNCellBase``'s contract (carry ``h`` ``[(B,) H]``; the output y equals h).

* :class:`IndRNNCell` — Li et al. 2018, "Independently Recurrent Neural Network (IndRNN)".
* :class:`MinGRUCell`, :class:`MinLSTMCell` — Feng et al. 2024, "Were RNNs All We Needed?".

The minimal cells' gates read only x_t, so ∂h_t/∂h_{t−1} is diagonal and known in closed
form; their recurrence is linear in the carry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.engine.linalg import orthogonal

Initializer = Callable[..., jax.Array]


class _Cell(nn.RNNCellBase):
    """Shared fields and ``initialize_carry`` (as Flax's own cells have them).

    Attributes:
        features: H, units in the carry.
        kernel_init: initialiser of the input kernels.
        recurrent_kernel_init: initialiser of recurrent matrices (cells that have one).
        bias_init: initialiser of the biases.
        dtype: computation dtype (None: from the inputs).
        param_dtype: parameter dtype.
        carry_init: initialiser of h_0 (:func:`rnnviz.engine.cells.carry_initializer`).
    """

    features: int
    kernel_init: Initializer = nn.initializers.lecun_normal()
    recurrent_kernel_init: Initializer = orthogonal()
    bias_init: Initializer = nn.initializers.zeros_init()
    dtype: Any = None
    param_dtype: Any = jnp.float32
    carry_init: Initializer = nn.initializers.zeros_init()

    def _dense(self, name: str, bias: bool = True) -> nn.Dense:
        return nn.Dense(
            self.features,
            use_bias=bias,
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            kernel_init=self.kernel_init,
            bias_init=self.bias_init,
            name=name,
        )

    @nn.nowrap
    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> jax.Array:
        """``h_0`` of shape ``input_shape[:-1] + (H,)`` from ``carry_init``."""
        return self.carry_init(rng, tuple(input_shape[:-1]) + (self.features,), self.param_dtype)

    @property
    def num_feature_axes(self) -> int:
        return 1


class IndRNNCell(_Cell):
    r"""IndRNN (Li et al. 2018): every unit recurs only on itself.

    .. math:: h' = φ(W_i x + b + u ⊙ h)

    ``u`` ``[H]`` is the recurrent weight vector (``recurrent_init``: orthogonal/normal draw
    U(0, 1); identity sets u = 1), φ the activation (ReLU in the paper). ∂h'/∂h = diag(φ′ ⊙ u):
    with φ = identity the gradient decays by exactly ``u_j`` per step in unit j.

    Attributes:
        activation_fn: φ.
        u_init: initialiser of ``u`` (:func:`u_init`); the other fields as ``_Cell``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from rnnviz.engine.cells.modern import IndRNNCell
        >>> cell = IndRNNCell(features=4)
        >>> x = jnp.ones((2, 3))  # [B, I]
        >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
        >>> variables = cell.init(jax.random.key(1), carry, x)
        >>> carry, y = cell.apply(variables, carry, x)
        >>> carry.shape, y.shape  # [B, H]
        ((2, 4), (2, 4))
    """

    activation_fn: Callable[[jax.Array], jax.Array] = jax.nn.relu
    u_init: Initializer = nn.initializers.uniform(1.0)

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        u = self.param("u", self.u_init, (self.features,), self.param_dtype)
        h = self.activation_fn(
            self._dense("i")(x) + jnp.broadcast_to(u.astype(carry.dtype), carry.shape) * carry
        )
        return h, h


class MinGRUCell(_Cell):
    r"""minGRU (Feng et al. 2024): the GRU with gates that read only x_t.

    .. math::
        z = σ(W_{iz} x + b_z), \quad \tilde h = W_{ih} x + b_h, \quad h' = a·(1 − z) ⊙ h + z ⊙ \tilde h

    ``a`` (a scalar parameter, 1 at init) scales the carry path: the recurrent gain
    multiplies it, so at gain 1 this is the paper's cell. ∂h'/∂h = diag(a·(1 − z)), so
    ‖∂L/∂h_t‖ follows the product of (1 − z_s) over the later steps exactly. Fields as
    ``_Cell`` (no recurrent matrix).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from rnnviz.engine.cells.modern import MinGRUCell
        >>> cell = MinGRUCell(features=4)
        >>> x = jnp.ones((2, 3))  # [B, I]
        >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
        >>> variables = cell.init(jax.random.key(1), carry, x)
        >>> carry, y = cell.apply(variables, carry, x)
        >>> carry.shape, y.shape  # [B, H]
        ((2, 4), (2, 4))
    """

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        a = self.param("a", nn.initializers.ones_init(), (), self.param_dtype).astype(carry.dtype)
        z = jax.nn.sigmoid(self._dense("iz")(x))
        h_tilde = self._dense("ih")(x)
        h = a * (1 - z) * carry + z * h_tilde
        return h, h


class MinLSTMCell(_Cell):
    r"""minLSTM (Feng et al. 2024): forget and input gates from x_t only, normalised.

    .. math::
        f = σ(W_{if} x + b_f),\ i = σ(W_{ii} x + b_i),\ f' = \frac{f}{f + i},\ i' = \frac{i}{f + i},\
        \tilde h = W_{ih} x + b_h,\quad h' = a·f' ⊙ h + i' ⊙ \tilde h

    ``a`` (1 at init) is scaled by the recurrent gain, as in :class:`MinGRUCell`. The forget
    bias is added to ``if``'s bias. ∂h'/∂h = diag(a·f'). Fields as ``_Cell``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from rnnviz.engine.cells.modern import MinLSTMCell
        >>> cell = MinLSTMCell(features=4)
        >>> x = jnp.ones((2, 3))  # [B, I]
        >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
        >>> variables = cell.init(jax.random.key(1), carry, x)
        >>> carry, y = cell.apply(variables, carry, x)
        >>> carry.shape, y.shape  # [B, H]
        ((2, 4), (2, 4))
    """

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        a = self.param("a", nn.initializers.ones_init(), (), self.param_dtype).astype(carry.dtype)
        f = jax.nn.sigmoid(self._dense("if")(x))
        i = jax.nn.sigmoid(self._dense("ii")(x))
        total = f + i
        h = a * (f / total) * carry + (i / total) * self._dense("ih")(x)
        return h, h


def u_init(kind: str) -> Initializer:
    """IndRNN's ``u`` from ``recurrent_init``: identity → 1, otherwise U(0, 1) (the paper's range)."""
    return nn.initializers.ones_init() if kind == "identity" else nn.initializers.uniform(1.0)


def _ring_nu_log(r_min: float, r_max: float) -> Initializer:
    """ν_log with |λ| = exp(−exp(ν)) uniform on the ring r_min ≤ |λ| ≤ r_max (density ∝ r)."""

    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        u = jax.random.uniform(key, shape, jnp.float32)
        return jnp.log(-0.5 * jnp.log(u * (r_max**2 - r_min**2) + r_min**2)).astype(dtype)

    return init


def _phase_log(max_phase: float) -> Initializer:
    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        u = jax.random.uniform(key, shape, jnp.float32, minval=1e-4)
        return jnp.log(max_phase * u).astype(dtype)

    return init


class LRUCell(_Cell):
    r"""Linear Recurrent Unit (Orvieto et al. 2023, "Resurrecting Recurrent Neural Networks
    for Long Sequences"): a diagonal complex recurrence, carried as real parts.

    .. math::
        λ = a·\exp(−\exp(ν) + i\exp(θ)),\quad γ = \sqrt{1 − |\exp(−\exp(ν))|^2},\quad
        h' = λ ⊙ h + γ ⊙ (B x),\quad y = \mathrm{Re}(C h') + D x

    ``ν``, ``θ`` [H] start on the ring r_min ≤ |λ| ≤ r_max (0.9, 0.999) with phases in
    (0, 2π·0.1]; B ``[I, H]`` and C ``[H, H]`` are complex (real and imaginary kernels,
    N(0, 1/(2I)) and N(0, 1/H)), D a real ``[I, H]`` skip. The carry is ``(re, im)``, each
    ``[(B,) H]``, computed in real arithmetic (so every dtype works); the output y is the
    real projection (:func:`lru_readout`). ``a`` (a scalar, 1 at init) scales |λ|: the
    recurrent gain multiplies it. ∂h'/∂h is diag(λ) — per unit a rotation scaled by |λ|.

    Attributes:
        r_min, r_max: the ring |λ| starts on.
        max_phase: the largest initial phase θ.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from rnnviz.engine.cells.modern import LRUCell
        >>> cell = LRUCell(features=4)
        >>> x = jnp.ones((2, 3))  # [B, I]
        >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
        >>> variables = cell.init(jax.random.key(1), carry, x)
        >>> carry, y = cell.apply(variables, carry, x)
        >>> [c.shape for c in carry], y.shape  # [B, H]
        ([(2, 4), (2, 4)], (2, 4))
    """

    r_min: float = 0.9
    r_max: float = 0.999
    max_phase: float = 2 * jnp.pi * 0.1

    def _kernel(self, name: str, fan_in: int, features: int, scale: float) -> jax.Array:
        init = nn.initializers.normal(scale / fan_in**0.5)
        return self.param(
            name, lambda k, s, d: init(k, s, jnp.float32).astype(d), (fan_in, features), self.param_dtype
        )

    @nn.compact
    def __call__(self, carry: tuple[jax.Array, jax.Array], x: jax.Array):
        re, im = carry
        h_dim, i_dim = self.features, x.shape[-1]
        nu_log = self.param("nu_log", _ring_nu_log(self.r_min, self.r_max), (h_dim,), self.param_dtype)
        theta_log = self.param("theta_log", _phase_log(self.max_phase), (h_dim,), self.param_dtype)
        a = self.param("a", nn.initializers.ones_init(), (), self.param_dtype)
        b_re = self._kernel("B_re", i_dim, h_dim, 2**-0.5)
        b_im = self._kernel("B_im", i_dim, h_dim, 2**-0.5)
        readout = {
            "C_re": self._kernel("C_re", h_dim, h_dim, 1.0),
            "C_im": self._kernel("C_im", h_dim, h_dim, 1.0),
            "D": self.param("D", self.kernel_init, (i_dim, h_dim), self.param_dtype),
        }
        modulus = jnp.exp(-jnp.exp(nu_log.astype(jnp.float32)))
        gamma = jnp.sqrt(1.0 - modulus**2)
        phase = jnp.exp(theta_log.astype(jnp.float32))
        a = a.astype(jnp.float32)
        lam_re = (a * modulus * jnp.cos(phase)).astype(re.dtype)
        lam_im = (a * modulus * jnp.sin(phase)).astype(re.dtype)
        g = gamma.astype(re.dtype)
        bx_re, bx_im = x @ b_re.astype(x.dtype), x @ b_im.astype(x.dtype)
        new_re = _bcast(lam_re, re) * re - _bcast(lam_im, im) * im + _bcast(g, bx_re) * bx_re
        new_im = _bcast(lam_re, im) * im + _bcast(lam_im, re) * re + _bcast(g, bx_im) * bx_im
        new = (new_re, new_im)
        return new, lru_readout(readout, new, x)

    @nn.nowrap
    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> tuple[jax.Array, jax.Array]:
        """``(re, im)`` of ``h_0``, each ``input_shape[:-1] + (H,)``, from ``carry_init``."""
        k_re, k_im = jax.random.split(rng)
        shape = tuple(input_shape[:-1]) + (self.features,)
        return self.carry_init(k_re, shape, self.param_dtype), self.carry_init(k_im, shape, self.param_dtype)


def _bcast(v: jax.Array, like: jax.Array) -> jax.Array:
    return jnp.broadcast_to(v, like.shape)


def lru_readout(params: dict[str, Any], carry: tuple[jax.Array, jax.Array], x: jax.Array) -> jax.Array:
    """y = Re(C h) + D x = h_re C_reᵀ − h_im C_imᵀ + x D, ``[(B,) H]`` (C stored ``[H_in, H_out]``)."""
    re, im = carry
    dt = re.dtype
    return (
        re @ params["C_re"].astype(dt)
        - im @ params["C_im"].astype(dt)
        + x.astype(dt) @ params["D"].astype(dt)
    )


# ---- linear forms for the parallel strategy: h_t = A_t ⊙ h_{t−1} + B_t ---------------------


def _apply_dense(p: dict[str, Any], x: jax.Array) -> jax.Array:
    out = x @ p["kernel"].astype(x.dtype)
    return out + jnp.broadcast_to(p["bias"].astype(x.dtype), out.shape)


def mingru_linear(params: dict[str, Any], xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """minGRU over ``xs`` ``[T, (B,) I]``: A = a(1 − z), B = z ⊙ h̃, each ``[T, (B,) H]``."""
    z = jax.nn.sigmoid(_apply_dense(params["iz"], xs))
    a = params["a"].astype(xs.dtype)
    return a * (1 - z), z * _apply_dense(params["ih"], xs)


def minlstm_linear(params: dict[str, Any], xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """minLSTM over ``xs``: A = a·f/(f + i), B = i/(f + i) ⊙ h̃."""
    f = jax.nn.sigmoid(_apply_dense(params["if"], xs))
    i = jax.nn.sigmoid(_apply_dense(params["ii"], xs))
    a = params["a"].astype(xs.dtype)
    return a * (f / (f + i)), (i / (f + i)) * _apply_dense(params["ih"], xs)


def lru_linear(params: dict[str, Any], xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """LRU over ``xs``: A = λ, B = γ ⊙ (B x), complex64 ``[T, (B,) H]`` (computed in float32)."""
    x = xs.astype(jnp.float32)
    modulus = params["a"].astype(jnp.float32) * jnp.exp(-jnp.exp(params["nu_log"].astype(jnp.float32)))
    gamma = jnp.sqrt(1.0 - jnp.exp(-jnp.exp(params["nu_log"].astype(jnp.float32))) ** 2)
    phase = jnp.exp(params["theta_log"].astype(jnp.float32))
    lam = jax.lax.complex(modulus * jnp.cos(phase), modulus * jnp.sin(phase))
    bx = jax.lax.complex(x @ params["B_re"].astype(jnp.float32), x @ params["B_im"].astype(jnp.float32))
    shape = bx.shape
    return jnp.broadcast_to(lam, shape), jax.lax.complex(
        jnp.broadcast_to(gamma, shape), jnp.zeros(shape, jnp.float32)
    ) * bx


def lru_pack(carry: tuple[jax.Array, jax.Array]) -> jax.Array:
    """The LRU carry ``(re, im)`` as one complex64 ``h = re + i·im`` ``[(B,) H]``, for the parallel scan."""
    re, im = carry
    return jax.lax.complex(re.astype(jnp.float32), im.astype(jnp.float32))


def lru_unpack(h: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The inverse of :func:`lru_pack`: ``(Re h, Im h)``, float32, each of ``h``'s shape."""
    return jnp.real(h), jnp.imag(h)

"""Recurrent cells from the post-2017 answers to vanishing gradients, as Flax modules
honouring ``RNNCellBase``'s contract (carry ``h`` ``[(B,) H]``; the output y equals h).

* :class:`IndRNNCell` — Li et al. 2018, "Independently Recurrent Neural Network (IndRNN)".
* :class:`MinGRUCell`, :class:`MinLSTMCell` — Feng et al. 2024, "Were RNNs All We Needed?".

The minimal cells' gates read only x_t, so ∂h_t/∂h_{t−1} is diagonal and known in closed
form; their recurrence is linear in the carry.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

Initializer = Callable[..., jax.Array]


class _Cell(nn.RNNCellBase):
    """Shared fields and ``initialize_carry`` (as Flax's own cells have them)."""

    features: int
    kernel_init: Initializer = nn.initializers.lecun_normal()
    recurrent_kernel_init: Initializer = nn.initializers.orthogonal()
    bias_init: Initializer = nn.initializers.zeros_init()
    dtype: Any = None
    param_dtype: Any = jnp.float32
    carry_init: Initializer = nn.initializers.zeros_init()

    def _dense(self, name: str, bias: bool = True) -> nn.Dense:
        return nn.Dense(self.features, use_bias=bias, dtype=self.dtype, param_dtype=self.param_dtype,
                        kernel_init=self.kernel_init, bias_init=self.bias_init, name=name)

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
    """

    activation_fn: Callable[[jax.Array], jax.Array] = jax.nn.relu
    u_init: Initializer = nn.initializers.uniform(1.0)

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        u = self.param("u", self.u_init, (self.features,), self.param_dtype)
        h = self.activation_fn(self._dense("i")(x) + jnp.broadcast_to(u.astype(carry.dtype), carry.shape) * carry)
        return h, h


class MinGRUCell(_Cell):
    r"""minGRU (Feng et al. 2024): the GRU with gates that read only x_t.

    .. math::
        z = σ(W_{iz} x + b_z), \quad \tilde h = W_{ih} x + b_h, \quad h' = a·(1 − z) ⊙ h + z ⊙ \tilde h

    ``a`` (a scalar parameter, 1 at init) scales the carry path: the recurrent gain
    multiplies it, so at gain 1 this is the paper's cell. ∂h'/∂h = diag(a·(1 − z)), so
    ‖∂L/∂h_t‖ follows the product of (1 − z_s) over the later steps exactly.
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
    bias is added to ``if``'s bias. ∂h'/∂h = diag(a·f').
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

r"""A leaky-integrator RNN cell for rnnviz (an example plugin).

.. math:: h' = (1 − α)·h + α·\tanh(W_i x + b + W_h h)

α ∈ (0, 1] is the leak (0.1 here): small α keeps most of the carry each step, so the
gradient decays slowly even where the tanh RNN's vanishes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz import CellSpec
from rnnviz.tables.cells import CarryLayout, CostModel, Display, ParamRules


class LeakyCell(nn.RNNCellBase):
    """Honours Flax's RNNCellBase contract: ``(carry, x) -> (carry, y)`` and
    ``initialize_carry(rng, input_shape)``; the carry is ``h`` ``[(B,) H]`` and y = h."""

    features: int
    alpha: float = 0.1
    kernel_init: Callable[..., jax.Array] = nn.initializers.lecun_normal()
    recurrent_kernel_init: Callable[..., jax.Array] = nn.initializers.orthogonal()
    dtype: Any = None
    param_dtype: Any = jnp.float32
    carry_init: Callable[..., jax.Array] = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        def dense(name: str, init: Callable[..., jax.Array], bias: bool) -> nn.Dense:
            return nn.Dense(
                self.features,
                use_bias=bias,
                kernel_init=init,
                dtype=self.dtype,
                param_dtype=self.param_dtype,
                name=name,
            )

        drive = jnp.tanh(
            dense("i", self.kernel_init, True)(x) + dense("h", self.recurrent_kernel_init, False)(carry)
        )
        h = (1 - self.alpha) * carry + self.alpha * drive
        return h, h

    @nn.nowrap
    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> jax.Array:
        return self.carry_init(rng, tuple(input_shape[:-1]) + (self.features,), self.param_dtype)

    @property
    def num_feature_axes(self) -> int:
        return 1


def build(cfg: Any, options: dict[str, Any]) -> LeakyCell:
    """rnnviz passes the options it decides for every cell; take the ones this cell has."""
    keep = ("features", "dtype", "param_dtype", "kernel_init", "recurrent_kernel_init", "carry_init")
    return LeakyCell(**{k: options[k] for k in keep})


# The carry is one leaf h, which is also the output: CellSpec's default CarryLayout. The
# recurrent part is the W_h kernel (module "h"): the default ParamRules already say so, and
# the gain multiplies it. What is left: the cost model and what the dashboard shows.
SPEC = CellSpec(
    build,
    cost=CostModel(matmuls=1, vectors=1, residuals=4),
    display=Display(
        description="h' = (1 − α)h + α·tanh(W_i x + W_h h + b), α = 0.1 (leaky integrator; example plugin)"
    ),
)


class FastWeightsCell(nn.RNNCellBase):
    r"""A matrix memory (fast weights; linear attention with a decay), to show that a plugin
    cell may carry a tree of matrices: carry S ``[(B,) H, H]``.

    .. math:: S' = λ·S + v kᵀ,\quad y = \tanh(S q),\quad q, k, v = W_{q,k,v} x

    λ (``decay``, 0.95) is a parameter, so the gain scales it (rnnviz's default rule
    multiplies the recurrent leaves); every view reads S as a whole (its Frobenius norm, its
    singular values, its H² entries flattened for the Jacobians)."""

    features: int
    kernel_init: Callable[..., jax.Array] = nn.initializers.lecun_normal()
    dtype: Any = None
    param_dtype: Any = jnp.float32
    carry_init: Callable[..., jax.Array] = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        def project(name: str) -> jax.Array:
            return nn.Dense(
                self.features,
                use_bias=False,
                kernel_init=self.kernel_init,
                dtype=self.dtype,
                param_dtype=self.param_dtype,
                name=name,
            )(x)

        decay = self.param("decay", nn.initializers.constant(0.95), (1,), self.param_dtype)
        q, k, v = project("q"), project("k") / jnp.sqrt(self.features), project("v")
        memory = decay.astype(carry.dtype) * carry + v[..., :, None] * k[..., None, :]
        return memory, jnp.tanh(jnp.einsum("...vk,...k->...v", memory, q))

    @nn.nowrap
    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> jax.Array:
        shape = tuple(input_shape[:-1]) + (self.features, self.features)
        return self.carry_init(rng, shape, self.param_dtype)

    @property
    def num_feature_axes(self) -> int:
        return 1


def build_fast_weights(cfg: Any, options: dict[str, Any]) -> FastWeightsCell:
    keep = ("features", "dtype", "param_dtype", "kernel_init", "carry_init")
    return FastWeightsCell(**{k: options[k] for k in keep})


def _fast_weights_readout(params: dict[str, Any], memory: jax.Array, x: jax.Array) -> jax.Array:
    """y_t from the new carry and x_t (the output is not a carry leaf, so rnnviz needs this)."""
    q = x.astype(params["q"]["kernel"].dtype) @ params["q"]["kernel"]
    return jnp.tanh(jnp.einsum("...vk,...k->...v", memory.astype(q.dtype), q))


# A carry leaf S that is not the output: the readout says how y follows from S and x; the
# recurrent part is the decay λ.
FAST_WEIGHTS = CellSpec(
    build_fast_weights,
    carry=CarryLayout(components=("S",), output="S", readout=_fast_weights_readout),
    params=ParamRules(recurrent=lambda path: path[0] == "decay"),
    cost=CostModel(matmuls=3, vectors=1, residuals=4, carry_scalars=lambda h: h * h, residual_carries=1),
    display=Display(description="S' = λS + v kᵀ, y = tanh(S q): a matrix memory [H, H] (example plugin)"),
)

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
from rnnviz.tables.cells import CostModel, Display


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

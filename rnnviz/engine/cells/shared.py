"""The pieces the gated-recurrence cells share: Dense parameters as plain trees (for their
pure step functions), splitting features into heads, and Mamba's Δ-bias initialiser.

>>> import jax, jax.numpy as jnp
>>> split_heads(jnp.zeros((2, 12)), 3).shape  # [B, heads·d] -> [B, heads, d]
(2, 3, 4)
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.engine.cells.modern import Initializer

Params = dict[str, Any]


def affine(
    module: nn.Module,
    name: str,
    fan_in: int,
    fan_out: int,
    *,
    bias: bool = True,
    kernel_init: Initializer | None = None,
    bias_init: Initializer | None = None,
) -> Params:
    """A Dense layer's parameters ``{"kernel": [fan_in, fan_out](, "bias": [fan_out])}`` as one
    parameter: the tree Flax's ``nn.Dense`` would make, for the pure step functions to read."""
    k_init = kernel_init or module.kernel_init
    b_init = bias_init or module.bias_init

    def init(key: jax.Array) -> Params:
        k_key, b_key = jax.random.split(key)
        p = {"kernel": k_init(k_key, (fan_in, fan_out), module.param_dtype)}
        if bias:
            p["bias"] = b_init(b_key, (fan_out,), module.param_dtype)
        return p

    return module.param(name, init)


def dense(p: Params, x: jax.Array) -> jax.Array:
    """``x @ kernel (+ bias)`` in ``x``'s dtype, for a tree made by :func:`affine`."""
    out = x @ p["kernel"].astype(x.dtype)
    if "bias" in p:
        out = out + jnp.broadcast_to(p["bias"].astype(x.dtype), out.shape)
    return out


def split_heads(a: jax.Array, n: int) -> jax.Array:
    """``[..., n·d]`` → ``[..., n, d]``: the features split into ``n`` heads."""
    return a.reshape(a.shape[:-1] + (n, a.shape[-1] // n))


def dt_bias_init(dt_min: float = 1e-3, dt_max: float = 1e-1, floor: float = 1e-4) -> Initializer:
    r"""b_Δ with Δ = softplus(b_Δ) log-uniform on [dt_min, dt_max] (clamped below at ``floor``):

    .. math::
        Δ = \exp(U(\ln Δ_{min}, \ln Δ_{max})),\quad
        b_Δ = \mathrm{softplus}^{-1}(Δ) = Δ + \ln(−\mathrm{expm1}(−Δ))

    >>> import jax, jax.numpy as jnp
    >>> dt = jax.nn.softplus(dt_bias_init()(jax.random.key(0), (100,)))
    >>> bool(dt.min() >= 1e-3 * 0.999), bool(dt.max() <= 1e-1 * 1.001)
    (True, True)
    """

    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        u = jax.random.uniform(key, shape, jnp.float32)
        dt = jnp.maximum(jnp.exp(u * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)), floor)
        return (dt + jnp.log(-jnp.expm1(-dt))).astype(dtype)

    return init


__all__ = ["Params", "affine", "dense", "dt_bias_init", "split_heads"]

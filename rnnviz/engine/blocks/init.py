r"""Fresh weights for the block families, drawn as the reference draws them when it builds a
model: small initialisers (each ``(key, shape) -> <float32>[shape]``) and :func:`draw`, which
gives every tensor its own key, folded in from its name.

A tensor's key is ``fold_in(key, crc32(name))``, so each tensor's draw depends on the model's
key and its own name only: tying the head or adding a layer leaves every other tensor as it
was. Draws are made in float32 and cast once, so a bfloat16 model is the float32 one rounded.

>>> import jax
>>> params = draw({"w": (2, 3), "b": (2,)}, {"w": normal(0.1), "b": constant(0.0)}.get,
...               jax.random.key(0))
>>> params["w"].shape, params["b"].tolist()
((2, 3), [0.0, 0.0])
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

#: ``(key, shape) -> <float32>[shape]``.
Initialiser = Callable[[jax.Array, tuple[int, ...]], jax.Array]


def named_key(key: jax.Array, name: str) -> jax.Array:
    """The key of tensor ``name``: ``key`` with the name's CRC-32 folded in."""
    return jax.random.fold_in(key, zlib.crc32(name.encode()))


def normal(std: float) -> Initialiser:
    """N(0, std²) entries (torch's ``normal_(mean=0, std=std)``)."""
    return lambda key, shape: std * jax.random.normal(key, shape, jnp.float32)


def uniform(low: float, high: float) -> Initialiser:
    """U(low, high) entries (torch's ``uniform_(low, high)``)."""
    return lambda key, shape: jax.random.uniform(key, shape, jnp.float32, low, high)


def fan_in_uniform(scale: float = 1.0) -> Initialiser:
    r"""U(−b, b) with :math:`b = \mathrm{scale}/\sqrt{\mathrm{fan\_in}}`, fan_in the product of
    every axis after the first: torch's ``kaiming_uniform_(a=√5)`` (``nn.Linear`` and
    ``nn.Conv1d``'s own initialisation) with ``scale`` 1."""

    def init(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        bound = scale / math.sqrt(math.prod(shape[1:]))
        return jax.random.uniform(key, shape, jnp.float32, -bound, bound)

    return init


def constant(value: float) -> Initialiser:
    """Every entry ``value`` (zeros, ones, a gate's bias)."""
    return lambda key, shape: jnp.full(shape, value, jnp.float32)


def fixed(values: Callable[[tuple[int, ...]], jax.Array | np.ndarray]) -> Initialiser:
    """The same values whatever the key: ``values(shape)`` (``A_log = log(1 … N)``)."""
    return lambda key, shape: jnp.asarray(values(shape), jnp.float32)


def log_arange(shape: tuple[int, ...]) -> np.ndarray:
    """``log(1 … N)`` along the last axis, broadcast over the others: S4D-real's ``A_log``,
    rounded once from float64 as torch's float32 log rounds it (XLA's float32 log can be an
    ulp away)."""
    return np.broadcast_to(np.log(np.arange(1, shape[-1] + 1, dtype=np.float64)).astype(np.float32), shape)


def dt_bias(t_min: float, t_max: float, floor: float) -> Initialiser:
    r"""Mamba's Δ bias: Δ drawn log-uniformly in [t_min, t_max], clamped below at ``floor``,
    then put through the inverse softplus, :math:`Δ + \log(−\mathrm{expm1}(−Δ))`, so that
    softplus(bias) = Δ at the start."""

    def init(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        u = jax.random.uniform(key, shape, jnp.float32)
        dt = jnp.maximum(jnp.exp(u * (math.log(t_max) - math.log(t_min)) + math.log(t_min)), floor)
        return dt + jnp.log(-jnp.expm1(-dt))

    return init


def zero_row(init: Initialiser, row: int | None) -> Initialiser:
    """``init`` with row ``row`` set to zero (an embedding's ``padding_idx``); None: ``init``."""
    if row is None:
        return init
    return lambda key, shape: init(key, shape).at[row].set(0.0)


def draw(
    shapes: Mapping[str, tuple[int, ...]],
    rule: Callable[[str], Initialiser],
    key: jax.Array,
    dtype: str = "float32",
    tied: Mapping[str, str] | None = None,
) -> dict[str, jax.Array]:
    """Every tensor of ``shapes`` drawn by its initialiser, each with its own key.

    Args:
        shapes: ``{name: shape}``, a family's tensors.
        rule: ``name -> initialiser``.
        key: the model's PRNG key.
        dtype: what every tensor is cast to after its float32 draw.
        tied: ``{name: source}``: ``name`` is ``source``'s array itself, as the loader fills it.

    Returns:
        ``{name: <dtype>[shape]}`` in the order of ``shapes``.
    """
    tied = tied or {}
    out = {
        name: rule(name)(named_key(key, name), tuple(shape)).astype(dtype)
        for name, shape in shapes.items()
        if name not in tied
    }
    return {name: out[tied[name]] if name in tied else out[name] for name in shapes}

"""Initialisers rnnviz gives every cell: the recurrent kernels' and the carry's.

Each runs in float32 and casts (:func:`in_float32`), so a bfloat16 run starts from the
float32 draw rounded.
"""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.engine.linalg import orthogonal


def in_float32(init: Callable) -> Callable:
    """Run an initialiser in float32 and cast: LAPACK has no bf16/f16 QR (orthogonal init),
    and it keeps a low-precision run equal to the float32 run rounded."""

    def wrapped(key, shape, dtype=jnp.float32):
        return init(key, shape, jnp.float32).astype(dtype)

    return wrapped


def _identity_init(key, shape, dtype=jnp.float32):
    del key
    return jnp.eye(shape[0], shape[1], dtype=dtype)


def recurrent_init(kind: str) -> Callable:
    """The initialiser of the recurrent kernels for ``RunConfig.recurrent_init``.

    Args:
        kind: ``orthogonal`` (Flax's draw, factorised without LAPACK), ``normal``
            (variance 1/H, spectral radius ≈ 1 by the circular law) or ``identity``.

    Returns:
        A Flax initialiser ``(key, shape, dtype) -> array``.
    """
    if kind == "orthogonal":
        # Flax's draw, factorised without LAPACK: batched QRs that XLA:CPU may run at once
        # deadlock jaxlib 0.10.2 (see rnnviz.engine.linalg).
        return orthogonal()
    if kind == "normal":
        # Var 1/H: the spectral radius of W_hh is then about 1 (circular law).
        return nn.initializers.variance_scaling(1.0, "fan_in", "normal")
    return _identity_init


def carry_initializer(kind: str, scale: jax.Array | float) -> Callable:
    """The Flax ``carry_init`` for a ``carry_init`` kind; ``scale`` may be a tracer.

    zeros → 0; normal → N(0, scale²); uniform → U(−scale, scale); constant → scale;
    learned → N(0, scale²) as the starting value of a trainable ``[H]`` vector.
    """

    def init(key, shape, dtype=jnp.float32):
        s = jnp.asarray(scale, jnp.float32)
        if kind == "zeros":
            out = jnp.zeros(shape, jnp.float32)
        elif kind in ("normal", "learned"):
            out = s * jax.random.normal(key, shape, jnp.float32)
        elif kind == "uniform":
            out = jax.random.uniform(key, shape, jnp.float32, -1.0, 1.0) * s
        else:
            out = jnp.full(shape, s, jnp.float32)
        return out.astype(dtype)

    return init

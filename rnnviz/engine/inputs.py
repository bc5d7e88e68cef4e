"""Input sequences made from a PRNG key: pure functions, batch-first ``[(B,) T, I]``."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def make_inputs(key: jax.Array, kind: str, shape: tuple[int, ...], scale: jax.Array, dtype) -> jax.Array:
    """Input sequence of ``shape`` = ``[(B,) T, I]`` in ``dtype``.

    * ``normal``:  ``x = scale · N(0, 1)``
    * ``uniform``: ``x = scale · U(−1, 1)``
    * ``sine``:    ``x[b, t, i] = scale · sin(ω_i · t + φ_{b,i})`` with ω_i ~ U(0.1, 1) rad/step
      and phase φ ~ U(0, 2π): smooth, strongly correlated in time.
    """
    scale = jnp.asarray(scale, jnp.float32)
    if kind == "normal":
        x = jax.random.normal(key, shape, jnp.float32)
    elif kind == "uniform":
        x = jax.random.uniform(key, shape, jnp.float32, -1.0, 1.0)
    elif kind == "sine":
        k_freq, k_phase = jax.random.split(key)
        t_len, n_in = shape[-2], shape[-1]
        omega = jax.random.uniform(k_freq, (n_in,), jnp.float32, 0.1, 1.0)
        phase = jax.random.uniform(k_phase, shape[:-2] + (1, n_in), jnp.float32, 0.0, 2 * jnp.pi)
        wave = jnp.arange(t_len, dtype=jnp.float32)[:, None] * omega[None, :]  # [T, I]
        wave = wave.reshape((1,) * (len(shape) - 2) + wave.shape)
        x = jnp.sin(wave + phase)
    else:
        raise ValueError(f"unknown input kind {kind!r}")
    return (scale * x).astype(dtype)

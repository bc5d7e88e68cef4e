"""The ``parallel`` strategy: a recurrence linear in the carry, computed over time with
``jax.lax.associative_scan`` instead of a sequential ``lax.scan``.

For cells whose spec gives a ``linear_form`` — per step ``h_t = A_t ⊙ h_{t−1} + B_t`` with
A, B ``[T, (B,) H]`` functions of the inputs and params only (mingru, minlstm; lru with
complex A, B) — the pairs compose associatively::

    (A₁, B₁) ∘ (A₂, B₂) = (A₂·A₁, A₂·B₁ + B₂)

so all T carries come from a prefix scan of depth O(log T) (Blelloch 1990; the reason
linear recurrent cells train fast on accelerators). The zero perturbations of the per-step
gradients enter as ``B_t + ε_t``, so ∂L/∂carry_t keeps the sequential definition, and the
reverse pass is the autodiff of the same scan — also parallel over time.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rnnviz.cells import Params, cell_spec
from rnnviz.config import RunConfig
from rnnviz.rollout import Carry, tree_add


def _compose(left: tuple[jax.Array, jax.Array], right: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
    a1, b1 = left
    a2, b2 = right
    return a2 * a1, a2 * b1 + b2


def parallel_rollout(cfg: RunConfig, params: Params, carry0: Carry, xs: jax.Array, eps: Carry | None = None) -> Carry:
    """Like :func:`rnnviz.rollout.rollout` (carries ``[T+1, (B,) H]`` per leaf, carry_0 at
    index 0, ``eps`` added to the carry handed on at every step) by an associative scan."""
    spec = cell_spec(cfg.cell)
    if eps is None:
        eps = jax.tree.map(lambda c: jnp.zeros((xs.shape[0] + 1,) + c.shape, c.dtype), carry0)
    first = tree_add(carry0, jax.tree.map(lambda e: e[0], eps))
    a, b = spec.linear_form(params, xs)  # [T, (B,) H]
    b = b + spec.pack(jax.tree.map(lambda e: e[1:], eps))
    b = b.at[0].add(a[0] * spec.pack(first))  # fold h_0 into the first step
    _, hs = jax.lax.associative_scan(_compose, (a, b))
    return jax.tree.map(lambda c0, cs: jnp.concatenate([c0[None], cs.astype(c0.dtype)], axis=0), first, spec.unpack(hs))

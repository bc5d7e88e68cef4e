"""The ``parallel`` strategy: a recurrence linear in the carry, computed over time with
``jax.lax.associative_scan`` instead of a sequential ``lax.scan``.

For cells whose spec gives a ``linear_form`` — per step ``h_t = A_t ⊙ h_{t−1} + B_t`` with
A, B ``[T, (B,) H]`` functions of the inputs and params only (mingru, minlstm; lru with
complex A, B) — the pairs compose associatively::

    (A₁, B₁) ∘ (A₂, B₂) = (A₂·A₁, A₂·B₁ + B₂)

so all T carries come from a prefix scan (Blelloch 1990; the reason linear recurrent cells
train fast on accelerators). On a GPU it is ``jax.lax.associative_scan`` over all T (depth
O(log T)). On a CPU it is scheduled the way Blelloch schedules a scan on p processors
(:func:`blocked_scan`): T is cut into C ≈ √T blocks of L ≈ √T steps; every block is scanned
at once (one sequential pass of L steps over arrays holding all C blocks), the block totals
are combined by ``jax.lax.associative_scan`` (depth O(log C)), and each block's carries are
fixed up with its incoming state in one vectorised step — fewer passes over memory than the
full-depth tree, which is what a 2-core CPU is bound by.

The zero perturbations of the per-step gradients enter as ``B_t + ε_t``, so ∂L/∂carry_t
keeps the sequential definition, and the reverse pass is the autodiff of the same scans.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from rnnviz.engine.cells import Params, cell_spec
from rnnviz.engine.rollout import Carry, split_eps, with_first

if TYPE_CHECKING:
    from rnnviz.config import RunConfig


def _compose(
    left: tuple[jax.Array, jax.Array], right: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    a1, b1 = left
    a2, b2 = right
    return a2 * a1, a2 * b1 + b2


def _on_cpu(cfg: RunConfig) -> bool:
    """Whether ``cfg`` runs on the CPU (``auto`` and ``gpu`` run on JAX's default backend)."""
    return cfg.device == "cpu" or jax.default_backend() == "cpu"


def block_length(t: int) -> int:
    """⌈√T⌉: steps per block of the blocked scan."""
    return math.isqrt(max(t - 1, 0)) + 1


def blocked_scan(a: jax.Array, b: jax.Array) -> jax.Array:
    """``h_t = a_t ⊙ h_{t−1} + b_t`` with ``h_{−1} = 0`` for a, b ``[T, …]`` (complex allowed),
    in C = ⌈T/L⌉ blocks of L = ⌈√T⌉ steps (see the module docstring)."""
    t_len = a.shape[0]
    size = block_length(t_len)
    blocks = -(-t_len // size)
    pad = blocks * size - t_len
    if pad:  # identity steps (a = 1, b = 0) after the end, cut off below
        a = jnp.concatenate([a, jnp.ones((pad,) + a.shape[1:], a.dtype)])
        b = jnp.concatenate([b, jnp.zeros((pad,) + b.shape[1:], b.dtype)])
    a = jnp.swapaxes(a.reshape((blocks, size) + a.shape[1:]), 0, 1)  # [L, C, …]
    b = jnp.swapaxes(b.reshape((blocks, size) + b.shape[1:]), 0, 1)

    def within(carry, ab):
        h, prod = carry
        a_l, b_l = ab
        h, prod = a_l * h + b_l, a_l * prod
        return (h, prod), (h, prod)

    start = (jnp.zeros(b.shape[1:], b.dtype), jnp.ones(a.shape[1:], a.dtype))
    _, (local, prods) = jax.lax.scan(within, start, (a, b))  # each block from a zero state
    _, ends = jax.lax.associative_scan(_compose, (prods[-1], local[-1]))  # state at each block's end
    entering = jnp.concatenate([jnp.zeros_like(ends[:1]), ends[:-1]])
    h = local + prods * entering[None]
    return jnp.swapaxes(h, 0, 1).reshape((blocks * size,) + h.shape[2:])[:t_len]


def _single_leaf(carry: Carry) -> jax.Array:
    """The state h of a cell whose carry is one leaf (a ``CellSpec`` whose carry has no ``pack``)."""
    (leaf,) = jax.tree.leaves(carry)
    return leaf


def _same(h: jax.Array) -> jax.Array:
    return h


def full_scan(a: jax.Array, b: jax.Array) -> jax.Array:
    """``h_t = a_t ⊙ h_{t−1} + b_t`` from ``h_{−1} = 0`` by ``jax.lax.associative_scan`` over all T."""
    return jax.lax.associative_scan(_compose, (a, b))[1]


def parallel_rollout(
    cfg: RunConfig, params: Params, carry0: Carry, xs: jax.Array, eps: Carry | None = None
) -> Carry:
    """Like :func:`rnnviz.engine.rollout.rollout` (carries ``[T+1, (B,) H]`` per leaf, carry_0 at
    index 0, ``eps`` added to the carry handed on at every step) by an associative scan: the
    cell's ``linear_form``, or its own ``prefix_scan`` given this device's scan."""
    spec = cell_spec(cfg.cell)
    scan = blocked_scan if _on_cpu(cfg) else full_scan
    first, rest = split_eps(carry0, eps)
    if spec.forms.prefix_scan is not None:
        return with_first(first, spec.forms.prefix_scan(params, first, rest, xs, scan))
    pack = spec.carry.pack or _single_leaf
    unpack = spec.carry.unpack or _same
    a, b = spec.forms.linear_form(params, xs)  # [T, (B,) H]
    if rest is not None:
        b = b + pack(rest)
    b = b.at[0].add(a[0] * pack(first))  # fold h_0 into the first step
    return with_first(first, unpack(scan(a, b)))

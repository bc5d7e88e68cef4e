"""The scan over time that always emits the carry.

Shapes: ``xs`` is time-major ``[T, (B,) I]``; every carry component is ``[(B,) H]`` and
the emitted trajectory ``[T+1, (B,) H]`` holds ``carry_0`` at index 0 and, at index t,
the carry after consuming ``x_t``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from rnnviz.engine.cells import Params
from rnnviz.engine.compat import scan

Carry = Any


def tree_add(a: Any, b: Any) -> Any:
    """``a + b`` leaf by leaf for two pytrees of one structure (carry + perturbation, two cotangents)."""
    return jax.tree.map(jnp.add, a, b)


def split_eps(carry0: Carry, eps: Carry | None) -> tuple[Carry, Carry | None]:
    """``(carry_0 + eps[0], eps[1:])``, or ``(carry0, None)`` without eps: the training
    forward and plain parameter gradients add no zeros."""
    if eps is None:
        return carry0, None
    return tree_add(carry0, jax.tree.map(lambda e: e[0], eps)), jax.tree.map(lambda e: e[1:], eps)


def perturbed(new: Carry, e: Carry | None) -> Carry:
    """The carry handed on: ``new + e``, or ``new`` when there is no perturbation."""
    return new if e is None else tree_add(new, e)


def with_first(first: Carry, carries: Carry) -> Carry:
    """``[T+1, …]`` per leaf: carry_0 at index 0, then the scanned carries ``[T, …]``."""
    return jax.tree.map(
        lambda c0, cs: jnp.concatenate([c0[None], cs.astype(c0.dtype)], axis=0), first, carries
    )


def rollout(
    cell,
    params: Params,
    carry0: Carry,
    xs: jax.Array,
    eps: Carry | None = None,
    *,
    per_step_params: bool = False,
    split_transpose: bool = False,
) -> Carry:
    """Run ``cell`` over ``xs`` [T, (B,) I] and return the carries, each ``[T+1, (B,) H]``.

    ``eps`` (carry-shaped, leading ``[T+1]``) is added to the carry handed on at every
    step: zeros leave values unchanged, and the gradient with respect to ``eps[t]`` is
    ∂L/∂carry_t. With ``per_step_params`` the params carry a leading ``[T]`` axis and
    step t uses copy t (one tangent per step under differentiation); otherwise they are
    closed over and the reverse scan accumulates their cotangent in one buffer.
    ``eps=None`` adds nothing (no zeros to add when nobody asks for ∂L/∂carry_t).
    """
    first, rest = split_eps(carry0, eps)

    def step(carry, inp):
        x, e, p = inp
        new = perturbed(cell.apply({"params": p if per_step_params else params}, carry, x)[0], e)
        return new, new

    scanned = (xs, rest, params if per_step_params else None)
    _, carries = scan(step, first, scanned, split_transpose=split_transpose)
    return with_first(first, carries)


def checkpoint_rollout(
    cell, params: Params, carry0: Carry, xs: jax.Array, eps: Carry | None, block: int
) -> Carry:
    """:func:`rollout` with ``jax.checkpoint`` over blocks of ``block`` steps (same values).

    The forward pass keeps only each block's starting carry (and the trajectory, which is
    an output); the reverse pass recomputes one block's forward at a time, so the cell's
    per-step residuals (gates, pre-activations) are held for ``block`` steps instead of T.
    T = n·block + r: n checkpointed blocks, then r < block plain steps.
    """
    t_len = xs.shape[0]
    first, rest = split_eps(carry0, eps)

    def step(carry, inp):
        x, e = inp
        new = perturbed(cell.apply({"params": params}, carry, x)[0], e)
        return new, new

    @jax.checkpoint
    def run_block(carry, inp):
        return jax.lax.scan(step, carry, inp)

    n = t_len // block
    head = jax.tree.map(lambda a: a[: n * block].reshape((n, block) + a.shape[1:]), (xs, rest))
    carry, carries = jax.lax.scan(run_block, first, head)
    carries = jax.tree.map(lambda c: c.reshape((n * block,) + c.shape[2:]), carries)
    if n * block < t_len:
        tail = jax.tree.map(lambda a: a[n * block :], (xs, rest))
        _, more = jax.lax.scan(step, carry, tail)
        carries = jax.tree.map(lambda a, b: jnp.concatenate([a, b], axis=0), carries, more)
    return with_first(first, carries)


def reference_loop(cell, params: Params, carry0: Carry, xs: jax.Array) -> Carry:
    """The same trajectory with a plain Python loop over ``cell.apply`` (for tests)."""
    out = [carry0]
    carry = carry0
    for t in range(xs.shape[0]):
        carry, _ = cell.apply({"params": params}, carry, xs[t])
        out.append(carry)
    return jax.tree.map(lambda *cs: jnp.stack(cs), *out)

"""How parameter gradients are gathered through time.

* ``accumulate`` — params are closed over by the scanned step; the reverse scan sums
  their cotangents into one buffer as it walks back (Zygote's accumulator). O(P) memory.
* ``per_step`` — params are broadcast to one copy per step ``[T, ...]`` and scanned as
  inputs; the gradient with respect to the copies is one tangent per step, summed
  afterwards (a ChainRules ``rrule`` for Flux's ``Recur``). O(T·P) memory, and it shows
  each step's contribution to ∂L/∂W.
* ``split_transpose`` — like ``accumulate`` but with ``lax.scan(..., _split_transpose=True)``
  (experimental in JAX): the reverse scan is split so the parameter-gradient part of
  the transpose runs outside the loop.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from rnnviz.cells import PARAM_GROUPS, Params, param_group
from rnnviz.norms import robust_norm


def lift_params(params: Params, strategy: str, seq_len: int) -> Params:
    """What the scan differentiates: the params, or ``[T, ...]`` copies for ``per_step``."""
    if strategy != "per_step":
        return params
    return jax.tree.map(lambda p: jnp.broadcast_to(p, (seq_len,) + p.shape), params)


def collapse_grads(grads: Params, strategy: str, recurrent: Callable[[tuple[str, ...]], bool]) -> tuple[Params, jax.Array | None]:
    """Turn the differentiated params' gradient into ``(param_grads, by_step)``.

    ``by_step`` is ``None`` except for ``per_step``: ``[T, len(PARAM_GROUPS)]``, the
    Frobenius norm of each step's contribution to each parameter group (``recurrent`` is
    the cell spec's predicate on parameter paths).
    """
    if strategy != "per_step":
        return grads, None
    summed = jax.tree.map(lambda g: jnp.sum(g, axis=0, dtype=jnp.float32).astype(g.dtype), grads)
    return summed, group_norms_by_step(grads, recurrent)


def group_norms_by_step(stacked: Params, recurrent: Callable[[tuple[str, ...]], bool]) -> jax.Array:
    """``[T, G]``: ‖contribution of step t to group g‖ for stacked per-step grads ``[T, ...]``
    (robust norms: per leaf, then over the group's leaves)."""
    per_group: dict[str, list[jax.Array]] = {g: [] for g in PARAM_GROUPS}
    for path, leaf in jax.tree_util.tree_flatten_with_path(stacked)[0]:
        names = tuple(k.key for k in path)
        per_group[param_group(names, recurrent)].append(robust_norm(leaf.reshape(leaf.shape[0], -1), 1))
    t_len = jax.tree.leaves(stacked)[0].shape[0]
    cols = [robust_norm(jnp.stack(n), 0) if n else jnp.zeros((t_len,), jnp.float32) for n in per_group.values()]
    return jnp.stack(cols, axis=1)

"""How parameter gradients are gathered through time: one :class:`Strategy` per name, in a table.

* ``accumulate`` — params are closed over by the scanned step; the reverse scan sums
  their cotangents into one buffer as it walks back (Zygote's accumulator). O(P) memory.
  Its analysis keeps only the trajectory for the reverse pass and reads every
  ‖∂L/∂carry_t‖ there (:mod:`rnnviz.engine.strategies.traced`).
* ``per_step`` — params are broadcast to one copy per step ``[T, ...]`` and scanned as
  inputs; the gradient with respect to the copies is one tangent per step, summed
  afterwards (a ChainRules ``rrule`` for Flux's ``Recur``). O(T·P) memory, and it shows
  each step's contribution to ∂L/∂W.
* ``split_transpose`` — like ``accumulate`` but with ``lax.scan(..., _split_transpose=True)``
  (experimental in JAX): the reverse scan is split so the parameter-gradient part of
  the transpose runs outside the loop.
* ``parallel`` — cells whose recurrence is linear in the carry: an associative scan over
  time, forward and reverse (:mod:`rnnviz.engine.strategies.parallel`).
* ``fused`` — cells with a :class:`~rnnviz.tables.cells.FusedForm`: the input GEMM
  hoisted out of the scan, a custom VJP whose reverse scan only propagates the carry
  cotangent, and the weight gradients as one GEMM each afterwards (:mod:`rnnviz.engine.strategies.fused`).
  Per-step contributions to ∂L/∂W from the stored gate cotangents in O(T·B²).
* ``checkpoint`` — ``jax.checkpoint`` over blocks of ⌈√T⌉ steps: the reverse pass
  recomputes each block's forward, so the per-step residuals are kept for one block
  only — what makes T = 100 000 fit (:func:`rnnviz.engine.rollout.checkpoint_rollout`).

What validation needs (names, which cells, memory) is plain data in
:mod:`rnnviz.tables.strategies`; this module keys the implementations by the same names.
An implementation is a few pure functions with narrow interfaces (as an Optax transform is
``init``/``update``): a ``rollout`` that reads a :class:`ForwardPass`, a :class:`ParamLift`
(params into the rollout, their gradient back) and, for the strategies that show each
step's contribution to ∂L/∂W, :class:`Contributions` (zero taps in, norms out of a
:class:`ReversePass`). Adding a strategy is one :func:`register_strategy` call; validation,
the CLI, the dashboard and the comparisons read the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.engine.cells import PARAM_GROUPS, Params, cell_spec, param_group
from rnnviz.engine.compat import split_transpose_available
from rnnviz.engine.norms import robust_norm
from rnnviz.engine.rollout import Carry, checkpoint_rollout, rollout
from rnnviz.engine.strategies import fused
from rnnviz.engine.strategies.parallel import parallel_rollout
from rnnviz.engine.strategies.traced import traced_rollout
from rnnviz.tables import strategies as rules
from rnnviz.tables.strategies import StrategyRules, block_length, cell_unavailable, strategy_names

if TYPE_CHECKING:
    from rnnviz.config import RunConfig

__all__ = [
    "PER_STEP_COPIES",
    "SHARED",
    "Contributions",
    "ForwardPass",
    "ParamLift",
    "ReversePass",
    "Strategy",
    "block_length",
    "cell_unavailable",
    "group_norms_by_step",
    "lift_params",
    "register_strategy",
    "split_transpose_available",
    "strategy",
    "strategy_names",
    "unavailable",
]


def _split_transpose_here() -> str | None:
    return (
        None
        if split_transpose_available()
        else "this JAX cannot differentiate lax.scan(_split_transpose=True)"
    )


class ForwardPass(NamedTuple):
    """What a strategy's rollout reads: one forward pass's inputs (each rollout takes what it needs).

    Attributes:
        cfg: the static :class:`~rnnviz.config.RunConfig` (the cell's table entry, H, activation).
        cell: the Flax cell (:func:`rnnviz.engine.cells.make_cell`).
        params: the params as the strategy lifted them (:class:`ParamLift`).
        carry0: the initial carry, each leaf ``[(B,) H]``.
        xs: time-major inputs ``[T, (B,) I]``.
        eps: optional zero perturbations, carry-shaped ``[T+1, (B,) H]``: their cotangents are
            every ∂L/∂carry_t.
        taps: optional extra zero inputs (:attr:`Contributions.taps`), or None.
    """

    cfg: RunConfig
    cell: Any
    params: Params
    carry0: Carry
    xs: jax.Array
    eps: Carry | None = None
    taps: Any = None


class ReversePass(NamedTuple):
    """What the per-step contribution norms read once the reverse pass has run.

    Attributes:
        cfg: the static :class:`~rnnviz.config.RunConfig`.
        carries: the trajectory, each leaf ``[T+1, (B,) H]``.
        xs: time-major inputs ``[T, (B,) I]``.
        param_grads: the gradient with respect to the lifted params (``per_step``: ``[T, …]``).
        tap_grads: the cotangents of :attr:`ForwardPass.taps` (None without taps).
    """

    cfg: RunConfig
    carries: Carry
    xs: jax.Array
    param_grads: Params
    tap_grads: Any


class ParamLift(NamedTuple):
    """How params enter the differentiated rollout, and how their gradient comes back.

    Attributes:
        lift: ``(params, T) -> what is differentiated`` (the params, or ``[T, …]`` copies).
        collapse: that gradient → ∂L/∂W (like params).
        stacked: whether ``lift`` adds a leading ``[T]`` axis (readouts are then vmapped over it).
    """

    lift: Callable[[Params, int], Params]
    collapse: Callable[[Params], Params]
    stacked: bool = False


class Contributions(NamedTuple):
    """How a strategy yields each step's contribution to ∂L/∂W, ``[T, G]``.

    Attributes:
        taps: ``(cfg, xs [T, (B,) I]) -> pytree | None``: extra zero inputs of the forward pass
            whose cotangents ``norms`` reads.
        norms: ``ReversePass -> [T, G]``, G the groups of :data:`rnnviz.engine.cells.PARAM_GROUPS`.
    """

    taps: Callable[[RunConfig, jax.Array], Any]
    norms: Callable[[ReversePass], jax.Array]


def _same(params: Params, seq_len: int) -> Params:
    return params


def _stack(params: Params, seq_len: int) -> Params:
    return jax.tree.map(lambda p: jnp.broadcast_to(p, (seq_len,) + p.shape), params)


def _kept(grads: Params) -> Params:
    return grads


def _summed(grads: Params) -> Params:
    return jax.tree.map(lambda g: jnp.sum(g, axis=0, dtype=jnp.float32).astype(g.dtype), grads)


#: The params themselves: the scan closes over them and sums their cotangents as it goes.
SHARED = ParamLift(_same, _kept)
#: One copy per step ``[T, …]``: one tangent per step, summed afterwards.
PER_STEP_COPIES = ParamLift(_stack, _summed, stacked=True)


def _no_taps(cfg: RunConfig, xs: jax.Array) -> None:
    return None


def _tangent_norms(r: ReversePass) -> jax.Array:
    return group_norms_by_step(r.param_grads, cell_spec(r.cfg.cell).params.recurrent)


def _gram_norms(r: ReversePass) -> jax.Array:
    return fused.group_norms(r.cfg, r.carries, r.xs, r.tap_grads.zx, r.tap_grads.zh)


def _scan_rollout(**flags: bool) -> Callable[[ForwardPass], Carry]:
    def run(f: ForwardPass) -> Carry:
        return rollout(f.cell, f.params, f.carry0, f.xs, f.eps, **flags)

    return run


def _parallel_rollout(f: ForwardPass) -> Carry:
    return parallel_rollout(f.cfg, f.params, f.carry0, f.xs, f.eps)


def _fused_rollout(f: ForwardPass) -> Carry:
    return fused.fused_rollout(f.cfg, f.params, f.carry0, f.xs, f.eps, f.taps)


def _checkpoint_rollout(f: ForwardPass) -> Carry:
    return checkpoint_rollout(f.cell, f.params, f.carry0, f.xs, f.eps, block_length(f.xs.shape[0]))


def _everywhere() -> str | None:
    return None


@dataclass(frozen=True)
class Strategy:
    """One way of gathering ∂L/∂W through time: its plain-data rules and a few pure functions.

    Attributes:
        rules: the :class:`~rnnviz.tables.strategies.StrategyRules` validation reads (name,
            summary, which cells, memory model).
        rollout: ``ForwardPass -> carries [T+1, …]`` (:func:`rnnviz.engine.rollout.rollout`'s
            contract: carry_0 at index 0, ``eps`` added to the carry handed on at every step).
        param_lift: the :class:`ParamLift`: how params are lifted for the rollout and the
            gradient summed back (default :data:`SHARED`).
        contributions: optional :class:`Contributions`: the per-step contributions to ∂L/∂W.
        jax_reason: ``() -> str | None``: why this JAX cannot run it (None: it can).
        traced: optional ``(cell, batch_axes) -> fn``, as
            :func:`~rnnviz.engine.strategies.traced.traced_rollout`: where it pays
            (:func:`rnnviz.engine.gradients.traced_pays`) the analysis takes every
            ‖∂L/∂carry_t‖ as the cotangent of a probe, with the trajectory as the only
            residual, instead of the gradients of ``eps`` through ``rollout``.
    """

    rules: StrategyRules
    rollout: Callable[[ForwardPass], Carry]
    param_lift: ParamLift = SHARED
    contributions: Contributions | None = None
    jax_reason: Callable[[], str | None] = _everywhere
    traced: Callable[[Any, int], Callable] | None = None

    @property
    def name(self) -> str:
        """The name users pass (``RunConfig.strategy``), from its rules."""
        return self.rules.name

    @property
    def summary(self) -> str:
        """Its one-line summary, from its rules."""
        return self.rules.summary

    def cell_reason(self, spec: Any) -> str | None:
        """Why the cell ``spec`` cannot use this strategy (None: it can)."""
        return self.rules.cell_reason(spec)

    def residual_steps(self, t: int) -> int:
        """Steps of per-step residuals the reverse pass holds at once for ``T = t`` (its rules' model)."""
        return self.rules.residual_steps(t)

    def param_copies(self, t: int) -> int:
        """Parameter-sized buffers held for ``T = t`` (params, grads, tangents; its rules' model)."""
        return self.rules.param_copies(t)

    @property
    def by_step(self) -> bool:
        """Whether it yields ``param_grad_by_step`` ``[T, G]``."""
        return self.contributions is not None


_TABLE: dict[str, Strategy] = {}


def register_strategy(strategy: Strategy) -> Strategy:
    """Add a strategy: its rules to the plain-data table, its implementation here.

    Args:
        strategy: the rules and implementation; its name may replace an existing one.

    Returns:
        ``strategy``.
    """
    rules.register_rules(strategy.rules)
    _TABLE[strategy.name] = strategy
    return strategy


register_strategy(Strategy(rules=rules.ACCUMULATE, rollout=_scan_rollout(), traced=traced_rollout))
register_strategy(
    Strategy(
        rules=rules.PER_STEP,
        rollout=_scan_rollout(per_step_params=True),
        param_lift=PER_STEP_COPIES,
        contributions=Contributions(taps=_no_taps, norms=_tangent_norms),
    )
)
register_strategy(
    Strategy(
        rules=rules.SPLIT_TRANSPOSE,
        rollout=_scan_rollout(split_transpose=True),
        jax_reason=_split_transpose_here,
    )
)
register_strategy(Strategy(rules=rules.PARALLEL, rollout=_parallel_rollout))
register_strategy(
    Strategy(
        rules=rules.FUSED,
        rollout=_fused_rollout,
        contributions=Contributions(taps=fused.taps, norms=_gram_norms),
    )
)
register_strategy(Strategy(rules=rules.CHECKPOINT, rollout=_checkpoint_rollout))


def strategy(name: str) -> Strategy:
    """The registered strategy ``name`` (KeyError when there is none)."""
    return _TABLE[name]


def unavailable(name: str, spec: Any | None = None) -> str | None:
    """Why strategy ``name`` cannot run here (for the cell ``spec``), or None."""
    s = _TABLE[name]
    return s.jax_reason() or (s.cell_reason(spec) if spec is not None else None)


def lift_params(params: Params, name: str, seq_len: int) -> Params:
    """What the scan differentiates for strategy ``name``: the params, or ``[T, ...]`` copies."""
    return _TABLE[name].param_lift.lift(params, seq_len)


def group_norms_by_step(stacked: Params, recurrent: Callable[[tuple[str, ...]], bool]) -> jax.Array:
    """``[T, G]``: ‖contribution of step t to group g‖ for stacked per-step grads ``[T, ...]``
    (robust norms: per leaf, then over the group's leaves)."""
    per_group: dict[str, list[jax.Array]] = {g: [] for g in PARAM_GROUPS}
    for path, leaf in jax.tree_util.tree_flatten_with_path(stacked)[0]:
        names = tuple(k.key for k in path)
        per_group[param_group(names, recurrent)].append(robust_norm(leaf.reshape(leaf.shape[0], -1), 1))
    t_len = jax.tree.leaves(stacked)[0].shape[0]
    cols = [
        robust_norm(jnp.stack(n), 0) if n else jnp.zeros((t_len,), jnp.float32) for n in per_group.values()
    ]
    return jnp.stack(cols, axis=1)

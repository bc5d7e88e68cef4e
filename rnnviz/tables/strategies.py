"""The strategy table: what validation and the memory model need to know about each
strategy, in plain data (no JAX).

Each strategy's implementation (its rollout, param lift and per-step contributions) is
registered under the same name in :mod:`rnnviz.engine.strategies.registry`; this table is
what a :class:`~rnnviz.config.RunConfig` is checked against: the names, which cells each
strategy can run, and how much memory it holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def block_length(t: int) -> int:
    """⌈√T⌉: the block length of ``checkpoint`` (memory O(√T) residual steps).

    Args:
        t: the sequence length T ≥ 1.

    Returns:
        The smallest integer b with b² ≥ T.
    """
    return math.isqrt(t - 1) + 1 if t > 1 else 1


def contributions_source(available: tuple[str, ...] | list[str]) -> str | None:
    """The strategy whose analysis holds each step's contribution to ∂L/∂W, of those
    ``available``: ``fused`` (from its stored gate cotangents, O(T·B²)), else ``per_step``
    (a ``[T, …]`` copy of the parameter gradient); None when neither is.

    >>> contributions_source(("accumulate", "per_step", "fused")), contributions_source(("accumulate",))
    ('fused', None)
    """
    return next((name for name in ("fused", "per_step") if name in available), None)


def _any_cell(spec: Any) -> str | None:
    return None


def _linear(spec: Any) -> str | None:
    if spec.forms.linear_form is not None or spec.forms.prefix_scan is not None:
        return None
    return "its recurrence is not linear in its carry (h_t = A_t⊙h_{t−1} + B_t)"


def _fusable(spec: Any) -> str | None:
    if spec.forms.fused is not None:
        return None
    return "it has no fused form (an input GEMM, one recurrent matrix product, element-wise gates)"


def _every_step(t: int) -> int:
    return t


def _two_blocks(t: int) -> int:
    """Steps whose residuals the checkpointed reverse pass holds at once: one block being
    recomputed plus the block-boundary carries."""
    return 2 * block_length(t)


def _three_buffers(t: int) -> int:
    return 3


def _per_step_copies(t: int) -> int:
    return 2 * t + 3


@dataclass(frozen=True)
class StrategyRules:
    """What validation and the memory model read about one strategy.

    Attributes:
        name: the name users pass (``RunConfig.strategy``).
        summary: one line for the CLI, the dashboard and the docs.
        cell_reason: ``CellSpec -> str | None``: why a cell cannot use it (None: it can).
        residual_steps: ``T -> steps`` of per-step residuals the reverse pass holds at once.
        param_copies: ``T -> k``: parameter-sized buffers held (params, grads, tangents).
        compile_cost: seconds to compile its analysis, per second of the accumulator's (the
            dashboard's budgets; measured here over 8 configs of 6 cells and rounded up
            within that range: the comment above the table).
        run_cost: seconds of one run per second of the accumulator's, apart from its buffers
            beyond the accumulator's (``param_copies``, counted by the budgets on their own).
    """

    name: str
    summary: str
    cell_reason: Callable[[Any], str | None] = _any_cell
    residual_steps: Callable[[int], int] = _every_step
    param_copies: Callable[[int], int] = _three_buffers
    compile_cost: float = 1.0
    run_cost: float = 1.0


_TABLE: dict[str, StrategyRules] = {}


def register_rules(rules: StrategyRules) -> StrategyRules:
    """Add (or replace) one strategy's rules; :func:`rnnviz.engine.strategies.registry.register_strategy`
    calls this with the rules of every strategy it registers."""
    _TABLE[rules.name] = rules
    return rules


def strategy_names() -> tuple[str, ...]:
    """The registered strategies, in table order."""
    return tuple(_TABLE)


def strategy_rules(name: str) -> StrategyRules:
    """The rules of strategy ``name`` (KeyError when there is none)."""
    return _TABLE[name]


def cell_unavailable(name: str, spec: Any) -> str | None:
    """Why the cell ``spec`` cannot use strategy ``name`` (None: it can); asks nothing of JAX."""
    return _TABLE[name].cell_reason(spec)


# compile_cost and run_cost: measured here with ``scripts/strategy_costs.py`` (each
# strategy compiled and timed as the Strategies tab does, over the accumulator's analysis),
# at LSTM H=128 T=1000 B=32 and H=256 T=300, GRU and simple H=128–256 T=1000, mLSTM, Mamba
# and DeltaNet H=64 T=200 B=16, and simple H=32 T=50 B=4. Compile: per-step 1.3–1.7,
# split-transpose 0.8–1.1, fused 1.1–1.45, checkpoint 1.3–1.75, parallel 1.3–3.2. Run:
# fused 0.8–1.25; split-transpose and checkpoint 0.9–1.1 on vector carries, 2–3 on matrix
# memories; parallel 4.2–4.5; per-step 1.9–4.6, which is its buffers (budget.BUFFER_S_PER_FLOAT
# per float of its 2·T copies of P), so its run_cost is 1 and the budgets add the buffers. The
# values sit in the upper half of each range (a budget that counts too little runs over it),
# but split-transpose's and checkpoint's runs: above the vector carries', below the matrix
# memories' (whose tabs are mostly compiling: mLSTM H=64 T=200 B=16 was counted over what it
# took, docs/dev/benchmarks.md).
ACCUMULATE = register_rules(
    StrategyRules(
        name="accumulate",
        summary="one buffer: the reverse scan sums each step's cotangent into ∂L/∂W as it walks back "
        "(O(P) memory)",
    )
)
PER_STEP = register_rules(
    StrategyRules(
        name="per_step",
        summary="one tangent per step [T, …], summed afterwards (O(T·P) memory); shows each step's "
        "contribution",
        param_copies=_per_step_copies,
        compile_cost=1.5,
    )
)
SPLIT_TRANSPOSE = register_rules(
    StrategyRules(
        name="split_transpose",
        summary="the accumulator with lax.scan's experimental split transpose (weight part outside the loop)",
        run_cost=1.3,
    )
)
PARALLEL = register_rules(
    StrategyRules(
        name="parallel",
        summary="associative scan over time, depth O(log T), for recurrences linear in the carry",
        cell_reason=_linear,
        compile_cost=3.0,
        run_cost=4.5,
    )
)
FUSED = register_rules(
    StrategyRules(
        name="fused",
        summary="input GEMM before the scan, carry cotangents only in the reverse scan, ∂L/∂W as one "
        "GEMM after (cuDNN/oneDNN's layout); per-step contributions in O(T·B²)",
        cell_reason=_fusable,
        compile_cost=1.3,
        run_cost=1.15,
    )
)
CHECKPOINT = register_rules(
    StrategyRules(
        name="checkpoint",
        summary="jax.checkpoint over blocks of ⌈√T⌉ steps: the reverse pass recomputes each block "
        "(O(√T) residual memory, about one more forward pass of time)",
        residual_steps=_two_blocks,
        compile_cost=1.6,
        run_cost=1.5,
    )
)

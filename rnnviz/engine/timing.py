"""Run timing of compiled functions: the median of repeated runs (:func:`time_runs`), of
several functions' runs taken in turn (:func:`time_interleaved`), runs bounded by time
(:func:`time_within`) and runs until their mean is known to a stated precision
(:func:`time_until_precise`). What they return, and the :class:`Timing` record of one
analysis, are plain records of :mod:`rnnviz.base.timing` (re-exported here).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from rnnviz.base.timing import (
    MIN_PRECISE_REPEATS,
    T90,
    Z90,
    RunTiming,
    Timing,
    budgeted_repeats,
    mean_halfwidth,
)


def time_runs(
    fn: Callable, args: tuple, repeats: int, warmup: int = 1, budget_s: float | None = None
) -> tuple[Any, RunTiming]:
    """Run ``fn(*args)`` ``warmup`` + ``repeats`` times, blocking on each; return the last
    result and the wall-clock statistics of the timed runs. With ``budget_s``, slow
    functions get fewer timed runs (at least 3) so the total stays near the budget."""
    out = None
    start = time.perf_counter()
    for _ in range(warmup):
        out = jax.block_until_ready(fn(*args))
    if budget_s is not None and warmup:
        repeats = budgeted_repeats(repeats, (time.perf_counter() - start) / warmup, budget_s)
    times = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return out, RunTiming.of(times)


def time_interleaved(
    calls: Sequence[tuple[Callable, tuple]], repeats: int, budget_s: float | None = None
) -> list[RunTiming]:
    """Time several compiled functions in turn, one run of each per round, so that a ratio of
    two of them compares runs made under the same load (on a shared machine the speed drifts
    over minutes, which timing each function's runs in one block turns into the ratios).

    Each ``fn(*args)`` of ``calls`` runs once untimed first (its result dropped at once, as
    every timed run's is); with ``budget_s``, a slow one gets fewer rounds (at least 3), as
    :func:`~rnnviz.base.timing.budgeted_repeats` gives.

    Returns:
        The statistics of each function's timed runs, in the order of ``calls``.
    """
    counts = []
    for fn, args in calls:  # the warm-up, which also sizes the runs against the budget
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        counts.append(budgeted_repeats(max(repeats, 1), time.perf_counter() - start, budget_s))
    times: list[list[float]] = [[] for _ in calls]
    for round_ in range(max(counts, default=0)):
        for i, (fn, args) in enumerate(calls):
            if round_ < counts[i]:
                start = time.perf_counter()
                jax.block_until_ready(fn(*args))
                times[i].append(time.perf_counter() - start)
    return [RunTiming.of(t) for t in times]


def time_within(fn: Callable, args: tuple, budget_s: float, max_repeats: int) -> tuple[Any, RunTiming]:
    """Run ``fn(*args)`` at least once and again while the runs so far took less than
    ``budget_s`` (at most ``max_repeats`` runs), blocking on each; return the last result
    and the statistics of all of them. No separate warm-up: the executable is compiled
    ahead of time, so the first run is a run like the others, and a slow configuration
    costs one run, not a warm-up plus a fixed count."""
    times: list[float] = []
    out = None
    while not times or (sum(times) < budget_s and len(times) < max(1, max_repeats)):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return out, RunTiming.of(times)


def time_until_precise(
    fn: Callable, args: tuple, max_repeats: int, precision: float, warmup: int = 1
) -> tuple[Any, RunTiming]:
    """Run ``fn(*args)`` ``warmup`` times, then time runs until the 90 % confidence interval
    of their mean is within ± ``precision`` of it (at least :data:`MIN_PRECISE_REPEATS`
    runs, at most ``max_repeats``), blocking on each; return the last result and the
    statistics. A steady executable stops at 3 runs; a noisy one gets up to ``max_repeats``,
    and its interval says how well it is known.

    >>> import jax.numpy as jnp
    >>> _, t = time_until_precise(jnp.sin, (jnp.ones(4),), max_repeats=5, precision=1e9)
    >>> t.repeats  # any spread is within a precision of 1e9
    3
    """
    out = None
    for _ in range(warmup):
        out = jax.block_until_ready(fn(*args))
    times: list[float] = []
    least = min(MIN_PRECISE_REPEATS, max(1, max_repeats))
    while len(times) < max(1, max_repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
        if len(times) >= least and mean_halfwidth(times) <= precision * statistics.fmean(times):
            break
    return out, RunTiming.of(times)


__all__ = [
    "MIN_PRECISE_REPEATS",
    "T90",
    "Z90",
    "RunTiming",
    "Timing",
    "budgeted_repeats",
    "mean_halfwidth",
    "time_interleaved",
    "time_runs",
    "time_until_precise",
    "time_within",
]

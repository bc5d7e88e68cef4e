"""Run timing of compiled functions: the median of repeated runs (:func:`time_runs`), runs
bounded by time (:func:`time_within`), and the :class:`Timing` record of one analysis.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax


class RunTiming(NamedTuple):
    """Seconds of the timed runs of one compiled call: median, fastest, slowest, and how many."""

    median_s: float
    min_s: float
    max_s: float
    repeats: int


class Timing(NamedTuple):
    """Timing of one analysis. ``compile_s`` is what compiling took when it happened;
    ``cache_hit`` says whether this call reused an executable compiled earlier."""

    compile_s: float
    run_s: float
    run_min_s: float
    run_max_s: float
    repeats: int
    peak_bytes: int
    flops: float  # analytic estimate for one run, see rnnviz.config.estimate_flops
    device: str
    backend: str
    cache_hit: bool
    #: The log-magnitude pass (:mod:`rnnviz.engine.logpass`): median run and compile seconds when
    #: it ran (float32 could not hold every norm), 0.0 when float32's norms were exact.
    log_pass_s: float = 0.0
    log_pass_compile_s: float = 0.0


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
        per_run = (time.perf_counter() - start) / warmup
        repeats = max(3, min(repeats, int(budget_s / max(per_run, 1e-9))))
    times = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return out, RunTiming(statistics.median(times), min(times), max(times), len(times))


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
    return out, RunTiming(statistics.median(times), min(times), max(times), len(times))

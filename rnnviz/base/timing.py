"""What a timing says, in plain records (no JAX): the statistics of repeated runs
(:class:`RunTiming`, :func:`mean_halfwidth`), the :class:`Timing` of one analysis, and how
many runs a timing takes (:func:`budgeted_repeats`, :data:`MIN_PRECISE_REPEATS`).

The runs themselves are timed by :mod:`rnnviz.engine.timing`; the dashboard's server reads
these records without importing JAX.
"""

from __future__ import annotations

import math
import statistics
from typing import NamedTuple


class RunTiming(NamedTuple):
    """Seconds of the timed runs of one compiled call: median, fastest, slowest, how many, and
    the half-width of the 90 % confidence interval of their mean (:func:`mean_halfwidth`;
    inf for one run)."""

    median_s: float
    min_s: float
    max_s: float
    repeats: int
    halfwidth_s: float = math.inf

    @classmethod
    def of(cls, times: list[float]) -> RunTiming:
        """The statistics of ``times`` (seconds of each run)."""
        return cls(statistics.median(times), min(times), max(times), len(times), mean_halfwidth(times))


#: Student's t at 0.95 for 1…30 degrees of freedom (``scipy.stats.t.ppf(0.95, df)``): the
#: two-sided 90 % interval of a mean from n runs is mean ± T90[n − 2] · s / √n.
T90 = (
    6.3138, 2.92, 2.3534, 2.1318, 2.015, 1.9432, 1.8946, 1.8595, 1.8331, 1.8125,
    1.7959, 1.7823, 1.7709, 1.7613, 1.7531, 1.7459, 1.7396, 1.7341, 1.7291, 1.7247,
    1.7207, 1.7171, 1.7139, 1.7109, 1.7081, 1.7056, 1.7033, 1.7011, 1.6991, 1.6973,
)  # fmt: skip
#: The normal quantile, for more than 31 runs.
Z90 = 1.6449


def mean_halfwidth(times: list[float]) -> float:
    """Half-width of the 90 % confidence interval of the mean of ``times``, t · s / √n
    (Student's t with n − 1 degrees of freedom; inf for fewer than two runs).

    >>> round(mean_halfwidth([1.0, 1.1, 0.9]), 4)  # s = 0.1, t(2) = 2.92
    0.1686
    """
    n = len(times)
    if n < 2:
        return math.inf
    t = T90[n - 2] if n - 2 < len(T90) else Z90
    return t * statistics.stdev(times) / math.sqrt(n)


class Timing(NamedTuple):
    """Timing of one analysis. ``compile_s`` is what compiling took when it happened (or
    reading the executable from JAX's persistent compilation cache, where it came from
    there); ``cache_hit`` says whether this call reused an executable compiled earlier;
    ``fresh_compile_s`` is what compiling it takes (``compile_s``, or the compile time the
    persistent cache recorded)."""

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
    #: Half-width of the 90 % confidence interval of the mean run (inf for one run).
    run_halfwidth_s: float = math.inf
    #: Whether the analysis was compiled for compile speed (a small shape on the CPU,
    #: :func:`rnnviz.engine.compile.quick_compile`): its runs are of less optimised code.
    quick_compiled: bool = False
    #: Seconds compiling the analysis takes: ``compile_s`` where this process compiled it,
    #: the persistent cache's record where it read it from there (0.0: not known).
    fresh_compile_s: float = 0.0


def budgeted_repeats(repeats: int, per_run_s: float, budget_s: float | None) -> int:
    """Timed runs for a function whose warm-up took ``per_run_s``: ``repeats``, or fewer (at
    least 3) so that they take about ``budget_s`` (None: no limit)."""
    if budget_s is None:
        return repeats
    return max(3, min(repeats, int(budget_s / max(per_run_s, 1e-9))))


#: The fewest timed runs :func:`~rnnviz.engine.timing.time_until_precise` stops at (two could
#: agree by chance).
MIN_PRECISE_REPEATS = 3


__all__ = [
    "MIN_PRECISE_REPEATS",
    "T90",
    "Z90",
    "RunTiming",
    "Timing",
    "budgeted_repeats",
    "mean_halfwidth",
]

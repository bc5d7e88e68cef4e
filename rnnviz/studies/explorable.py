"""Everything a teaching page shows, at every point of a grid of configurations.

:func:`explorable_grid` evaluates, for each combination of the swept fields, what the
dashboard's first tabs show for one configuration: the full :class:`~rnnviz.analysis.Analysis`
(exact per-step magnitudes, the trajectory, the verdict's inputs), the step Jacobians'
top singular values and the leading Lyapunov exponent. Value fields (gain, seed, forget
bias, scales) share one vmapped executable per shape (:mod:`rnnviz.studies.sweep`); each
shape (cell, T, activation, carry initialisation, …) compiles two: the analysis with its
log pass and Jacobians, and the QR method. The page itself is written by
:mod:`rnnviz.report.explorable`; it only looks these results up.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import numpy as np

from rnnviz.analysis import Analysis, analysis_of_outputs, log_outputs
from rnnviz.config import ConfigError, RunConfig, estimate_flops
from rnnviz.engine.cells import make_cell
from rnnviz.engine.gradients import analysis_outputs
from rnnviz.engine.timing import Timing
from rnnviz.studies.jacobians import carry_dim, choose_method, jacobian_pass
from rnnviz.studies.lyapunov import check_options
from rnnviz.studies.sweep import evaluate_points, grid_points, sweep_executable, validate_over

#: The most steps at which a point's step Jacobian is taken (every ``ceil(T / this)``-th).
MAX_JACOBIAN_STEPS = 50


class LessonMeasure(NamedTuple):
    """A sweep measure (:mod:`rnnviz.studies.sweep`): at each point, the analysis's outputs,
    its log-magnitude pass, the params and inputs, and ``[S, k]`` top singular values of the
    step Jacobian of example 0 at every ``stride``-th step (method ``exact`` or ``subspace``)."""

    method: str
    k: int
    iterations: int
    stride: int

    def point(self, static: RunConfig, key_data: jax.Array, params, carry0, xs, objective=None):
        """``(StepGrads, Summary, log Scaled, params, xs, singular values [S, k])`` of one point."""
        cell = make_cell(static)
        sg, summary = analysis_outputs(static, cell, params, carry0, xs, objective)
        logs = log_outputs(static, cell, params, sg.carries, xs, objective)
        sv = jacobian_pass(
            static, self.method, self.k, self.iterations, self.stride, 0, params, carry0, xs, key_data
        )
        return sg, summary, logs, params, xs, sv


@dataclass(frozen=True, eq=False)
class LessonPoint:
    """One grid point.

    Attributes:
        analysis: what :func:`rnnviz.analyze` gives at this point.
        jacobian_steps: ``[S]`` the steps t at which J_t = ∂carry_t/∂carry_{t−1} was taken.
        singular_values: ``[S, k]`` σ₁ ≥ … ≥ σ_k of J_t (example 0).
        lyapunov: λ₁ per step (QR method, mean over the examples).
    """

    analysis: Analysis
    jacobian_steps: np.ndarray
    singular_values: np.ndarray
    lyapunov: float

    @property
    def config(self) -> RunConfig:
        """The point's configuration."""
        return self.analysis.config


@dataclass(frozen=True, eq=False)
class ExplorableGrid:
    """Every point of a grid, in row-major order over ``over`` (the last field fastest).

    Attributes:
        config: the base configuration (each point replaces the swept fields).
        over: ``{field: values}``, validated, in the order the page's controls show them.
        points: one :class:`LessonPoint` per combination.
        compile_s: seconds of the calls that compiled (their run included); run_s: seconds of
            the calls whose executable was compiled already.
    """

    config: RunConfig
    over: dict[str, tuple[Any, ...]]
    points: tuple[LessonPoint, ...]
    compile_s: float
    run_s: float

    def index(self, **values: Any) -> int:
        """The position in :attr:`points` of the combination ``values`` (every swept field).

        Raises:
            ConfigError: a field that is not swept, or a value that is not on the grid.
        """
        return grid_index(self.over, values)

    def at(self, **values: Any) -> LessonPoint:
        """The point at ``values`` (:meth:`index`)."""
        return self.points[self.index(**values)]


def grid_index(over: Mapping[str, Sequence[Any]], values: Mapping[str, Any]) -> int:
    """Row-major position of ``values`` in the product of ``over``'s value lists.

    >>> grid_index({"a": [1, 2], "b": ["x", "y", "z"]}, {"a": 2, "b": "y"})
    4
    """
    if set(values) != set(over):
        raise ConfigError("point", sorted(values), "a value for each swept field: " + ", ".join(over))
    index = 0
    for name, options in over.items():
        options = list(options)
        if values[name] not in options:
            raise ConfigError(name, values[name], "one of the grid's values: " + ", ".join(map(str, options)))
        index = index * len(options) + options.index(values[name])
    return index


def grid_size(over: Mapping[str, Sequence[Any]]) -> int:
    """How many points the product of ``over``'s value lists has."""
    return math.prod(len(v) for v in over.values())


def lesson_measure(cfg: RunConfig, k: int) -> LessonMeasure:
    """The measure for ``cfg``'s shape: k clipped to the carry's size, exact Jacobians up to
    D = 256 (:func:`~rnnviz.studies.jacobians.choose_method`), at most
    :data:`MAX_JACOBIAN_STEPS` steps."""
    dim = carry_dim(cfg)
    return LessonMeasure(choose_method(dim), min(int(k), dim), 12, -(-cfg.seq_len // MAX_JACOBIAN_STEPS))


def explorable_grid(
    cfg: RunConfig,
    over: Mapping[str, Sequence[Any]],
    *,
    k: int = 4,
    progress: Callable[[int, int], None] | None = None,
) -> ExplorableGrid:
    """The analysis, step-Jacobian spectrum and λ₁ at every combination of ``over``.

    Args:
        cfg: the base configuration.
        over: ``{field: values}`` of :class:`~rnnviz.config.RunConfig` fields, e.g.
            ``{"recurrent_gain": [0.8, 1.0, 1.2], "seq_len": [50, 100]}``.
        k: singular values per step Jacobian (at most the carry's size).
        progress: called as ``progress(done, total)`` after each compiled call (two per shape).

    Returns:
        An :class:`ExplorableGrid`.

    Raises:
        ConfigError: as :func:`rnnviz.sweep` (a bad field or value, a combination that is
            not a valid configuration, too many points) and :func:`rnnviz.lyapunov`.

    Example:
        >>> from rnnviz import RunConfig
        >>> from rnnviz.studies.explorable import explorable_grid
        >>> g = explorable_grid(RunConfig(hidden_size=4, seq_len=6), {"recurrent_gain": [0.5, 1.5]}, k=2)
        >>> len(g.points), g.at(recurrent_gain=0.5).singular_values.shape  # [S, k]
        (2, (6, 2))
        >>> low, high = (g.at(recurrent_gain=v).analysis.log10_grad_norms[0] for v in (0.5, 1.5))
        >>> bool(low < high)
        True
    """
    over = {name: tuple(values) for name, values in validate_over(cfg, over).items()}
    groups = grid_points(cfg, over)
    total, done = 2 * len(groups), 0
    points: list[LessonPoint | None] = [None] * grid_size(over)
    compile_s = run_s = 0.0
    for base, shape_point, values in groups:
        measure = lesson_measure(base, k)
        for m in (measure, check_options(base, 1, None, 1)):
            before = sweep_executable.cache_info().currsize
            start = time.perf_counter()
            out = evaluate_points(base, values, m)
            spent = time.perf_counter() - start
            compiled = sweep_executable.cache_info().currsize > before
            compile_s += spent if compiled else 0.0
            run_s += 0.0 if compiled else spent
            if m is measure:
                lesson = out
            else:
                lyap = np.asarray(out, np.float64).reshape(len(values), -1)  # [N, B·k], k = 1
            done += 1
            if progress is not None:
                progress(done, total)
        steps = np.arange(measure.stride, base.seq_len + 1, measure.stride)
        share = Timing(0.0, 0.0, 0.0, 0.0, 1, 0, estimate_flops(base), "sweep", "sweep", True)
        for i, value in enumerate(values):
            point_cfg = base.replace(**value)
            sg, summary, logs, params, xs, sv = jax.tree.map(lambda x, i=i: x[i], lesson)
            a = analysis_of_outputs(point_cfg, sg, summary, logs, params=params, xs=xs, timing=share)
            where = grid_index(over, {**shape_point, **value})
            points[where] = LessonPoint(a, steps, np.asarray(sv, np.float64), float(lyap[i].mean()))
    assert all(p is not None for p in points)  # every combination came from one group
    return ExplorableGrid(cfg, over, tuple(points), compile_s, run_s)  # type: ignore[arg-type]


def product_of(over: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of ``over`` in row-major order (:func:`grid_index`'s)."""
    names = list(over)
    return [dict(zip(names, combo)) for combo in itertools.product(*(over[n] for n in names))]

"""Sweeps: many values of a config in one compiled, vmapped call, sharded over devices.

Fields that keep array shapes (``RunConfig.VALUE_FIELDS``: seed, gain, forget bias,
scales) are swept inside one ``jax.vmap``-ed executable over a ``("sweep", "batch")``
``Mesh`` of every local device: points are split over "sweep", each point's batch
over "batch" (``NamedSharding`` + ``vmap(spmd_axis_name=...)``). Fields that change shapes or
code (hidden size, seq_len, cell, …) are swept by an outer loop, one compile per shape
(cached).
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from rnnviz.analysis import analyze, is_compiled
from rnnviz.base.theory import GAMMA
from rnnviz.base.weights import Weights
from rnnviz.config import FIELD_SPECS, ConfigError, RunConfig, check_field, coerce, estimate_flops
from rnnviz.dataset import Dataset, check_data
from rnnviz.engine.cells import make_cell, outputs
from rnnviz.engine.compat import process_allgather
from rnnviz.engine.compile import Compiled, compile_cache, compile_lowered, quick_compile, run_once_options
from rnnviz.engine.gradients import full_carry0, loss_from_outputs, time_major
from rnnviz.engine.logpass import log_carry_gradients
from rnnviz.engine.losses import DataArrays, DataSpec, data_arrays, data_spec
from rnnviz.engine.norms import combine, log10, log10_combine
from rnnviz.engine.prepare import (
    Values,
    check_weights,
    prepare,
    prepared_inputs,
    resolve_device,
    static_config,
    trained_tree,
)
from rnnviz.engine.rollout import rollout
from rnnviz.tables.cells import cell_spec

MAX_POINTS = 4096
#: Seconds that a grid may always take point by point through the analysis's own executable
#: (:func:`sweep_reusing`) instead of compiling a vmapped one: compiling the smallest
#: sweep takes longer than this on 2 cores (the default config's: 2.3 s, where its Phase
#: diagram's 123 points one by one take less than this).
REUSE_BUDGET_S = 1.0
#: A vmapped sweep (its log-magnitude pass included) compiles at least this many times as
#: long as the analysis of its shape: 2.1–3.6× measured on 2 cores (simple H=32 T=50, GRU
#: H=64 T=200 B=8, Mamba H=32 T=100, LSTM H=128 T=1000 B=32), so a grid that takes less
#: one by one surely costs less than compiling the sweep.
SWEEP_COMPILE_RATIO = 2.0


class SweepResult(NamedTuple):
    """``log10_grad_norms`` ``[N, C, T+1]`` (float64, exact: from the log-magnitude pass)
    per point and carry component; ``loss`` ``[N]``."""

    log10_grad_norms: np.ndarray
    loss: np.ndarray

    @property
    def grad_norms(self) -> np.ndarray:
        """The same in linear units (float64: 0 below ~1e-308)."""
        with np.errstate(under="ignore", over="ignore"):
            return 10.0**self.log10_grad_norms


class GradientMeasure(NamedTuple):
    """What a gradient sweep computes at each point: ``(Scaled [C, T+1], loss)``.

    A *measure* is any hashable value with ``point(static, key_data, params, carry0, xs,
    objective)`` (objective: a data set's loss terms, or None);
    it is part of the executable's cache key, so each measure compiles once per shape
    (:class:`rnnviz.studies.lyapunov.LyapunovOptions` is the other one)."""

    def point(self, static: RunConfig, key_data: jax.Array, params, carry0, xs, objective=None):
        """One point: the rollout, its loss, and ‖∂L/∂carry_t‖ by the log pass (never underflows).

        Args:
            static: the shape-deciding config.
            key_data: the point's seed key (unused here; other measures draw from it).
            params: the cell's params.
            carry0: the initial carry, each component ``[(B,) H]``.
            xs: the inputs ``[(B,) T, I]``, batch-first.
            objective: a data set's loss terms, or None for ``static.loss``.

        Returns:
            ``(Scaled [C, T+1], loss)``: the norms combined over the batch, and the scalar loss.
        """
        cell = make_cell(static)
        xs_tm = time_major(static, xs)
        carries = rollout(cell, params, full_carry0(static, carry0), xs_tm)
        loss = loss_from_outputs(static, outputs(static, params, carries, xs_tm), objective)
        # The log pass: the phase diagram is never clipped by float32 underflow.
        norms = combine(log_carry_gradients(static, cell, params, carries, xs_tm, objective=objective), 2)
        return norms, loss


GRADIENTS = GradientMeasure()


def _point(
    static: RunConfig,
    batch_sharding: NamedSharding | None,
    measure,
    key_data: jax.Array,
    values: Values,
    data: DataArrays | None,
    trained: dict | None = None,
):
    params, carry0, xs, objective = prepare(static, key_data, values, data, trained)
    if batch_sharding is not None:
        # Under vmap(spmd_axis_name="sweep") this shards [N, B, ...] as ("sweep", "batch").
        xs = jax.lax.with_sharding_constraint(xs, batch_sharding)
        carry0 = jax.tree.map(lambda c: jax.lax.with_sharding_constraint(c, batch_sharding), carry0)
    return measure.point(static, key_data, params, carry0, xs, objective)


def mesh_shape(cfg: RunConfig, n_devices: int) -> tuple[int, int]:
    """``(sweep, batch)`` split of the devices: the batch axis takes the largest share that
    divides B (all of it when it can), the sweep axis the rest."""
    n_batch = (
        math.gcd(n_devices, cfg.batch_size)
        if cfg.batch_size is not None and cfg.carry_init != "learned"
        else 1
    )
    return n_devices // n_batch, n_batch


def sweep_devices(cfg: RunConfig) -> tuple[jax.Device, ...]:
    """Every device of the platform ``cfg.device`` resolves to, across all processes
    (after ``jax.distributed.initialize`` that is every host's devices)."""
    return tuple(jax.devices(resolve_device(cfg).platform))


def _global(host: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """A global array from the same host array on every process: each process supplies
    the shards its own devices hold (single- and multi-process alike)."""
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def _to_host(x: jax.Array) -> np.ndarray:
    if jax.process_count() > 1:
        return np.asarray(process_allgather(x))
    return np.asarray(x)


def sweep_flops(static: RunConfig, n_points: int) -> float:
    """Estimated FLOPs of one call of a sweep of ``n_points``: each point's gradient evaluation
    (:func:`~rnnviz.config.estimate_flops`) and its parameter draw, whose orthogonal recurrent
    kernels cost about 12·H³ each (Householder's two passes and a Newton–Schulz step).

    >>> sweep_flops(RunConfig(), 123) > 123 * estimate_flops(RunConfig())
    True
    """
    kernels = cell_spec(static.cell).cost.matmuls if static.recurrent_init == "orthogonal" else 0
    return n_points * (estimate_flops(static) + kernels * 12.0 * static.hidden_size**3)


def _sweep_key(
    static: RunConfig,
    devices: tuple[jax.Device, ...],
    n_points: int,
    measure: Any = GRADIENTS,
    data: DataSpec | None = None,
    trained: DataSpec | None = None,
) -> tuple:
    """:func:`sweep_executable`'s cache key and arguments: its own, and whether it compiles
    for compile speed (:func:`~rnnviz.engine.compile.quick_compile` of :func:`sweep_flops`)."""
    quick = quick_compile(sweep_flops(static, n_points), devices[0])
    return static, devices, n_points, measure, data, trained, quick


@compile_cache(maxsize=32, key=_sweep_key)
def sweep_executable(
    static: RunConfig,
    devices: tuple[jax.Device, ...],
    n_points: int,
    measure: Any,
    data: DataSpec | None,
    trained: DataSpec | None,
    quick: bool,
) -> Compiled:
    """``(keys [N, 2], Values of [N], data, trained) -> measure's outputs with a leading [N]``
    (for gradients ``(Scaled [N, C, T+1], [N])``) on a ``("sweep", "batch")`` mesh over
    ``devices``: N is split over "sweep", each point's batch over "batch"; a data set's
    arrays (or None) are replicated, and each point draws its batch from them by its seed;
    trained weights (:func:`rnnviz.engine.prepare.trained_tree`, or None) are replicated, and each
    point's gain scales their recurrence. Called as ``sweep_executable(static, devices,
    n_points, measure=GRADIENTS, data=None, trained=None)``; a small sweep (``quick``)
    compiles for compile speed."""
    n_sweep, n_batch = mesh_shape(static, len(devices))
    mesh = Mesh(np.array(devices).reshape(n_sweep, n_batch), ("sweep", "batch"))
    shard = NamedSharding(mesh, PartitionSpec("sweep"))
    batch = NamedSharding(mesh, PartitionSpec("batch")) if n_batch > 1 else None
    point = jax.vmap(
        functools.partial(_point, static, batch, measure), in_axes=(0, 0, None, None), spmd_axis_name="sweep"
    )
    replicated = NamedSharding(mesh, PartitionSpec())
    # every output split over "sweep"
    fn = jax.jit(point, in_shardings=(shard, shard, replicated, replicated), out_shardings=shard)
    keys = jax.ShapeDtypeStruct((n_points, 2), jnp.uint32, sharding=shard)
    vals = Values(*(jax.ShapeDtypeStruct((n_points,), jnp.float32, sharding=shard) for _ in Values._fields))
    arrays = None if data is None else data.shapes()
    weights = None if trained is None else trained.shapes()
    start = time.perf_counter()
    compiled = compile_lowered(
        fn.lower(keys, vals, arrays, weights),
        f"the {static.cell} sweep",
        run_once_options(devices[0]) if quick else None,
    )
    return Compiled(compiled, time.perf_counter() - start, 0)


def _grid(cfg: RunConfig, values: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    names = list(values)
    return [dict(zip(names, combo)) for combo in itertools.product(*(values[n] for n in names))]


def evaluate_points(
    cfg: RunConfig,
    points: list[dict[str, Any]],
    measure: Any,
    data: Dataset | None = None,
    weights: Weights | None = None,
) -> Any:
    """``measure`` at value-only variations of ``cfg``, in one sharded, vmapped call:
    its outputs as host arrays with a leading ``[len(points)]`` axis (each point on a batch
    of ``data`` drawn by its seed, when given; at trained ``weights``, when given)."""
    n = len(points)
    key, arrays, trained = _executable_key(cfg, n, measure, data, weights)
    padded = key[2]
    cfgs = [cfg.replace(**p) for p in points] + [cfg] * (padded - n)
    key_of = {
        seed: np.asarray(jax.random.key_data(jax.random.key(seed)), np.uint32)
        for seed in {c.seed for c in cfgs}
    }
    keys = np.stack([key_of[c.seed] for c in cfgs])  # one key derivation per distinct seed, not per point
    vals = Values(*(np.asarray([getattr(c, f) for c in cfgs], np.float32) for f in Values._fields))
    exe = sweep_executable(*key)
    shard = exe.fn.input_shardings[0][0]
    replicated = NamedSharding(shard.mesh, PartitionSpec())
    arrays, trained = jax.tree.map(lambda a: _global(np.asarray(a), replicated), (arrays, trained))
    out = exe.fn(_global(keys, shard), Values(*(_global(v, shard) for v in vals)), arrays, trained)
    return jax.tree.map(lambda x: _to_host(x)[:n], out)


def _executable_key(
    cfg: RunConfig, n: int, measure: Any, data: Dataset | None, weights: Weights | None
) -> tuple[tuple, DataArrays | None, Any]:
    """``(sweep_executable's arguments, the data's arrays, the trained tree)`` for ``n`` points
    of ``cfg`` (N padded to a multiple of the mesh's "sweep" axis, which it must divide)."""
    devices = sweep_devices(cfg)
    n_sweep = mesh_shape(cfg, len(devices))[0]
    padded = -(-n // n_sweep) * n_sweep
    arrays = spec = None
    if data is not None:
        check_data(cfg, data)
        arrays = data_arrays(data)
        spec = data_spec(arrays)
    check_weights(cfg, weights)
    trained = None if weights is None else trained_tree(weights)
    trained_spec = None if trained is None else data_spec(trained)
    key = (static_config(cfg), devices, padded, measure, spec, trained_spec)
    return key, arrays, trained


def compile_points(
    cfg: RunConfig,
    n: int,
    measure: Any = GRADIENTS,
    data: Dataset | None = None,
    weights: Weights | None = None,
) -> bool:
    """Compile what :func:`evaluate_points` runs for ``n`` points of ``cfg``, without running
    it; whether it compiled (False: it already was). A server's idle time prepares the Phase
    diagram this way.

    Example:
        >>> from rnnviz import RunConfig
        >>> cfg = RunConfig(hidden_size=4, seq_len=6)
        >>> compile_points(cfg, 6), compile_points(cfg.replace(seed=2), 6)  # values: the same executable
        (True, False)
    """
    key = _executable_key(cfg, n, measure, data, weights)[0]
    if key in sweep_executable:
        return False
    sweep_executable(*key)
    return True


def run_points(
    cfg: RunConfig,
    points: list[dict[str, Any]],
    data: Dataset | None = None,
    weights: Weights | None = None,
) -> SweepResult:
    """Gradient norms at value-only variations of ``cfg`` in one sharded, vmapped call."""
    norms, loss = evaluate_points(cfg, points, GRADIENTS, data, weights)
    return SweepResult(log10(norms), loss)


def validate_over(cfg: RunConfig, over: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    """Coerce and range-check every swept value; a bad one is a :class:`ConfigError`."""
    out: dict[str, list[Any]] = {}
    total = 1
    for name, raw in over.items():
        if name not in FIELD_SPECS:
            raise ConfigError("over", name, "sweep over RunConfig fields: " + ", ".join(FIELD_SPECS))
        vals = [coerce(name, v) for v in raw]
        if not vals:
            raise ConfigError(name, list(raw), "at least one value to sweep")
        for v in vals:
            check_field(FIELD_SPECS[name], v)
        out[name] = vals
        total *= len(vals)
    if total > MAX_POINTS:
        raise ConfigError("over", f"{total} points", f"at most {MAX_POINTS} points in one sweep")
    return out


def sweep(
    cfg: RunConfig,
    over: Mapping[str, Sequence[Any]],
    *,
    data: Dataset | None = None,
    params: Weights | None = None,
) -> pd.DataFrame:
    """Gradient norms for every combination of ``over``'s values.

    Value fields (seed, gain, forget bias, scales) are evaluated in one vmapped, compiled
    call per shape, split over every device of the platform (and every process after
    ``jax.distributed.initialize``); shape fields (cell, sizes, …) loop outside, one
    compile each.

    Args:
        cfg: the base configuration; each point replaces the swept fields.
        over: ``{field: values}``, e.g. ``{"recurrent_gain": [0.5, 1.5], "seed": [0, 1]}``.
        data: each point analyses a batch of this data set drawn by its seed, with the
            data's task loss (:func:`rnnviz.analyze`); ``cfg`` must fit it.
        params: trained weights (``run.weights(step)``): every point runs them, the
            swept ``recurrent_gain`` scaling the trained recurrence (``gain / params.gain``:
            the run's own gain is the network as trained).

    Returns:
        A tidy frame, one row per point × t × component: one column per swept field, then
        ``t``, ``lag`` (T − t), ``component`` (``total`` or a carry component),
        ``grad_norm`` (float64, 0 below ~1e-308) and ``log10_grad_norm`` (exact, from the
        log-magnitude pass: finite far below float32's range, −inf only for a true zero).

    Raises:
        ConfigError: an unknown field, a bad value, a grid over the point limit, or a
            config that does not fit ``data``.

    Example:
        >>> from rnnviz import RunConfig, sweep
        >>> df = sweep(RunConfig(hidden_size=8, seq_len=10), {"recurrent_gain": [0.5, 1.5], "seed": [0, 1]})
        >>> len(df)  # 2 gains × 2 seeds × (T+1) steps
        44
        >>> low = df.groupby("recurrent_gain")["log10_grad_norm"].min()
        >>> bool(low[0.5] < low[1.5])  # the smaller gain vanishes further
        True
    """
    return pd.concat(
        [
            _tidy(base, shape_point, points, run_points(base, points, data, params))
            for base, shape_point, points in grid_points(cfg, over)
        ],
        ignore_index=True,
    )


def sweep_reusing(
    cfg: RunConfig,
    over: Mapping[str, Sequence[Any]],
    *,
    data: Dataset | None = None,
    params: Weights | None = None,
    budget_s: float = REUSE_BUDGET_S,
    to_come: int = 0,
) -> pd.DataFrame:
    """:func:`sweep`'s frame, computed point by point through the analysis's executable
    when that costs less than compiling the sweep's own.

    A vmapped sweep compiles an executable of its own for each shape and number of points
    (at small shapes far longer than the sweep then runs: :data:`REUSE_BUDGET_S`). When this
    process has compiled the analysis of ``cfg``'s shape (a page has shown it) and not that
    sweep, the points go through :func:`rnnviz.analyze` one after the other (one run each),
    as long as the faster of the first two says they all take less than ``budget_s``, or the
    points left, with what the shape's earlier grids spent one by one, take less than
    :data:`SWEEP_COMPILE_RATIO` times the analysis's compile (a lower bound on the sweep's;
    :func:`_compile_instead`); else (or once the sweep is compiled) the vmapped :func:`sweep`
    runs, at once where the earlier grids already tell. Either way the frame has the same
    rows and columns, and the same values up to float32 rounding: the
    analysis's log₁₀ norms are float32's where those are exact and the log-magnitude pass's
    elsewhere, the sweep's always the pass's.

    Args:
        cfg, over, data, params: as for :func:`sweep` (here over value fields only, the
            fields that never recompile: seed, gain, forget bias, scales).
        budget_s: seconds the points may take one by one whatever the analysis's compile took.
        to_come: points that later grids of the same sweep will ask for (the Phase diagram's
            parts still to come). Once the shape's first grid has run one by one (the first
            picture, soon), they count as points left: the second compiles the sweep when all
            of them one by one would cost more, rather than renting on until that is spent.

    Returns:
        :func:`sweep`'s tidy frame.

    Raises:
        ConfigError: as :func:`sweep`, or ``over`` names a field that changes the shape.

    Example:
        >>> from rnnviz import RunConfig, analyze
        >>> cfg = RunConfig(hidden_size=8, seq_len=10)
        >>> _ = analyze(cfg)  # its executable, compiled
        >>> df = sweep_reusing(cfg, {"recurrent_gain": [0.5, 1.5], "seed": [0, 1]})
        >>> len(df)  # as sweep's: 2 gains × 2 seeds × (T+1) steps
        44
    """
    (base, shape_point, points), *more = grid_points(cfg, over)
    if more or shape_point:
        raise ConfigError("over", sorted(over), "value fields only: " + ", ".join(RunConfig.VALUE_FIELDS))
    sweep_key = _executable_key(base, len(points), GRADIENTS, data, params)[0]
    if sweep_key not in sweep_executable and is_compiled(base, data=data):
        spent, seen = _one_by_one.get(sweep_key, (0.0, None))
        if seen is not None and _compile_instead(
            seen.point_s, len(points) + to_come, 0, budget_s, seen.compile_s, spent
        ):
            return sweep(cfg, over, data=data, params=params)  # known: compiling costs less now
        logs, losses, took = [], [], []
        for p in points:
            start = time.perf_counter()
            a = analyze(base.replace(**p), data=data, params=params, repeats=1, budget_s=0.0)  # one run
            logs.append(np.stack([a.log10_component_grad_norms[c] for c in base.carry_components]))
            losses.append(a.loss)
            took.append(time.perf_counter() - start)
            # judged on the faster of the first two points: the first alone also pays what a first
            # call after a pause pays (caches, a log pass compiled once), at times a few points' worth
            if len(took) == min(2, len(points)) and _compile_instead(
                min(took), len(points), len(took), budget_s, a.timing.fresh_compile_s, spent
            ):
                break  # compiling the vmapped sweep costs less
        else:
            point_s = min(took) if seen is None else min(seen.point_s, min(took))
            _one_by_one.note(sweep_key, spent + sum(took), _Seen(point_s, a.timing.fresh_compile_s))
            return _tidy(base, shape_point, points, SweepResult(np.stack(logs), np.asarray(losses)))
    return sweep(cfg, over, data=data, params=params)


class _Seen(NamedTuple):
    """A grid's points run one by one: the fastest point, and what compiling the analysis takes."""

    point_s: float
    compile_s: float


class _OneByOne:
    """Per sweep executable not compiled (its key): the seconds this process has spent running
    its grids' points one by one instead, and what it saw (:class:`_Seen`); the newest
    :data:`MAX_KEYS` keys, safe across threads (the app's sessions)."""

    MAX_KEYS = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spent: collections.OrderedDict[Any, tuple[float, _Seen]] = collections.OrderedDict()

    def get(self, key: Any, default: tuple[float, _Seen | None]) -> tuple[float, _Seen | None]:
        with self._lock:
            return self._spent.get(key, default)

    def note(self, key: Any, spent_s: float, seen: _Seen) -> None:
        with self._lock:
            self._spent[key] = (spent_s, seen)
            self._spent.move_to_end(key)
            while len(self._spent) > self.MAX_KEYS:
                self._spent.popitem(last=False)


#: What :func:`sweep_reusing` spent one by one, per sweep it did not compile.
_one_by_one = _OneByOne()


def _compile_instead(
    point_s: float, n: int, done: int, budget_s: float, analysis_compile_s: float, spent_s: float = 0.0
) -> bool:
    """Whether a grid of ``n`` points, ``done`` of them run one by one at ``point_s`` each,
    should compile its vmapped sweep for the rest: when the whole grid one by one takes more
    than ``budget_s`` and the points still to run, with the ``spent_s`` that earlier grids of
    its sweep already spent one by one, take longer than compiling the sweep would (at least
    :data:`SWEEP_COMPILE_RATIO` × the analysis's compile). So a shape whose grids keep coming
    (the Phase diagram's parts, a gain range changed again) goes one by one until that has
    cost as much as the compile, then compiles, as a skier rents until renting has cost the
    price of skis: never more than about twice the better choice made in hindsight. The
    points of this grid already run are spent either way: counting them too had a part of
    the big config's Phase diagram (5 gains of LSTM H=128 T=1000 B=32) run two points, then
    compile the sweep and run all five again, its first picture far later than the three
    points left one by one would have taken (docs/dev/benchmarks.md).
    ``analysis_compile_s`` is what compiling the analysis takes (``Timing.fresh_compile_s``),
    not what reading it from the persistent compilation cache took: a worker that had read
    it judged the sweep's compile at a fraction of its cost and compiled it."""
    return (
        point_s * n > budget_s and spent_s + point_s * (n - done) > SWEEP_COMPILE_RATIO * analysis_compile_s
    )


def grid_points(
    cfg: RunConfig, over: Mapping[str, Sequence[Any]]
) -> list[tuple[RunConfig, dict, list[dict]]]:
    """``over`` validated and split: one ``(base config, shape fields, value points)`` per
    shape (each a compile), the value points of each evaluated in one vmapped call."""
    over = validate_over(cfg, over)
    value_fields = {k: v for k, v in over.items() if k in RunConfig.VALUE_FIELDS}
    shape_fields = {k: v for k, v in over.items() if k not in RunConfig.VALUE_FIELDS}
    out = []
    for shape_point in _grid(cfg, shape_fields) or [{}]:
        base = cfg.replace(**shape_point)
        points = _grid(base, value_fields) or [{}]
        for p in points:
            base.replace(**p)  # validates each combination (e.g. forget_bias needs lstm)
        out.append((base, dict(shape_point), points))
    return out


def _tidy(cfg: RunConfig, shape_point: dict, points: list[dict], res: SweepResult) -> pd.DataFrame:
    n, comps, steps = res.log10_grad_norms.shape
    t = np.arange(steps)
    total = log10_combine(res.log10_grad_norms, 1)
    blocks = []
    for i, p in enumerate(points):
        for name, series in [("total", total[i])] + [
            (c, res.log10_grad_norms[i, j]) for j, c in enumerate(cfg.carry_components)
        ]:
            if name != "total" and comps == 1:
                continue
            with np.errstate(under="ignore", over="ignore"):
                linear = 10.0**series
            block = pd.DataFrame(
                {
                    "t": t,
                    "lag": cfg.seq_len - t,
                    "component": name,
                    "grad_norm": linear,
                    "log10_grad_norm": series,
                }
            )
            for k, v in reversed(list({**shape_point, **p}.items())):
                block.insert(0, k, v)
            blocks.append(block)
    return pd.concat(blocks, ignore_index=True)


def critical_gain(cfg: RunConfig, seeds: Sequence[int] = (0,)) -> float | None:
    """Gain where the Pascanu condition σ₁(g·W₀)·γ = 1 sits, for the simple cell (else None):
    ``1 / (γ · mean_seed σ₁(W₀))``, with W₀ the recurrent kernel at gain 1."""
    if cfg.cell != "simple":
        return None
    sig = []
    for seed in seeds:
        params, _, _ = prepared_inputs(cfg.replace(seed=int(seed), recurrent_gain=1.0))
        sig.append(float(np.linalg.svd(np.asarray(params["h"]["kernel"], np.float64), compute_uv=False)[0]))
    return 1.0 / (GAMMA[cfg.activation] * float(np.mean(sig)))

"""Strategy comparisons and scaling studies as tidy tables, and measurement records.

``measure`` is the one place that times a compiled function and turns it into a
schema-1 record (:mod:`rnnviz.base.measurements`); ``compare_strategies``, ``scaling`` and the
benchmark build on it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
import pandas as pd

from rnnviz.analysis import analyze, baseline_executable, executables, log_executable
from rnnviz.base.measurements import SCHEMA
from rnnviz.base.weights import Weights
from rnnviz.config import ConfigError, RunConfig, estimate_flops
from rnnviz.dataset import Dataset
from rnnviz.engine.cells import cell_spec, make_cell
from rnnviz.engine.compile import Compiled, compile_cache, compile_for, optimised_code
from rnnviz.engine.environment import run_stamp
from rnnviz.engine.gradients import strategy_grad
from rnnviz.engine.losses import DataSpec
from rnnviz.engine.prepare import data_on, prepared_batch, prepared_shapes, resolve_device, static_config
from rnnviz.engine.strategies.registry import unavailable
from rnnviz.engine.timing import RunTiming, time_interleaved, time_runs
from rnnviz.tables.strategies import strategy_names


def available_strategies(cfg: RunConfig | None = None) -> tuple[str, ...]:
    """Strategies this JAX supports and, given a config, that its cell can use."""
    return tuple(s for s in strategy_names() if not strategy_unavailable(s, cfg))


def strategy_unavailable(strategy: str, cfg: RunConfig | None = None) -> str | None:
    """Why ``strategy`` cannot run here (for ``cfg``'s cell), or None when it can."""
    here = unavailable(strategy)
    if here is not None or cfg is None:
        return here
    reason = unavailable(strategy, cell_spec(cfg.cell))
    return None if reason is None else f"the {cfg.cell} cell cannot: {reason}"


@compile_cache(maxsize=64)
def strategy_executable(static: RunConfig, device: jax.Device, data: DataSpec | None = None) -> Compiled:
    """Parameter gradient only, with ``static.strategy`` (cached per shape, data spec and device)."""
    return compile_for(
        functools.partial(strategy_grad, static, make_cell(static)), prepared_shapes(static, data), device
    )


def measured_executable(
    cfg: RunConfig, measure: str, strategy: str, device: jax.Device, data: DataSpec | None = None
) -> Compiled:
    """The executable :func:`measure` times for ``cfg`` (compiled once, then cached): plain
    ``jax.value_and_grad`` for ``strategy="plain_grad"``, else the analysis
    (``measure="analyze"``) or the parameter gradient alone with ``strategy``.

    Compiling it before a measurement keeps what compiling allocates (a GPU's autotuning
    buffers) out of the device memory read during the measurement.

    Args:
        cfg: the configuration.
        measure: ``"analyze"`` or ``"grad"`` (``"log_pass"`` compiles the analysis it reads).
        strategy: a registered strategy or ``"plain_grad"``.
        device: where it runs.
        data: the data set's shapes, when measuring on a data set.

    Returns:
        The cached :class:`~rnnviz.engine.compile.Compiled`.
    """
    if strategy == "plain_grad":
        return baseline_executable(static_config(cfg), device, data)
    static = static_config(cfg.replace(strategy=strategy))
    if measure in ("analyze", "log_pass"):
        return executables(static, device, data).analysis
    return strategy_executable(static, device, data)


class _Timed(NamedTuple):
    """One measurement made ready: its executable, its arguments and its record's fields."""

    exe: Compiled
    args: tuple
    fields: dict[str, Any]
    flops: float


def _prepared_measurement(
    cfg: RunConfig,
    measure: str,
    strategy: str | None,
    device: jax.Device | None,
    suite: str,
    data: Dataset | None,
    params: Weights | None,
) -> _Timed:
    device = device or resolve_device(cfg)
    strategy = strategy or cfg.strategy
    spec = data_on(cfg, device, data)[1]
    run_cfg = cfg if strategy == "plain_grad" else cfg.replace(strategy=strategy)
    with optimised_code():  # a recorded measurement times the fastest code, whatever the size
        exe = measured_executable(cfg, measure, strategy, device, spec)
        args = tuple(prepared_batch(run_cfg, device, data, params))
        if measure == "log_pass":
            params, _, xs, objective = args
            sg, _ = executables(static_config(run_cfg), device, spec).analysis.fn(*args)
            exe = log_executable(static_config(run_cfg), device, spec)
            args = (params, sg.carries, xs, objective)
    fields = {
        "schema": SCHEMA,
        "kind": "bench",
        "suite": suite,
        "label": label(cfg) if data is None else f"{label(cfg)} on {data.label}",
        "config": run_cfg.to_dict(),
        "strategy": strategy,
        "measure": measure,
        **run_stamp(device),
    }
    return _Timed(exe, args, fields, estimate_flops(run_cfg))


def _record(m: _Timed, t: RunTiming) -> dict[str, Any]:
    return {
        **m.fields,
        "compile_s": m.exe.compile_s,
        "run_s": t.median_s,
        "run_min_s": t.min_s,
        "run_max_s": t.max_s,
        "repeats": t.repeats,
        "peak_bytes": int(m.exe.peak_bytes),
        "flops": m.flops,
        "flops_per_s": m.flops / t.median_s if t.median_s > 0 else 0.0,
        "ratio_to_plain_grad": None,
    }


def measure(
    cfg: RunConfig,
    *,
    measure: str = "analyze",
    strategy: str | None = None,
    repeats: int = 10,
    device: jax.Device | None = None,
    suite: str = "adhoc",
    budget_s: float | None = None,
    data: Dataset | None = None,
    params: Weights | None = None,
) -> dict[str, Any]:
    """Time one compiled function for ``cfg`` and return a schema-1 record.

    measure="analyze": the full analysis (per-step carry gradients + param gradients +
    trajectory) with ``cfg.strategy``; "log_pass": the log-magnitude reverse pass alone
    (:mod:`rnnviz.engine.logpass`, over the trajectory the analysis computed), which ``analyze``
    adds when float32 cannot hold every norm; "grad": the parameter gradient alone, with
    ``strategy`` (``"plain_grad"`` is plain ``jax.value_and_grad``, the yardstick).
    ``data``: a batch of this data set and its task loss (:func:`rnnviz.analyze`);
    ``params``: trained weights (the same executables: run times do not depend on values).
    """
    m = _prepared_measurement(cfg, measure, strategy, device, suite, data, params)
    _, t = time_runs(m.exe.fn, m.args, repeats, budget_s=budget_s)
    return _record(m, t)


def measure_interleaved(
    cfg: RunConfig,
    wanted: Sequence[tuple[str, str]],
    *,
    repeats: int = 10,
    device: jax.Device | None = None,
    suite: str = "adhoc",
    budget_s: float | None = None,
) -> list[dict[str, Any] | ConfigError]:
    """:func:`measure` for several ``(measure, strategy)`` pairs of one config, their timed runs
    taken in turn (one run of each, then the next round), so that a ratio of two of them
    compares runs made under the same load: on a shared 2-core machine the speed drifts over
    minutes (docs/dev/benchmarks.md), which timing each function's runs in one block turned
    into the ratios (:func:`~rnnviz.engine.timing.time_interleaved`). Each is compiled and run
    once untimed first; with ``budget_s``, a slow one gets fewer rounds (at least 3).

    Returns:
        One record per pair, in order, or the :class:`~rnnviz.config.ConfigError` that
        refused it (a strategy this cell cannot run, a config over budget).
    """
    ready: list[_Timed | ConfigError] = []
    for measure_, strategy_ in wanted:
        try:
            ready.append(_prepared_measurement(cfg, measure_, strategy_, device, suite, None, None))
        except ConfigError as err:
            ready.append(err)
    runs = [m for m in ready if isinstance(m, _Timed)]
    timings = time_interleaved([(m.exe.fn, m.args) for m in runs], repeats, budget_s)
    timed = iter(_record(m, t) for m, t in zip(runs, timings))
    return [next(timed) if isinstance(m, _Timed) else m for m in ready]


def label(cfg: RunConfig) -> str:
    """A row's label of the shape it ran: ``"lstm B=4 T=100 I=8 H=32 float32"`` (or ``unbatched``;
    a reference block's ``"lstm block ×2 B=4 …"``)."""
    b = "unbatched" if cfg.batch_size is None else f"B={cfg.batch_size}"
    model = cfg.cell if cfg.block == "cell" else f"{cfg.cell} block ×{cfg.layers}"
    return f"{model} {b} T={cfg.seq_len} I={cfg.input_size} H={cfg.hidden_size} {cfg.dtype}"


def _grad_difference(ref: dict, other: dict) -> tuple[float, float]:
    """(max |Δ|, ‖Δ‖/‖ref‖) between two params trees, in float64."""
    a = np.concatenate([np.ravel(x).astype(np.float64) for x in jax.tree.leaves(ref)])
    b = np.concatenate([np.ravel(x).astype(np.float64) for x in jax.tree.leaves(other)])
    diff = a - b
    return float(np.max(np.abs(diff))), float(np.linalg.norm(diff) / max(np.linalg.norm(a), 1e-300))


def _timed_analysis(
    cfg: RunConfig,
    repeats: int,
    precision: float | None,
    data: Dataset | None,
    params: Weights | None,
    device: jax.Device | None = None,
):
    """The analysis as the cost tables time it: without the log-magnitude pass (the same for
    every strategy and device, and nothing they show)."""
    return analyze(
        cfg, repeats=repeats, device=device, data=data, params=params, log_pass=False, precision=precision
    )


def accumulator_grads(
    cfg: RunConfig,
    data: Dataset | None = None,
    params: Weights | None = None,
    device: jax.Device | None = None,
) -> Any:
    """∂L/∂W under the ``accumulate`` strategy (one untimed run): what the other strategies'
    gradients are compared against."""
    a = analyze(
        cfg.replace(strategy="accumulate"), repeats=1, device=device, data=data, params=params, log_pass=False
    )
    return a.param_grads


def compare_strategies(
    cfg: RunConfig,
    *,
    repeats: int = 10,
    strategies: Sequence[str] | None = None,
    data: Dataset | None = None,
    params: Weights | None = None,
    precision: float | None = None,
    reference: Any = None,
) -> pd.DataFrame:
    """The full analysis of ``cfg`` under each strategy: what it costs, and that it agrees.

    Only the analysis itself is run and timed: the log-magnitude pass (the same for every
    strategy, and nothing this table shows) is left out.

    Args:
        cfg: the configuration.
        repeats: timed runs per strategy (with ``precision``: at most).
        strategies: which (default: every strategy this cell and this JAX can run).
        data: analyse a batch of this data set with its task loss (:func:`rnnviz.analyze`).
        params: trained weights (``run.weights(step)``), as :func:`rnnviz.analyze`.
        precision: stop timing a strategy once the 90 % interval of its mean run is within
            ± this fraction of it (at least 3 runs; :func:`rnnviz.analyze`).
        reference: the accumulator's ∂L/∂W (a params tree, :func:`accumulator_grads`) to
            compare against; default: computed here (its own row, or one more run).

    Returns:
        One row per strategy: ``strategy, compile_s, run_s, run_min_s, run_max_s,
        run_halfwidth_s, repeats, peak_bytes, flops, max_abs_diff, rel_diff, loss, device,
        quick_compiled`` (differences of ∂L/∂W against the accumulator; ``run_halfwidth_s``
        the 90 % interval's half-width of the mean run; ``quick_compiled``: a small shape's
        code, compiled for compile speed, :func:`~rnnviz.engine.compile.quick_compile`).
        Strategies whose config is over budget (per-step tangents at large
        T·P) are left out.

    Example:
        >>> from rnnviz import RunConfig, compare_strategies
        >>> df = compare_strategies(RunConfig(cell="gru", hidden_size=8, seq_len=10), repeats=1,
        ...                         strategies=["accumulate", "per_step", "fused"])
        >>> list(df["strategy"]), bool((df["rel_diff"] < 1e-5).all())
        (['accumulate', 'per_step', 'fused'], True)
    """
    runs = {}
    for s in strategies or available_strategies(cfg):
        try:
            runs[s] = _timed_analysis(cfg.replace(strategy=s), repeats, precision, data, params)
        except ConfigError:  # e.g. per-step tangents over the memory budget: left out
            continue
    if reference is None:
        reference = (
            runs["accumulate"].param_grads if "accumulate" in runs else accumulator_grads(cfg, data, params)
        )
    rows = []
    for s, a in runs.items():
        max_abs, rel = _grad_difference(reference, a.param_grads)
        t = a.timing
        rows.append(
            dict(
                strategy=s,
                compile_s=t.compile_s,
                run_s=t.run_s,
                run_min_s=t.run_min_s,
                run_max_s=t.run_max_s,
                run_halfwidth_s=t.run_halfwidth_s,
                repeats=t.repeats,
                peak_bytes=t.peak_bytes,
                flops=t.flops,
                max_abs_diff=max_abs,
                rel_diff=rel,
                loss=a.loss,
                device=t.device,
                quick_compiled=t.quick_compiled,
            )
        )
    return pd.DataFrame(rows)


def scaling(
    cfg: RunConfig,
    seq_lens: Iterable[int],
    *,
    strategies: Sequence[str] | None = None,
    repeats: int = 5,
    measure_kind: str = "grad",
) -> pd.DataFrame:
    """Time and memory per strategy over sequence lengths (one compile per length and
    strategy, cached).

    Args:
        cfg: the configuration; its ``seq_len`` is replaced by each of ``seq_lens``.
        seq_lens: the lengths T.
        strategies: which (default: every strategy this cell and this JAX can run).
        data: analyse a batch of this data set with its task loss (:func:`rnnviz.analyze`).
        params: trained weights (``run.weights(step)``), as :func:`rnnviz.analyze`.
        repeats: timed runs per measurement.
        measure_kind: ``grad`` (∂L/∂W alone) or ``analyze`` (the full analysis).

    Returns:
        Rows ``strategy, seq_len, compile_s, run_s, peak_bytes``.
    """
    rows = []
    for t_len in seq_lens:
        for s in strategies or available_strategies(cfg):
            rec = measure(
                cfg.replace(seq_len=int(t_len), strategy=s),
                measure=measure_kind,
                repeats=repeats,
                suite="scaling",
            )
            rows.append(
                dict(
                    strategy=s,
                    seq_len=int(t_len),
                    compile_s=rec["compile_s"],
                    run_s=rec["run_s"],
                    peak_bytes=rec["peak_bytes"],
                )
            )
    return pd.DataFrame(rows)


def present_devices() -> list[jax.Device]:
    """The first device of each platform JAX sees (CPU always; GPU when present)."""
    out = []
    for platform in ("cpu", "gpu"):
        try:
            out.extend(jax.devices(platform))
        except RuntimeError:
            continue
    return out


def run_on_devices(
    cfg: RunConfig,
    *,
    devices: Sequence[jax.Device] | None = None,
    strategies: Sequence[str] | None = None,
    repeats: int = 5,
    data: Dataset | None = None,
    params: Weights | None = None,
    precision: float | None = None,
    reference: Any = None,
) -> pd.DataFrame:
    """The full analysis of ``cfg`` on every device and strategy: CPU against GPU.

    As in :func:`compare_strategies`, the analysis alone is run and timed (no log-magnitude pass).

    Args:
        cfg: the configuration.
        devices: JAX devices (default: every one JAX sees).
        strategies: which (default: ``cfg.strategy``).
        repeats: timed runs per measurement (with ``precision``: at most).
        data: analyse a batch of this data set with its task loss (:func:`rnnviz.analyze`).
        params: trained weights (``run.weights(step)``), as :func:`rnnviz.analyze`.
        precision: as :func:`compare_strategies`.
        reference: ∂L/∂W to compare against (:func:`accumulator_grads`); default: the first row's.

    Returns:
        Rows ``device_kind, device_name, device_id, strategy, compile_s, run_s,
        run_halfwidth_s, repeats, peak_bytes, loss, max_grad_diff, quick_compiled``
        (∂L/∂W's largest difference from ``reference``; whether the CPU's code was compiled
        for compile speed, :func:`~rnnviz.engine.compile.quick_compile`). Beside another
        kind of device, every row is of optimised code: CPU against GPU compares each one's
        fastest code.
    """
    rows, ref = [], reference
    devices = list(devices or present_devices())
    optimised = len({d.platform for d in devices}) > 1
    for device in devices:
        for s in strategies or (cfg.strategy,):
            with optimised_code() if optimised else contextlib.nullcontext():
                a = _timed_analysis(cfg.replace(strategy=s), repeats, precision, data, params, device)
            ref = ref or a.param_grads
            rows.append(
                dict(
                    device_kind=device.platform,
                    device_name=str(device.device_kind),
                    device_id=device.id,
                    strategy=s,
                    compile_s=a.timing.compile_s,
                    run_s=a.timing.run_s,
                    run_halfwidth_s=a.timing.run_halfwidth_s,
                    repeats=a.timing.repeats,
                    peak_bytes=a.timing.peak_bytes,
                    loss=a.loss,
                    max_grad_diff=_grad_difference(ref, a.param_grads)[0],
                    quick_compiled=a.timing.quick_compiled,
                )
            )
    return pd.DataFrame(rows)

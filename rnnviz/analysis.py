"""``analyze(cfg) -> Analysis``: the single entry point the CLI and the app call.

Two compiled functions per shape (cached by :meth:`RunConfig.shape_key` and device):

* *prepare* (:mod:`rnnviz.engine.prepare`) ``(key, values) -> (params, carry0, xs, objective)``:
  params, the initial carry and the inputs (or a batch of a data set and its loss terms)
  from the seed;
* *analysis* ``(params, carry0, xs, objective) -> (StepGrads, Summary)``: one forward and
  one reverse pass (:func:`rnnviz.engine.gradients.analysis_outputs`).

Seed, gain, forget bias and scales are arguments of *prepare*, so changing them
reuses both executables. With a data set the executables' cache key adds the data's
shapes (:class:`~rnnviz.engine.losses.DataSpec`), never its values.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.analysis import Analysis
from rnnviz.base.timing import Timing
from rnnviz.base.weights import Weights
from rnnviz.config import RunConfig, estimate_flops, require_cell
from rnnviz.dataset import Dataset
from rnnviz.engine.cells import PARAM_GROUPS, carry_to_dict, make_cell
from rnnviz.engine.compile import Compiled, compile_cache, compile_for, quick_compile
from rnnviz.engine.gradients import analysis_outputs, plain_grad, time_major
from rnnviz.engine.logpass import log_carry_gradients, reduce_log_norms
from rnnviz.engine.losses import DataArrays, DataSpec
from rnnviz.engine.norms import log10, log10_combine, robust_norm
from rnnviz.engine.prepare import (
    check_weights,
    data_on,
    prepare_executables,
    prepared_on,
    prepared_shapes,
    resolve_device,
    static_config,
)
from rnnviz.engine.timing import time_runs, time_until_precise, time_within


class Executables(NamedTuple):
    """The compiled functions of one shape: *prepare* (params; inputs, or a data batch)
    and the analysis ``(params, carry0, xs, objective) -> (StepGrads, Summary)``."""

    params: Compiled
    inputs: Compiled
    analysis: Compiled
    seq_len: int
    data: DataSpec | None = None

    def prepare(self, key_data, values, data: DataArrays | None = None):
        """``(params, carry0, xs, objective)`` from the two prepare executables (``data``:
        the device arrays of a data set, for executables compiled for its spec)."""
        if self.data is None:
            xs = self.inputs.fn(key_data, values)[..., : self.seq_len, :]
            return (*self.params.fn(key_data, values), xs, None)
        return (*self.params.fn(key_data, values), *self.inputs.fn(key_data, data))


def _objective_shapes(inputs: Compiled, data: DataSpec | None):
    """The objective's shapes from a data batch's compiled prepare (None without data)."""
    return None if data is None else inputs.fn.out_info[1]


def _codegen_key(
    static: RunConfig, device: jax.Device, data: DataSpec | None = None
) -> tuple[RunConfig, jax.Device, DataSpec | None, bool]:
    """An executable's cache key and build arguments: the shape, the device, the data spec,
    and whether it compiles for compile speed (:func:`~rnnviz.engine.compile.quick_compile`:
    a small shape on the CPU, outside ``optimised_code``)."""
    return static, device, data, quick_compile(estimate_flops(static), device)


@compile_cache(maxsize=64, key=_codegen_key)
def executables(static: RunConfig, device: jax.Device, data: DataSpec | None, quick: bool) -> Executables:
    """Compile the prepare and analysis functions for one shape (and data spec) on one
    device (cached; called as ``executables(static, device, data=None)``, ``quick`` decided
    by :func:`~rnnviz.engine.compile.quick_compile`)."""
    params, inputs = prepare_executables(static, device, data)
    # The compiled prepares already know their output shapes: no second trace of cell.init.
    xs = jax.ShapeDtypeStruct(static.input_shape, jnp.dtype(static.dtype))
    args = (*params.fn.out_info, xs, _objective_shapes(inputs, data))
    run = compile_for(
        functools.partial(analysis_outputs, static, make_cell(static)), args, device, run_once=quick
    )
    return Executables(params, inputs, run, static.seq_len, data)


@compile_cache(maxsize=64, key=_codegen_key)
def baseline_executable(
    static: RunConfig, device: jax.Device, data: DataSpec | None, quick: bool
) -> Compiled:
    """Plain ``jax.value_and_grad`` of the same loss w.r.t. params (the benchmark's
    yardstick), compiled as the analysis of the same shape is (``quick`` alike)."""
    return compile_for(
        functools.partial(plain_grad, static, make_cell(static)),
        prepared_shapes(static, data),
        device,
        run_once=quick,
    )


def log_outputs(cfg: RunConfig, cell, params, carries, xs, objective=None):
    """The log-magnitude pass over a trajectory the analysis already computed:
    :class:`rnnviz.engine.norms.Scaled` ``(per component [C, T+1], per example [T+1, B], total [T+1])``."""
    return reduce_log_norms(
        log_carry_gradients(cfg, cell, params, carries, time_major(cfg, xs), objective=objective)
    )


@compile_cache(maxsize=64, key=_codegen_key)
def log_executable(static: RunConfig, device: jax.Device, data: DataSpec | None, quick: bool) -> Compiled:
    """The log-magnitude pass for one shape (compiled only once a run needs it, as the
    analysis of the same shape is)."""
    exe = executables(static, device, data)
    params_info, _ = exe.params.fn.out_info
    carries_info = exe.analysis.fn.out_info[0].carries
    xs = jax.ShapeDtypeStruct(static.input_shape, jnp.dtype(static.dtype))
    args = (params_info, carries_info, xs, _objective_shapes(exe.inputs, data))
    return compile_for(
        functools.partial(log_outputs, static, make_cell(static)), args, device, run_once=quick
    )


#: float32 norms inside [tiny·2^MARGIN, max·2^−MARGIN] are exact to float32 precision; outside
#: it (or zero before T, or NaN/Inf) the log pass decides. A vanishing gradient is smooth
#: over units, so at 2^30 above ``tiny`` its elements are far from the flush-to-zero range.
TRUSTED_MARGIN_BITS = 30


def needs_log_pass(dtype: str, component_norms: np.ndarray, example_norms: np.ndarray) -> bool:
    """Whether float32's norms ``[C, T+1]`` and ``[T+1, B]`` might not be the true
    magnitudes: NaN/Inf, a zero before t = T (at T the direct loss term is exact, so a 0
    there is a true zero) or a value near the edge of ``dtype``'s range. float16's range is
    too narrow to trust at all."""
    fin = jnp.finfo(jnp.dtype(dtype))
    lo, hi = float(fin.tiny) * 2.0**TRUSTED_MARGIN_BITS, float(fin.max) * 2.0**-TRUSTED_MARGIN_BITS
    if lo >= hi:
        return True
    for v in (component_norms, example_norms.T):
        v = np.asarray(v, np.float64)
        if not np.isfinite(v).all() or (v[..., :-1] == 0).any():
            return True
        nonzero = v[v > 0]
        if nonzero.size and (nonzero.min() < lo or nonzero.max() > hi):
            return True
    return False


def _log10_of(norms: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log10(np.asarray(norms, np.float64))


def is_compiled(cfg: RunConfig, device: jax.Device | None = None, data: Dataset | None = None) -> bool:
    """Whether ``analyze(cfg, data=data)`` would reuse executables (no compile)."""
    device = device or resolve_device(cfg)
    return (static_config(cfg), device, data_on(cfg, device, data)[1]) in executables


def compile_analysis(
    cfg: RunConfig, device: jax.Device | None = None, data: Dataset | None = None, log_pass: bool = False
) -> bool:
    """Compile what ``analyze(cfg, data=data)`` runs, without running it: the analysis, and
    with ``log_pass`` the log-magnitude pass too (it runs when float32's norms are not exact,
    e.g. a gradient vanishing over a long T); whether anything was compiled (False: all of it
    already was). A server's idle time prepares the next tabs this way.

    Raises:
        ConfigError: as :func:`analyze`, for a device that is not present or data ``cfg`` does not fit.

    Example:
        >>> from rnnviz import RunConfig
        >>> cfg = RunConfig(hidden_size=5, seq_len=9)
        >>> compile_analysis(cfg), is_compiled(cfg), compile_analysis(cfg.replace(seed=3))
        (True, True, False)
        >>> compile_analysis(cfg, log_pass=True), compile_analysis(cfg, log_pass=True)
        (True, False)
    """
    device = device or resolve_device(cfg)
    key = (static_config(cfg), device, data_on(cfg, device, data)[1])
    wanted = [executables, log_executable] if log_pass else [executables]
    missing = [compiled for compiled in wanted if key not in compiled]
    for compiled in missing:
        compiled(*key)
    return bool(missing)


def _nonfinite_steps(series: np.ndarray) -> np.ndarray:
    """Indices t where ``series[t]`` is NaN/Inf."""
    return np.flatnonzero(~np.isfinite(series))


def _first_or_none(idx: np.ndarray) -> int | None:
    return int(idx[0]) if idx.size else None


def _last_or_none(idx: np.ndarray) -> int | None:
    return int(idx[-1]) if idx.size else None


def analyze(
    cfg: RunConfig,
    *,
    data: Dataset | None = None,
    params: Weights | None = None,
    repeats: int = 10,
    device: jax.Device | None = None,
    log_pass: bool | None = None,
    budget_s: float | None = None,
    precision: float | None = None,
) -> Analysis:
    r"""Per-step gradient norms of one configuration, from one compiled reverse pass.

    With zero perturbations ε_t added to the carry handed on at every step,
    ∂L/∂ε_t = ∂L/∂carry_t, so a single ``jax.grad`` gives every step's gradient at once:

    .. math::

        \frac{\partial L}{\partial h_t} = \frac{\partial L}{\partial \varepsilon_t}\Big|_{\varepsilon=0},
        \qquad t = 0, \dots, T

    The executable is compiled once per shape (:meth:`RunConfig.shape_key`); the seed,
    gain, forget bias and scales are arguments, so changing them never recompiles.

    Args:
        cfg: what to analyse.
        data: a data set (:func:`rnnviz.load_dataset`): the inputs are ``cfg.batch_size``
            of its training sequences drawn by the seed (changing the seed draws others and
            never recompiles), and L is its task loss through a readout drawn by the seed
            (:mod:`rnnviz.engine.losses`). ``cfg`` must have its length, features and loss
            placement (:func:`rnnviz.fit_to_data`).
        params: trained weights (:class:`rnnviz.base.weights.Weights`, e.g. ``run.weights()``)
            instead of the seed's initialisation; the recurrence is scaled by
            ``cfg.recurrent_gain / params.gain`` (1 with the run's own config), and on data
            of the run's kind the loss reads the trained readout. The same executables run
            (the weights are arguments).
        repeats: timed runs of the compiled pass (the median is reported), after one warm-up.
        device: a concrete JAX device, overriding ``cfg.device`` (e.g. the second GPU).
        log_pass: run the log-magnitude pass always (True), never (False: ``log10_*`` are
            then float32's, −inf where it underflowed), or when float32's norms might not
            be exact (None): it costs a pass of its own, shorter than the analysis's run
            (docs/dev/benchmarks.md).
        budget_s: bound the timing by time instead: one run, then more while the runs so
            far took less than ``budget_s``, at most ``repeats`` (the dashboard's:
            :data:`rnnviz.serve.jobs.TIMING_BUDGET_S`).
        precision: bound the timing by what it says instead: after the warm-up, time runs
            until the 90 % confidence interval of the mean run is within ± ``precision``
            of it (at least 3, at most ``repeats``; :func:`~rnnviz.engine.timing.time_until_precise`).
            The interval is ``timing.run_halfwidth_s``.

    Returns:
        An :class:`Analysis`; its arrays are the last timed run's.

    Raises:
        ConfigError: ``device`` or ``cfg.device`` names a device that is not present, or
            ``cfg`` does not fit ``data``.

    Example:
        >>> from rnnviz import RunConfig, analyze, fit_to_data, load_dataset
        >>> a = analyze(RunConfig(hidden_size=8, seq_len=20, recurrent_gain=0.5), repeats=1)
        >>> a.grad_norms.shape, a.carries["h"].shape  # [T+1], [T+1, B, H]
        ((21,), (21, 4, 8))
        >>> bool(a.log10_grad_norms[0] < a.log10_grad_norms[-1] - 5)  # gain 0.5: it vanishes
        True
        >>> digits = load_dataset("digits", order="rows")  # 8 rows of 8 pixels, 10 classes
        >>> a = analyze(fit_to_data(RunConfig(cell="gru", hidden_size=8), digits), data=digits, repeats=1)
        >>> a.inputs.shape, a.data  # [B, T, I]: four digits, drawn by the seed
        ((4, 8, 8), 'digits rows')
        >>> bool(0.5 < a.loss < 5.0)  # cross-entropy of 10 classes, near ln 10 untrained
        True
    """
    require_cell(cfg)
    device = device or resolve_device(cfg)
    static = static_config(cfg)
    weights = params
    check_weights(cfg, weights)  # before compiling: weights that do not fit are one message
    arrays, spec = data_on(cfg, device, data)
    hit = executables.cache_info().currsize
    exe = executables(static, device, spec)
    cache_hit = executables.cache_info().currsize == hit
    params, carry0, xs, objective = prepared_on(cfg, device, arrays, spec, weights)
    (sg, summary), run = _timed(
        exe.analysis.fn, (params, carry0, xs, objective), repeats, budget_s, precision
    )
    log_args = (params, sg.carries, xs, objective)  # on device: what the log pass reads, if it runs
    sg, summary, params, carry0, xs = jax.device_get((sg, summary, params, carry0, xs))
    if log_pass is None:
        log_pass = needs_log_pass(cfg.dtype, summary.component_grad_norms, summary.example_grad_norms)
    if log_pass:
        logs = _log_pass(log_executable(static, device, spec), log_args, repeats, budget_s)
    else:
        logs = _float32_logs(summary)
    timing = Timing(
        compile_s=exe.analysis.compile_s,
        run_s=run.median_s,
        run_min_s=run.min_s,
        run_max_s=run.max_s,
        repeats=run.repeats,
        peak_bytes=exe.analysis.peak_bytes,
        flops=estimate_flops(cfg),
        device=f"{device.platform}:{device.id} {device.device_kind}",
        backend=device.platform,
        cache_hit=cache_hit,
        log_pass_s=logs.run_s,
        log_pass_compile_s=logs.compile_s,
        run_halfwidth_s=run.halfwidth_s,
        quick_compiled=_codegen_key(static, device, spec)[3],
        fresh_compile_s=exe.analysis.fresh_compile_s or exe.analysis.compile_s,
    )
    return _assemble(
        cfg,
        sg,
        summary,
        logs,
        params=params,
        xs=xs,
        timing=timing,
        objective=objective,
        data=data,
        weights=weights,
    )


def _timed(fn, args: tuple, repeats: int, budget_s: float | None, precision: float | None = None):
    """``(outputs, RunTiming)``: ``repeats`` timed runs, as many as ``budget_s`` allows, or
    as many as ``precision`` needs."""
    if budget_s is not None:
        return time_within(fn, args, budget_s, repeats)
    if precision is not None:
        return time_until_precise(fn, args, repeats, precision)
    return time_runs(fn, args, repeats)


class _Logs(NamedTuple):
    """The exact log₁₀ norms (per component ``[C, T+1]``, per example ``[B, T+1]``, total
    ``[T+1]``) and what computing them cost (zero when float32's own norms were exact)."""

    component: np.ndarray
    example: np.ndarray
    total: np.ndarray
    source: str
    run_s: float = 0.0
    compile_s: float = 0.0


def _log_pass(log_exe: Compiled, log_args: tuple, repeats: int, budget_s: float | None) -> _Logs:
    """The log-magnitude pass (:mod:`rnnviz.engine.logpass`), timed on half the runs (half
    the budget): exact where float32's norms underflowed."""
    budget = None if budget_s is None else budget_s / 2
    scaled, log_run = _timed(log_exe.fn, log_args, max(1, repeats // 2), budget)
    return _pass_logs(scaled, log_run.median_s, log_exe.compile_s)


def _pass_logs(scaled, run_s: float = 0.0, compile_s: float = 0.0) -> _Logs:
    """The exact log₁₀ norms from the log-magnitude pass's ``(component, example, total)``."""
    comp, example, total = scaled
    return _Logs(log10(comp), log10(example), log10(total), "log pass", run_s, compile_s)


def _float32_logs(summary) -> _Logs:
    """log₁₀ of float32's own norms (−inf where they underflowed): no pass needed."""
    log_comp = _log10_of(summary.component_grad_norms)
    return _Logs(log_comp, _log10_of(summary.example_grad_norms), log10_combine(log_comp, 0), "float32")


def _assemble(
    cfg: RunConfig,
    sg,
    summary,
    logs: _Logs,
    *,
    params,
    xs,
    timing: Timing,
    objective,
    data: Dataset | None,
    weights: Weights | None,
) -> Analysis:
    """The host-side :class:`Analysis` of one run: per-component dicts, robust totals, the
    carries by name, and where the trajectory or the gradient stopped being finite."""
    comps = cfg.carry_components
    grad_norms = robust_norm(summary.component_grad_norms, 0).astype(np.float32)
    carry_norms = robust_norm(summary.component_carry_norms, 0).astype(np.float32)
    carries = carry_to_dict(cfg, sg.carries)
    learned = sg.learned_carry_grads
    return Analysis(
        config=cfg,
        loss=float(sg.loss),
        grad_norms=grad_norms,
        component_grad_norms={c: summary.component_grad_norms[i] for i, c in enumerate(comps)},
        example_grad_norms=summary.example_grad_norms,
        input_grad_norms=summary.input_grad_norms,
        carries=carries,
        carry_norms=carry_norms,
        component_carry_norms={c: summary.component_carry_norms[i] for i, c in enumerate(comps)},
        params=params,
        param_grads=sg.param_grads,
        learned_carry_grad=None if learned is None else carry_to_dict(cfg, learned),
        param_grad_by_step=sg.by_step,
        param_groups=PARAM_GROUPS,
        inputs=xs,
        final_carry={k: v[-1] for k, v in carries.items()},
        log10_grad_norms=logs.total,
        log10_component_grad_norms={c: logs.component[i] for i, c in enumerate(comps)},
        log10_example_grad_norms=logs.example,
        log10_source=logs.source,
        nonfinite_carry_step=_first_or_none(_nonfinite_steps(carry_norms)),
        nonfinite_grad_step=_last_or_none(_nonfinite_steps(grad_norms)),
        timing=timing,
        data=None if data is None else data.label,
        weights=None if weights is None else weights.label,
        readout=_readout_kind(objective, weights),
    )


def analysis_of_outputs(
    cfg: RunConfig, sg, summary, log_scaled, *, params, xs, timing: Timing, objective=None
) -> Analysis:
    """The :class:`Analysis` of outputs computed elsewhere (a vmapped sweep's point), with
    :func:`analyze`'s own choice of magnitudes: float32's norms where they are exact
    (:func:`needs_log_pass`), else the log-magnitude pass ``log_scaled`` (:func:`log_outputs`).

    Args:
        cfg: the point's configuration.
        sg, summary: :func:`~rnnviz.engine.gradients.analysis_outputs` of that point (host arrays).
        log_scaled: :func:`log_outputs` of that point (host arrays).
        params, xs: the point's params and inputs ``[(B,) T, I]``.
        timing: what the point cost (a sweep's share).
        objective: the data set's loss terms, or None.

    Returns:
        The same record :func:`analyze` would give at ``cfg``.
    """
    if needs_log_pass(cfg.dtype, summary.component_grad_norms, summary.example_grad_norms):
        logs = _pass_logs(log_scaled)
    else:
        logs = _float32_logs(summary)
    return _assemble(
        cfg,
        sg,
        summary,
        logs,
        params=params,
        xs=xs,
        timing=timing,
        objective=objective,
        data=None,
        weights=None,
    )


def _readout_kind(objective, weights: Weights | None) -> str | None:
    if objective is None or objective.w is None:
        return None
    trained = weights is not None and weights.readout is not None
    fits = trained and tuple(weights.readout["kernel"].shape) == tuple(objective.w.shape)
    return "trained" if fits else "seed"


__all__ = [
    "Analysis",
    "Executables",
    "analyze",
    "baseline_executable",
    "compile_analysis",
    "executables",
    "is_compiled",
    "log_executable",
    "needs_log_pass",
]

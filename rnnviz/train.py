"""Training on a long-range task while watching ‖∂L/∂carry_t‖: does the design *learn*?

The model is the configured cell exactly as :func:`rnnviz.analysis.prepare_params` builds
it for :func:`rnnviz.analyze` (gain, forget bias, carry initialisation incl. a learned
carry, dtype) plus an ``nn.Dense`` readout on the task's last outputs (:mod:`rnnviz.tasks`).

Compiled, chunked: one compiled call runs ``log_every`` optimisation steps inside a
``lax.scan`` (state buffers donated) and, before them, records the profile
‖∂L/∂carry_t‖ ``[T+1]`` of the task loss on a fixed probe batch — the zero-perturbation
definition of :mod:`rnnviz.gradients`, with exact log magnitudes from
:mod:`rnnviz.logpass` — and ‖∂L/∂W_h‖. Between calls the caller sees progress and may
stop. The learning rate, clip threshold, seed, gain, forget bias and scales are
arguments, so changing them never recompiles; several runs (seeds × values) are one
``jax.vmap``-ed call.

Each step draws a fresh batch from ``fold_in(key(seed), step)``, so a config gives
bit-identical curves in any process. Global-norm clipping (Pascanu et al. 2013):
g ← g · min(1, c/‖g‖). A non-finite loss or gradient freezes the run at that step (the
state keeps its last finite values) and is reported, never raised.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from rnnviz.analysis import Values, prepare_params, resolve_device, seed_key, static_config
from rnnviz.cells import cell_spec, make_cell, outputs
from rnnviz.config import (
    MEMORY_BUDGET_BYTES,
    REFERENCE_FLOPS_PER_S,
    BudgetError,
    ConfigError,
    RunConfig,
    estimate_flops,
    estimate_memory_bytes,
)
from rnnviz.gradients import full_carry0
from rnnviz.logpass import log_carry_gradients, reduce_log_norms
from rnnviz.norms import Scaled, log10, robust_norm
from rnnviz.rollout import rollout
from rnnviz.strategies import strategy
from rnnviz.tasks import Task, check_task, get_task
from rnnviz.timing import compile_cache, compile_lowered

OPTIMIZERS = ("adam", "sgd")
SGD_MOMENTUM = 0.9
#: Training's FLOP budget: about 200 s at the ~50 GFLOP/s of this project's 2-core CPU.
TRAIN_FLOP_BUDGET = 1e13
MAX_STEPS = 100_000
MAX_RUNS = 64
PROBE_BATCH = 32
_TRAIN_SALT, _PROBE_SALT, _READOUT_SALT = 0x7A1, 0x7A2, 0x7A3


class TrainSpec(NamedTuple):
    """The static part of a training run (part of the compile key)."""

    task: str
    lag: int
    optimizer: str
    chunk: int  # steps per compiled call (= log_every)


class Hyper(NamedTuple):
    """Traced training values: the learning rate and the clip threshold (inf: no clipping)."""

    learning_rate: Any
    clip: Any


class TrainState(NamedTuple):
    params: Any  # {"cell": …, "readout": …, ("carry": learned initial carry)}
    opt_state: Any
    alive: Any  # bool: no non-finite value seen yet


class ChunkOut(NamedTuple):
    """Per step ``[chunk]``: loss, metric, global grad norm (before clipping), clipped;
    at the chunk's start: the probe profile as log₁₀ ``[T+1]`` and log₁₀ ‖∂L/∂W_h‖."""

    loss: Any
    metric: Any
    grad_norm: Any
    clipped: Any
    profile: Any
    recurrent_grad: Any


def _optimizer(name: str, learning_rate) -> optax.GradientTransformation:
    if name == "adam":
        return optax.adam(learning_rate)
    return optax.sgd(learning_rate, momentum=SGD_MOMENTUM)


def _readout(task: Task) -> nn.Dense:
    return nn.Dense(task.out_features, dtype=jnp.float32, param_dtype=jnp.float32)


def init_state(static: RunConfig, spec: TrainSpec, key_data: jax.Array, values: Values) -> TrainState:
    """Params exactly as :func:`rnnviz.analyze` builds them for the same config and seed, plus
    a readout from its own key; the optimiser's state (its learning rate does not enter it)."""
    task = get_task(spec.task)
    cell_params, carry0 = prepare_params(static, key_data, values)
    xs = jnp.zeros((static.batch_size, 1, task.input_size), jnp.dtype(static.dtype))
    out_dim = jax.eval_shape(
        lambda: _outputs(static, {"cell": cell_params}, full_carry0(static, carry0), xs)
    ).shape[-1]
    key = jax.random.fold_in(jax.random.wrap_key_data(key_data), _READOUT_SALT)
    readout = _readout(task).init(key, jnp.zeros((1, out_dim), jnp.float32))["params"]
    params = {"cell": cell_params, "readout": readout}
    if static.carry_init == "learned":
        params["carry"] = carry0
    return TrainState(params, _optimizer(spec.optimizer, 1.0).init(params), jnp.bool_(True))


def _outputs(static: RunConfig, params, carry0, xs, eps=None):
    """The outputs ``y [T, B, O]`` of the cell over batch-first ``xs`` ``[B, T, I]``; with
    ``eps`` (carry-shaped ``[T+1, …]``) through :func:`rnnviz.rollout.rollout`'s
    zero-perturbation path, else (the training step's forward: nothing added) through the
    config's strategy (``fused``: the custom VJP with its deferred weight GEMMs; a strategy
    that differentiates per-step copies of the params trains with the plain scan)."""
    cell = make_cell(static)
    xs_tm = jnp.swapaxes(xs, 0, 1)
    strat = strategy(static.strategy)
    if eps is not None or strat.stacked_params:
        return outputs(static, params["cell"], rollout(cell, params["cell"], carry0, xs_tm, eps), xs_tm)
    carries = strat.rollout(static, cell, params["cell"], carry0, xs_tm, None, None)
    return outputs(static, params["cell"], carries, xs_tm)


def _carry0_for(static: RunConfig, params, carry0_fixed, batch: int):
    """The batch's initial carry: the learned one (a parameter) or the configured one."""
    if "carry" in params:
        return jax.tree.map(lambda c: jnp.broadcast_to(c, (batch,) + c.shape), params["carry"])
    return carry0_fixed


def predictions(task: Task, params, ys: jax.Array) -> jax.Array:
    """The readout on the last ``task.outputs_read`` outputs: ``[B, n, F]`` (``[B, F]`` for n = 1)."""
    read = jnp.swapaxes(ys[-task.outputs_read :], 0, 1).astype(jnp.float32)  # [B, n, O]
    pred = _readout(task).apply({"params": params["readout"]}, read)
    return pred[:, 0] if task.outputs_read == 1 else pred


def task_loss(static: RunConfig, task: Task, params, carry0, inputs, targets, eps=None):
    """``(L, predictions)`` of the task on one batch (inputs ``[B, T, I]``)."""
    ys = _outputs(static, params, carry0, inputs.astype(jnp.dtype(static.dtype)), eps)
    pred = predictions(task, params, ys)
    return task.loss_fn(static.seq_len)(pred, targets), pred


def fixed_carry0(static: RunConfig, key_data: jax.Array, values: Values, batch: int):
    """The configured (not learned) initial carry for ``batch`` examples, from the seed's
    carry key as in :func:`rnnviz.analysis.prepare_params`."""
    cfg = static.replace(batch_size=batch)
    _, carry0 = prepare_params(cfg, key_data, values)
    return full_carry0(cfg, carry0)


def probe_profile(static: RunConfig, task: Task, params, carry0, probe):
    """``(Scaled [T+1], [])``: ‖∂L/∂carry_t‖ (exact: the log-magnitude pass with the task
    loss's direct terms) and ‖∂L/∂W_h‖ on the probe batch."""
    cell = make_cell(static)
    xs_tm = jnp.swapaxes(probe.inputs.astype(jnp.dtype(static.dtype)), 0, 1)
    carries = rollout(cell, params["cell"], carry0, xs_tm)

    def loss_of_carries(cs):
        ys = outputs(static, params["cell"], cs, xs_tm)
        return task.loss_fn(static.seq_len)(predictions(task, params, ys), probe.targets)

    direct = jax.grad(loss_of_carries)(carries)
    _, _, total = reduce_log_norms(
        log_carry_gradients(static, cell, params["cell"], carries, xs_tm, direct=direct)
    )
    grads = jax.grad(lambda p: task_loss(static, task, p, carry0, probe.inputs, probe.targets)[0])(params)
    recurrent = [
        leaf
        for path, leaf in jax.tree_util.tree_leaves_with_path(grads["cell"])
        if cell_spec(static.cell).recurrent(tuple(k.key for k in path))
    ]
    w_norm = (
        robust_norm(jnp.concatenate([r.astype(jnp.float32).reshape(-1) for r in recurrent]), 0)
        if recurrent
        else jnp.float32(0)
    )
    return total, w_norm


def step_fn(
    static: RunConfig, spec: TrainSpec, key_data: jax.Array, values: Values, hyper: Hyper, carry0=None
):
    """``(state, step_index) -> (state, (loss, metric, grad_norm, clipped))``: one
    optimisation step on the batch drawn for ``step_index`` (a frozen state once a
    non-finite value was seen; its records are then NaN)."""
    task = get_task(spec.task)
    batch = static.batch_size
    root = jax.random.wrap_key_data(key_data)
    if carry0 is None:
        carry0 = fixed_carry0(static, key_data, values, batch)
    train_key = jax.random.fold_in(root, _TRAIN_SALT)
    opt = _optimizer(spec.optimizer, hyper.learning_rate)
    metric_fn = task.metric_fn()

    def step(st: TrainState, step_index):
        data = task.batch(jax.random.fold_in(train_key, step_index), batch, static.seq_len, spec.lag)

        def loss_fn(p):
            return task_loss(
                static, task, p, _carry0_for(static, p, carry0, batch), data.inputs, data.targets
            )

        (loss, pred), grads = jax.value_and_grad(loss_fn, has_aux=True)(st.params)
        gnorm = optax.tree.norm(grads)
        clipped = gnorm > hyper.clip
        scale = jnp.where(clipped, hyper.clip / gnorm, jnp.float32(1.0))
        grads = jax.tree.map(lambda g: (g * scale).astype(g.dtype), grads)
        with jax.numpy_dtype_promotion("standard"):  # optax mixes Python floats with its int32 step count
            updates, opt_state = opt.update(grads, st.opt_state, st.params)
            params = optax.apply_updates(st.params, updates)
        ok = st.alive & jnp.isfinite(loss) & jnp.isfinite(gnorm)
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)  # noqa: E731
        new = TrainState(keep(params, st.params), keep(opt_state, st.opt_state), ok)
        metric = metric_fn(pred, data.targets)
        nan = jnp.float32(jnp.nan)
        rec = (
            jnp.where(st.alive, loss, nan),
            jnp.where(st.alive, metric, nan),
            jnp.where(st.alive, gnorm, nan),
            clipped & st.alive,
        )
        return new, rec

    return step


def run_chunk(
    static: RunConfig,
    spec: TrainSpec,
    state: TrainState,
    key_data: jax.Array,
    values: Values,
    hyper: Hyper,
    start: jax.Array,
) -> tuple[TrainState, ChunkOut]:
    """``spec.chunk`` steps from step ``start``, after recording the probe profile."""
    task = get_task(spec.task)
    batch = static.batch_size
    root = jax.random.wrap_key_data(key_data)
    carry0 = fixed_carry0(static, key_data, values, batch)
    probe = task.batch(jax.random.fold_in(root, _PROBE_SALT), PROBE_BATCH, static.seq_len, spec.lag)
    probe_carry0 = _carry0_for(
        static, state.params, fixed_carry0(static, key_data, values, PROBE_BATCH), PROBE_BATCH
    )
    profile, w_grad = probe_profile(static, task, state.params, probe_carry0, probe)
    step = step_fn(static, spec, key_data, values, hyper, carry0)
    state, (loss, metric, gnorm, clipped) = jax.lax.scan(step, state, start + jnp.arange(spec.chunk))
    return state, ChunkOut(loss, metric, gnorm, clipped, profile, w_grad)


# ---- compiled executables (vmapped over runs) ---------------------------------------------

TRAIN_VALUE_FIELDS = RunConfig.VALUE_FIELDS + ("learning_rate", "clip")


@compile_cache(maxsize=16)
def train_executables(static: RunConfig, spec: TrainSpec, n_runs: int, device: jax.Device):
    """``(init, chunk, compile_s)`` for ``n_runs`` runs at once: init ``(keys [N, 2], Values of
    [N]) -> TrainState`` and chunk ``(state, keys, values, hyper, start) -> (state, ChunkOut)``
    (the state donated), both vmapped over runs and compiled for ``device``."""
    keys = jax.ShapeDtypeStruct((n_runs, 2), jnp.uint32)
    vals = Values(*(jax.ShapeDtypeStruct((n_runs,), jnp.float32) for _ in Values._fields))
    hyper = Hyper(*(jax.ShapeDtypeStruct((n_runs,), jnp.float32) for _ in Hyper._fields))
    start_s = time.perf_counter()
    init_fn = jax.vmap(functools.partial(init_state, static, spec))
    chunk_fn = jax.vmap(functools.partial(run_chunk, static, spec), in_axes=(0, 0, 0, 0, None))
    if n_runs == 1:  # one run: the same function without vmap's batched ops (≈ 15 % faster on CPU)
        init_fn = _with_run_axis(functools.partial(init_state, static, spec), n_in=2)
        chunk_fn = _with_run_axis(functools.partial(run_chunk, static, spec), n_in=4)
    with jax.default_device(device):
        init = compile_lowered(jax.jit(init_fn).lower(keys, vals), f"the {static.cell} training init")
        chunk = compile_lowered(
            jax.jit(chunk_fn, donate_argnums=(0,)).lower(
                init.out_info, keys, vals, hyper, jax.ShapeDtypeStruct((), jnp.int32)
            ),
            f"the {static.cell} training chunk",
        )
    return init, chunk, time.perf_counter() - start_s


def _with_run_axis(fn: Callable, n_in: int) -> Callable:
    """``fn`` on one run, called with (and returning) a leading run axis of size 1; the
    first ``n_in`` arguments carry that axis, the rest do not."""

    def wrapped(*args):
        inner = [jax.tree.map(lambda a: a[0], x) for x in args[:n_in]] + list(args[n_in:])
        return jax.tree.map(lambda a: a[None], fn(*inner))

    return wrapped


# ---- the record and the driver ---------------------------------------------------------------


class TrainTiming(NamedTuple):
    compile_s: float
    run_s: float  # wall time of the training calls (all runs of the call together)
    steps_per_s: float  # optimisation steps per second, per run


@dataclass(frozen=True, eq=False)
class Training:
    """One training run. Arrays are NumPy, over the ``steps_run`` steps actually taken.

    losses, metric, grad_norm (global ‖∇L‖ before clipping) ``[steps_run]``; clipped
    ``[steps_run]`` bool. profile_steps ``[n_logs]``: the steps whose start the probe
    profile was taken at; profiles ``[n_logs, T+1]``: log₁₀ ‖∂L/∂carry_t‖ of the task loss
    on a fixed probe batch (exact, −inf for a true zero); recurrent_grad ``[n_logs]``:
    log₁₀ ‖∂L/∂W_h‖. baseline: the trivial predictor's loss. solved_step: the first step
    whose running mean loss (over the last :data:`SOLVE_WINDOW` steps) is below 10 % of
    the baseline, or None. nonfinite_step: the step whose loss or gradient was NaN/Inf
    (the run stopped there), or None. stopped: the caller stopped it early.
    """

    config: RunConfig
    task: str
    lag: int
    optimizer: str
    learning_rate: float
    clip: float | None
    steps: int
    losses: np.ndarray
    metric: np.ndarray
    metric_name: str
    grad_norm: np.ndarray
    clipped: np.ndarray
    profile_steps: np.ndarray
    profiles: np.ndarray
    recurrent_grad: np.ndarray
    baseline: float
    solved_step: int | None
    nonfinite_step: int | None
    stopped: bool
    timing: TrainTiming

    @property
    def clip_count(self) -> int:
        return int(self.clipped.sum())

    @property
    def steps_run(self) -> int:
        return int(self.losses.size)

    def final_loss(self, window: int = 50) -> float:
        """Mean loss over the last ``window`` finite steps."""
        finite = self.losses[np.isfinite(self.losses)]
        return float(finite[-window:].mean()) if finite.size else math.nan


SOLVE_WINDOW = 50


def solved_step(losses: np.ndarray, baseline: float, window: int = SOLVE_WINDOW) -> int | None:
    """First step whose trailing mean loss over ``window`` steps (fewer at the start) is
    below 10 % of ``baseline``."""
    x = np.asarray(losses, np.float64)
    if not x.size:
        return None
    c = np.concatenate([[0.0], np.cumsum(np.where(np.isfinite(x), x, np.inf))])
    n = np.arange(1, x.size + 1)
    lo = np.maximum(0, n - window)
    mean = (c[n] - c[lo]) / (n - lo)
    hit = np.flatnonzero(mean < 0.1 * baseline)
    return int(hit[0]) if hit.size else None


def _check_number(
    name: str, value: Any, lo: float, hi: float, *, integer: bool = False, lo_open: bool = False
) -> None:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    ok = ok and (not integer or float(value) == int(value)) and math.isfinite(float(value))
    ok = ok and (lo < value if lo_open else lo <= value) and value <= hi
    if not ok:
        what = "an integer" if integer else "a number"
        raise ConfigError(name, value, f"{what} in {'(' if lo_open else '['}{lo:g}, {hi:g}]")


def check_training(
    cfg: RunConfig,
    task: str,
    steps: int,
    learning_rate: float,
    optimizer: str,
    clip: float | None,
    log_every: int,
    lag: int,
    n_runs: int = 1,
) -> tuple[Task, TrainSpec]:
    """Every training argument checked; a bad one is a :class:`ConfigError` naming it, an
    over-budget request a :class:`BudgetError` naming the largest number of steps that fits."""
    t = get_task(task)
    if cfg.batch_size is None:
        raise ConfigError("batch_size", None, "training draws a batch per step; give a batch size (e.g. 64)")
    check_task(t, cfg.seq_len, cfg.input_size, lag)
    _check_number("steps", steps, 1, MAX_STEPS, integer=True)
    _check_number("learning_rate", learning_rate, 0.0, 10.0, lo_open=True)
    if optimizer not in OPTIMIZERS:
        raise ConfigError("optimizer", optimizer, "one of " + ", ".join(OPTIMIZERS))
    if clip is not None:
        _check_number("clip", clip, 0.0, 1e6, lo_open=True)
    _check_number("log_every", log_every, 1, max(1, int(steps)), integer=True)
    per_step = estimate_flops(cfg) * n_runs
    flops = per_step * steps
    if flops > TRAIN_FLOP_BUDGET:
        raise BudgetError(
            "steps",
            steps,
            f"{n_runs} run(s) × {int(steps)} steps need about {flops / 1e12:.1f} TFLOP (≈ "
            f"{flops / REFERENCE_FLOPS_PER_S:.0f} s on a 2-core CPU), over the {TRAIN_FLOP_BUDGET / 1e12:g} "
            f"TFLOP training budget; the most steps that fit is {int(TRAIN_FLOP_BUDGET // per_step)}",
        )
    memory = (
        estimate_memory_bytes(cfg) * n_runs * 2
    )  # params, grads and optimiser moments on top of the working set
    if memory > MEMORY_BUDGET_BYTES:
        raise BudgetError(
            "batch_size",
            cfg.batch_size,
            f"{n_runs} run(s) need about {memory / 2**30:.1f} GiB, over the "
            f"{MEMORY_BUDGET_BYTES / 2**30:.0f} GiB budget; use fewer runs, a smaller batch or a shorter T",
        )
    return t, TrainSpec(t.name, int(lag), optimizer, int(log_every))


def _points_of(over: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    import itertools

    for name in over:
        if name not in TRAIN_VALUE_FIELDS:
            raise ConfigError("over", name, "vmapped training runs vary " + ", ".join(TRAIN_VALUE_FIELDS))
    names = list(over)
    points = [dict(zip(names, combo)) for combo in itertools.product(*(over[n] for n in names))]
    if not 1 <= len(points) <= MAX_RUNS:
        raise ConfigError("over", f"{len(points)} runs", f"between 1 and {MAX_RUNS} runs in one call")
    return points


ProgressFn = Callable[[int, int, float], bool | None]


class Trainer:
    """A resumable training call: :meth:`advance` runs one compiled chunk of ``log_every``
    steps for every run; :meth:`records` returns what has been trained so far. Used by
    :func:`train_many` (all chunks at once) and by the dashboard (a few chunks per rerun,
    so it can show progress and stop). Arguments as :func:`train_many`."""

    def __init__(
        self,
        cfg: RunConfig,
        over: Mapping[str, Sequence[Any]] | None = None,
        *,
        task: str = "adding",
        steps: int = 2000,
        learning_rate: float = 1e-3,
        optimizer: str = "adam",
        clip: float | None = 1.0,
        log_every: int = 50,
        lag: int = 0,
        device: jax.Device | None = None,
    ):
        points = _points_of(over or {})
        self.cfgs, self.lrs, self.clips = [], [], []
        for p in points:
            self.cfgs.append(cfg.replace(**{k: v for k, v in p.items() if k in RunConfig.VALUE_FIELDS}))
            self.lrs.append(p.get("learning_rate", learning_rate))
            self.clips.append(p.get("clip", clip))
        self.task, self.spec = check_training(
            cfg, task, steps, learning_rate, optimizer, clip, log_every, lag, n_runs=len(points)
        )
        for c, lr, cl in zip(self.cfgs, self.lrs, self.clips):
            check_training(c, task, steps, lr, optimizer, cl, log_every, lag)
        self.cfg, self.steps, self.optimizer = cfg, int(steps), optimizer
        device = device or resolve_device(cfg)
        static = static_config(cfg)
        key = (static, self.spec, len(points), device)
        hit = key in train_executables
        self._init, self._chunk, compile_s = train_executables(*key)
        self.compile_s = 0.0 if hit else compile_s
        keys = np.stack([np.asarray(seed_key(c.seed), np.uint32) for c in self.cfgs])
        vals = Values(*(np.asarray([getattr(c, f) for c in self.cfgs], np.float32) for f in Values._fields))
        hyper = Hyper(
            np.asarray(self.lrs, np.float32),
            np.asarray([np.inf if c is None else c for c in self.clips], np.float32),
        )
        self._args = jax.device_put((keys, vals, hyper), device)
        self._state = self._init(*self._args[:2])
        self._outs: list[ChunkOut] = []
        self.run_s = 0.0
        self.stopped = False
        self._all_dead = False

    @property
    def steps_done(self) -> int:
        return min(self.steps, len(self._outs) * self.spec.chunk)

    @property
    def done(self) -> bool:
        return self.stopped or self._all_dead or self.steps_done >= self.steps

    def advance(self) -> int:
        """Run one chunk (unless done); returns the steps done so far."""
        if not self.done:
            start = time.perf_counter()
            keys, vals, hyper = self._args
            self._state, out = self._chunk(
                self._state, keys, vals, hyper, np.int32(len(self._outs) * self.spec.chunk)
            )
            self._outs.append(jax.device_get(out))
            self._all_dead = not bool(np.asarray(jax.device_get(self._state.alive)).any())
            self.run_s += time.perf_counter() - start
        return self.steps_done

    def stop(self) -> None:
        self.stopped = True

    def records(self) -> list[Training]:
        """One :class:`Training` per run, over the steps taken so far."""
        outs, taken, chunk = self._outs, self.steps_done, self.spec.chunk
        if not outs:
            raise ConfigError("steps", 0, "at least one chunk must run before there are records")
        cat = lambda field: np.concatenate([getattr(o, field) for o in outs], axis=1)[:, :taken]  # noqa: E731
        losses, metric, gnorm, clipped = cat("loss"), cat("metric"), cat("grad_norm"), cat("clipped")
        profiles = log10(
            Scaled(
                np.stack([o.profile.mantissa for o in outs], axis=1),
                np.stack([o.profile.exponent for o in outs], axis=1),
            )
        )
        with np.errstate(divide="ignore"):
            wgrad = np.log10(np.stack([o.recurrent_grad for o in outs], axis=1).astype(np.float64))
        profile_steps = np.arange(len(outs)) * chunk
        timing = TrainTiming(self.compile_s, self.run_s, taken / self.run_s if self.run_s > 0 else math.inf)
        baseline = self.task.baseline(self.cfg.seq_len)
        records = []
        for j, c in enumerate(self.cfgs):
            bad = np.flatnonzero(~np.isfinite(losses[j]) | ~np.isfinite(gnorm[j]))
            nonfinite = int(bad[0]) if bad.size else None
            end = taken if nonfinite is None else nonfinite + 1
            keep = profile_steps < end
            records.append(
                Training(
                    config=c,
                    task=self.task.name,
                    lag=self.spec.lag,
                    optimizer=self.optimizer,
                    learning_rate=float(self.lrs[j]),
                    clip=None if self.clips[j] is None else float(self.clips[j]),
                    steps=self.steps,
                    losses=losses[j, :end].astype(np.float64),
                    metric=metric[j, :end].astype(np.float64),
                    metric_name=self.task.metric_name,
                    grad_norm=gnorm[j, :end].astype(np.float64),
                    clipped=clipped[j, :end].astype(bool),
                    profile_steps=profile_steps[keep],
                    profiles=profiles[j][keep],
                    recurrent_grad=wgrad[j][keep],
                    baseline=baseline,
                    solved_step=solved_step(losses[j, :end], baseline),
                    nonfinite_step=nonfinite,
                    stopped=self.stopped and taken < self.steps,
                    timing=timing,
                )
            )
        return records


def train_many(
    cfg: RunConfig,
    over: Mapping[str, Sequence[Any]] | None = None,
    *,
    task: str = "adding",
    steps: int = 2000,
    learning_rate: float = 1e-3,
    optimizer: str = "adam",
    clip: float | None = 1.0,
    log_every: int = 50,
    lag: int = 0,
    progress: ProgressFn | None = None,
    device: jax.Device | None = None,
) -> list[Training]:
    """Train every combination of ``over`` (seeds and value fields: seed, recurrent_gain,
    forget_bias, carry_scale, input_scale, learning_rate, clip) in one vmapped, compiled call
    per chunk of ``log_every`` steps (one compile per shape, whatever the values); see
    :func:`train` for the arguments.

    ``progress(steps_done, steps, elapsed_s)`` is called after every chunk; returning True
    stops training there (the records then hold the steps taken).
    """
    trainer = Trainer(
        cfg,
        over,
        task=task,
        steps=steps,
        learning_rate=learning_rate,
        optimizer=optimizer,
        clip=clip,
        log_every=log_every,
        lag=lag,
        device=device,
    )
    while not trainer.done:
        done = trainer.advance()
        if progress is not None and progress(done, steps, trainer.run_s) and not trainer.done:
            trainer.stop()
    return trainer.records()


def train(
    cfg: RunConfig,
    task: str = "adding",
    steps: int = 2000,
    learning_rate: float = 1e-3,
    optimizer: str = "adam",
    clip: float | None = 1.0,
    log_every: int = 50,
    lag: int = 0,
    *,
    progress: ProgressFn | None = None,
    device: jax.Device | None = None,
) -> Training:
    """Train ``cfg``'s cell with a Dense readout on ``task`` (adding, copy, recall) and record
    the gradient profile as it learns.

    ``cfg.input_size`` must be the task's (adding 2, copy 10, recall 1) and ``cfg.batch_size``
    the training batch. ``optimizer``: adam or sgd (momentum 0.9); ``clip``: global-norm
    threshold, None for no clipping; ``log_every``: steps per compiled chunk and between
    profiles (``steps`` is rounded up to whole chunks and the records cut back to
    ``steps``); ``lag``: the recall task's k.
    """
    return train_many(
        cfg,
        None,
        task=task,
        steps=steps,
        learning_rate=learning_rate,
        optimizer=optimizer,
        clip=clip,
        log_every=log_every,
        lag=lag,
        progress=progress,
        device=device,
    )[0]


__all__ = ["OPTIMIZERS", "Trainer", "Training", "check_training", "solved_step", "train", "train_many"]


def verdict(records: Sequence[Training]) -> str:
    """One sentence on whether the runs learned their task (several runs: how many did)."""
    if not records:
        return "no runs"
    r0 = records[0]
    what = f"the {r0.task} problem at T={r0.config.seq_len}" + (
        f" (lag {r0.lag})" if r0.task == "recall" else ""
    )
    solved = [r.solved_step for r in records if r.solved_step is not None]
    diverged = [r.nonfinite_step for r in records if r.nonfinite_step is not None]
    n = len(records)
    if n == 1:
        if r0.solved_step is not None:
            return f"Learned {what} by step {r0.solved_step} (running mean loss below 10 % of the baseline {r0.baseline:.3g})."
        if r0.nonfinite_step is not None:
            return f"Diverged on {what}: the loss or gradient became NaN/Inf at step {r0.nonfinite_step} (try clipping)."
        ratio = r0.final_loss() / r0.baseline
        if ratio > 0.8:
            return f"Stayed at the baseline on {what}: final loss {ratio:.2f}× the trivial predictor's after {r0.steps_run} steps."
        return f"Improved on {what} to {ratio:.2f}× the baseline after {r0.steps_run} steps, but did not reach 10 %."
    text = f"{len(solved)} of {n} runs learned {what}"
    if solved:
        text += f" (by step {min(solved)}–{max(solved)})" if len(solved) > 1 else f" (by step {solved[0]})"
    if diverged:
        text += f"; {len(diverged)} diverged (NaN/Inf)"
    ratios = [r.final_loss() / r.baseline for r in records if r.nonfinite_step is None]
    if ratios:
        text += f"; final loss {min(ratios):.2f}–{max(ratios):.2f}× the baseline"
    return text + "."

"""Training runs: the compiled executables (vmapped over runs), the checks of the settings
against the config, the resumable :class:`Trainer` and the drivers :func:`train` and
:func:`train_many`.

The model is the configured cell exactly as :func:`rnnviz.engine.prepare.prepare_params` builds
it for :func:`rnnviz.analyze` (gain, forget bias, carry initialisation incl. a learned
carry, dtype) plus an ``nn.Dense`` readout on the task's last outputs (:mod:`rnnviz.studies.tasks.synthetic`).

Compiled, chunked: one compiled call runs ``log_every`` optimisation steps inside a
``lax.scan`` (state buffers donated) and, before them, records the profile
‖∂L/∂carry_t‖ ``[T+1]`` of the task loss on a fixed probe batch — the zero-perturbation
definition of :mod:`rnnviz.engine.gradients`, with exact log magnitudes from
:mod:`rnnviz.engine.logpass` — and ‖∂L/∂W_h‖. Between calls the caller sees progress and may
stop. The learning rate, clip threshold, seed, gain, forget bias and scales are
arguments, so changing them never recompiles; several runs (seeds × values) are one
``jax.vmap``-ed call.

Each step draws a fresh batch from ``fold_in(key(seed), step)``, so a config gives
bit-identical curves in any process. Global-norm clipping (Pascanu et al. 2013):
g ← g · min(1, c/‖g‖). A non-finite loss or gradient freezes the run at that step (the
state keeps its last finite values) and is reported, never raised.

"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.train_settings import DATA_TASK, TrainSettings
from rnnviz.base.training import Training, TrainTiming, solved_step
from rnnviz.config import (
    MEMORY_BUDGET_BYTES,
    REFERENCE_FLOPS_PER_S,
    BudgetError,
    ConfigError,
    RunConfig,
    estimate_flops,
    estimate_memory_bytes,
)
from rnnviz.dataset import Dataset
from rnnviz.engine.compile import compile_cache, compile_lowered, run_once_options
from rnnviz.engine.norms import Scaled, log10
from rnnviz.engine.prepare import Values, resolve_device, seed_key, static_config
from rnnviz.studies.tasks.data import data_task
from rnnviz.studies.tasks.synthetic import Task, check_task, get_task
from rnnviz.studies.training import blocks, model
from rnnviz.studies.training.model import ChunkOut, Hyper, TrainSpec

#: Training's FLOP budget: about 200 s at the ~50 GFLOP/s of this project's 2-core CPU.
TRAIN_FLOP_BUDGET = 1e13


MAX_RUNS = 64


#: The weights a training call keeps (all its runs, every kept step) stay under this many
#: bytes: past it, every k-th log step is kept (k as small as fits), and always the last.
MAX_KEPT_BYTES = 256 * 2**20


#: The training settings that are arguments of the compiled chunk (:class:`Hyper`): ``over`` may vary them.
_HYPER_FIELDS = ("learning_rate", "clip")
TRAIN_VALUE_FIELDS = RunConfig.VALUE_FIELDS + _HYPER_FIELDS


class TrainedModel(NamedTuple):
    """What a kind of model trains with: ``init_state(static, spec, key_data, values) -> TrainState``
    and ``run_chunk(static, spec, state, key_data, values, hyper, start) -> (TrainState, ChunkOut)``."""

    init_state: Callable[..., Any]
    run_chunk: Callable[..., Any]


#: ``RunConfig.block`` → the model trained: the bare cell with its Dense readout
#: (:mod:`~rnnviz.studies.training.model`), or the design as its reference block
#: (:mod:`~rnnviz.studies.training.blocks`).
MODELS: dict[str, TrainedModel] = {
    "cell": TrainedModel(model.init_state, model.run_chunk),
    "reference": TrainedModel(blocks.init_state, blocks.run_chunk),
}


#: The initial states of recent training calls kept for the next call, in bytes.
INIT_CACHE_BYTES = 64 * 2**20


class _InitStates:
    """The initial :class:`TrainState` of recent calls, by executables and arguments: a call
    that changes only what the init does not read (steps, learning rate, clip, a stop) starts
    from the same draw instead of drawing it again. The draw runs at -O0 (drawn as
    :func:`rnnviz.analyze` draws it, bit for bit): 16 LSTM runs at H=128 spend as long in it
    as in several chunks of steps (docs/dev/benchmarks.md). Least recently used first out, past
    :data:`INIT_CACHE_BYTES` in all; a larger state is not kept. The chunk donates its state,
    so a call gets a copy; the kept one is never run."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, key: Any) -> Any | None:
        """A copy of the state kept under ``key``, or None."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            self.hits += 1
        return jax.tree.map(lambda a: a.copy(), item[0])

    def put(self, key: Any, state: Any) -> Any:
        """Keep ``state`` (if it fits); returns a copy for the caller to run."""
        size = sum(leaf.nbytes for leaf in jax.tree.leaves(state))
        if size > self.max_bytes:
            return state
        with self._lock:
            self._items[key] = (state, size)
            self._items.move_to_end(key)
            while sum(n for _, n in self._items.values()) > self.max_bytes:
                self._items.popitem(last=False)
        return jax.tree.map(lambda a: a.copy(), state)

    def clear(self) -> None:
        """Forget every kept state."""
        with self._lock:
            self._items.clear()


#: This process's kept initial states (what :class:`Trainer` starts from when it can).
init_states = _InitStates(INIT_CACHE_BYTES)


@compile_cache(maxsize=16)
def train_executables(static: RunConfig, spec: TrainSpec, n_runs: int, device: jax.Device):
    """``(init, chunk, compile_s)`` for ``n_runs`` runs at once: init ``(keys [N, 2], Values of
    [N]) -> TrainState`` and chunk ``(state, keys, values, hyper, start) -> (state, ChunkOut)``
    (the state donated), both vmapped over runs and compiled for ``device``."""
    keys = jax.ShapeDtypeStruct((n_runs, 2), jnp.uint32)
    vals = Values(*(jax.ShapeDtypeStruct((n_runs,), jnp.float32) for _ in Values._fields))
    hyper = Hyper(*(jax.ShapeDtypeStruct((n_runs,), jnp.float32) for _ in Hyper._fields))
    start_s = time.perf_counter()
    trained = MODELS[static.block]
    init_fn = jax.vmap(functools.partial(trained.init_state, static, spec))
    chunk_fn = jax.vmap(functools.partial(trained.run_chunk, static, spec), in_axes=(0, 0, 0, 0, None))
    if n_runs == 1:  # one run: the same function without vmap's batched ops (≈ 15 % faster on CPU)
        init_fn = _with_run_axis(functools.partial(trained.init_state, static, spec), n_in=2)
        chunk_fn = _with_run_axis(functools.partial(trained.run_chunk, static, spec), n_in=4)
    with jax.default_device(device):
        # drawn as analyze draws the same seed's params (run once, compiled alike)
        init = compile_lowered(
            jax.jit(init_fn).lower(keys, vals), f"the {static.cell} training init", run_once_options(device)
        )
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


def resolve_task(task: str, data: Dataset | None = None) -> Task:
    """The task of :attr:`TrainSettings.task`: a synthetic one by name, or the task of ``data``
    for :data:`~rnnviz.base.train_settings.DATA_TASK`.

    Raises:
        ConfigError: ``data`` without :data:`DATA_TASK`, or :data:`DATA_TASK` without ``data``.
    """
    if task == DATA_TASK:
        if data is None:
            raise ConfigError("task", task, "a data set to train on: pass it as data=")
        return data_task(data)
    if data is not None:
        raise ConfigError("task", task, f"{DATA_TASK!r} to train on the data set passed as data=")
    return get_task(task)


def check_training(
    cfg: RunConfig,
    settings: TrainSettings,
    n_runs: int = 1,
    data: Dataset | None = None,
    flop_budget: float = TRAIN_FLOP_BUDGET,
    memory_budget: float = MEMORY_BUDGET_BYTES,
) -> tuple[Task, TrainSpec]:
    """The settings checked against the config they train (each setting is checked on its own by
    :class:`TrainSettings`).

    Args:
        cfg: the config trained; it needs a batch size, and must fit the task.
        settings: the training settings.
        n_runs: runs trained at once (the budgets count them all).
        data: the data set trained on when ``settings.task`` is :data:`DATA_TASK`.
        flop_budget: the most FLOPs all the runs may take (a benchmark's long tables
            raise it; the dashboard keeps :data:`TRAIN_FLOP_BUDGET`).
        memory_budget: the most bytes all the runs may hold, by the estimate (a benchmark's
            tables, which run alone, may raise it; the dashboard keeps ``MEMORY_BUDGET_BYTES``).

    Returns:
        ``(task, spec)``: the task and the compiled step's static settings.

    Raises:
        ConfigError: a config that does not fit the task, naming the field (a
            :class:`BudgetError` when over the FLOP or memory budget, naming what fits).
    """
    t = resolve_task(settings.task, data)
    if cfg.batch_size is None:
        raise ConfigError("batch_size", None, "training draws a batch per step; give a batch size (e.g. 64)")
    check_task(t, cfg.seq_len, cfg.input_size, settings.lag)
    steps = settings.steps
    per_step = estimate_flops(cfg) * n_runs
    flops = per_step * steps
    if flops > flop_budget:
        raise BudgetError(
            "steps",
            steps,
            f"{n_runs} run(s) × {int(steps)} steps need about {flops / 1e12:.1f} TFLOP (≈ "
            f"{flops / REFERENCE_FLOPS_PER_S:.0f} s on a 2-core CPU), over the {flop_budget / 1e12:g} "
            f"TFLOP training budget; the most steps that fit is {int(flop_budget // per_step)}",
        )
    memory = (
        estimate_memory_bytes(cfg) * n_runs * 2
    )  # params, grads and optimiser moments on top of the working set
    if memory > memory_budget:
        raise BudgetError(
            "batch_size",
            cfg.batch_size,
            f"{n_runs} run(s) need about {memory / 2**30:.1f} GiB, over the "
            f"{memory_budget / 2**30:g} GiB budget; use fewer runs, a smaller batch or a shorter T",
        )
    return t, TrainSpec(t.name, settings.lag, settings.optimizer, settings.log_every)


def _points_of(over: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
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
    so it can show progress and stop).

    Args:
        cfg: the base configuration.
        over: ``{field: values}`` as for :func:`train_many`; None: one run.
        settings: the training settings (``over`` may vary their learning rate and clip).
        data: the data set trained on when ``settings.task`` is :data:`DATA_TASK`.
        device: a concrete JAX device, overriding ``cfg.device``.
        flop_budget, memory_budget: as :func:`check_training`.

    Raises:
        ConfigError: as :func:`train_many`.
    """

    def __init__(
        self,
        cfg: RunConfig,
        over: Mapping[str, Sequence[Any]] | None = None,
        *,
        settings: TrainSettings,
        data: Dataset | None = None,
        device: jax.Device | None = None,
        flop_budget: float = TRAIN_FLOP_BUDGET,
        memory_budget: float = MEMORY_BUDGET_BYTES,
    ):
        points = _points_of(over or {})
        self.data_source = None if data is None else (data.name, data.options)
        self.cfgs, self.runs = [], []  # per run: its config and its settings (learning rate, clip)
        for p in points:
            self.cfgs.append(cfg.replace(**{k: v for k, v in p.items() if k in RunConfig.VALUE_FIELDS}))
            self.runs.append(
                dataclasses.replace(settings, **{k: v for k, v in p.items() if k in _HYPER_FIELDS})
            )
        budgets = {"flop_budget": flop_budget, "memory_budget": memory_budget}
        self.task, self.spec = check_training(cfg, settings, len(points), data, **budgets)
        for c in self.cfgs:  # the values may take a config out of the task's reach (one message per field)
            check_training(c, settings, data=data, **budgets)
        self.cfg, self.settings, self.steps = cfg, settings, settings.steps
        device = self._device = device or resolve_device(cfg)
        static = static_config(cfg)
        key = (static, self.spec, len(points), device)
        hit = key in train_executables
        self._init, self._chunk, compile_s = train_executables(*key)
        self.compile_s = 0.0 if hit else compile_s
        keys = np.stack([np.asarray(seed_key(c.seed), np.uint32) for c in self.cfgs])
        vals = Values(*(np.asarray([getattr(c, f) for c in self.cfgs], np.float32) for f in Values._fields))
        hyper = Hyper(
            np.asarray([r.learning_rate for r in self.runs], np.float32),
            np.asarray([np.inf if r.clip is None else r.clip for r in self.runs], np.float32),
        )
        self._args = jax.device_put((keys, vals, hyper), device)
        drawn = (key, keys.tobytes(), tuple(v.tobytes() for v in vals))
        self._state = init_states.get(drawn)
        if self._state is None:
            self._state = init_states.put(drawn, self._init(*self._args[:2]))
        self._outs: list[ChunkOut] = []
        self.run_s = 0.0
        self.stopped = False
        self._all_dead = False
        chunks = -(-self.steps // self.spec.chunk)
        per_copy = sum(leaf.nbytes for leaf in jax.tree.leaves(self._state.params))
        #: keep the params of every ``keep_every``-th chunk start (and the last state)
        self.keep_every = max(1, math.ceil(chunks * per_copy / MAX_KEPT_BYTES))

    @property
    def steps_done(self) -> int:
        """Optimisation steps run so far: chunks run × ``log_every``, at most ``steps``."""
        return min(self.steps, len(self._outs) * self.spec.chunk)

    @property
    def done(self) -> bool:
        """Whether no chunk is left to run: stopped, every run non-finite, or all ``steps`` run."""
        return self.stopped or self._all_dead or self.steps_done >= self.steps

    def advance(self) -> int:
        """Run one chunk (unless done); returns the steps done so far."""
        if not self.done:
            start = time.perf_counter()
            keys, vals, hyper = self._args
            self._state, out = self._chunk(
                self._state, keys, vals, hyper, np.int32(len(self._outs) * self.spec.chunk)
            )
            out = jax.device_get(out)
            if len(self._outs) % self.keep_every:  # a log step whose weights are not kept
                out = out._replace(params=None)
            self._outs.append(out)
            self._all_dead = not bool(np.asarray(jax.device_get(self._state.alive)).any())
            self.run_s += time.perf_counter() - start
        return self.steps_done

    def stop(self) -> None:
        """Stop before the next chunk: :meth:`advance` runs no more, and the records say ``stopped``
        when steps were left."""
        self.stopped = True

    def _fingerprint(self) -> str:
        """What a saved state must have been trained with: every run's config and settings, and
        the data set."""
        return repr((self.cfgs, self.runs, self.data_source, self.spec))

    def save(self, path: str | os.PathLike) -> None:
        """Write the runs' state and everything logged so far to ``path`` (``.npz``), for
        :meth:`resume` in another process: a table of hours then loses at most what ran since
        the last save. The file is written beside ``path`` and renamed, so a process killed
        while writing leaves the last whole one."""
        outs = self._outs
        meta = {
            "fingerprint": self._fingerprint(),
            "chunks": len(outs),
            "kept": [i for i, o in enumerate(outs) if o.params is not None],
            "held": bool(outs) and outs[0].held_out_loss is not None,
            "run_s": self.run_s,
        }
        leaves = jax.tree.leaves((jax.device_get(self._state), outs))
        path = Path(path)
        part = path.with_name(path.name + ".part")
        with part.open("wb") as fh:  # a file object: np.savez would add ".npz" to a name
            np.savez(
                fh,
                meta=np.asarray(json.dumps(meta)),
                **{f"leaf{i}": np.asarray(v) for i, v in enumerate(leaves)},
            )
        os.replace(part, path)

    def resume(self, path: str | os.PathLike) -> bool:
        """Continue from :meth:`save`'s file of the same runs, where one exists.

        Returns:
            True when ``path`` held a saved state (now this trainer's), False when there is none.

        Raises:
            ConfigError: ``path`` was saved by other runs (configs, settings or data), or holds
                arrays of other shapes.
        """
        if not Path(path).exists():
            return False
        with np.load(path, allow_pickle=False) as saved:
            meta = json.loads(str(saved["meta"]))
            leaves = [saved[f"leaf{i}"] for i in range(len(saved.files) - 1)]
        allowed = "a state saved by the same runs (configs, settings and data)"
        if meta["fingerprint"] != self._fingerprint():
            raise ConfigError("resume", str(path), allowed)
        held, kept = meta["held"], set(meta["kept"])
        outs = [
            ChunkOut(
                0,
                0,
                0,
                0,
                Scaled(0, 0),
                0,
                *((0, 0) if held else (None, None)),
                self._state.params if i in kept else None,
            )
            for i in range(meta["chunks"])
        ]
        template = (self._state, outs)
        structure = jax.tree.structure(template)
        state_shapes = [np.shape(v) for v in jax.tree.leaves(self._state)]
        if structure.num_leaves != len(leaves) or state_shapes != [
            v.shape for v in leaves[: len(state_shapes)]
        ]:
            raise ConfigError("resume", str(path), allowed)
        state, outs = jax.tree.unflatten(structure, leaves)
        self._state = jax.device_put(state, self._device)
        self._outs = list(outs)
        self.run_s = float(meta["run_s"])
        self._all_dead = bool(outs) and not bool(np.asarray(state.alive).any())
        return True

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
        held = outs[0].held_out_loss is not None
        held_loss = np.stack([o.held_out_loss for o in outs], axis=1).astype(np.float64) if held else None
        held_metric = np.stack([o.held_out_metric for o in outs], axis=1).astype(np.float64) if held else None
        profile_steps = np.arange(len(outs)) * chunk
        held_steps = (np.arange(len(outs)) + 1) * chunk  # a chunk past `steps` is cut from the records
        timing = TrainTiming(self.compile_s, self.run_s, taken / self.run_s if self.run_s > 0 else math.inf)
        baseline = self.task.baseline(self.cfg.seq_len)
        chunks_kept = np.asarray([i for i, o in enumerate(outs) if o.params is not None], int)
        kept = _kept_weights([outs[i].params for i in chunks_kept], jax.device_get(self._state.params))
        kept_steps = profile_steps[chunks_kept]
        records = []
        for j, (c, run) in enumerate(zip(self.cfgs, self.runs)):
            bad = np.flatnonzero(~np.isfinite(losses[j]) | ~np.isfinite(gnorm[j]))
            nonfinite = int(bad[0]) if bad.size else None
            end = taken if nonfinite is None else nonfinite + 1
            keep = profile_steps < end
            after = held_steps <= end  # held-out evaluations after the chunks this run completed
            # The weights at each profile step, then the last state (frozen at a non-finite step).
            last = len(outs) * chunk if nonfinite is None else nonfinite
            keep_w = kept_steps < end
            index = _index_kept(keep_w, kept_steps, last)
            records.append(
                Training(
                    config=c,
                    task=self.task.name,
                    lag=self.spec.lag,
                    optimizer=run.optimizer,
                    learning_rate=run.learning_rate,
                    clip=run.clip,
                    steps=run.steps,
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
                    held_out_loss=held_loss[j][after] if held else None,
                    held_out_metric=held_metric[j][after] if held else None,
                    held_out_steps=held_steps[after] if held else None,
                    weight_steps=_steps_kept(kept_steps[keep_w], last),
                    weight_tree=jax.tree.map(lambda a, j=j, index=index: a[j][index], kept),
                    data_source=self.data_source,
                )
            )
        return records


def _kept_weights(per_chunk: list[Any], final: Any) -> dict[str, Any]:
    """The params at the kept chunks' starts and the final ones, stacked: leaves ``[N, kept+1, …]``;
    a learned carry stored as ``{"0": …, "1": …}`` (its components in Flax's order)."""
    stacked = jax.tree.map(lambda *a: np.stack(a, axis=1), *per_chunk, final)
    if "carry" in stacked:
        stacked["carry"] = {str(i): leaf for i, leaf in enumerate(jax.tree.leaves(stacked["carry"]))}
    return stacked


def _steps_kept(profile_steps: np.ndarray, last: int) -> np.ndarray:
    """The profile steps and the last one (once, if a profile was taken there)."""
    if profile_steps.size and profile_steps[-1] == last:
        return profile_steps
    return np.append(profile_steps, last)


def _index_kept(keep: np.ndarray, kept_steps: np.ndarray, last: int) -> np.ndarray:
    """Indices into the stacked weights (kept chunk starts, then the final state) of
    :func:`_steps_kept`'s steps."""
    idx = np.flatnonzero(keep)
    if idx.size and kept_steps[idx[-1]] == last:
        return idx
    return np.append(idx, kept_steps.size)


def _asked(
    task: str | Dataset,
    steps: int,
    learning_rate: float,
    optimizer: str,
    clip: float | None,
    log_every: int,
    lag: int,
    settings: TrainSettings | None,
    data: Dataset | None,
) -> tuple[TrainSettings, Dataset | None]:
    """The settings and data set of :func:`train`'s and :func:`train_many`'s arguments: the
    keyword form (a data set as ``task``) or ``settings`` with the keywords at their defaults."""
    if isinstance(task, Dataset):
        if data is not None:
            raise ConfigError("task", task.name, "a data set as task, or data=, not both")
        task, data = DATA_TASK, task
    given = dict(
        task=task,
        steps=steps,
        learning_rate=learning_rate,
        optimizer=optimizer,
        clip=clip,
        log_every=log_every,
        lag=lag,
    )
    if settings is None:
        return TrainSettings(**given), data
    for name, value in given.items():
        if value != getattr(TrainSettings, name):  # the class holds each field's default
            raise ConfigError(name, value, "settings= holds it: give the settings or the arguments, not both")
    return settings, data


def train_many(
    cfg: RunConfig,
    over: Mapping[str, Sequence[Any]] | None = None,
    *,
    task: str | Dataset = "adding",
    steps: int = 2000,
    learning_rate: float = 1e-3,
    optimizer: str = "adam",
    clip: float | None = 1.0,
    log_every: int = 50,
    lag: int = 0,
    settings: TrainSettings | None = None,
    data: Dataset | None = None,
    progress: ProgressFn | None = None,
    device: jax.Device | None = None,
    flop_budget: float = TRAIN_FLOP_BUDGET,
    memory_budget: float = MEMORY_BUDGET_BYTES,
) -> list[Training]:
    """Train every combination of ``over`` in one vmapped, compiled call per chunk.

    One compile per shape, whatever the values; each run draws its own batches from its
    seed, so a run equals the same run trained alone.

    Args:
        cfg: the base configuration.
        over: ``{field: values}`` over the seed and value fields (seed, recurrent_gain,
            forget_bias, carry_scale, input_scale, learning_rate, clip); None: one run.
        task, steps, learning_rate, optimizer, clip, log_every, lag, settings, data, device: as for
            :func:`train`.
        progress: ``(steps_done, steps, elapsed_s) -> stop?`` called after every chunk;
            returning True stops training there (the records then hold the steps taken).
        flop_budget, memory_budget: the most FLOPs all the runs may take, and bytes they may
            hold (:func:`check_training`).

    Returns:
        One :class:`~rnnviz.base.training.Training` per combination, in
        ``itertools.product`` order.

    Raises:
        ConfigError: as :func:`train`, or an ``over`` field that is not a value field, or
            more than ``MAX_RUNS`` runs.
    """
    settings, data = _asked(task, steps, learning_rate, optimizer, clip, log_every, lag, settings, data)
    budgets = {"flop_budget": flop_budget, "memory_budget": memory_budget}
    trainer = Trainer(cfg, over, settings=settings, data=data, device=device, **budgets)
    while not trainer.done:
        done = trainer.advance()
        if progress is not None and progress(done, settings.steps, trainer.run_s) and not trainer.done:
            trainer.stop()
    return trainer.records()


def train(
    cfg: RunConfig,
    task: str | Dataset = "adding",
    steps: int = 2000,
    learning_rate: float = 1e-3,
    optimizer: str = "adam",
    clip: float | None = 1.0,
    log_every: int = 50,
    lag: int = 0,
    *,
    settings: TrainSettings | None = None,
    data: Dataset | None = None,
    progress: ProgressFn | None = None,
    device: jax.Device | None = None,
) -> Training:
    r"""Train ``cfg``'s cell with a Dense readout on ``task`` and record the gradient
    profile ‖∂L/∂carry_t‖ as it learns.

    Every ``log_every`` steps run in one compiled call (state donated), after the profile
    of the task loss on a fixed probe batch; gradients are clipped by global norm
    (Pascanu et al. 2013):

    .. math::

        g \leftarrow g \cdot \min\Big(1, \frac{c}{\|g\|}\Big)

    The settings are given either as the arguments ``task`` … ``lag`` or as one
    :class:`~rnnviz.base.train_settings.TrainSettings` (``settings``, the arguments then
    left at their defaults): the same run either way.

    Args:
        cfg: the cell and its initialisation; ``cfg.input_size`` must be the task's
            (adding 2, copy 10, recall 1) and ``cfg.batch_size`` is the training batch.
        task: ``adding``, ``copy`` or ``recall`` (:mod:`rnnviz.studies.tasks.synthetic`), or a
            data set (:mod:`rnnviz.studies.tasks.data`).
        steps: optimisation steps (rounded up to whole chunks; the records are cut back).
        learning_rate: the optimiser's step size.
        optimizer: ``adam`` or ``sgd`` (momentum 0.9).
        clip: the global-norm threshold c; None for no clipping.
        log_every: steps per compiled chunk and between gradient profiles.
        lag: the recall task's k (the target is x_{T−k}).
        settings: all of the above in one record, instead of the arguments.
        data: the data set trained on when the task is
            :data:`~rnnviz.base.train_settings.DATA_TASK` (``settings``' way to train on data).
        progress: ``(steps_done, steps, elapsed_s) -> stop?`` called after every chunk.
        device: a concrete JAX device, overriding ``cfg.device``.

    Returns:
        A :class:`~rnnviz.base.training.Training`.

    Raises:
        ConfigError: a bad argument, both ``settings`` and an argument it holds, or a config
            that does not fit the task (``BudgetError`` when the run is over the FLOP or memory
            budget, naming what fits).

    Example:
        >>> from rnnviz import RunConfig, TrainSettings, train
        >>> cfg = RunConfig(cell="lstm", forget_bias=1.0, hidden_size=8, input_size=2,
        ...                 seq_len=10, batch_size=16)
        >>> run = train(cfg, "adding", steps=20, log_every=10)
        >>> run.losses.shape, run.profiles.shape  # [steps], [profiles, T+1]
        ((20,), (2, 11))
        >>> again = train(cfg, settings=TrainSettings("adding", steps=20, log_every=10))
        >>> bool((again.losses == run.losses).all())
        True
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
        settings=settings,
        data=data,
        progress=progress,
        device=device,
    )[0]

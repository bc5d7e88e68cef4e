"""What the dashboard's worker processes run: one function per computation, taking a job's
key (:func:`rnnviz.serve.requests.job_key`) and returning plain records, so every call and
answer pickles. The server names these by name (:data:`rnnviz.serve.requests.jobs`) and never
imports this module; a worker imports it in its :func:`setup`.

Training keeps its :class:`~rnnviz.studies.training.Trainer` in the worker between calls (the
pool routes every call of one run to the same worker); a worker that was replaced has lost
it, and :func:`train_advance` says so with :class:`LookupError`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import logging
import time
from typing import Any

import jax
import numpy as np
import pandas as pd

from rnnviz.analysis import Analysis, analyze, compile_analysis
from rnnviz.analysis import is_compiled as _is_compiled
from rnnviz.base.presets import PAGES
from rnnviz.base.weights import Weights
from rnnviz.checkpoints import CheckpointError
from rnnviz.config import ConfigError, RunConfig, static_config
from rnnviz.dataset import Dataset, load_dataset, resolve
from rnnviz.dataset.budget import Budget
from rnnviz.dataset.builtin import BUILTINS
from rnnviz.dataset.describe import Preview, preview_record
from rnnviz.dataset.files import MAX_DATA_BYTES, MAX_SEQUENCES, load_file
from rnnviz.engine.allocator import keep_freed_buffers
from rnnviz.engine.compile import enable_compilation_cache
from rnnviz.engine.environment import environment
from rnnviz.engine.timing import MIN_PRECISE_REPEATS
from rnnviz.report.explorable_data import preset_data
from rnnviz.serve import trained_runs
from rnnviz.serve.folders import stamp
from rnnviz.serve.model_files import model_max_bytes
from rnnviz.serve.requests import ModelSummary, RunSummary, TrainProgress, config_of
from rnnviz.serve.settings import (
    QUIET_REPEATS,
    QUIET_TIMING_S,
    TIMING_BUDGET_S,
    TIMING_PRECISION,
    settings,
)
from rnnviz.studies.comparisons import (
    accumulator_grads,
    available_strategies,
    compare_strategies,
    present_devices,
    run_on_devices,
    scaling,
    strategy_unavailable,
)
from rnnviz.studies.connectivity import Connectivity, connectivity
from rnnviz.studies.explorable import explorable_grid
from rnnviz.studies.jacobians import Jacobians
from rnnviz.studies.jacobians import jacobians as _jacobians
from rnnviz.studies.lyapunov import Lyapunov, lyapunov_phase
from rnnviz.studies.lyapunov import lyapunov as _lyapunov
from rnnviz.studies.models import Model, ModelAnalysis, analyze_model, load_model, tokenize
from rnnviz.studies.over_training import OverTraining, over_training
from rnnviz.studies.sweep import critical_gain, sweep_reusing
from rnnviz.studies.training import DATA_TASK, Trainer, Training, TrainSettings, load_run
from rnnviz.tables.strategies import strategy_names

log = logging.getLogger("rnnviz.jobs")

#: The Training tab's settings that are not :class:`~rnnviz.studies.training.TrainSettings`.
_TAB_ONLY = ("seeds", "batch")


def setup() -> None:
    """Run once in each new worker: JAX's persistent compilation cache held to its cap (the
    server's settings), buffers kept in the heap, and the default analysis compiled (every
    page opens at it, and a visitor's call may go to any worker)."""
    limits = settings()
    if limits.jax_cache != "off":
        enable_compilation_cache(limits.jax_cache, max_bytes=limits.jax_cache_mb * 2**20)
        jax.monitoring.register_event_listener(_count_cache_event)
    keep_freed_buffers()
    try:
        compile_analysis(RunConfig())
    except Exception:  # a worker that cannot compile it still serves (its first call will say why)
        log.exception("compiling the default analysis at set-up failed")


#: This worker's persistent-cache events (``cache_hits``, ``compile_requests_use_cache``).
_CACHE_EVENTS: collections.Counter[str] = collections.Counter()


def _count_cache_event(event: str, **_: Any) -> None:
    if event.startswith("/jax/compilation_cache/"):
        _CACHE_EVENTS[event.rsplit("/", 1)[1]] += 1


def compilation_cache_stats() -> dict[str, int]:
    """How often this worker's compiles asked the persistent cache, and found the executable."""
    return dict(_CACHE_EVENTS)


@functools.lru_cache(maxsize=8)
def _run(path: str, version: tuple) -> Training:
    del version  # part of the cache key only: a file written again is read again
    return load_run(path)


def saved_run(path: str) -> Training:
    """A saved run (``.rnnviz``), loaded once per worker and version; a bad file raises its
    :class:`~rnnviz.studies.training.RunFileError`."""
    return _run(path, stamp(path))


def _weights(key: str) -> Weights | None:
    """The trained weights a job's key names (``{"weights": {"path": …, "step": …}}``), or None."""
    source = json.loads(key).get("weights")
    return None if source is None else saved_run(source["path"]).weights(source["step"])


def run_summary(path: str) -> RunSummary:
    """What the sidebar shows of the saved run at ``path`` (a bad file raises its error)."""
    run = saved_run(path)
    steps = tuple(int(s) for s in run.weight_steps)
    return RunSummary(run.label, run.config, steps, run.data_source, run.final_loss(), run.metric_name)


def over_training_job(path: str, k: int) -> OverTraining:
    """λ and the step-Jacobian spectrum at every kept step of a saved run (data reloaded)."""
    return over_training(saved_run(path), k=k, max_points=32)


def connectivity_job(key: str, index: int, step: int | None, measure: str | None) -> Connectivity:
    """:func:`~rnnviz.studies.connectivity.connectivity` of sequence ``index`` of the key's data
    set, read at ``step`` (None: the last real one), at the key's weights or initialisation.

    Raises:
      ConfigError: the key names no data set; a bad index, step or measure; or weights that
        do not fit the config.
    """
    ds = _data(key)
    if ds is None:
        raise ConfigError("data", None, "a data set: choose one in the sidebar's Data")
    return connectivity(config_of(key), ds, index, params=_weights(key), step=step, measure=measure)


def _data(key: str) -> Dataset | None:
    """The data set a job's key names (``{"data": {"name": …, options…}}``), or None."""
    source = json.loads(key).get("data")
    return None if source is None else load_source(json.dumps(source, sort_keys=True))


@functools.lru_cache(maxsize=8)
def _load(source_json: str, version: tuple) -> Dataset:
    del version  # part of the cache key only: a changed file is read again
    source = json.loads(source_json)
    options = {k: v for k, v in source.items() if k != "name" and not k.startswith("_")}
    if source["name"] in BUILTINS or options:  # the built-ins bound themselves (the text's windows)
        return load_dataset(source["name"], **options)
    return load_file(resolve(source["name"]), data_budget())


def data_budget() -> Budget:
    """What a data file may hold in a worker: the loaders' own budget, or a quarter of the
    worker's memory cap (``RNNVIZ_WORKER_MAX_RSS_MB``) where that is less. A file a worker
    could hold only over its cap would make every successor read it and retire again: it is
    refused at once, by its headers, with the setting named."""
    cap_mb = settings().worker_max_rss_mb
    if cap_mb * 2**20 // 4 >= MAX_DATA_BYTES:
        return Budget(MAX_DATA_BYTES, MAX_SEQUENCES)
    why = f"a quarter of a worker's {cap_mb} MB memory cap (RNNVIZ_WORKER_MAX_RSS_MB)"
    return Budget(cap_mb * 2**20 // 4, MAX_SEQUENCES, why)


def load_source(source_json: str) -> Dataset:
    """The data set of a source (a built-in's name and options, or a file's path; keys
    starting with ``_`` only tell sources apart), loaded once per worker and file version."""
    return _load(source_json, stamp(json.loads(source_json)["name"]))


def data_preview(source_json: str, index: int = 0) -> Preview:
    """Load a data source (a bad one raises its one :class:`DataError`) and draw one sequence."""
    ds = load_source(source_json)
    return preview_record(ds, min(max(index, 0), ds.n_sequences - 1))


def is_compiled(key: str) -> bool:
    """Whether the key's analysis would reuse this worker's executables (no compile)."""
    return _is_compiled(config_of(key), data=_data(key))  # weights: the same executables


def compile_shape(key: str, run: bool = False) -> bool:
    """Idle time's job for a shape a visitor may switch to next: its analysis compiled here,
    or with ``run`` run once (its log-magnitude pass then compiled too where it needs one).
    False: nothing is left to do."""
    cfg, data = config_of(key), _data(key)
    if run:
        analyze(cfg, repeats=1, budget_s=0.0, data=data)
    else:
        compile_analysis(cfg, data=data)
    return False


def analysis(key: str) -> Analysis:
    """The full analysis of a job's key on its data and weights; timed at least once, again
    while under :data:`~rnnviz.serve.settings.TIMING_BUDGET_S`, at most five times (a slow
    config shows its first chart after one run)."""
    cfg = config_of(key)
    return analyze(cfg, repeats=5, budget_s=TIMING_BUDGET_S, data=_data(key), params=_weights(key))


def strategies_table(key: str, repeats: int, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """:func:`~rnnviz.studies.comparisons.compare_strategies` at a job's key for each strategy
    (or those in ``only``), at most ``repeats`` timed runs each (until
    :data:`~rnnviz.serve.settings.TIMING_PRECISION`). Each row is kept for :func:`devices_live`."""
    table = compare_strategies(
        config_of(key),
        strategies=only,
        repeats=repeats,
        data=_data(key),
        params=_weights(key),
        precision=TIMING_PRECISION,
        reference=None if only is None or "accumulate" in only else _reference(key),
    )
    for row in table.to_dict("records"):
        _TIMED_ROWS[key, row["strategy"]] = (repeats, row)
        _TIMED_ROWS.move_to_end((key, row["strategy"]))
        while len(_TIMED_ROWS) > TIMED_ROWS:
            _TIMED_ROWS.popitem(last=False)
    return table


#: The Strategies rows this worker timed last, by (key, strategy), with the runs they were
#: allowed: on a machine of one device, the Devices tab's rows, not timed again.
_TIMED_ROWS: collections.OrderedDict[tuple[str, str], tuple[int, dict[str, Any]]] = collections.OrderedDict()
TIMED_ROWS = 64


@functools.lru_cache(maxsize=4)
def _reference(key: str) -> Any:
    """The accumulator's ∂L/∂W at a job's key, once per worker for all its rows."""
    return accumulator_grads(config_of(key), _data(key), _weights(key))


#: Shapes whose quiet timing this worker keeps, and the fastest run of each, by shape key.
MAX_QUIET = 64
_QUIET: collections.OrderedDict[str, float] = collections.OrderedDict()


def shape_key(key: str) -> str:
    """A job key's shape: its static config and data source (what run times depend on)."""
    values = json.loads(key)
    shape = static_config(config_of(key)).to_dict()
    if "data" in values:
        shape["data"] = values["data"]
    return json.dumps(shape, sort_keys=True)


def quiet_run_s(key: str) -> float:
    """Seconds of one run of the analysis at a job key's shape, timed here while nothing else
    ran: the fastest of up to :data:`~rnnviz.serve.settings.QUIET_REPEATS` runs within
    :data:`~rnnviz.serve.settings.QUIET_TIMING_S`, kept per shape (the tabs' budgets count in
    it: :class:`~rnnviz.serve.budget.Cost`)."""
    shape = shape_key(key)
    if shape not in _QUIET:
        cfg, data = config_of(shape), _data(shape)
        a = analyze(cfg, repeats=QUIET_REPEATS, budget_s=QUIET_TIMING_S, data=data, log_pass=False)
        _QUIET[shape] = a.timing.run_min_s
        while len(_QUIET) > MAX_QUIET:
            _QUIET.popitem(last=False)
    _QUIET.move_to_end(shape)
    return _QUIET[shape]


def compiled_strategies(key: str) -> tuple[str, ...]:
    """The strategies whose analysis at a job's key this worker has compiled (what the
    Strategies and Devices tabs' budgets need not count again)."""
    cfg, data = config_of(key), _data(key)

    def compiled(strategy: str) -> bool:
        try:
            return _is_compiled(cfg.replace(strategy=strategy), data=data)
        except ConfigError:  # over the budgets at this shape: the tab leaves it out
            return False

    return tuple(s for s in available_strategies(cfg) if compiled(s))


def strategy_availability(key: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """``(available, {strategy: why not})`` for this config's cell."""
    cfg = config_of(key)
    return available_strategies(cfg), {
        s: why for s in strategy_names() if (why := strategy_unavailable(s, cfg))
    }


def scaling_table(key: str, lens: tuple[int, ...]) -> pd.DataFrame:
    """:func:`~rnnviz.studies.comparisons.scaling` at each T of ``lens``, 3 timed runs each, on
    synthetic inputs (costs do not depend on values)."""
    return scaling(config_of(key), lens, repeats=3)


def devices_live(key: str, repeats: int, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """:func:`~rnnviz.studies.comparisons.run_on_devices` at a job's key on every device here,
    for every strategy its cell can run (or those in ``only``), at most ``repeats`` timed runs
    each. On a machine of one device, a row the Strategies tab timed here is reused when it
    was allowed as many runs or is already precise (:func:`_precise`)."""
    cfg = config_of(key)
    names = only or available_strategies(cfg)
    devices = present_devices()
    reused = {}
    for s in names if len(devices) == 1 else ():
        kept = _TIMED_ROWS.get((key, s))
        if kept is not None and (kept[0] >= repeats or _precise(kept[1])):
            reused[s] = kept[1]
    missing = [s for s in names if s not in reused]
    timed = pd.DataFrame()
    if missing:
        timed = run_on_devices(
            cfg,
            strategies=missing,
            repeats=repeats,
            data=_data(key),
            params=_weights(key),
            precision=TIMING_PRECISION,
            reference=_reference(key),
        )
    if not reused:
        return timed
    rows = {s: _device_row(devices[0], row) for s, row in reused.items()}
    rows.update({r["strategy"]: r for r in timed.to_dict("records")})
    return pd.DataFrame([rows[s] for s in names])


def _precise(row: dict[str, Any]) -> bool:
    """Whether a timed row's 90 % interval is within the precision after the fewest runs the
    rule stops at (a row of one run has no interval).

    >>> _precise({"repeats": 3, "run_s": 0.5, "run_halfwidth_s": 0.02})
    True
    >>> _precise({"repeats": 2, "run_s": 0.5, "run_halfwidth_s": 0.02})  # fewer runs than the rule's
    False
    >>> _precise({"repeats": 3, "run_s": 0.5, "run_halfwidth_s": 0.2})
    False
    """
    return row["repeats"] >= MIN_PRECISE_REPEATS and row["run_halfwidth_s"] <= TIMING_PRECISION * row["run_s"]


def _device_row(device: jax.Device, row: dict[str, Any]) -> dict[str, Any]:
    """A Strategies row as :func:`~rnnviz.studies.comparisons.run_on_devices` writes it."""
    where = {"device_kind": device.platform, "device_name": str(device.device_kind), "device_id": device.id}
    same = ("strategy", "compile_s", "run_s", "run_halfwidth_s", "repeats", "peak_bytes", "loss")
    return {
        **where,
        **{c: row[c] for c in same},
        "max_grad_diff": row["max_abs_diff"],
        "quick_compiled": row["quick_compiled"],
    }


def part_gains(gains: list[float], part: int, parts: int) -> list[float]:
    """Part ``part`` of ``parts`` of ``gains``: every ``parts``-th from index ``part``, padded
    with its last to ⌈len / parts⌉ so that every part is one size (one executable).

    >>> part_gains([0.5, 0.75, 1.0, 1.25, 1.5], 1, 3), part_gains([0.5, 0.75, 1.0, 1.25, 1.5], 2, 3)
    ([0.75, 1.5], [1.0, 1.0])
    """
    chosen = gains[part::parts]
    return chosen + chosen[-1:] * (-(-len(gains) // parts) - len(chosen))


def _gains(lo: float, hi: float, n: int) -> list[float]:
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def phase(
    key: str, lo: float, hi: float, n: int, seeds: int, part: int = 0, parts: int = 1
) -> tuple[pd.DataFrame, float | None]:
    """Gradient norms over ``n`` gains evenly spaced in [lo, hi] × ``seeds`` seeds from the
    config's, in one sweep (or part ``part`` of ``parts``: :func:`part_gains`).

    Returns:
      ``(frame, critical gain)``: :func:`~rnnviz.studies.sweep.sweep`'s tidy frame and
      :func:`~rnnviz.studies.sweep.critical_gain` (None for trained weights and cells other
      than simple).
    """
    cfg = config_of(key)
    gains = part_gains(_gains(lo, hi, n), part, parts)
    over = {"recurrent_gain": gains, "seed": list(range(cfg.seed, cfg.seed + seeds))}
    weights = _weights(key)
    # the later parts' points count: the second part compiles the sweep when the rest point
    # by point through the page's executable would cost more
    to_come = len(gains) * seeds * (parts - part - 1)
    df = sweep_reusing(cfg, over, data=_data(key), params=weights, to_come=to_come)
    df = df.drop_duplicates(ignore_index=True)  # the padding
    return df, None if weights is not None else critical_gain(cfg, range(cfg.seed, cfg.seed + seeds))


def lyapunov_phase_table(
    key: str, lo: float, hi: float, n: int, seeds: int
) -> tuple[pd.DataFrame, float | None]:
    """λ₁ over ``n`` gains in [lo, hi] × ``seeds`` seeds: per gain ``lyapunov`` (the mean) and
    ``lo``/``hi`` (its range), and the gain where the mean crosses 0 (or None):
    :func:`~rnnviz.studies.lyapunov.lyapunov_phase`."""
    cfg = config_of(key)
    seeds_range = range(cfg.seed, cfg.seed + seeds)
    return lyapunov_phase(cfg, _gains(lo, hi, n), seeds_range, data=_data(key), params=_weights(key))


def lyapunov(key: str, k: int) -> Lyapunov:
    """The ``k`` leading Lyapunov exponents of a job's key (the tab fits the decay itself)."""
    return _lyapunov(config_of(key), k=k, measure_decay=False, data=_data(key), params=_weights(key))


def jacobians(key: str, k: int, example: int, steps: int, part: int = 0, parts: int = 1) -> Jacobians:
    """Top-``k`` singular values of each step Jacobian ∂carry_t/∂carry_{t−1} of example
    ``example`` at every ⌈T / steps⌉-th step; of those, the ``part``-th of ``parts``
    interleaved parts (:func:`~rnnviz.studies.jacobians.part_steps`)."""
    cfg, data, params = config_of(key), _data(key), _weights(key)
    return _jacobians(
        cfg, k=k, example=example, max_steps=steps, data=data, params=params, part=part, parts=parts
    )


def teaching_page(name: str) -> dict[str, Any]:
    """The data of the teaching page ``name`` (:data:`rnnviz.base.presets.PAGES`), every point
    of its grid computed here (:func:`~rnnviz.report.explorable_data.preset_data`)."""
    preset = PAGES[name]
    return preset_data(preset, explorable_grid(preset.config(), preset.over))


# ---- your own model: loaded once per worker and version ------------------------------------


@functools.lru_cache(maxsize=2)
def _model(path: str, version: tuple) -> Model:
    del version  # part of the cache key only: a checkpoint written again is read again
    return load_model(path, max_bytes=model_max_bytes())


def model_summary(path: str, version: tuple) -> ModelSummary:
    """Load the checkpoint at ``path`` (once per worker and version,
    :func:`~rnnviz.serve.folders.stamp`) and say what it is; one that cannot be used raises
    its :class:`~rnnviz.checkpoints.CheckpointError`."""
    m = _model(path, version)
    width, has_tokenizer = m.stream_widths[0], m.tokenizer is not None
    return ModelSummary(m.model_type, m.source, m.n_layers, m.n_params, m.vocab_size, width, has_tokenizer)


def model_tokens(path: str, version: tuple, text: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``text`` as the model's token ids and each token's text, by its ``tokenizer.json``.

    Raises:
      CheckpointError: no ``tokenizer.json``, no tokens, a tokenizer that cannot be read, or no
        ``tokenizers`` package in the worker.
    """
    model = _model(path, version)
    try:
        ids, tokens = tokenize(model, text)
    except CheckpointError:
        raise
    except ImportError:
        why = 'needs the tokenizers package to read text (pip install "rnnviz[models]")'
        raise CheckpointError(str(model.tokenizer), why) from None
    except Exception as err:  # the tokenizers library's own: a tokenizer.json it cannot read
        raise CheckpointError(str(model.tokenizer), f"cannot be read by tokenizers ({err})") from None
    return tuple(int(i) for i in ids[0]), tuple(tokens)


def model_inputs(model: Model, inputs_json: str) -> tuple[np.ndarray, list[str] | None]:
    """A model's inputs from what the tab asks for, and each position's text.

    Args:
      model: the loaded model.
      inputs_json: ``{"ids": [...], "tokens": [...]}`` (one sequence of token ids, and
        their text or None), or ``{"normal": [B, T], "seed": s}``: a stack's inputs
        ``[B, T, I]`` drawn from N(0, 1) by the seed.

    Returns:
      ``(inputs, tokens)``: ``<int32>[1, T]`` ids or ``<float32>[B, T, I]``, and the tokens' text.
    """
    asked = json.loads(inputs_json)
    if "ids" in asked:
        return np.asarray([asked["ids"]], np.int64), asked.get("tokens")
    batch, steps = asked["normal"]
    rng = np.random.default_rng(asked["seed"])
    return rng.normal(size=(batch, steps, model.stream_widths[0])).astype(np.float32), None


def model_analysis(path: str, version: tuple, inputs_json: str, position: int | None) -> ModelAnalysis:
    """:func:`~rnnviz.studies.models.analyze_model` of the checkpoint at ``path`` on the inputs
    ``inputs_json`` asks for (:func:`model_inputs`), its connectivity read at ``position``
    (None: the last prediction).

    Raises:
      CheckpointError: the checkpoint cannot be used, or its inputs or position do not fit it.
    """
    model = _model(path, version)
    inputs, tokens = model_inputs(model, inputs_json)
    try:
        return analyze_model(model, inputs, position=position, tokens=tokens)
    except ValueError as err:  # ids outside the vocabulary, a position past the end
        raise CheckpointError(path, str(err)) from None


# ---- training: the Trainer stays in the worker ---------------------------------------------

_TRAINERS: dict[str, Trainer] = {}


def light(records: list[Training]) -> list[Training]:
    """The runs without their kept weights: what the server keeps and draws (the weights stay
    in the run files, which the workers open)."""
    return [dataclasses.replace(r, weight_tree=None) for r in records]


def _progress(trainer: Trainer, key: str) -> TrainProgress:
    records = trainer.records() if trainer.steps_done > 0 or trainer.done else None
    paths, error = (), None
    if trainer.done and records is not None:
        try:
            paths = tuple(str(p) for p in trained_runs.write_runs(records, key))
        except OSError as err:  # a full disk or a folder that is not writable: the curves still show
            error = f"the run files could not be written ({err.strerror or err})"
    done = None if records is None else light(records)
    return TrainProgress(
        trainer.steps_done, trainer.steps, trainer.run_s, trainer.done, trainer.stopped, done, paths, error
    )


def trained_curves(key: str, paths: tuple[str, ...]) -> list[Training]:
    """The runs of the training call ``key`` reopened from their files at ``paths``, without
    their weights (after the server dropped them from memory, or restarted)."""
    del key  # part of the cache key only
    return light([saved_run(p) for p in paths])


def train_start(key: str, cfg_key: str, settings: dict[str, Any]) -> TrainProgress:
    """Compile and set up the runs of ``settings`` under ``key``: the seeds, and a
    :class:`~rnnviz.studies.training.TrainSettings` dict (:data:`DATA_TASK`: the key's data set).

    Raises:
        ConfigError: a setting that is not allowed, or a config that does not fit the task.
    """
    cfg = config_of(cfg_key)
    asked = TrainSettings.from_dict({k: v for k, v in settings.items() if k not in _TAB_ONLY})
    seeds = {"seed": list(range(cfg.seed, cfg.seed + settings["seeds"]))}
    data = _data(cfg_key) if asked.task == DATA_TASK else None
    _TRAINERS[key] = trainer = Trainer(cfg, seeds, settings=asked, data=data)
    return TrainProgress(0, trainer.steps, 0.0, False, False, None)


def train_advance(key: str, budget_s: float) -> TrainProgress:
    """Train ``key``'s runs for about ``budget_s`` seconds (whole chunks, at least one)."""
    trainer = _TRAINERS.get(key)
    if trainer is None:
        why = "this training run is no longer in its worker (the worker was replaced)"
        raise LookupError(f"{why}; press Train to start again")
    start = time.perf_counter()
    trainer.advance()  # at least one chunk (none once done)
    while not trainer.done and time.perf_counter() - start < budget_s:
        trainer.advance()
    progress = _progress(trainer, key)
    if trainer.done:
        del _TRAINERS[key]
    return progress


def train_stop(key: str) -> None:
    """Mark ``key``'s runs stopped after the current chunk (nothing if none is here)."""
    trainer = _TRAINERS.get(key)
    if trainer is not None:
        trainer.stop()


__all__ = [
    "DATA_TASK",
    "analysis",
    "compilation_cache_stats",
    "compile_shape",
    "compiled_strategies",
    "connectivity_job",
    "data_budget",
    "data_preview",
    "devices_live",
    "environment",
    "is_compiled",
    "jacobians",
    "light",
    "load_source",
    "lyapunov",
    "lyapunov_phase_table",
    "model_analysis",
    "model_inputs",
    "model_summary",
    "model_tokens",
    "over_training_job",
    "part_gains",
    "phase",
    "quiet_run_s",
    "run_summary",
    "saved_run",
    "scaling_table",
    "setup",
    "shape_key",
    "strategies_table",
    "strategy_availability",
    "teaching_page",
    "train_advance",
    "train_start",
    "train_stop",
    "trained_curves",
]

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
from rnnviz.base.models import BlockPhase, ModelDevices, ModelStrategies
from rnnviz.base.presets import PAGES
from rnnviz.checkpoints import CheckpointError
from rnnviz.config import BLOCK_FIXES, ConfigError, RunConfig
from rnnviz.dataset import Dataset, load_dataset, resolve
from rnnviz.dataset.budget import Budget
from rnnviz.dataset.builtin import BUILTINS
from rnnviz.dataset.describe import Preview, preview_record
from rnnviz.dataset.files import MAX_DATA_BYTES, MAX_SEQUENCES, load_file
from rnnviz.engine.allocator import keep_freed_buffers
from rnnviz.engine.compile import enable_compilation_cache
from rnnviz.engine.environment import environment as environment  # a job: the machine's devices
from rnnviz.engine.timing import MIN_PRECISE_REPEATS
from rnnviz.report.explorable_data import preset_data
from rnnviz.report.models import ModelComparison, block_comparison
from rnnviz.serve import trained_runs
from rnnviz.serve.folders import stamp
from rnnviz.serve.model_files import model_max_bytes
from rnnviz.serve.requests import ModelSummary, RunSummary, TrainProgress, config_of, route
from rnnviz.serve.settings import (
    BLOCK_STRATEGY_S,
    QUIET_REPEATS,
    QUIET_TIMING_S,
    TIMING_BUDGET_S,
    TIMING_PRECISION,
    settings,
)
from rnnviz.studies.block_models import block_inputs, block_model, sized_block
from rnnviz.studies.block_phase import block_phase as _block_phase
from rnnviz.studies.block_phase import knob_grid
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
from rnnviz.studies.model_costs import block_on_devices
from rnnviz.studies.model_costs import block_strategies as model_strategies
from rnnviz.studies.model_jacobians import ModelJacobians, model_jacobians
from rnnviz.studies.model_lyapunov import ModelLyapunov, model_lyapunov
from rnnviz.studies.model_states import ModelStates, model_states
from rnnviz.studies.models import Model, ModelAnalysis, analyze_model, is_compiled_for, load_model, tokenize
from rnnviz.studies.over_training import LayersOverTraining, OverTraining, layers_over_training, over_training
from rnnviz.studies.sweep import critical_gain, sweep_reusing
from rnnviz.studies.training import DATA_TASK, Trainer, Training, TrainSettings, load_run
from rnnviz.tables.strategies import strategy_names

log = logging.getLogger("rnnviz.jobs")


def setup_idle() -> None:
    """Run once in the idle worker: the compilation cache and buffers kept in the heap."""
    limits = settings()
    if limits.jax_cache != "off":
        enable_compilation_cache(limits.jax_cache, max_bytes=limits.jax_cache_mb * 2**20)
        jax.monitoring.register_event_listener(_count_cache_event)
    keep_freed_buffers()


def setup() -> None:
    """Run once in each visitors' worker: :func:`setup_idle`, and the default analysis compiled
    (every page opens at it, and may call any worker)."""
    setup_idle()
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


# ---- what a job's key names, once per worker and file version (a stamp, only in the cache key)


@functools.lru_cache(maxsize=8)
def _run(path: str, version: tuple) -> Training:
    return load_run(path)


def saved_run(path: str) -> Training:
    """A saved run (``.rnnviz``); a bad file raises its :class:`~rnnviz.studies.training.RunFileError`."""
    return _run(path, stamp(path))


@functools.lru_cache(maxsize=8)
def _load(source_json: str, version: tuple) -> Dataset:
    source = json.loads(source_json)
    options = {k: v for k, v in source.items() if k != "name" and not k.startswith("_")}
    if source["name"] in BUILTINS or options:  # the built-ins bound themselves (the text's windows)
        return load_dataset(source["name"], **options)
    return load_file(resolve(source["name"]), data_budget())


def load_source(source_json: str) -> Dataset:
    """A built-in's name and options, or a file's path, as a data set (``_`` keys only tell sources apart)."""
    return _load(source_json, stamp(json.loads(source_json)["name"]))


def data_budget() -> Budget:
    """The loaders' own budget, or a quarter of a worker's memory cap where that is less: a file
    a worker could hold only over its cap would make every successor read it and retire again."""
    cap_mb = settings().worker_max_rss_mb
    if cap_mb * 2**20 // 4 >= MAX_DATA_BYTES:
        return Budget(MAX_DATA_BYTES, MAX_SEQUENCES)
    why = f"a quarter of a worker's {cap_mb} MB memory cap (RNNVIZ_WORKER_MAX_RSS_MB)"
    return Budget(cap_mb * 2**20 // 4, MAX_SEQUENCES, why)


def _data(key: str) -> Dataset | None:
    """The data set a job's key names (``"data": {"name": …, options…}``), or None."""
    source = json.loads(key).get("data")
    return None if source is None else load_source(json.dumps(source, sort_keys=True))


def _given(key: str) -> dict[str, Any]:
    """The studies' ``data`` and ``params`` a job's key names (``"weights": {"path": …, "step": …}``)."""
    weights = json.loads(key).get("weights")
    params = None if weights is None else saved_run(weights["path"]).weights(weights["step"])
    return {"data": _data(key), "params": params}


def run_summary(path: str) -> RunSummary:
    """What the sidebar shows of a saved run (a bad file raises its error)."""
    run = saved_run(path)
    steps = tuple(int(s) for s in run.weight_steps)
    return RunSummary(run.label, run.config, steps, run.data_source, run.final_loss(), run.metric_name)


def data_preview(source_json: str, index: int = 0) -> Preview:
    """One sequence of a data source (a bad one raises its one :class:`DataError`)."""
    ds = load_source(source_json)
    return preview_record(ds, min(max(index, 0), ds.n_sequences - 1))


# ---- the tabs' computations ----------------------------------------------------------------


#: ``RunConfig.block`` → how λ over training reads a saved run of it: a bare cell's λ₁ … λ_k and
#: step-Jacobian spectrum, or a reference block's λ₁ per recurrent layer.
OVER_TRAINING = {
    "cell": lambda run, k: over_training(run, k=k, max_points=32),
    "reference": lambda run, k: layers_over_training(run, max_points=32),
}


def over_training_job(path: str, k: int) -> OverTraining | LayersOverTraining:
    """λ over training at every kept step of a saved run, its data reloaded (:data:`OVER_TRAINING`)."""
    run = saved_run(path)
    return OVER_TRAINING[run.config.block](run, k)


def connectivity_job(key: str, index: int, step: int | None, measure: str | None) -> Connectivity:
    """:func:`~rnnviz.studies.connectivity.connectivity` of sequence ``index`` of the key's data
    set (:class:`ConfigError` when it names none), read at ``step`` (None: the last real one)."""
    given = _given(key)
    if given["data"] is None:
        raise ConfigError("data", None, "a data set: choose one in the sidebar's Data")
    return connectivity(
        config_of(key), given["data"], index, params=given["params"], step=step, measure=measure
    )


def is_compiled(key: str) -> bool:
    """Whether the key's analysis would reuse this worker's executables (no compile)."""
    return _is_compiled(config_of(key), data=_data(key))  # weights: the same executables


def compile_shape(key: str, run: bool = False) -> bool:
    """Idle time's job for a shape a visitor may switch to next: its analysis compiled, or with
    ``run`` run once (compiling its log-magnitude pass where it needs one); False: all done."""
    cfg, data = config_of(key), _data(key)
    if run:
        analyze(cfg, repeats=1, budget_s=0.0, data=data)
    else:
        compile_analysis(cfg, data=data)
    return False


def analysis(key: str) -> Analysis:
    """The analysis of a job's key, timed again while under ``TIMING_BUDGET_S`` (at most 5 runs)."""
    return analyze(config_of(key), repeats=5, budget_s=TIMING_BUDGET_S, **_given(key))


def _tensors(key: str) -> dict[str, np.ndarray] | None:
    """The trained tensors a block's key names (``"weights": {"path": …, "step": …}``), or None."""
    weights = json.loads(key).get("weights")
    return None if weights is None else saved_run(weights["path"]).tensors(weights["step"])


@functools.lru_cache(maxsize=2)
def _block_model(cfg: RunConfig, weights_key: str, version: tuple) -> Model:
    return block_model(cfg, _tensors(weights_key))


def _block(key: str) -> tuple[Model, np.ndarray]:
    """What a block's views read: the key's reference block (drawn from its seed, or a trained
    run's tensors at a kept step) and its inputs, the first B sequences of the key's data set,
    else the bare cell's (:func:`~rnnviz.studies.block_models.block_inputs`)."""
    cfg, weights = config_of(key), json.loads(key).get("weights")
    named = json.dumps({"weights": weights and {"path": weights["path"], "step": weights["step"]}})
    model = _block_model(cfg, named, stamp(weights["path"]) if weights else ())
    return model, block_inputs(cfg, _data(key))


def block_is_compiled(key: str) -> bool:
    """Whether the key's block analysis would reuse this worker's executable (no compile)."""
    return is_compiled_for(*_block(key))


def block_width(cell: str, layers: int, input_size: int, params: int) -> tuple[int, int]:
    """The width H at which ``cell``'s reference block of ``layers`` layers, reading
    ``input_size`` features, comes nearest ``params`` parameters, and its drawn count
    (:func:`~rnnviz.studies.block_models.sized_block`). Only these fields set the count, so one
    answer serves every seed, length and batch; none within 5 % raises the :class:`ConfigError`
    that names the nearest."""
    fixed = {name: value for name, (value, _) in BLOCK_FIXES.items()}
    base = RunConfig(cell=cell, block="reference", layers=layers, input_size=input_size, **fixed)
    cfg, count = sized_block(base, params)
    return cfg.hidden_size, count


def block_analysis(key: str) -> tuple[ModelSummary, ModelAnalysis]:
    """A reference block's per-layer analysis (:func:`~rnnviz.studies.block_models.analyze_block`)
    on the key's data set or the bare cell's inputs, at its seed's draw or a trained run's
    tensors, and what the page says of its model."""
    m, x = _block(key)
    summary = ModelSummary(m.model_type, m.source, m.n_layers, m.n_params, 0, m.input_size, False)
    return summary, analyze_model(m, x)


def block_jacobians(key: str, k: int) -> ModelJacobians:
    """The top-k singular values of each recurrent layer's step Jacobian of a reference block
    (:func:`~rnnviz.studies.model_jacobians.model_jacobians`), on its first example."""
    return model_jacobians(*_block(key), k=k)


def block_lyapunov(key: str) -> ModelLyapunov:
    """λ₁ of each recurrent layer of a reference block along its first example
    (:func:`~rnnviz.studies.model_lyapunov.model_lyapunov`)."""
    return model_lyapunov(*_block(key))


def block_states(key: str) -> ModelStates:
    """Each recurrent layer's state over the steps of a reference block's first example: every
    leaf's norm and first numbers (:func:`~rnnviz.studies.model_states.model_states`)."""
    return model_states(*_block(key))


def block_strategies(key: str, repeats: int) -> ModelStrategies:
    """Each way of computing a reference block's per-step gradients, compiled, checked against
    each other and timed in the same rounds as plain ``jax.grad`` of its loss (at most
    ``repeats`` rounds, fewer once a way's runs pass ``BLOCK_STRATEGY_S``;
    :func:`~rnnviz.studies.model_costs.block_strategies`)."""
    return model_strategies(*_block(key), repeats, BLOCK_STRATEGY_S)


def block_devices(key: str, repeats: int) -> ModelDevices:
    """:func:`block_strategies` on every device this worker's JAX sees, and the GPUs it sees
    (:func:`~rnnviz.studies.model_costs.block_on_devices`): the server learns them here."""
    return block_on_devices(*_block(key), None, repeats, BLOCK_STRATEGY_S)


def block_phase(key: str, lo: float, hi: float, n: int, seeds: int) -> BlockPhase:
    """A reference block's phase diagram: its design's memory knob at ``n`` values from ``lo``
    to ``hi`` (:func:`~rnnviz.studies.block_phase.knob_grid`) × ``seeds`` seeds from the key's,
    one executable for the sweep (:func:`~rnnviz.studies.block_phase.block_phase`)."""
    cfg = config_of(key)
    return _block_phase(cfg, knob_grid(cfg, lo, hi, n), range(cfg.seed, cfg.seed + seeds))


def block_report(keys: tuple[str, ...]) -> ModelComparison:
    """Reference blocks side by side, each on its key's inputs and weights, as the HTML report
    reads them (:func:`~rnnviz.report.models.block_comparison`)."""
    configs = [config_of(key) for key in keys]
    inputs = [block_inputs(cfg, _data(key)) for key, cfg in zip(keys, configs)]
    return block_comparison(configs, inputs=inputs, tensors=[_tensors(key) for key in keys])


def quiet_run_s(key: str) -> float:
    """Seconds of one analysis at a job key's shape, timed here while nothing else ran (the
    fastest of ``QUIET_REPEATS`` runs within ``QUIET_TIMING_S``): the tabs' budgets' unit."""
    return _quiet_run_s(route(config_of(key), json.loads(key).get("data")))  # what run times depend on


@functools.lru_cache(maxsize=64)
def _quiet_run_s(shape: str) -> float:
    a = analyze(
        config_of(shape), repeats=QUIET_REPEATS, budget_s=QUIET_TIMING_S, log_pass=False, **_given(shape)
    )
    return a.timing.run_min_s


def strategy_availability(key: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """``(available, {strategy: why not})`` for this config's cell."""
    cfg = config_of(key)
    return available_strategies(cfg), {
        s: why for s in strategy_names() if (why := strategy_unavailable(s, cfg))
    }


def compiled_strategies(key: str) -> tuple[str, ...]:
    """The strategies whose analysis at a job's key this worker has compiled (not counted again)."""
    cfg, data = config_of(key), _data(key)

    def compiled(strategy: str) -> bool:
        try:
            return _is_compiled(cfg.replace(strategy=strategy), data=data)
        except ConfigError:  # over the budgets at this shape: the tab leaves it out
            return False

    return tuple(s for s in available_strategies(cfg) if compiled(s))


#: The Strategies rows this worker timed last, by (key, strategy), with the runs they were
#: allowed: on a machine of one device, the Devices tab's rows, not timed again.
_TIMED_ROWS: collections.OrderedDict[tuple[str, str], tuple[int, dict[str, Any]]] = collections.OrderedDict()
TIMED_ROWS = 64


def strategies_table(key: str, repeats: int, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """:func:`~rnnviz.studies.comparisons.compare_strategies` at a job's key (of the strategies
    ``only``), each row kept for :func:`devices_live`."""
    reference = None if only is None or "accumulate" in only else _reference(key)
    table = compare_strategies(config_of(key), strategies=only, reference=reference, **_timed(key, repeats))
    for row in table.to_dict("records"):
        _TIMED_ROWS[key, row["strategy"]] = (repeats, row)
        _TIMED_ROWS.move_to_end((key, row["strategy"]))
        while len(_TIMED_ROWS) > TIMED_ROWS:
            _TIMED_ROWS.popitem(last=False)
    return table


def _timed(key: str, repeats: int) -> dict[str, Any]:
    """At most ``repeats`` timed runs, until the precision, on the key's data and weights."""
    return {"repeats": repeats, "precision": TIMING_PRECISION, **_given(key)}


@functools.lru_cache(maxsize=4)
def _reference(key: str) -> Any:
    """The accumulator's ∂L/∂W at a job's key, once per worker for all its rows."""
    return accumulator_grads(config_of(key), **_given(key))


def devices_live(key: str, repeats: int, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """:func:`~rnnviz.studies.comparisons.run_on_devices` at a job's key (of the strategies
    ``only``). On one device, a row the Strategies tab timed here is reused when it was allowed
    as many runs or is already precise."""
    cfg = config_of(key)
    names = only or available_strategies(cfg)
    devices = present_devices()
    reused = {}
    for s in names if len(devices) == 1 else ():
        runs, row = _TIMED_ROWS.get((key, s), (0, None))
        if row is not None and (runs >= repeats or _precise(row)):
            reused[s] = row
    missing = [s for s in names if s not in reused]
    timed = pd.DataFrame()
    if missing:
        timed = run_on_devices(cfg, strategies=missing, reference=_reference(key), **_timed(key, repeats))
    if not reused:
        return timed
    rows = {s: _device_row(devices[0], row) for s, row in reused.items()}
    rows.update({r["strategy"]: r for r in timed.to_dict("records")})
    return pd.DataFrame([rows[s] for s in names])


def _precise(row: dict[str, Any]) -> bool:
    """Whether a timed row met the precision after the fewest runs the rule stops at."""
    return row["repeats"] >= MIN_PRECISE_REPEATS and row["run_halfwidth_s"] <= TIMING_PRECISION * row["run_s"]


def _device_row(device: jax.Device, row: dict[str, Any]) -> dict[str, Any]:
    """A Strategies row as :func:`~rnnviz.studies.comparisons.run_on_devices` writes it."""
    same = ("strategy", "compile_s", "run_s", "run_halfwidth_s", "repeats", "peak_bytes", "loss")
    return {
        "device_kind": device.platform,
        "device_name": str(device.device_kind),
        "device_id": device.id,
        **{c: row[c] for c in same},
        "max_grad_diff": row["max_abs_diff"],
        "quick_compiled": row["quick_compiled"],
    }


def scaling_table(key: str, lens: tuple[int, ...]) -> pd.DataFrame:
    """:func:`~rnnviz.studies.comparisons.scaling` at each T of ``lens`` (synthetic inputs)."""
    return scaling(config_of(key), lens, repeats=3)


def part_gains(gains: list[float], part: int, parts: int) -> list[float]:
    """Every ``parts``-th of ``gains`` from ``part``, padded with its last so that every part is
    one size (one executable)."""
    chosen = gains[part::parts]
    return chosen + chosen[-1:] * (-(-len(gains) // parts) - len(chosen))


def _gains(lo: float, hi: float, n: int) -> list[float]:
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def phase(
    key: str, lo: float, hi: float, n: int, seeds: int, part: int = 0, parts: int = 1
) -> tuple[pd.DataFrame, float | None]:
    """Gradient norms over ``n`` gains in [lo, hi] × ``seeds`` seeds (or part ``part`` of
    ``parts``: :func:`part_gains`), and the critical gain (None for trained weights and cells
    other than simple)."""
    cfg, given = config_of(key), _given(key)
    gains = part_gains(_gains(lo, hi, n), part, parts)
    over = {"recurrent_gain": gains, "seed": list(range(cfg.seed, cfg.seed + seeds))}
    # the later parts' points count: the second part compiles the sweep when the rest point
    # by point through the page's executable would cost more
    to_come = len(gains) * seeds * (parts - part - 1)
    df = sweep_reusing(cfg, over, to_come=to_come, **given).drop_duplicates(ignore_index=True)  # the padding
    return df, None if given["params"] is not None else critical_gain(cfg, range(cfg.seed, cfg.seed + seeds))


def lyapunov_phase_table(
    key: str, lo: float, hi: float, n: int, seeds: int
) -> tuple[pd.DataFrame, float | None]:
    """:func:`~rnnviz.studies.lyapunov.lyapunov_phase` over ``n`` gains in [lo, hi] × ``seeds`` seeds."""
    cfg = config_of(key)
    return lyapunov_phase(cfg, _gains(lo, hi, n), range(cfg.seed, cfg.seed + seeds), **_given(key))


def lyapunov(key: str, k: int) -> Lyapunov:
    """The ``k`` leading Lyapunov exponents of a job's key (the tab fits the decay itself)."""
    return _lyapunov(config_of(key), k=k, measure_decay=False, **_given(key))


def jacobians(key: str, k: int, example: int, steps: int, part: int = 0, parts: int = 1) -> Jacobians:
    """:func:`~rnnviz.studies.jacobians.jacobians` at up to ``steps`` steps (or a part of them)."""
    cfg = config_of(key)
    return _jacobians(cfg, k=k, example=example, max_steps=steps, part=part, parts=parts, **_given(key))


def teaching_page(name: str) -> dict[str, Any]:
    """The data of the teaching page ``name`` (:data:`rnnviz.base.presets.PAGES`), computed here."""
    preset = PAGES[name]
    return preset_data(preset, explorable_grid(preset.config(), preset.over))


# ---- your own model: loaded once per worker and version ------------------------------------


@functools.lru_cache(maxsize=2)
def _model(path: str, version: tuple) -> Model:
    return load_model(path, max_bytes=model_max_bytes())


def model_summary(path: str, version: tuple) -> ModelSummary:
    """What the checkpoint at ``path`` is; one that cannot be used raises its
    :class:`~rnnviz.checkpoints.CheckpointError`."""
    m = _model(path, version)
    width, has_tokenizer = m.input_size, m.tokenizer is not None
    return ModelSummary(m.model_type, m.source, m.n_layers, m.n_params, m.vocab_size, width, has_tokenizer)


def model_tokens(path: str, version: tuple, text: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``text`` as the model's token ids and each token's text (every failure a :class:`CheckpointError`)."""
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
    """``(inputs, tokens' text)`` from ``{"ids": [...], "tokens": [...]}`` (one sequence of ids
    ``[1, T]``), or ``{"normal": [B, T], "seed": s}`` (a stack's ``<float32>[B, T, I]``, N(0, 1))."""
    asked = json.loads(inputs_json)
    if "ids" in asked:
        return np.asarray([asked["ids"]], np.int64), asked.get("tokens")
    batch, steps = asked["normal"]
    rng = np.random.default_rng(asked["seed"])
    return rng.normal(size=(batch, steps, model.input_size)).astype(np.float32), None


def model_analysis(path: str, version: tuple, inputs_json: str, position: int | None) -> ModelAnalysis:
    """:func:`~rnnviz.studies.models.analyze_model` on :func:`model_inputs`, read at ``position``
    (None: the last prediction); inputs that do not fit raise :class:`CheckpointError`."""
    model = _model(path, version)
    inputs, tokens = model_inputs(model, inputs_json)
    try:
        return analyze_model(model, inputs, position=position, tokens=tokens)
    except ValueError as err:  # ids outside the vocabulary, a position past the end
        raise CheckpointError(path, str(err)) from None


# ---- training: the Trainer stays in the worker ---------------------------------------------

_TRAINERS: dict[str, Trainer] = {}


def light(records: list[Training]) -> list[Training]:
    """The runs without their weights (which stay in the run files): what the server keeps."""
    return [dataclasses.replace(r, weight_tree=None) for r in records]


def trained_curves(key: str, paths: tuple[str, ...]) -> list[Training]:
    """The runs of the training call ``key`` (part of the cache key only) reopened from their files."""
    return light([saved_run(p) for p in paths])


def train_start(key: str, cfg_key: str, settings: dict[str, Any]) -> TrainProgress:
    """Set up the runs of ``settings`` (the tab's ``seeds`` and ``batch``, and a ``TrainSettings``
    dict) under ``key``; a setting that is not allowed raises :class:`ConfigError`."""
    cfg = config_of(cfg_key)
    asked = TrainSettings.from_dict({k: v for k, v in settings.items() if k not in ("seeds", "batch")})
    seeds = {"seed": list(range(cfg.seed, cfg.seed + settings["seeds"]))}
    data = _data(cfg_key) if asked.task == DATA_TASK else None
    _TRAINERS[key] = trainer = Trainer(cfg, seeds, settings=asked, data=data)
    return TrainProgress(0, trainer.steps, 0.0, False, False, None)


def train_advance(key: str, budget_s: float) -> TrainProgress:
    """Train ``key``'s runs for about ``budget_s`` seconds (whole chunks, at least one); once
    done, write their files."""
    trainer = _TRAINERS.get(key)
    if trainer is None:
        why = "this training run is no longer in its worker (the worker was replaced)"
        raise LookupError(f"{why}; press Train to start again")
    start = time.perf_counter()
    trainer.advance()  # at least one chunk (none once done)
    while not trainer.done and time.perf_counter() - start < budget_s:
        trainer.advance()
    records = trainer.records() if trainer.steps_done > 0 or trainer.done else None
    paths, error = (), None
    if trainer.done:
        try:
            paths = tuple(str(p) for p in trained_runs.write_runs(records, key))
        except OSError as err:  # a full disk or a folder that is not writable: the curves still show
            error = f"the run files could not be written ({err.strerror or err})"
        del _TRAINERS[key]
    done = None if records is None else light(records)
    return TrainProgress(
        trainer.steps_done, trainer.steps, trainer.run_s, trainer.done, trainer.stopped, done, paths, error
    )


def train_stop(key: str) -> None:
    """Mark ``key``'s runs stopped after the current chunk (nothing if none is here)."""
    if key in _TRAINERS:
        _TRAINERS[key].stop()

"""What the dashboard's worker processes run (:mod:`rnnviz.serve.worker`): one function per
computation, taking the config as JSON and returning plain records, so every call and
answer pickles. Nothing here imports Streamlit; the server process imports this module
only to name the functions it sends.

Training keeps its :class:`~rnnviz.studies.training.Trainer` in the worker between calls (the pool
routes every call of one run to the same worker); a worker that was replaced has lost
it, and :func:`train_advance` says so with :class:`LookupError`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import logging
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
import pandas as pd

from rnnviz.analysis import Analysis, analyze, compile_analysis
from rnnviz.analysis import is_compiled as _is_compiled
from rnnviz.base.presets import PAGES
from rnnviz.base.weights import Weights
from rnnviz.checkpoints import CheckpointError
from rnnviz.checkpoints.load import MAX_BYTES as MAX_MODEL_BYTES
from rnnviz.config import ConfigError, RunConfig
from rnnviz.dataset import Dataset, load_dataset, resolve
from rnnviz.dataset.budget import Budget
from rnnviz.dataset.builtin import BUILTINS
from rnnviz.dataset.describe import Preview, preview_record
from rnnviz.dataset.files import MAX_DATA_BYTES, MAX_SEQUENCES, load_file
from rnnviz.engine.allocator import keep_freed_buffers
from rnnviz.engine.compile import enable_compilation_cache
from rnnviz.engine.prepare import static_config
from rnnviz.engine.timing import MIN_PRECISE_REPEATS
from rnnviz.report.explorable_data import preset_data
from rnnviz.serve import trained_runs
from rnnviz.serve.settings import QUIET_REPEATS, QUIET_TIMING_S, TIMING_BUDGET_S, settings
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

#: The Training tab's settings that are not :class:`~rnnviz.studies.training.TrainSettings`: the
#: seeds (the runs' ``over``) and the batch (already the config's).
_TAB_ONLY = ("seeds", "batch")


def setup() -> None:
    """Run once in each new worker: JAX's persistent compilation cache (so a replaced or
    retired worker recompiles from disk), held to its cap, buffers kept in the heap, and the
    default configuration's analysis compiled.
    The folder and cap are the server's settings (``RNNVIZ_JAX_CACHE``, ``off`` turns it
    off; ``RNNVIZ_JAX_CACHE_MB``: :mod:`rnnviz.serve.settings`)."""
    limits = settings()
    if limits.jax_cache != "off":
        enable_compilation_cache(limits.jax_cache, max_bytes=limits.jax_cache_mb * 2**20)
        jax.monitoring.register_event_listener(_count_cache_event)
    keep_freed_buffers()
    # Every page opens at the default configuration, and a visitor's call may go to any
    # worker (spill): each has its executables from the start (from the compilation cache
    # after the first worker compiled them).
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
    """How often this worker's compiles asked the persistent cache and found the executable
    there (a retired worker's successor finds its routes' executables: hits)."""
    return dict(_CACHE_EVENTS)


def config_of(cfg_json: str) -> RunConfig:
    """The config of a job's key (its ``data`` entry, when there is one, is the data source;
    its ``weights`` entry the trained weights)."""
    values = json.loads(cfg_json)
    values.pop("data", None)
    values.pop("weights", None)
    return RunConfig(**values)


@functools.lru_cache(maxsize=8)
def _run(path: str, version: int) -> Training:
    del version  # part of the cache key only: a file written again is read again
    return load_run(path)


def saved_run(path: str) -> Training:
    """A saved run (``.rnnviz``), loaded once per worker (again when the file changes); a
    bad file raises its one :class:`~rnnviz.studies.training.RunFileError`."""
    p = Path(path)
    return _run(str(p), p.stat().st_mtime_ns if p.is_file() else 0)


def _weights(cfg_json: str) -> Weights | None:
    """The trained weights a job's key names (``{"weights": {"path": …, "step": …}}``), or None."""
    source = json.loads(cfg_json).get("weights")
    return None if source is None else saved_run(source["path"]).weights(source["step"])


class RunSummary(NamedTuple):
    """What the sidebar shows of a saved run (no arrays): its label, config, kept steps, data."""

    label: str
    config: RunConfig
    weight_steps: tuple[int, ...]
    data_source: tuple | None
    final_loss: float
    metric: str


def run_summary(path: str) -> RunSummary:
    """The :class:`RunSummary` of the saved run at ``path``; a bad file raises its
    :class:`~rnnviz.studies.training.RunFileError`."""
    run = saved_run(path)
    return RunSummary(
        run.label,
        run.config,
        tuple(int(s) for s in run.weight_steps),
        run.data_source,
        run.final_loss(),
        run.metric_name,
    )


def over_training_job(path: str, k: int) -> OverTraining:
    """λ and the step-Jacobian spectrum at every kept step of a saved run (data reloaded)."""
    return over_training(saved_run(path), k=k, max_points=32)


def connectivity_job(cfg_json: str, index: int, step: int | None, measure: str | None) -> Connectivity:
    """How strongly the output at step ``step`` (None: the last real one) of sequence ``index``
    of the key's data set depends on each input, at the key's weights or the seed's
    initialisation (:func:`~rnnviz.studies.connectivity.connectivity`).

    Raises:
      ConfigError: the key names no data set; a bad index, step or measure; or weights that
        do not fit the config.
    """
    ds = _data(cfg_json)
    if ds is None:
        raise ConfigError("data", None, "a data set: choose one in the sidebar's Data")
    cfg = config_of(cfg_json)
    return connectivity(cfg, ds, index, params=_weights(cfg_json), step=step, measure=measure)


def _data(cfg_json: str) -> Dataset | None:
    """The data set a job's key names (``{"data": {"name": …, options…}}``), or None."""
    source = json.loads(cfg_json).get("data")
    return None if source is None else load_source(json.dumps(source, sort_keys=True))


@functools.lru_cache(maxsize=8)
def _load(source_json: str, stamp: tuple[int, int] | None) -> Dataset:
    del stamp  # part of the cache key only: a changed file is read again
    source = json.loads(source_json)
    options = {k: v for k, v in source.items() if k != "name" and not k.startswith("_")}
    if source["name"] in BUILTINS or options:  # the built-ins bound themselves (the text's windows)
        return load_dataset(source["name"], **options)
    return load_file(resolve(source["name"]), data_budget())


def data_budget() -> Budget:
    """What a data file may hold in a worker: the loaders' own budget, or a quarter of the
    worker's memory cap (``RNNVIZ_WORKER_MAX_RSS_MB``) where that is less.

    Reading a file takes up to twice its float32 inputs, and the worker's JAX runtime and
    executables need the rest. A file that a worker could hold only over its cap would make
    it retire after every job, and each successor read the file and compile again: such a
    file is refused at once instead, by its headers, with the setting named.
    """
    cap_mb = settings().worker_max_rss_mb
    if cap_mb * 2**20 // 4 >= MAX_DATA_BYTES:
        return Budget(MAX_DATA_BYTES, MAX_SEQUENCES)
    why = f"a quarter of a worker's {cap_mb} MB memory cap (RNNVIZ_WORKER_MAX_RSS_MB)"
    return Budget(cap_mb * 2**20 // 4, MAX_SEQUENCES, why)


def load_source(source_json: str) -> Dataset:
    """The data set of a source (a built-in's name and options, or a file's path; keys
    starting with ``_`` only tell sources apart), loaded once per worker (a file again when
    its size or time changes)."""
    name = json.loads(source_json)["name"]
    path = Path(name)
    stamp = (path.stat().st_size, path.stat().st_mtime_ns) if path.is_file() else None
    return _load(source_json, stamp)


def data_preview(source_json: str, index: int = 0) -> Preview:
    """Load a data source (a bad one raises its one :class:`DataError`) and draw one sequence."""
    ds = load_source(source_json)
    return preview_record(ds, min(max(index, 0), ds.n_sequences - 1))


def is_compiled(cfg_json: str) -> bool:
    """Whether the key's analysis would reuse this worker's executables (no compile)."""
    return _is_compiled(config_of(cfg_json), data=_data(cfg_json))  # weights: the same executables


def compile_shape(cfg_json: str, run: bool = False) -> bool:
    """The idle-time job for a shape the visitor may switch to next (another cell at the
    page's shape, or a teaching preset's, :func:`rnnviz.ui.calls.prepare_neighbours`): its
    analysis compiled in this worker, nothing run; with ``run``, run once, so that the
    log-magnitude pass is compiled too where this config's gradients need it (the underflow
    presets' do). False: nothing is left to do (it prepares in one call)."""
    cfg, data = config_of(cfg_json), _data(cfg_json)
    if run:
        analyze(cfg, repeats=1, budget_s=0.0, data=data)
    else:
        compile_analysis(cfg, data=data)
    return False


def analysis(cfg_json: str) -> Analysis:
    """The full analysis of a job's key, on its data set and weights, its timing bounded by
    time: at least one run, more while under :data:`TIMING_BUDGET_S`, at most five."""
    cfg = config_of(cfg_json)
    # Timing bounded by time (≥ 1 run, more while under TIMING_BUDGET_S, ≤ 5): a slow config shows its
    # first chart after one run instead of a warm-up and five more.
    return analyze(cfg, repeats=5, budget_s=TIMING_BUDGET_S, data=_data(cfg_json), params=_weights(cfg_json))


#: The Strategies and Devices tabs time each run until the 90 % interval of its mean is within
#: ± 10 % (at least 3 runs, at most the budget's ``repeats``): a steady executable stops at 3,
#: and the table says the interval (time less to say as much).
TIMING_PRECISION = 0.10


def strategies_table(cfg_json: str, repeats: int, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The analysis of a job's key under each strategy (or those in ``only``: the tab asks
    for one at a time and draws each row as it arrives), at most ``repeats`` timed runs each
    (until :data:`TIMING_PRECISION`): one row per strategy, its cost and ∂L/∂W's difference
    against the accumulator's (:func:`~rnnviz.studies.comparisons.compare_strategies`).
    Each row is kept for the Devices tab (:func:`devices_live`)."""
    table = compare_strategies(
        config_of(cfg_json),
        strategies=only,
        repeats=repeats,
        data=_data(cfg_json),
        params=_weights(cfg_json),
        precision=TIMING_PRECISION,
        reference=None if only is None or "accumulate" in only else _reference(cfg_json),
    )
    for row in table.to_dict("records"):
        _TIMED_ROWS[cfg_json, row["strategy"]] = (repeats, row)
        _TIMED_ROWS.move_to_end((cfg_json, row["strategy"]))
        while len(_TIMED_ROWS) > TIMED_ROWS:
            _TIMED_ROWS.popitem(last=False)
    return table


#: The Strategies tab's rows this worker timed last, by (key, strategy), with the runs they
#: were allowed: on a machine of one device they are the Devices tab's live rows (the same
#: executables on the same device, timed moments before), which :func:`devices_live` reuses
#: instead of timing them again (at LSTM H=128 T=1000 B=32, seconds of runs).
_TIMED_ROWS: collections.OrderedDict[tuple[str, str], tuple[int, dict[str, Any]]] = collections.OrderedDict()
TIMED_ROWS = 64


@functools.lru_cache(maxsize=4)
def _reference(cfg_json: str) -> Any:
    """The accumulator's ∂L/∂W at a job's key, once per worker for all its rows."""
    return accumulator_grads(config_of(cfg_json), _data(cfg_json), _weights(cfg_json))


#: Shapes whose quiet timing this worker keeps.
MAX_QUIET = 64
#: The fastest run of each shape's analysis timed here while nothing else ran, by shape key.
_QUIET: collections.OrderedDict[str, float] = collections.OrderedDict()


def shape_key(cfg_json: str) -> str:
    """A job key's shape: its static config (:func:`~rnnviz.engine.prepare.static_config`)
    and data source, without values or weights: what run times depend on (the dashboard's
    route, :func:`rnnviz.serve.requests.route`)."""
    values = json.loads(cfg_json)
    shape = static_config(config_of(cfg_json)).to_dict()
    if "data" in values:
        shape["data"] = values["data"]
    return json.dumps(shape, sort_keys=True)


def quiet_run_s(cfg_json: str) -> float:
    """Seconds of one run of the analysis at a job key's shape, timed when this worker was
    asked (idle time, or a visitor's tab before idle time took it): the fastest of
    up to :data:`QUIET_REPEATS` runs within :data:`QUIET_TIMING_S`, kept per shape. The
    tabs' budgets count in it (:class:`~rnnviz.serve.budget.Cost`): the page's own timing of
    the analysis ran beside a page being drawn."""
    shape = shape_key(cfg_json)
    if shape not in _QUIET:
        cfg, data = config_of(shape), _data(shape)
        a = analyze(cfg, repeats=QUIET_REPEATS, budget_s=QUIET_TIMING_S, data=data, log_pass=False)
        _QUIET[shape] = a.timing.run_min_s
        while len(_QUIET) > MAX_QUIET:
            _QUIET.popitem(last=False)
    _QUIET.move_to_end(shape)
    return _QUIET[shape]


def compiled_strategies(cfg_json: str) -> tuple[str, ...]:
    """The strategies whose analysis at a job's key this worker has compiled (what the
    Strategies and Devices tabs' budgets need not count again)."""
    cfg, data = config_of(cfg_json), _data(cfg_json)

    def compiled(strategy: str) -> bool:
        try:
            return _is_compiled(cfg.replace(strategy=strategy), data=data)
        except ConfigError:  # over the budgets at this shape: the tab leaves it out
            return False

    return tuple(s for s in available_strategies(cfg) if compiled(s))


def strategy_availability(cfg_json: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """``(available, {strategy: why not})`` for this config's cell."""
    cfg = config_of(cfg_json)
    return available_strategies(cfg), {
        s: why for s in strategy_names() if (why := strategy_unavailable(s, cfg))
    }


def scaling_table(cfg_json: str, lens: tuple[int, ...]) -> pd.DataFrame:
    """Time and memory of ∂L/∂W per available strategy at each length T of ``lens``, 3 timed
    runs each: rows ``strategy, seq_len, compile_s, run_s, peak_bytes``
    (:func:`~rnnviz.studies.comparisons.scaling`; the key's data and weights are not used)."""
    # Costs over T at shapes the data do not have: synthetic inputs (costs do not depend on values).
    return scaling(config_of(cfg_json), lens, repeats=3)


def devices_live(cfg_json: str, repeats: int, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The analysis of a job's key on every device JAX sees here, under every strategy its
    cell can run (or those in ``only``, one call per strategy as the tab asks), at most
    ``repeats`` timed runs each (until :data:`TIMING_PRECISION`): rows ``device_kind,
    device_name, device_id, strategy, compile_s, run_s, run_halfwidth_s, repeats,
    peak_bytes, loss, max_grad_diff, quick_compiled`` (against the accumulator's ∂L/∂W on the
    config's device; :func:`~rnnviz.studies.comparisons.run_on_devices`). On a machine of
    one device, a strategy this worker timed for the Strategies tab at this key is that row,
    not timed again, when it was allowed at least ``repeats`` runs or its interval already met
    :data:`TIMING_PRECISION` (:func:`_precise`: more runs allowed would have stopped there)."""
    cfg = config_of(cfg_json)
    names = only or available_strategies(cfg)
    devices = present_devices()
    reused = {}
    for s in names if len(devices) == 1 else ():
        kept = _TIMED_ROWS.get((cfg_json, s))
        if kept is not None and (kept[0] >= repeats or _precise(kept[1])):
            reused[s] = kept[1]
    missing = [s for s in names if s not in reused]
    timed = pd.DataFrame()
    if missing:
        timed = run_on_devices(
            cfg,
            strategies=missing,
            repeats=repeats,
            data=_data(cfg_json),
            params=_weights(cfg_json),
            precision=TIMING_PRECISION,
            reference=_reference(cfg_json),
        )
    if not reused:
        return timed
    rows = {s: _device_row(devices[0], row) for s, row in reused.items()}
    rows.update({r["strategy"]: r for r in timed.to_dict("records")})
    return pd.DataFrame([rows[s] for s in names])


def _precise(row: dict[str, Any]) -> bool:
    """Whether a timed row's 90 % interval is within :data:`TIMING_PRECISION` of its run time
    after the fewest runs the rule stops at: the Strategies tab allowed fewer runs than the
    Devices tab asks (its budget was sized before the strategies were compiled), yet they
    say as much. A row of one run has no interval: it is timed again.

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
    cfg_json: str, lo: float, hi: float, n: int, seeds: int, part: int = 0, parts: int = 1
) -> tuple[pd.DataFrame, float | None]:
    """Gradient norms over ``n`` recurrent gains × ``seeds`` seeds, in one sweep (or part
    ``part`` of ``parts`` of it: every ``parts``-th gain, :func:`part_gains`).

    Args:
      cfg_json: a job's key (its config, data and weights).
      lo: the smallest gain.
      hi: the largest gain.
      n: how many gains, evenly spaced from ``lo`` to ``hi`` (at least 2).
      seeds: how many seeds, ``cfg.seed`` … ``cfg.seed + seeds − 1``.
      part: which part (0 … parts − 1).
      parts: in how many parts the gains are computed (1: all at once).

    Returns:
      ``(frame, critical gain)``: :func:`~rnnviz.studies.sweep.sweep`'s tidy frame, and
      :func:`~rnnviz.studies.sweep.critical_gain` over those seeds (None for trained weights,
      whose gain has no closed form, and for cells other than simple).
    """
    cfg = config_of(cfg_json)
    gains = part_gains(_gains(lo, hi, n), part, parts)
    over = {"recurrent_gain": gains, "seed": list(range(cfg.seed, cfg.seed + seeds))}
    weights = _weights(cfg_json)
    # point by point through the page's compiled analysis where that is quicker than
    # compiling the sweep (a small shape whose Phase diagram idle time has not prepared)
    # the later parts' points count once the first part is drawn: the second compiles the
    # sweep if the rest one by one would cost more
    to_come = len(gains) * seeds * (parts - part - 1)
    df = sweep_reusing(cfg, over, data=_data(cfg_json), params=weights, to_come=to_come).drop_duplicates(
        ignore_index=True
    )  # the padding
    # The closed-form critical gain is the initialisation's; trained weights have none.
    return df, None if weights is not None else critical_gain(cfg, range(cfg.seed, cfg.seed + seeds))


def lyapunov_phase_table(
    cfg_json: str, lo: float, hi: float, n: int, seeds: int
) -> tuple[pd.DataFrame, float | None]:
    """λ₁ over ``n`` recurrent gains × ``seeds`` seeds (:func:`~rnnviz.studies.lyapunov.lyapunov_phase`).

    Args:
      cfg_json: a job's key (its config, data and weights).
      lo: the smallest gain.
      hi: the largest gain.
      n: how many gains, evenly spaced from ``lo`` to ``hi`` (at least 2).
      seeds: how many seeds, ``cfg.seed`` … ``cfg.seed + seeds − 1``.

    Returns:
      ``(frame, edge)``: per gain ``lyapunov`` (the mean λ₁) and ``lo``/``hi`` (its range over
      seeds), and the gain where the mean crosses 0 (None when it does not in the range).
    """
    cfg = config_of(cfg_json)
    return lyapunov_phase(
        cfg,
        _gains(lo, hi, n),
        range(cfg.seed, cfg.seed + seeds),
        data=_data(cfg_json),
        params=_weights(cfg_json),
    )


def lyapunov(cfg_json: str, k: int) -> Lyapunov:
    """The ``k`` leading Lyapunov exponents of a job's key, on its data and weights, without
    the measured decay."""
    # the tab fits the decay on the analysis it has
    return _lyapunov(
        config_of(cfg_json), k=k, measure_decay=False, data=_data(cfg_json), params=_weights(cfg_json)
    )


def jacobians(cfg_json: str, k: int, example: int, steps: int, part: int = 0, parts: int = 1) -> Jacobians:
    """Top-``k`` singular values of each step Jacobian J_t = ∂carry_t/∂carry_{t−1} for the batch's
    example ``example``, at every ⌈T / steps⌉-th step; of those, the ``part``-th of ``parts``
    interleaved parts (:func:`~rnnviz.studies.jacobians.part_steps`)."""
    return _jacobians(
        config_of(cfg_json),
        k=k,
        example=example,
        max_steps=steps,
        data=_data(cfg_json),
        params=_weights(cfg_json),
        part=part,
        parts=parts,
    )


def teaching_page(name: str) -> dict[str, Any]:
    """The data of the teaching page ``name`` (:data:`rnnviz.base.presets.PAGES`): every point
    of its grid computed here, stored as the page looks it up
    (:func:`~rnnviz.report.explorable_data.page_data`; the server puts it in the page)."""
    preset = PAGES[name]
    return preset_data(preset, explorable_grid(preset.config(), preset.over))


# ---- your own model: loaded once per worker and version --------------------------------------


class ModelSummary(NamedTuple):
    """What the Your model tab shows of a loaded checkpoint, and needs to ask for its inputs
    (no arrays).

    Attributes:
      model_type: its family (``"mamba"``, ``"torch_lstm"``, …).
      source: the folder or file it was read from.
      n_layers: L, its blocks (or stacked layers).
      n_params: its parameters, tied ones counted once.
      vocab_size: its vocabulary (0: a stack that reads vectors).
      input_size: the width of what its first layer reads (a stack's I).
      tokenizer: whether a ``tokenizer.json`` lies beside it.
    """

    model_type: str
    source: str
    n_layers: int
    n_params: int
    vocab_size: int
    input_size: int
    tokenizer: bool


def model_max_bytes() -> int:
    """The most bytes of weights (in float32) a worker loads: a quarter of its memory cap
    (``RNNVIZ_WORKER_MAX_RSS_MB``), at most the loader's own cap. As for a data file
    (:func:`data_budget`), a model the worker could hold only over its cap would make it
    retire after every job, each successor loading it again."""
    return min(MAX_MODEL_BYTES, settings().worker_max_rss_mb * 2**20 // 4)


def model_stamp(path: str) -> tuple[tuple[str, int, int], ...]:
    """Which version of a checkpoint ``path`` is: each of its files' name, size and time (a
    folder's files directly in it), so that a checkpoint written again is read again; ``()``
    when nothing is there (the loader says so)."""
    p = Path(path)
    try:
        files = sorted(p.iterdir()) if p.is_dir() else [p] if p.is_file() else []
        return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file())
    except OSError:  # removed meanwhile (another session's upload evicted): the loader says so
        return ()


@functools.lru_cache(maxsize=2)
def _model(path: str, stamp: tuple) -> Model:
    del stamp  # part of the cache key only: a checkpoint written again is read again
    return load_model(path, max_bytes=model_max_bytes())


def model_summary(path: str, stamp: tuple) -> ModelSummary:
    """Load the checkpoint at ``path`` (once per worker and version ``stamp``,
    :func:`model_stamp`) and say what it is; a checkpoint that cannot be used raises its one
    :class:`~rnnviz.checkpoints.CheckpointError`."""
    model = _model(path, stamp)
    return ModelSummary(
        model.model_type,
        model.source,
        model.n_layers,
        model.n_params,
        model.vocab_size,
        model.stream_widths[0],
        model.tokenizer is not None,
    )


def model_tokens(path: str, stamp: tuple, text: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``text`` as the model's token ids and each token's text, by its ``tokenizer.json``.

    Raises:
      CheckpointError: no ``tokenizer.json``, no tokens, a tokenizer that cannot be read, or no
        ``tokenizers`` package in the worker.
    """
    model = _model(path, stamp)
    try:
        ids, tokens = tokenize(model, text)
    except CheckpointError:
        raise
    except ImportError:
        raise CheckpointError(
            str(model.tokenizer), 'needs the tokenizers package to read text (pip install "rnnviz[models]")'
        ) from None
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


def model_analysis(path: str, stamp: tuple, inputs_json: str, position: int | None) -> ModelAnalysis:
    """The gradient through every layer and step of the checkpoint at ``path`` on the inputs
    ``inputs_json`` asks for (:func:`model_inputs`), its connectivity read at ``position``
    (None: the last prediction): :func:`~rnnviz.studies.models.analyze_model`.

    Raises:
      CheckpointError: the checkpoint cannot be used, or its inputs or position do not fit it
        (naming the checkpoint and what is allowed).
    """
    model = _model(path, stamp)
    inputs, tokens = model_inputs(model, inputs_json)
    try:
        return analyze_model(model, inputs, position=position, tokens=tokens)
    except ValueError as err:  # ids outside the vocabulary, a position past the end
        raise CheckpointError(path, str(err)) from None


# ---- training: the Trainer stays in the worker ---------------------------------------------


class TrainProgress(NamedTuple):
    """Where a run stands: steps done of ``steps``, seconds of training, whether it is done
    (finished, stopped or diverged everywhere) or was stopped, and its records so far
    without their weights (:func:`light`). Once done, ``paths`` are the run files the
    worker wrote, weights and all (:func:`rnnviz.serve.trained_runs.write_runs`), or
    ``write_error`` says why there are none."""

    steps_done: int
    steps: int
    run_s: float
    done: bool
    stopped: bool
    records: list[Training] | None
    paths: tuple[str, ...] = ()
    write_error: str | None = None


_TRAINERS: dict[str, Trainer] = {}


def light(records: list[Training]) -> list[Training]:
    """The runs without their kept weights (up to 256 MiB a call): what the server keeps and
    draws; the weights stay in the run files, which the workers open."""
    return [dataclasses.replace(r, weight_tree=None) for r in records]


def _progress(trainer: Trainer, key: str) -> TrainProgress:
    records = trainer.records() if trainer.steps_done > 0 or trainer.done else None
    paths, error = (), None
    if trainer.done and records is not None:
        try:
            paths = tuple(str(p) for p in trained_runs.write_runs(records, key))
        except OSError as err:  # a full disk or a folder that is not writable: the curves still show
            error = f"the run files could not be written ({err.strerror or err})"
    return TrainProgress(
        trainer.steps_done,
        trainer.steps,
        trainer.run_s,
        trainer.done,
        trainer.stopped,
        None if records is None else light(records),
        paths,
        error,
    )


def trained_curves(key: str, paths: tuple[str, ...]) -> list[Training]:
    """The runs of the training call ``key`` saved at ``paths``, without their weights
    (:func:`light`): a finished call reopened from its files (after the server dropped it
    from memory, or restarted)."""
    del key  # part of the cache key only
    return light([saved_run(p) for p in paths])


def train_start(key: str, cfg_json: str, settings: dict[str, Any]) -> TrainProgress:
    """Compile and set up the runs of ``settings`` under ``key``: the seeds, and a
    :class:`~rnnviz.studies.training.TrainSettings` dict (:data:`DATA_TASK`: the key's data set).

    Raises:
        ConfigError: a setting that is not allowed, or a config that does not fit the task.
    """
    cfg = config_of(cfg_json)
    asked = TrainSettings.from_dict({k: v for k, v in settings.items() if k not in _TAB_ONLY})
    _TRAINERS[key] = trainer = Trainer(
        cfg,
        {"seed": list(range(cfg.seed, cfg.seed + settings["seeds"]))},
        settings=asked,
        data=_data(cfg_json) if asked.task == DATA_TASK else None,
    )
    return TrainProgress(0, trainer.steps, 0.0, False, False, None)


def train_advance(key: str, budget_s: float) -> TrainProgress:
    """Train ``key``'s runs for about ``budget_s`` seconds (whole chunks, at least one)."""
    trainer = _TRAINERS.get(key)
    if trainer is None:
        raise LookupError(
            "this training run is no longer in its worker (the worker was replaced); press Train to start "
            "again"
        )
    start = time.perf_counter()
    trainer.advance()  # at least one chunk (none once done)
    while not trainer.done and time.perf_counter() - start < budget_s:
        trainer.advance()
    progress = _progress(trainer, key)
    if trainer.done:
        del _TRAINERS[key]
    return progress


def train_stop(key: str) -> None:
    """Mark ``key``'s runs stopped: no chunk after the current one (nothing if this worker has
    no run under ``key``)."""
    trainer = _TRAINERS.get(key)
    if trainer is not None:
        trainer.stop()


__all__ = [
    "ModelSummary",
    "RunSummary",
    "TrainProgress",
    "DATA_TASK",
    "analysis",
    "compiled_strategies",
    "config_of",
    "connectivity_job",
    "over_training_job",
    "run_summary",
    "saved_run",
    "light",
    "trained_curves",
    "data_budget",
    "data_preview",
    "devices_live",
    "load_source",
    "is_compiled",
    "quiet_run_s",
    "shape_key",
    "jacobians",
    "lyapunov",
    "lyapunov_phase_table",
    "model_analysis",
    "model_inputs",
    "model_max_bytes",
    "model_stamp",
    "model_summary",
    "model_tokens",
    "part_gains",
    "phase",
    "scaling_table",
    "setup",
    "strategies_table",
    "strategy_availability",
    "train_advance",
    "train_start",
    "train_stop",
]

"""rnnviz dashboard, packaged: ``rnnviz app`` (or ``streamlit run app.py`` in a checkout)
runs :func:`main` on every rerun.

Sections: parameters (sidebar → RunConfig), calculation (cached, one entry point:
``rnnviz.analyze``), rendering (rnnviz.ui.views → rnnviz.charts). No JAX maths here.

Recorded runs: the ones shipped in the package (``rnnviz/data/runs``), the data folder's
(``data/runs``, where ``bench --record`` writes) and, when the operator names one, a
folder of their own (``RNNVIZ_RUNS_DIR``, or ``rnnviz app --runs-dir``) — never a folder
from a URL or a widget.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import streamlit as st

from rnnviz.analysis import Analysis, static_config
from rnnviz.config import ConfigError, RunConfig
from rnnviz.exponents import Lyapunov
from rnnviz.frames import records_frame
from rnnviz.records import load_dir
from rnnviz.sources import runs_dir
from rnnviz.sources.fit import fitted_config
from rnnviz.step_jacobians import Jacobians, carry_dim
from rnnviz.tasks import TASKS, get_task
from rnnviz.training import OPTIMIZERS
from rnnviz.ui import budget, data_panel, jobs, runs_panel, state, views
from rnnviz.ui.worker import ComputationTimeout, InlinePool, ResultCache, WorkerDied, WorkerPool, make_pool

SHIPPED_RUNS = Path(__file__).resolve().parent.parent / "data" / "runs"
TABS = (
    "Gradients",
    "Carry",
    "Strategies",
    "Phase diagram",
    "Jacobians",
    "Training",
    "Memory",
    "Devices",
    "Compare",
    "Learn",
)
log = logging.getLogger("rnnviz.app")


# ---- calculation: in worker processes (rnnviz.ui.worker), results cached here ---------------


@st.cache_resource(show_spinner=False)
def _pool() -> WorkerPool | InlinePool:
    """The worker processes, shared by every session: no JAX computation runs in this process,
    so a stuck one can be killed without taking a session with it (``RNNVIZ_WORKERS``)."""
    return make_pool(setup="rnnviz.ui.jobs:setup")


@st.cache_resource(show_spinner=False)
def _results() -> ResultCache:
    """Finished results by (computation, arguments), shared by every session."""
    return ResultCache(max_entries=128)


def _key(cfg: RunConfig, weights: dict | None = None, *, trained: bool = True) -> str:
    """A job's key: the config, and the session's data source and trained weights when it
    has them (so every view and pin carries the data and weights it was computed on);
    ``weights`` names other weights than the session's; ``trained=False`` leaves them out
    (training always starts from the seed's initialisation)."""
    values = cfg.to_dict()
    source = st.session_state.get("data_source")
    if source is not None:
        values["data"] = source
    weights = weights or st.session_state.get("weights_source")
    if weights is not None and trained:
        values["weights"] = weights
    return json.dumps(values, sort_keys=True)


def _route(cfg: RunConfig) -> str:
    """Calls for one shape go to one worker, whose compiled executables then serve every value
    (trained weights are values too)."""
    values = json.loads(_key(static_config(cfg)))
    values.pop("weights", None)
    return json.dumps(values, sort_keys=True)


def describe(cfg: RunConfig) -> str:
    return f"{cfg.cell} T={cfg.seq_len} H={cfg.hidden_size} B={cfg.batch_size or 'unbatched'} {cfg.dtype}"


def compute(what: str, route: str, fn, *args):
    """``fn(*args)`` in the route's worker, through the result cache; while it runs, a line says
    so (and gives Streamlit the chance to stop this run when the user changes something)."""
    note = st.empty()
    limit = _pool().time_limit_s

    def waiting(elapsed: float, running: bool) -> None:
        if elapsed >= 1.0:
            doing = "computing" if running else "waiting for another session's computation"
            note.caption(f"⏳ {what}: {doing}… {elapsed:.0f} s (stopped at {limit:g} s)")

    call = lambda: _pool().call(fn, *args, route=route, what=what, on_wait=waiting)  # noqa: E731
    try:
        return _results().get((fn.__name__,) + args, call, on_wait=waiting)
    finally:
        note.empty()


def _environment() -> jobs.Environment:
    return compute("looking at this machine's devices", "environment", jobs.environment)


def _analysis(cfg_json: str) -> Analysis:
    cfg = jobs.config_of(cfg_json)
    return compute(f"the analysis of {describe(cfg)}", _route(cfg), jobs.analysis, cfg_json)


def _strategies(cfg_json: str, repeats: int) -> pd.DataFrame:
    cfg = jobs.config_of(cfg_json)
    return compute(
        f"every strategy on {describe(cfg)} ({repeats} runs each)",
        _route(cfg),
        jobs.strategies_table,
        cfg_json,
        repeats,
    )


def _availability(cfg: RunConfig) -> tuple[tuple[str, ...], dict[str, str]]:
    return compute("which strategies apply", _route(cfg), jobs.strategy_availability, _key(cfg))


def _scaling(cfg_json: str, lens: tuple[int, ...]) -> pd.DataFrame:
    cfg = jobs.config_of(cfg_json)
    return compute(
        f"every strategy at T ∈ {list(lens)} ({cfg.cell})", _route(cfg), jobs.scaling_table, cfg_json, lens
    )


def _devices_live(cfg_json: str, repeats: int) -> pd.DataFrame:
    cfg = jobs.config_of(cfg_json)
    return compute(
        f"live runs on every device of {describe(cfg)}", _route(cfg), jobs.devices_live, cfg_json, repeats
    )


def _phase(cfg_json: str, lo: float, hi: float, n: int, seeds: int) -> tuple[pd.DataFrame, float | None]:
    cfg = jobs.config_of(cfg_json)
    return compute(
        f"the phase diagram ({n} gains × {seeds} seeds, {describe(cfg)})",
        _route(cfg),
        jobs.phase,
        cfg_json,
        lo,
        hi,
        n,
        seeds,
    )


def _lyapunov_phase(
    cfg_json: str, lo: float, hi: float, n: int, seeds: int
) -> tuple[pd.DataFrame, float | None]:
    cfg = jobs.config_of(cfg_json)
    return compute(
        f"λ₁ over {n} gains × {seeds} seeds ({describe(cfg)})",
        _route(cfg),
        jobs.lyapunov_phase_table,
        cfg_json,
        lo,
        hi,
        n,
        seeds,
    )


def _lyapunov(cfg_json: str, k: int) -> Lyapunov:
    cfg = jobs.config_of(cfg_json)
    return compute(f"{k} Lyapunov exponents of {describe(cfg)}", _route(cfg), jobs.lyapunov, cfg_json, k)


def _jacobians(cfg_json: str, k: int, example: int) -> Jacobians:
    cfg = jobs.config_of(cfg_json)
    return compute(
        f"the step Jacobians' top {k} singular values ({describe(cfg)})",
        _route(cfg),
        jobs.jacobians,
        cfg_json,
        k,
        example,
    )


def _connectivity(cfg: RunConfig, run: str | None, index: int, step: int | None, measure: str | None):
    """The connectivity at the session's weights (``run`` None) or at the last kept step of a
    saved run (its cell and sizes)."""
    weights = None
    if run is not None:
        run_cfg = runs_panel.run_config(run)
        if run_cfg is None:
            raise ConfigError("run", Path(run).name, "a readable saved run")
        cfg = cfg.replace(**{f: getattr(run_cfg, f) for f in runs_panel.FOLLOWS_RUN})
        steps = runs_panel.saved_runs().get(run, {}).get("kept_steps") or [0]
        weights = {"path": run, "step": steps[-1], "_version": Path(run).stat().st_mtime_ns}
    key = _key(cfg, weights)
    return compute(
        f"the connectivity of sequence {index} ({cfg.cell})",
        _route(cfg),
        jobs.connectivity_job,
        key,
        index,
        step,
        measure,
    )


def _comparable_runs(cfg: RunConfig) -> dict[str, str]:
    """Saved runs trained on the session's data (same source and input size), other than
    the one whose weights are chosen: the Memory tab's side-by-side choices."""
    source = st.session_state.get("data_source") or {}
    chosen = (st.session_state.get("weights_source") or {}).get("path")
    out = {}
    for path, header in runs_panel.saved_runs().items():
        trained_on = header.get("data_source") or {}
        if path == chosen or trained_on.get("name") != source.get("name"):
            continue
        if header["config"].get("input_size") == cfg.input_size:
            out[path] = runs_panel.run_label(header)
    return out


def _over_training(path: str, k: int):
    return compute(f"λ over training ({Path(path).name})", path, jobs.over_training_job, path, k)


def _check_run(path: str) -> object:
    return compute("reading the run file", "runs", jobs.run_summary, path)


def with_weights(cfg: RunConfig, source: dict | None) -> RunConfig:
    """``cfg`` with the cell, sizes and dtype of the chosen trained run (its weights fit only
    those); a run whose inputs do not fit the chosen data is one sidebar message, and the
    weights stay initial."""
    st.session_state["weights_source"] = None
    if source is None:
        return cfg
    run_cfg = runs_panel.run_config(source["path"])
    if run_cfg is None:
        st.sidebar.error(f"{Path(source['path']).name} cannot be read; the weights stay initial.")
        return cfg
    if st.session_state.get("data_source") is not None and run_cfg.input_size != cfg.input_size:
        st.sidebar.error(
            f"The run reads {run_cfg.input_size} input features and these data have {cfg.input_size}: "
            "choose the data it was trained on (or synthetic inputs). The weights stay initial."
        )
        return cfg
    fixed = {f: getattr(run_cfg, f) for f in runs_panel.FOLLOWS_RUN}
    out = cfg.replace(**fixed)
    st.session_state["weights_source"] = source
    notes = [
        f"the cell, its sizes and dtype follow the trained run ({run_cfg.cell}, H={run_cfg.hidden_size})"
    ]
    if cfg.recurrent_gain != run_cfg.recurrent_gain:
        notes.append(
            f"the gain {cfg.recurrent_gain:g} scales its trained recurrence by "
            f"{cfg.recurrent_gain / run_cfg.recurrent_gain:.3g} (as trained at {run_cfg.recurrent_gain:g})"
        )
    st.sidebar.caption("; ".join(notes) + ".")
    return out


# ---- training: a few compiled chunks per rerun (in the run's worker), so progress shows and Stop works


@st.cache_resource(show_spinner=False)
def _trained_store() -> dict:
    """Finished training runs by settings (all sessions): re-opening a setting never retrains."""
    return {}


#: Seconds of training per script run before the page redraws and continues.
TRAIN_SLICE_S = 0.5


def _training_config(cfg: RunConfig, settings: dict) -> RunConfig:
    if settings["task"] == jobs.DATA_TASK:  # the config is already fitted to the data
        return cfg.replace(batch_size=settings["batch"])
    return cfg.replace(input_size=get_task(settings["task"]).input_size, batch_size=settings["batch"])


def _train_key(cfg: RunConfig, settings: dict) -> str:
    return json.dumps({"config": json.loads(_key(cfg, trained=False)), **settings}, sort_keys=True)


def _start_training(cfg_json: str, settings: dict) -> None:
    """on_click of Train: the run's Trainer is made (and compiled) in its worker."""
    key = _train_key(jobs.config_of(cfg_json), settings)
    st.session_state["train_error"] = None
    try:
        _pool().call(jobs.train_start, key, cfg_json, settings, route=key, what="compiling the training run")
    except ConfigError as err:
        st.session_state["train_error"] = str(err)
        return
    except (ComputationTimeout, WorkerDied) as err:
        st.session_state["train_error"] = f"{err}. Shrink T, H, the batch or the seeds."
        return
    st.session_state["trainer"] = key


def _stop_training() -> None:
    key = st.session_state.get("trainer")
    if key is not None:
        _pool().call(jobs.train_stop, key, route=key, what="stopping the training run")


def _pin_training(key: str, label: str) -> None:
    pins = st.session_state.setdefault("train_pins", [])
    if key not in [k for k, _ in pins]:
        pins.append((key, label))


def training_panel(cfg: RunConfig) -> None:
    st.markdown(
        "Train the configured cell (with a Dense readout) on a long-range task and watch ‖∂L/∂carry_t‖ as "
        "it learns. "
        "The task fixes the input size; the batch is drawn fresh every step."
    )
    tasks = dict(TASKS)
    if st.session_state.get("data_source") is not None:
        tasks = {jobs.DATA_TASK: DataChoice(f"the data set chosen in the sidebar ({describe(cfg)})"), **tasks}
    elif st.session_state.get("train_task") == jobs.DATA_TASK:
        st.session_state["train_task"] = next(iter(TASKS))
    settings = views.training_controls(cfg, tasks, OPTIMIZERS)
    tcfg = _training_config(cfg, settings)
    plan = budget.training_plan(tcfg, settings["log_every"])
    if plan.note:
        st.info(plan.note.replace("steps per chunk", "steps per chunk (one compiled call between redraws)"))
    settings = {**settings, "log_every": plan.settings["chunk"]}
    if (tcfg.input_size, tcfg.batch_size) != (cfg.input_size, cfg.batch_size):
        st.caption(
            f"Trained with input_size={tcfg.input_size} (the {settings['task']} task's) and batch "
            f"{tcfg.batch_size}; "
            "every other field as in the sidebar."
        )
    key = _train_key(tcfg, settings)
    store = _trained_store()
    running = st.session_state.get("trainer") == key
    c1, c2, c3 = st.columns(3)
    c1.button(
        "Train",
        key="train_start",
        type="primary",
        disabled=running,
        on_click=_start_training,
        args=(_key(tcfg, trained=False), settings),
    )
    c2.button(
        "Stop",
        key="train_stop",
        on_click=_stop_training,
        help="stops the run in progress after its current chunk",
    )
    if st.session_state.get("train_error"):
        st.error(f"Training cannot run: {st.session_state['train_error']}")
    if running:
        bar = st.progress(0.0, text="compiling and training…")
        try:
            progress = _pool().call(jobs.train_advance, key, TRAIN_SLICE_S, route=key, what="training")
        except (LookupError, ComputationTimeout, WorkerDied) as err:
            st.session_state["trainer"] = None
            st.error(f"Training stopped: {err}")
            return
        rate = progress.steps_done / progress.run_s if progress.run_s > 0 else 0.0
        eta = (progress.steps - progress.steps_done) / rate if rate > 0 else 0.0
        bar.progress(
            progress.steps_done / progress.steps,
            text=f"{progress.steps_done}/{progress.steps} steps · {rate:.0f} steps/s "
            f"per run · ETA {eta:.0f} s",
        )
        if progress.done:
            st.session_state["trainer"] = None
            if progress.records is not None:
                store[key] = progress.records
            if progress.stopped:
                st.info(f"Stopped at step {progress.steps_done}; shown below as far as it got.")
        else:
            if progress.records is not None:
                views.training_results(progress.records, [], running=True)
            st.rerun()
            return
    records = store.get(key)
    if records is None:
        st.info(
            "Press Train: the settings above have not been trained yet (finished runs are kept, so coming "
            "back does not retrain)."
        )
        return
    label = (
        f"{tcfg.cell} T={tcfg.seq_len} g={tcfg.recurrent_gain:g} {settings['task']} "
        f"lr={settings['learning_rate']:g}"
    )
    c3.button("Pin these runs", key="train_pin", on_click=_pin_training, args=(key, label))
    pinned = [(lab, store[k]) for k, lab in st.session_state.get("train_pins", []) if k != key and k in store]
    views.training_results(records, pinned, running=False)
    trained_weights_panel(records, key, tcfg)


def trained_weights_panel(records: list, key: str, cfg: RunConfig) -> None:
    """The finished runs' weights: kept as files (every tab can open them, after reloads too),
    downloadable, and λ over training."""
    paths = runs_panel.save_runs(records, key)
    st.subheader("The trained weights")
    st.caption(
        f"Kept at every profile step ({len(records[0].weight_steps)} steps) and saved on this machine: the "
        "sidebar's *Weights* opens them in every tab, also after a reload."
    )
    cols = st.columns(min(len(records), 4))
    for i, (r, path) in enumerate(zip(records, paths)):
        col = cols[i % len(cols)]
        col.button(
            f"Open seed {r.config.seed} in every tab",
            key=f"train_use_{i}",
            on_click=runs_panel.use_run,
            args=(str(path),),
        )
        col.download_button(
            f"Download seed {r.config.seed} (.rnnviz)",
            path.read_bytes(),
            file_name=f"{r.label.replace(' ', '_')}_seed{r.config.seed}.rnnviz",
            key=f"train_download_{i}",
            on_click="ignore",
        )
    if st.toggle(
        "λ₁ and the step-Jacobian spectrum at every kept step",
        key="train_dynamics",
        help="does training move the network toward λ₁ = 0? One vmapped call over the kept weights, on the "
        "run's probe sequences",
    ):
        k = min(4, carry_dim(cfg))
        views.over_training_view(_over_training(str(paths[0]), k))


def runs_folders() -> tuple[str, ...]:
    """The shipped runs, the data folder's ``runs/`` (``bench --record`` writes there) when
    it exists, then the operator's folder (``RNNVIZ_RUNS_DIR``) when set."""
    user = os.environ.get("RNNVIZ_RUNS_DIR")
    local = runs_dir()
    return (
        (str(SHIPPED_RUNS),)
        + ((str(local.resolve()),) if local.is_dir() else ())
        + ((user,) if user and Path(user).resolve() != local.resolve() else ())
    )


@st.cache_data(show_spinner=False, ttl=60)
def _recorded(folders: tuple[str, ...]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Recorded runs: only ``*.jsonl`` directly in the fixed runs folders are ever read."""
    records, skipped = [], []
    for folder in folders:
        loaded = load_dir(folder)
        records += loaded.records
        skipped += loaded.skipped
    return records_frame(records), skipped


def analysis_for(cfg: RunConfig) -> Analysis:
    key = _key(cfg)
    if _results().peek(("analysis", key)) or _pool().call(
        jobs.is_compiled, key, route=_route(cfg), what="a cache look-up"
    ):
        return _analysis(key)
    with st.status(
        f"Compiling the {cfg.cell} cell for T={cfg.seq_len}, H={cfg.hidden_size}, "
        f"B={cfg.batch_size or 'unbatched'}, {cfg.dtype}…",
        expanded=False,
    ) as status:
        a = _analysis(key)
        status.update(
            label=f"Compiled in {a.timing.compile_s:.2f} s (reused for every seed, gain and scale)",
            state="complete",
        )
        return a


class DataChoice(NamedTuple):
    """The Training tab's entry for the chosen data set (a task's description)."""

    description: str


def with_data(cfg: RunConfig, source: dict | None) -> RunConfig:
    """``cfg`` fitted to the data source (its T, I and loss placement), after loading it in a
    worker and drawing its preview; a source that cannot be used is one message in the
    sidebar and the inputs stay synthetic: nothing half-loaded is used."""
    st.session_state["data_source"] = None
    if source is None:
        return cfg
    source_json = json.dumps(source, sort_keys=True)
    try:
        preview = compute("loading the data", "data", jobs.data_preview, source_json)
    except ConfigError as err:  # DataError: the file and what is wrong
        st.sidebar.error(f"{err} The inputs stay synthetic.")
        return cfg
    data_panel.draw_preview(preview)
    fitted = fitted_config(cfg, preview.seq_len, preview.input_size, preview.kind)
    st.session_state["data_source"] = source
    if (fitted.seq_len, fitted.input_size) != (cfg.seq_len, cfg.input_size):
        st.sidebar.caption(f"T = {fitted.seq_len} and I = {fitted.input_size} follow the data.")
    return fitted


# ---- pins: per session, stored as config JSON -------------------------------------------


def _pins() -> list[str]:
    return st.session_state.setdefault("pins", [])


def _pin(cfg_json: str) -> None:
    if cfg_json not in _pins():
        _pins().append(cfg_json)


def _unpin(i: int) -> None:
    if 0 <= i < len(_pins()):
        _pins().pop(i)


def _clear() -> None:
    _pins().clear()


# ---- rendering ----------------------------------------------------------------------------


def main() -> None:
    st.set_page_config(page_title="rnnviz — gradients through time", page_icon="∇", layout="wide")
    state.init_from_url()
    runs_panel.apply_pending()  # an uploaded run sets the sidebar before it is drawn
    try:
        env = _environment()
    except (ComputationTimeout, WorkerDied) as err:
        st.error(f"The computing process could not start: {err}. Reload the page to try again.")
        return
    gpu_reason = None if env.gpus else "JAX sees no GPU on this machine"
    devices = ("auto", "cpu", "gpu") if env.gpus else ("auto", "cpu")
    values = state.sidebar(env.strategies, devices, gpu_reason)
    source = data_panel.source_sidebar(values.get("seq_len"))
    weights = runs_panel.weights_sidebar(_check_run)
    views.limits_caption()

    st.title("∇ rnnviz — how gradients flow back through time")
    views.url_warnings(st.session_state.get("_url_warnings", []))
    try:
        cfg = state.config_from_widgets(values)
        cfg = with_data(cfg, source)
        cfg = with_weights(cfg, weights)
    except ConfigError as err:
        st.error(f"This combination cannot run: {err}")
        return
    except (ComputationTimeout, WorkerDied) as err:
        st.error(stopped_message(err))
        return
    state.sync_url(cfg)
    try:
        a = analysis_for(cfg)
    except ConfigError as err:
        st.error(f"This combination cannot run: {err}")
        return
    except (ComputationTimeout, WorkerDied) as err:
        st.error(stopped_message(err))
        return
    except Exception as err:  # a browser must never see a traceback
        log.exception("analysis failed for %s", cfg)
        st.error(f"The analysis failed ({type(err).__name__}: {err}). Try a smaller size or another dtype.")
        return
    views.header(a)
    pins = [_analysis(p) for p in _pins()]
    pinned = [p for p, k in zip(pins, _pins()) if k != _key(cfg)]  # overlays: the current run is drawn anyway

    tabs = st.tabs(TABS, key="tab", on_change="rerun", bind="query-params")
    renderers = {
        "Gradients": lambda: views.gradients_view(a, pinned),
        "Carry": lambda: views.carry_view(a, pinned),
        "Strategies": lambda: views.strategies_view(
            a,
            lambda c, r: _strategies(_key(c), r),
            lambda c: _analysis(_key(c)),
            lambda c, lens: _scaling(_key(c), lens),
            *_availability(cfg),
        ),
        "Phase diagram": lambda: views.phase_view(
            cfg,
            lambda c, lo, hi, n, k: _phase(_key(c.replace(recurrent_gain=1.0)), lo, hi, n, k),
            lambda c, lo, hi, n, k: _lyapunov_phase(_key(c.replace(recurrent_gain=1.0)), lo, hi, n, k),
            views.cost_of(a),
        ),
        "Jacobians": lambda: views.jacobians_view(
            a, lambda c, k: _lyapunov(_key(c), k), lambda c, k, e: _jacobians(_key(c), k, e), carry_dim(cfg)
        ),
        "Training": lambda: training_panel(cfg),
        "Memory": lambda: views.memory_view(
            st.session_state.get("data_source") is not None,
            a.weights or "initial weights (from the seed)",
            _comparable_runs(cfg),
            lambda run, i, s, m: _connectivity(cfg, run, i, s, m),
        ),
        "Devices": lambda: views.devices_view(
            lambda r: _devices_live(_key(cfg), r),
            (1 + len(env.gpus)) * len(_availability(cfg)[0]),
            views.cost_of(a),
            *_recorded(runs_folders()),
            gpu_reason,
        ),
        "Compare": lambda: views.compare_view(a, pins, pinned, lambda: _pin(_key(cfg)), _unpin, _clear),
        "Learn": views.learn_view,
    }
    for name, panel in zip(TABS, tabs):
        if panel.open:  # lazy: only the open tab computes
            with panel:
                _guarded(name, renderers[name], cfg)


def _guarded(name: str, render, cfg: RunConfig) -> None:
    """Run one view; its errors become plain messages in that tab, never a traceback."""
    try:
        render()
    except ConfigError as err:
        st.error(f"The {name} view cannot run this configuration: {err}")
    except (ComputationTimeout, WorkerDied) as err:
        st.error(stopped_message(err, name))
    except Exception as err:
        log.exception("%s view failed for %s", name, cfg)
        st.error(f"The {name} view failed ({type(err).__name__}: {err}).")


def stopped_message(err: Exception, view: str | None = None) -> str:
    """What the user reads when a computation was stopped or its process died: what it was,
    how long it ran, what to shrink, and that nothing of theirs is lost."""
    where = f"The {view} view: " if view else ""
    if isinstance(err, ComputationTimeout):
        head = (
            f"{where}{err.what} did not finish within {err.limit_s:g} s (stopped after {err.elapsed_s:.0f} "
            "s); "
            "its worker process was replaced."
        )
    else:
        head = f"{where}{err}; a new worker process takes over."
    return (
        f"{head} Shrink the sequence length T, the hidden size H or the batch B (or, in the Phase diagram, "
        "the gains and "
        "seeds) and try again. Your pins, trained runs and URL are kept; other tabs and sessions are not "
        "affected."
    )

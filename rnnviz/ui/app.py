"""rnnviz dashboard, packaged: ``rnnviz app`` (or ``streamlit run app.py`` in a checkout)
runs :func:`main` on every rerun.

Sections: parameters (sidebar → RunConfig), calculation (cached, one entry point:
``rnnviz.analyze``), rendering (rnnviz.ui.views → rnnviz.charts). No JAX maths here.

Recorded runs: the ones shipped in the package (``rnnviz/data/runs``) and, when the
operator names one, a folder of their own (``RNNVIZ_RUNS_DIR``, or ``rnnviz app
--runs-dir``) — never a folder from a URL or a widget.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pandas as pd
import streamlit as st

from rnnviz import Analysis, ConfigError, RunConfig, analyze
from rnnviz.analysis import executables, is_compiled, resolve_device, static_config
from rnnviz.comparisons import (
    available_strategies, compare_strategies, present_devices, run_on_devices, scaling, strategy_unavailable,
)
from rnnviz.config import strategy_names
from rnnviz.frames import records_frame
from rnnviz.lyapunov import Jacobians, Lyapunov, carry_dim, jacobians, lyapunov, lyapunov_phase
from rnnviz.records import load_dir
from rnnviz.sweeps import critical_gain, sweep
from rnnviz.timing import enable_compilation_cache, keep_freed_buffers
from rnnviz.ui import state, views

SHIPPED_RUNS = Path(__file__).resolve().parent.parent / "data" / "runs"
TABS = ("Gradients", "Carry", "Strategies", "Phase diagram", "Jacobians", "Training", "Devices", "Compare", "Learn")
log = logging.getLogger("rnnviz.app")


# ---- calculation: cached around pure functions of a config (passed as JSON) -------------

@st.cache_resource(show_spinner=False)
def _setup_process() -> str:
    folder = os.environ.get("RNNVIZ_JAX_CACHE", str(Path.home() / ".cache" / "rnnviz" / "jax"))
    enable_compilation_cache(folder)
    keep_freed_buffers()
    return folder


@st.cache_resource(show_spinner=False, max_entries=64)
def _compiled(static_json: str):
    """Executables for one shape: shared by every session, never mutated."""
    cfg = RunConfig(**json.loads(static_json))
    return executables(static_config(cfg), resolve_device(cfg))


def _cfg(cfg_json: str) -> RunConfig:
    return RunConfig(**json.loads(cfg_json))


def _key(cfg: RunConfig) -> str:
    return json.dumps(cfg.to_dict(), sort_keys=True)


TIMING_BUDGET_S = 0.3


@st.cache_data(show_spinner=False, max_entries=128)
def _analysis(cfg_json: str) -> Analysis:
    cfg = _cfg(cfg_json)
    _compiled(_key(static_config(cfg)))
    # Timing bounded by time (≥ 1 run, more while under 0.3 s, ≤ 5): a slow config shows its
    # first chart after one run instead of a warm-up and five more.
    return analyze(cfg, repeats=5, budget_s=TIMING_BUDGET_S)


@st.cache_data(show_spinner=False, max_entries=32)
def _strategies(cfg_json: str) -> pd.DataFrame:
    return compare_strategies(_cfg(cfg_json), repeats=5)


@st.cache_data(show_spinner=False, max_entries=16)
def _scaling(cfg_json: str, lens: tuple[int, ...]) -> pd.DataFrame:
    return scaling(_cfg(cfg_json), lens, repeats=3)


@st.cache_data(show_spinner=False, max_entries=32)
def _devices_live(cfg_json: str) -> pd.DataFrame:
    cfg = _cfg(cfg_json)
    return run_on_devices(cfg, strategies=available_strategies(cfg), repeats=5)


@st.cache_data(show_spinner=False, max_entries=16)
def _phase(cfg_json: str, lo: float, hi: float, n: int, seeds: int) -> tuple[pd.DataFrame, float | None]:
    cfg = _cfg(cfg_json)
    gains = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
    df = sweep(cfg, {"recurrent_gain": gains, "seed": list(range(cfg.seed, cfg.seed + seeds))})
    return df, critical_gain(cfg, range(cfg.seed, cfg.seed + seeds))


@st.cache_data(show_spinner=False, max_entries=16)
def _lyapunov_phase(cfg_json: str, lo: float, hi: float, n: int, seeds: int) -> tuple[pd.DataFrame, float | None]:
    cfg = _cfg(cfg_json)
    gains = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
    return lyapunov_phase(cfg, gains, range(cfg.seed, cfg.seed + seeds))


@st.cache_data(show_spinner=False, max_entries=32)
def _lyapunov(cfg_json: str, k: int) -> Lyapunov:
    return lyapunov(_cfg(cfg_json), k=k, measure_decay=False)  # the view fits the decay on the analysis it has


#: The dashboard takes J_t at up to this many steps (every ⌈T/400⌉-th); the library, every step.
JACOBIAN_STEPS = 400


@st.cache_data(show_spinner=False, max_entries=32)
def _jacobians(cfg_json: str, k: int, example: int) -> Jacobians:
    return jacobians(_cfg(cfg_json), k=k, example=example, max_steps=JACOBIAN_STEPS)


# ---- training: a few compiled chunks per rerun, so progress shows and Stop works ----------

@st.cache_resource(show_spinner=False)
def _trained_store() -> dict:
    """Finished training runs by settings (all sessions): re-opening a setting never retrains."""
    return {}


#: Seconds of training per script run before the page redraws and continues.
TRAIN_SLICE_S = 0.5


def _training_config(cfg: RunConfig, settings: dict) -> RunConfig:
    from rnnviz.tasks import get_task

    return cfg.replace(input_size=get_task(settings["task"]).input_size, batch_size=settings["batch"])


def _train_key(cfg: RunConfig, settings: dict) -> str:
    return json.dumps({"config": cfg.to_dict(), **settings}, sort_keys=True)


def _start_training(cfg_json: str, settings: dict) -> None:
    """on_click of Train: a :class:`rnnviz.train.Trainer` in the session (compiles here)."""
    from rnnviz.train import Trainer

    cfg = _cfg(cfg_json)
    try:
        trainer = Trainer(cfg, {"seed": list(range(cfg.seed, cfg.seed + settings["seeds"]))}, task=settings["task"], steps=settings["steps"],
                          learning_rate=settings["learning_rate"], optimizer=settings["optimizer"], clip=settings["clip"],
                          log_every=settings["log_every"], lag=settings["lag"])
    except ConfigError as err:
        st.session_state["train_error"] = str(err)
        return
    st.session_state["train_error"] = None
    st.session_state["trainer"] = (_train_key(cfg, settings), trainer)


def _stop_training() -> None:
    held = st.session_state.get("trainer")
    if held is not None:
        held[1].stop()


def _pin_training(key: str, label: str) -> None:
    pins = st.session_state.setdefault("train_pins", [])
    if key not in [k for k, _ in pins]:
        pins.append((key, label))


def training_panel(cfg: RunConfig) -> None:
    from rnnviz.tasks import TASKS
    from rnnviz.train import OPTIMIZERS

    st.markdown("Train the configured cell (with a Dense readout) on a long-range task and watch ‖∂L/∂carry_t‖ as it learns. "
                "The task fixes the input size; the batch is drawn fresh every step.")
    settings = views.training_controls(cfg, TASKS, OPTIMIZERS)
    tcfg = _training_config(cfg, settings)
    if (tcfg.input_size, tcfg.batch_size) != (cfg.input_size, cfg.batch_size):
        st.caption(f"Trained with input_size={tcfg.input_size} (the {settings['task']} task's) and batch {tcfg.batch_size}; "
                   "every other field as in the sidebar.")
    key = _train_key(tcfg, settings)
    store = _trained_store()
    held = st.session_state.get("trainer")
    running = held is not None and held[0] == key and not held[1].done
    c1, c2, c3 = st.columns(3)
    c1.button("Train", key="train_start", type="primary", disabled=running, on_click=_start_training, args=(_key(tcfg), settings))
    c2.button("Stop", key="train_stop", on_click=_stop_training, help="stops the run in progress after its current chunk")
    if st.session_state.get("train_error"):
        st.error(f"Training cannot run: {st.session_state['train_error']}")
    if held is not None and held[0] == key:
        trainer = held[1]
        if not trainer.done:
            bar = st.progress(trainer.steps_done / trainer.steps, text="compiling and training…")
            start = time.perf_counter()
            while not trainer.done and time.perf_counter() - start < TRAIN_SLICE_S:
                trainer.advance()
            rate = trainer.steps_done / trainer.run_s if trainer.run_s > 0 else 0.0
            eta = (trainer.steps - trainer.steps_done) / rate if rate > 0 else 0.0
            bar.progress(trainer.steps_done / trainer.steps, text=f"{trainer.steps_done}/{trainer.steps} steps · {rate:.0f} steps/s "
                                                                  f"per run · ETA {eta:.0f} s")
        if trainer.done:
            store[key] = trainer.records()
            st.session_state["trainer"] = None
            if trainer.stopped:
                st.info(f"Stopped at step {trainer.steps_done}; shown below as far as it got.")
        else:
            views.training_results(trainer.records(), [], running=True)
            st.rerun()
            return
    records = store.get(key)
    if records is None:
        st.info("Press Train: the settings above have not been trained yet (finished runs are kept, so coming back does not retrain).")
        return
    label = f"{tcfg.cell} T={tcfg.seq_len} g={tcfg.recurrent_gain:g} {settings['task']} lr={settings['learning_rate']:g}"
    c3.button("Pin these runs", key="train_pin", on_click=_pin_training, args=(key, label))
    pinned = [(lab, store[k]) for k, lab in st.session_state.get("train_pins", []) if k != key and k in store]
    views.training_results(records, pinned, running=False)


def runs_folders() -> tuple[str, ...]:
    """The shipped runs, then the operator's folder (``RNNVIZ_RUNS_DIR``) when set."""
    user = os.environ.get("RNNVIZ_RUNS_DIR")
    return (str(SHIPPED_RUNS),) + ((user,) if user else ())


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
    if not is_compiled(cfg):
        with st.status(f"Compiling the {cfg.cell} cell for T={cfg.seq_len}, H={cfg.hidden_size}, "
                       f"B={cfg.batch_size or 'unbatched'}, {cfg.dtype}…", expanded=False) as status:
            a = _analysis(_key(cfg))
            status.update(label=f"Compiled in {a.timing.compile_s:.2f} s (reused for every seed, gain and scale)", state="complete")
            return a
    return _analysis(_key(cfg))


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
    _setup_process()
    state.init_from_url()
    gpus = [d for d in present_devices() if d.platform == "gpu"]
    gpu_reason = None if gpus else "JAX sees no GPU on this machine"
    devices = ("auto", "cpu", "gpu") if gpus else ("auto", "cpu")
    strategies = available_strategies()
    values = state.sidebar(strategies, devices, gpu_reason)
    views.limits_caption()

    st.title("∇ rnnviz — how gradients flow back through time")
    views.url_warnings(st.session_state.get("_url_warnings", []))
    try:
        cfg = state.config_from_widgets(values)
    except ConfigError as err:
        st.error(f"This combination cannot run: {err}")
        return
    state.sync_url(cfg)
    try:
        a = analysis_for(cfg)
    except ConfigError as err:
        st.error(f"This combination cannot run: {err}")
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
            a, lambda c: _strategies(_key(c)), lambda c: _analysis(_key(c)),
            lambda c, lens: _scaling(_key(c), lens), available_strategies(cfg),
            {s: why for s in strategy_names() if (why := strategy_unavailable(s, cfg))}),
        "Phase diagram": lambda: views.phase_view(cfg, lambda c, lo, hi, n, k: _phase(_key(c.replace(recurrent_gain=1.0)), lo, hi, n, k),
                                                  lambda c, lo, hi, n, k: _lyapunov_phase(_key(c.replace(recurrent_gain=1.0)), lo, hi, n, k)),
        "Jacobians": lambda: views.jacobians_view(a, lambda c, k: _lyapunov(_key(c), k), lambda c, k, e: _jacobians(_key(c), k, e),
                                                  carry_dim(cfg)),
        "Training": lambda: training_panel(cfg),
        "Devices": lambda: views.devices_view(_devices_live(_key(cfg)), *_recorded(runs_folders()), gpu_reason),
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
    except Exception as err:
        log.exception("%s view failed for %s", name, cfg)
        st.error(f"The {name} view failed ({type(err).__name__}: {err}).")

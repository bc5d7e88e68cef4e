"""The Training tab: a few compiled chunks per rerun (in the run's worker), so progress
shows and Stop works; finished runs are kept (all sessions) and saved as run files the
sidebar's *Weights* opens in every tab; λ over training."""

from __future__ import annotations

import json
from typing import NamedTuple

import streamlit as st

from rnnviz.config import ConfigError, RunConfig
from rnnviz.studies.jacobians import carry_dim
from rnnviz.studies.tasks.synthetic import TASKS, get_task
from rnnviz.studies.training import OPTIMIZERS
from rnnviz.ui import budget, calls, jobs, runs_panel, views
from rnnviz.ui.worker import ComputationTimeout, WorkerDied


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
    return json.dumps({"config": json.loads(calls.job_key(cfg, trained=False)), **settings}, sort_keys=True)


def _start_training(cfg_json: str, settings: dict) -> None:
    """on_click of Train: the run's Trainer is made (and compiled) in its worker."""
    key = _train_key(jobs.config_of(cfg_json), settings)
    st.session_state["train_error"] = None
    try:
        calls.pool().call(
            jobs.train_start, key, cfg_json, settings, route=key, what="compiling the training run"
        )
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
        calls.pool().call(jobs.train_stop, key, route=key, what="stopping the training run")


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
        tasks = {
            jobs.DATA_TASK: DataChoice(f"the data set chosen in the sidebar ({calls.describe(cfg)})"),
            **tasks,
        }
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
        args=(calls.job_key(tcfg, trained=False), settings),
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
            progress = calls.pool().call(jobs.train_advance, key, TRAIN_SLICE_S, route=key, what="training")
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
            path.read_bytes,  # read when clicked, not on every rerun
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
        views.over_training_view(calls.over_training(str(paths[0]), k))


class DataChoice(NamedTuple):
    """The Training tab's entry for the chosen data set (a task's description)."""

    description: str

"""The Training tab: train the configured cell on a task (or the chosen data set) a few compiled
chunks per page run, in the run's worker, so progress shows and Stop works; the loss, the metric,
the gradient profile as it learns, the verdict, the finished runs' weights (kept as run files the
sidebar's *Weights* opens in every tab) and λ over training."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.base.runfile import RunFileError
from rnnviz.base.train_settings import DATA_TASK, OPTIMIZERS, TrainSettings
from rnnviz.base.training import training_verdict
from rnnviz.config import BudgetError, ConfigError, RunConfig, carry_size
from rnnviz.frames.training import (
    SMOOTH_STEPS,
    layers_over_training_frame,
    over_training_frame,
    profile_matrix,
    training_frame,
)
from rnnviz.serve import budget
from rnnviz.serve.folders import FolderFull
from rnnviz.serve.requests import Request, TrainProgress
from rnnviz.serve.settings import TRAIN_SLICE_S
from rnnviz.serve.trained_runs import kept_paths
from rnnviz.serve.worker import ComputationTimeout, WorkerDied
from rnnviz.tables.tasks import TASK_RULES
from rnnviz.ui.sidebar.weights import use_run
from rnnviz.ui.tabs.common import csv_button, download, prose
from rnnviz.ui.tabs.context import BlockContext, TabContext, TrainingCalls

TITLE = "Training"
TRAIN_DEFAULTS = dict(
    task="adding",
    steps=1000,
    log_every=50,
    batch=64,
    optimizer="adam",
    lr=1e-3,
    clip_on=True,
    clip=1.0,
    seeds=1,
    lag=0,
)
NOT_KEPT = "These runs are not kept as files, so other tabs cannot open them: {}."
#: ``RunConfig.block`` → what a run's gradient profile is of (:class:`~rnnviz.base.training.Training`).
PROFILES = {"cell": "‖∂L/∂carry_t‖", "reference": "‖∂L/∂x_t‖"}
#: ``RunConfig.block`` → λ over training: the toggle's label, how it is computed, and what draws it.
OVER_TRAINING = {
    "cell": (
        "λ₁ and the step-Jacobian spectrum at every kept step",
        "One vmapped call over the kept weights, on the run's probe sequences",
        lambda ot: over_training(ot),
    ),
    "reference": (
        "λ₁ of each layer at every kept step",
        "One executable for every kept step, on the first of the run's probe sequences",
        lambda ot: layers_over_training(ot),
    ),
}


def training_config(cfg: RunConfig, settings: dict) -> RunConfig:
    """The config a run trains: the sidebar's, with the task's input size (the data's, for
    the chosen data set) and the tab's batch, halved while that is over the memory budget
    (a matrix memory at the sidebar's H and T may fit the analysis's batch, not 64)."""
    fields = {} if settings["task"] == DATA_TASK else {"input_size": TASK_RULES[settings["task"]].input_size}
    batch = settings["batch"]
    while True:  # the sidebar's config fits at its own batch, so a batch of 1 does
        try:
            return cfg.replace(batch_size=batch, **fields)
        except BudgetError:
            if batch <= 1:
                raise
            batch //= 2


def requests(ctx: TabContext) -> list[Request]:
    """Nothing ahead: a run starts when the user presses Train, and lives in its worker."""
    return []


def render(ctx: TabContext) -> None:
    """The controls, Train / Stop / Pin, the run in progress, and the finished runs'
    results and weights."""
    _render(ctx.config, ctx.training, ctx.data_source)


def block_requests(ctx: BlockContext) -> list[Request]:
    """Nothing ahead: a run starts when the user presses Train."""
    return []


def render_block(ctx: BlockContext) -> None:
    """A reference block trained as a bare cell is (:mod:`rnnviz.studies.training.blocks`): the
    same controls, curves and verdict (on the sidebar's data set too); its profile is over the
    inputs."""
    _render(ctx.config, ctx.training, ctx.data_source)


def _render(cfg: RunConfig, calls: TrainingCalls, data_source: dict | None) -> None:
    st.markdown(prose(__name__, f"intro {cfg.block}"))
    tasks = {name: rule.description for name, rule in TASK_RULES.items()}
    if data_source is not None:
        batch = cfg.batch_size or "unbatched"
        shape = f"{cfg.cell} T={cfg.seq_len} H={cfg.hidden_size} B={batch} {cfg.dtype}"
        tasks = {DATA_TASK: f"the data set chosen in the sidebar ({shape})", **tasks}
    elif st.session_state.get("train_task") == DATA_TASK:
        st.session_state["train_task"] = next(iter(TASK_RULES))
    settings = controls(cfg, tasks)
    tcfg = training_config(cfg, settings)
    plan = budget.training_plan(tcfg, settings["log_every"])
    if plan.note:
        st.info(plan.note.replace("steps per chunk", "steps per chunk (one compiled call between redraws)"))
    settings = {**settings, "log_every": plan.settings["chunk"]}
    if (tcfg.input_size, tcfg.batch_size) != (cfg.input_size, cfg.batch_size):
        asked = settings["batch"]
        over = f" (asked {asked}: over the memory budget at this H and T)" if tcfg.batch_size != asked else ""
        st.caption(
            f"Trained with input_size={tcfg.input_size} (the {settings['task']} task's) and batch "
            f"{tcfg.batch_size}{over}; every other field as in the sidebar."
        )
    key = calls.key(tcfg, settings)
    running = st.session_state.get("trainer") == key
    c1, c2, c3 = st.columns(3)
    train = c1.empty()  # drawn after this pass's slice: the slice that finishes a run enables it
    if running:  # a stand-in of its own key (one widget key is drawn once per pass)
        train.button("Train", key="train_busy", type="primary", disabled=True)
    stops = "stops the run in progress after its current chunk"
    c2.button("Stop", key="train_stop", on_click=_stop, args=(calls,), help=stops)
    if st.session_state.get("train_error"):
        st.error(f"Training cannot run: {st.session_state['train_error']}")
    finished = not running or _advance(calls, key)  # a slice not finished reruns the page
    train.button("Train", key="train_start", type="primary", on_click=_start, args=(calls, tcfg, settings))
    if not finished:  # the run stopped with an error, said above: Train starts it again
        return
    records = _finished(calls, key)
    if records is None:
        st.info(
            "Press Train: the settings above have not been trained yet (finished runs are kept, so coming "
            "back does not retrain)."
        )
        return
    lr = settings["learning_rate"]
    label = f"{tcfg.cell} T={tcfg.seq_len} g={tcfg.recurrent_gain:g} {settings['task']} lr={lr:g}"
    c3.button("Pin these runs", key="train_pin", on_click=_pin, args=(key, label))
    pinned = [(lab, _finished(calls, k)) for k, lab in st.session_state.get("train_pins", []) if k != key]
    results(records, [(lab, runs) for lab, runs in pinned if runs is not None], running=False)
    trained_weights(records, key, tcfg, calls)


def _finished(calls: TrainingCalls, key: str) -> list | None:
    """A finished run's curves (shared by all sessions: re-opening a setting never retrains),
    or None; a run file damaged since is said once and treated as not trained."""
    try:
        return calls.finished(key)
    except (RunFileError, ComputationTimeout, WorkerDied) as err:
        st.warning(f"A finished training run could not be reopened: {err}")
        return None


def _start(calls: TrainingCalls, cfg: RunConfig, settings: dict) -> None:
    """on_click of Train: the run is made (and compiled) in its worker."""
    st.session_state["train_error"] = None
    try:
        st.session_state["trainer"] = calls.start(cfg, settings)
    except ConfigError as err:
        st.session_state["train_error"] = str(err)
    except (ComputationTimeout, WorkerDied) as err:
        st.session_state["train_error"] = f"{err}. Shrink T, H, the batch or the seeds."


def _stop(calls: TrainingCalls) -> None:
    key = st.session_state.get("trainer")
    if key is not None:
        calls.stop(key)


def _pin(key: str, label: str) -> None:
    pins = st.session_state.setdefault("train_pins", [])
    if key not in [k for k, _ in pins]:
        pins.append((key, label))
        # in use while pinned: the trained folder's caps never evict them (rnnviz.serve.folders)
        st.session_state.setdefault("train_pinned_files", []).extend(str(p) for p in kept_paths(key))


def progress_figure(progress: TrainProgress) -> tuple[float, str]:
    """One progress figure, its bar and its text from the same count: ``(fraction done, text)``.

    Example:
        >>> from rnnviz.serve.requests import TrainProgress
        >>> progress_figure(TrainProgress(950, 1000, 19.0, False, False, None))
        (0.95, '950 of 1000 steps (95 %) · 50 steps/s per run · about 1 s left')
    """
    fraction = min(max(progress.steps_done / progress.steps, 0.0), 1.0) if progress.steps else 0.0
    text = f"{progress.steps_done} of {progress.steps} steps ({100 * fraction:.0f} %)"
    if progress.steps_done and progress.run_s > 0:
        rate = progress.steps_done / progress.run_s
        left = (progress.steps - progress.steps_done) / rate
        return fraction, f"{text} · {rate:.0f} steps/s per run · about {left:.0f} s left"
    return fraction, f"{text} · compiling…"


def _advance(calls: TrainingCalls, key: str) -> bool:
    """One slice of the run in progress, with its progress bar; True when it is done (its
    records are in the store) and the finished results may be drawn."""
    # Each slice is a rerun that draws a new bar: it starts where the last one stood, not at
    # 0 (Streamlit animates a bar's width, so one restarted at 0 lagged behind its own text).
    last = st.session_state.get("train_progress")
    fraction, text = last[:2] if last and last[2] == key else (0.0, "compiling and training…")
    bar = st.progress(fraction, text=text)
    try:
        progress = calls.advance(key, TRAIN_SLICE_S)
    except (LookupError, ComputationTimeout, WorkerDied) as err:
        st.session_state["trainer"] = None
        st.error(f"Training stopped: {err}")
        return False
    fraction, text = progress_figure(progress)
    st.session_state["train_progress"] = (fraction, text, key)
    bar.progress(fraction, text=text)
    if not progress.done:
        if progress.records is not None:
            results(progress.records, [], running=True)
        st.rerun()
        return False
    st.session_state["trainer"] = None
    if progress.write_error:
        st.warning(NOT_KEPT.format(progress.write_error))
    if progress.records is not None:
        try:
            calls.keep(key, progress)
        except FolderFull as err:  # the folder's caps, and every run in it open in some session
            st.session_state.setdefault("train_not_kept", {})[key] = str(err)
    if progress.stopped:
        st.info(f"Stopped at step {progress.steps_done}; shown below as far as it got.")
    return True


def controls(cfg: RunConfig, tasks: dict[str, str]) -> dict:
    """The tab's settings (widgets keyed ``train_*``, defaults :data:`TRAIN_DEFAULTS`, set by
    presets through session state) as a :class:`~rnnviz.studies.training.TrainSettings` dict,
    with the batch and the seeds. ``tasks``: the tasks offered and their descriptions."""
    for name, value in TRAIN_DEFAULTS.items():
        st.session_state.setdefault(f"train_{name}", value)
    c1, c2, c3, c4 = st.columns(4)
    described = "\n\n".join(f"{name}: {text}" for name, text in tasks.items())
    task = c1.selectbox("Task", list(tasks), key="train_task", help=described)
    steps = int(c2.number_input("Steps", 10, 100_000, step=50, key="train_steps"))
    chunk = "one compiled call trains this many steps; the gradient profile is taken at the start of each"
    per_chunk = "Steps per chunk (and per profile)"
    log_every = int(c3.number_input(per_chunk, 1, 1000, step=10, key="train_log_every", help=chunk))
    fresh = "a fresh batch every step, drawn from the seed"
    batch = int(c4.number_input("Batch per step", 1, 1024, step=8, key="train_batch", help=fresh))
    c1, c2, c3, c4 = st.columns(4)
    momentum = "adam, or sgd with momentum 0.9"
    optimizer = c1.selectbox("Optimizer", OPTIMIZERS, key="train_optimizer", help=momentum)
    lr = float(c2.number_input("Learning rate", 1e-6, 10.0, format="%.5f", key="train_lr"))
    clips = "g ← g·min(1, c/‖g‖) (Pascanu et al. 2013)"
    clip_on = c3.toggle("Clip the global norm", key="train_clip_on", help=clips)
    clip = float(c3.number_input("clip c", 1e-3, 1e6, key="train_clip")) if clip_on else None
    seeds = int(c4.number_input("Seeds (one vmapped call)", 1, 8, step=1, key="train_seeds"))
    lag = 0
    if task == "recall":
        if st.session_state["train_lag"] > cfg.seq_len - 1:
            st.session_state["train_lag"] = 0
        lag = int(st.slider("Lag k (target x_(T−k))", 0, max(1, cfg.seq_len - 1), key="train_lag"))
    asked = TrainSettings(task, steps, lr, optimizer, clip, min(log_every, steps), lag)
    return {**asked.to_dict(), "batch": batch, "seeds": seeds}


def results(records: list, pinned: list[tuple[str, list]], running: bool) -> None:
    """Charts and verdict of one set of runs (all seeds), with pinned runs overlaid."""
    r0 = records[0]
    if running:
        st.markdown(f"Training… {r0.steps_run} of {r0.steps} steps so far.")
    else:
        diverged = any(r.nonfinite_step is not None for r in records)
        (st.warning if diverged else st.markdown)(f"**Training:** {training_verdict(records)}")
    df = training_frame(records)
    over = pd.concat([df] + [training_frame(recs, label) for label, recs in pinned], ignore_index=True)
    title = f"Loss ({r0.task}, mean of the last {SMOOTH_STEPS} steps)"
    loss = charts.training_figure(over, "loss_smooth", title, "loss (log)", baseline=r0.baseline)
    st.plotly_chart(loss, key="chart_train_loss")
    c1, c2 = st.columns(2)
    title, log_y = f"Task metric: {r0.metric_name}", r0.metric_name == "MSE"
    metric = charts.training_figure(over, "metric", title, r0.metric_name, log_y=log_y)
    c1.plotly_chart(metric, key="chart_train_metric")
    c2.plotly_chart(charts.clipping_figure(df, r0.clip), key="chart_train_clip")
    which = 0  # the gradient profile of one run (its seed chosen when there are several)
    if len(records) > 1:
        seeds = [f"seed {r.config.seed}" for r in records]
        which = st.selectbox(
            "Profile of run", range(len(seeds)), format_func=seeds.__getitem__, key="train_profile_run"
        )
    of = PROFILES[r0.config.block]
    profile = charts.heatmap_figure(
        profile_matrix(records[which]),
        f"log₁₀ {of} on a fixed probe batch, as training goes on",
        x_title="timestep t",
        y_title="training step",
        colorbar=f"log₁₀ {of}",
    )
    st.plotly_chart(profile, key="chart_train_profile")
    st.caption(prose(__name__, f"profile {r0.config.block}"))
    csv_button(df, "rnnviz_training.csv", "csv_training", "Download the training curves (CSV)")


def trained_weights(records: list, key: str, cfg: RunConfig, calls: TrainingCalls) -> None:
    """The finished runs' weights: kept as files (every tab can open them, after reloads too),
    downloadable, and λ over training."""
    paths = kept_paths(key)
    if len(paths) != len(records):
        why = st.session_state.get("train_not_kept", {}).get(key) or (
            "the trained-runs folder no longer holds them (its caps evict the least recently used run "
            "no session has open)"
        )
        st.warning(NOT_KEPT.format(why))
        return
    st.subheader("The trained weights")
    st.caption(
        f"Kept at every profile step ({len(records[0].weight_steps)} steps) and saved on this machine: the "
        "sidebar's *Weights* opens them in every tab, also after a reload."
    )
    cols = st.columns(min(len(records), 4))
    for i, (r, path) in enumerate(zip(records, paths)):
        col, seed = cols[i % len(cols)], r.config.seed
        col.button(
            f"Open seed {seed} in every tab", key=f"train_use_{i}", on_click=use_run, args=(str(path),)
        )
        with col:  # the file read when clicked, not on every rerun
            name = f"{r.label.replace(' ', '_')}_seed{seed}.rnnviz"
            download(f"Download seed {seed} (.rnnviz)", path.read_bytes, name, f"train_download_{i}")
    label, how, draw = OVER_TRAINING[cfg.block]
    why = "does training move the network toward λ₁ = 0?"
    if st.toggle(label, key="train_dynamics", help=f"{why} {how}"):
        draw(calls.over_training(str(paths[0]), min(4, carry_size(cfg))))


def layers_over_training(ot) -> None:
    """λ₁ of each recurrent layer and the loss against the training step."""
    df = layers_over_training_frame(ot)
    title = f"λ₁ of each recurrent layer over training ({ot.run.label}, seed {ot.run.config.seed})"
    st.plotly_chart(charts.over_training_figure(df, title), key="chart_train_lyapunov")
    moved = ", ".join(
        f"layer {layer + 1} {first:+.4f} → {last:+.4f}"
        for layer, first, last in zip(ot.layers, ot.lambda1[0], ot.lambda1[-1])
    )
    st.caption(
        f"λ₁ per step from step {int(ot.steps[0])} to {int(ot.steps[-1])}, along the first of the run's "
        f"probe sequences (after a warm-up of {ot.warmup} steps): {moved}. Toward 0, the edge of chaos, "
        "a layer's gradient through its state neither vanishes nor explodes."
    )
    csv_button(df, "rnnviz_layers_over_training.csv", "csv_over_training", "Download λ₁ over training (CSV)")


def over_training(ot) -> None:
    """λ₁ … λ_k and the loss against the training step, and the step-Jacobian spectrum."""
    df, lam = over_training_frame(ot), ot.lambda1
    title = f"Lyapunov exponents over training ({ot.run.label}, seed {ot.run.config.seed})"
    st.plotly_chart(charts.over_training_figure(df, title), key="chart_train_lyapunov")
    toward = "toward" if abs(lam[-1]) < abs(lam[0]) else "away from"
    st.caption(
        f"λ₁ went from {lam[0]:+.4f} at step {int(ot.steps[0])} to {lam[-1]:+.4f} at step "
        f"{int(ot.steps[-1])} (per step, on the run's {ot.probe} probe sequences): {toward} λ = 0, the "
        "edge of chaos, where gradients neither vanish nor explode."
    )
    sigma = df[df["series"].str.startswith("σ")]
    title = "Step-Jacobian spectrum over training: median σ_i(J_t) over t"
    spectrum = charts.line_figure(sigma, title, "σ", x="step", x_title="training step")
    st.plotly_chart(spectrum, key="chart_train_spectrum")
    csv_button(df, "rnnviz_over_training.csv", "csv_over_training", "Download λ and σ over training (CSV)")

"""The Training tab: its controls (task, steps, optimiser) and its results (loss, metric, the
gradient-profile heatmap, the verdict)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts, frames
from rnnviz.config import RunConfig
from rnnviz.studies.training import training_verdict
from rnnviz.ui.views.common import csv_button

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


def training_controls(cfg: RunConfig, tasks: dict, optimizers: tuple[str, ...]) -> dict:
    """The Training tab's settings (widgets keyed ``train_*``, defaults :data:`TRAIN_DEFAULTS`,
    set by presets through session state); the config's cell is trained."""
    for name, value in TRAIN_DEFAULTS.items():
        st.session_state.setdefault(f"train_{name}", value)
    c1, c2, c3, c4 = st.columns(4)
    task = c1.selectbox(
        "Task",
        list(tasks),
        key="train_task",
        help="\n\n".join(f"{n}: {t.description}" for n, t in tasks.items()),
    )
    steps = int(c2.number_input("Steps", 10, 100_000, step=50, key="train_steps"))
    log_every = int(
        c3.number_input(
            "Steps per chunk (and per profile)",
            1,
            1000,
            step=10,
            key="train_log_every",
            help="one compiled call trains this many steps; the gradient profile is taken at the start of "
            "each",
        )
    )
    batch = int(
        c4.number_input(
            "Batch per step",
            1,
            1024,
            step=8,
            key="train_batch",
            help="a fresh batch every step, drawn from the seed",
        )
    )
    c1, c2, c3, c4 = st.columns(4)
    optimizer = c1.selectbox(
        "Optimizer", optimizers, key="train_optimizer", help="adam, or sgd with momentum 0.9"
    )
    lr = float(c2.number_input("Learning rate", 1e-6, 10.0, format="%.5f", key="train_lr"))
    clip_on = c3.toggle(
        "Clip the global norm", key="train_clip_on", help="g ← g·min(1, c/‖g‖) (Pascanu et al. 2013)"
    )
    clip = (
        float(c3.number_input("clip c", 1e-3, 1e6, key="train_clip", disabled=not clip_on))
        if clip_on
        else None
    )
    seeds = int(c4.number_input("Seeds (one vmapped call)", 1, 8, step=1, key="train_seeds"))
    lag = 0
    if task == "recall":
        if st.session_state["train_lag"] > cfg.seq_len - 1:
            st.session_state["train_lag"] = 0
        lag = int(st.slider("Lag k (target x_(T−k))", 0, max(1, cfg.seq_len - 1), key="train_lag"))
    return dict(
        task=task,
        steps=steps,
        log_every=min(log_every, steps),
        batch=batch,
        optimizer=optimizer,
        learning_rate=lr,
        clip=clip,
        seeds=seeds,
        lag=lag,
    )


def training_results(records: list, pinned: list[tuple[str, list]], running: bool) -> None:
    """Charts and verdict of one set of runs (all seeds), with pinned runs overlaid."""
    r0 = records[0]
    text = (
        f"**Training:** {training_verdict(records)}"
        if not running
        else f"Training… {r0.steps_run} of {r0.steps} steps so far."
    )
    (st.warning if any(r.nonfinite_step is not None for r in records) and not running else st.markdown)(text)
    df = frames.training_frame(records)
    over = pd.concat([df] + [frames.training_frame(recs, label) for label, recs in pinned], ignore_index=True)
    st.plotly_chart(
        charts.training_figure(
            over,
            "loss_smooth",
            f"Loss ({r0.task}, mean of the last {frames.SMOOTH_STEPS} steps)",
            "loss (log)",
            baseline=r0.baseline,
        ),
        key="chart_train_loss",
    )
    c1, c2 = st.columns(2)
    with c1:
        st.plotly_chart(
            charts.training_figure(
                over,
                "metric",
                f"Task metric: {r0.metric_name}",
                r0.metric_name,
                log_y=r0.metric_name == "MSE",
            ),
            key="chart_train_metric",
        )
    with c2:
        st.plotly_chart(charts.clipping_figure(df, r0.clip), key="chart_train_clip")
    which = 0
    if len(records) > 1:
        which = st.selectbox(
            "Profile of run",
            range(len(records)),
            format_func=lambda i: f"seed {records[i].config.seed}",
            key="train_profile_run",
        )
    matrix = frames.profile_matrix(records[which])
    st.plotly_chart(
        charts.heatmap_figure(
            matrix,
            "log₁₀ ‖∂L/∂carry_t‖ on a fixed probe batch, as training goes on",
            x_title="timestep t",
            y_title="training step",
            colorbar="log₁₀ ‖∂L/∂carry_t‖",
        ),
        key="chart_train_profile",
    )
    st.caption(
        "Each row is the gradient of the task loss with respect to every carry, taken before that chunk's "
        "steps "
        "(zero-perturbation, exact magnitudes). Learning a long-range task needs the left columns — the "
        "early "
        "steps where the marked inputs sit — to stay within reach of the loss."
    )
    csv_button(df, "rnnviz_training.csv", "csv_training", "Download the training curves (CSV)")


def over_training_view(ot) -> None:
    """λ₁ … λ_k and the loss against the training step, and the step-Jacobian spectrum."""
    df = frames.over_training_frame(ot)
    lam = ot.lambda1
    st.plotly_chart(
        charts.over_training_figure(
            df, f"Lyapunov exponents over training ({ot.run.label}, seed {ot.run.config.seed})"
        ),
        key="chart_train_lyapunov",
    )
    st.caption(
        f"λ₁ went from {lam[0]:+.4f} at step {int(ot.steps[0])} to {lam[-1]:+.4f} at step "
        f"{int(ot.steps[-1])} "
        f"(per step, on the run's {ot.probe} probe sequences): "
        + ("toward" if abs(lam[-1]) < abs(lam[0]) else "away from")
        + " λ = 0, the edge of chaos, where gradients neither vanish nor explode."
    )
    sigma = df[df["series"].str.startswith("σ")]
    st.plotly_chart(
        charts.line_figure(
            sigma, "Step-Jacobian spectrum over training: median σ_i(J_t) over t", "σ", x="step",
            x_title="training step",
        ),
        key="chart_train_spectrum",
    )  # fmt: skip
    csv_button(df, "rnnviz_over_training.csv", "csv_over_training", "Download λ and σ over training (CSV)")

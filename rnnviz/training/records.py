"""What a training run leaves: the :class:`Training` record, when it solved its task, and a
one-sentence verdict (NumPy only)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from rnnviz.config import RunConfig


class TrainTiming(NamedTuple):
    """Seconds to compile, seconds of training calls, optimisation steps per second per run."""

    compile_s: float
    run_s: float  # wall time of the training calls (all runs of the call together)
    steps_per_s: float  # optimisation steps per second, per run


@dataclass(frozen=True, eq=False)
class Training:
    """One training run. Arrays are NumPy, over the ``steps_run`` steps actually taken.

    Attributes:
        config: the trained configuration.
        task, lag, optimizer, learning_rate, clip, steps: what was asked (:func:`train`).
        losses: ``[steps_run]`` the task loss at each step.
        metric: ``[steps_run]`` the task's metric (``metric_name``: MSE, accuracy, …).
        grad_norm: ``[steps_run]`` the global ‖∇L‖ before clipping.
        clipped: ``[steps_run]`` bool, whether the step was clipped.
        profile_steps: ``[n_logs]`` the steps whose start each probe profile was taken at.
        profiles: ``[n_logs, T+1]`` log₁₀ ‖∂L/∂carry_t‖ of the task loss on a fixed probe
            batch (exact, −inf for a true zero).
        recurrent_grad: ``[n_logs]`` log₁₀ ‖∂L/∂W_h‖ on the probe batch.
        baseline: the trivial predictor's loss.
        solved_step: the first step whose running mean loss (over :data:`SOLVE_WINDOW`
            steps) is below 10 % of the baseline, or None.
        nonfinite_step: the step whose loss or gradient was NaN/Inf (the run stopped
            there), or None.
        stopped: the caller stopped it early.
        timing: compile and run seconds, steps per second.
        held_out_loss: ``[n_evals]`` the loss on a data set's held-out sequences after each
            chunk (None for the synthetic tasks, whose every batch is fresh).
        held_out_metric: ``[n_evals]`` the metric there (accuracy, bits/char, MSE).
        held_out_steps: ``[n_evals]`` the steps they were measured after.
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
    held_out_loss: np.ndarray | None = None
    held_out_metric: np.ndarray | None = None
    held_out_steps: np.ndarray | None = None

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


def training_verdict(records: Sequence[Training]) -> str:
    """One sentence on whether the runs learned their task (several runs: how many did),
    and for a data set the held-out metric at the last profile."""
    if not records:
        return "no runs"
    return _learned(records) + _held_out(records)


def _held_out(records: Sequence[Training]) -> str:
    finals = [
        float(r.held_out_metric[-1])
        for r in records
        if r.held_out_metric is not None and r.held_out_metric.size
    ]
    if not finals:
        return ""
    r0 = records[0]
    value = f"{finals[0]:.3g}" if len(finals) == 1 else f"{min(finals):.3g}–{max(finals):.3g}"
    return f" Held-out {r0.metric_name} after step {int(r0.held_out_steps[-1])}: {value}."


def _learned(records: Sequence[Training]) -> str:
    r0 = records[0]
    what = f"the {r0.task} problem at T={r0.config.seq_len}" + (
        f" (lag {r0.lag})" if r0.task == "recall" else ""
    )
    solved = [r.solved_step for r in records if r.solved_step is not None]
    diverged = [r.nonfinite_step for r in records if r.nonfinite_step is not None]
    n = len(records)
    if n == 1:
        if r0.solved_step is not None:
            return (
                f"Learned {what} by step {r0.solved_step} (running mean loss below 10 % of the "
                f"baseline {r0.baseline:.3g})."
            )
        if r0.nonfinite_step is not None:
            return (
                f"Diverged on {what}: the loss or gradient became NaN/Inf at step {r0.nonfinite_step} "
                "(try clipping)."
            )
        ratio = r0.final_loss() / r0.baseline
        if ratio > 0.8:
            return (
                f"Stayed at the baseline on {what}: final loss {ratio:.2f}× the trivial predictor's "
                f"after {r0.steps_run} steps."
            )
        return (
            f"Improved on {what} to {ratio:.2f}× the baseline after {r0.steps_run} steps, but did not "
            "reach 10 %."
        )
    text = f"{len(solved)} of {n} runs learned {what}"
    if solved:
        text += f" (by step {min(solved)}–{max(solved)})" if len(solved) > 1 else f" (by step {solved[0]})"
    if diverged:
        text += f"; {len(diverged)} diverged (NaN/Inf)"
    ratios = [r.final_loss() / r.baseline for r in records if r.nonfinite_step is None]
    if ratios:
        text += f"; final loss {min(ratios):.2f}–{max(ratios):.2f}× the baseline"
    return text + "."

"""What a training run leaves: the :class:`Training` record (its curves and the weights
kept at every log step, saved as a ``.rnnviz`` file by :meth:`Training.save`), when it
solved its task, a one-sentence verdict, and λ and the step-Jacobian spectrum over its
training (:class:`OverTraining`).

Plain records (NumPy, no JAX): :mod:`rnnviz.studies.training` trains and
:mod:`rnnviz.studies.over_training` measures; a process that only reads runs and draws them
(the dashboard's server) never imports JAX."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rnnviz import __version__
from rnnviz.base import runfile
from rnnviz.base.formatting import finite_json
from rnnviz.base.weights import Weights
from rnnviz.config import ConfigError, RunConfig


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
            batch (exact, −inf for a true zero); a reference block's ``[n_logs, T]``
            log₁₀ ‖∂L/∂x_t‖ over its inputs (:mod:`rnnviz.studies.training.blocks`).
        recurrent_grad: ``[n_logs]`` log₁₀ ‖∂L/∂W_h‖ on the probe batch (a block's: over every
            tensor of its blocks).
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
        weight_steps: ``[n_kept]`` the steps whose weights are kept: every profile step (every
            k-th when all of them would pass ``MAX_KEPT_BYTES``, 256 MiB a training call) and
            the last step taken (the state a non-finite step froze).
        weight_tree: ``{"cell", "readout", ("carry")}`` with a leading ``[n_kept]`` axis on
            every leaf (NumPy); :meth:`weights` picks one step. A reference block's is
            ``{name: [n_kept, …]}``, its tensors by name (:meth:`tensors`).
        data_source: ``(name, options)`` of the data set trained on (``load_dataset(name,
            **dict(options))`` reloads it), or None for the synthetic tasks.
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
    weight_steps: np.ndarray | None = None
    weight_tree: dict[str, Any] | None = None
    data_source: tuple[str, tuple[tuple[str, Any], ...]] | None = None

    @property
    def clip_count(self) -> int:
        """How many steps clipped their gradient (global norm over ``clip``)."""
        return int(self.clipped.sum())

    @property
    def steps_run(self) -> int:
        """Steps recorded: ``steps``, fewer when stopped early or cut at the first non-finite step."""
        return int(self.losses.size)

    def to_json(self) -> dict[str, Any]:
        """The run's curves and numbers as JSON values (arrays as lists, NaN/Inf as null; the
        kept weights left out): what ``rnnviz train --json`` prints and every other writer of
        a run (the comparison report, the benchmark's records) takes its fields from."""
        held = {
            f: None if getattr(self, f) is None else getattr(self, f).tolist()
            for f in ("held_out_loss", "held_out_metric", "held_out_steps")
        }
        return finite_json(
            {
                "config": self.config.to_dict(),
                "task": self.task,
                "lag": self.lag,
                "optimizer": self.optimizer,
                "learning_rate": self.learning_rate,
                "clip": self.clip,
                "steps": self.steps,
                "steps_run": self.steps_run,
                "baseline": self.baseline,
                "metric_name": self.metric_name,
                "losses": _floats(self.losses),
                "metric": _floats(self.metric),
                "grad_norm": _floats(self.grad_norm),
                "clipped": self.clipped.tolist(),
                "clip_count": self.clip_count,
                "profile_steps": self.profile_steps.tolist(),
                "profiles": _floats(self.profiles),
                "recurrent_grad_log10": _floats(self.recurrent_grad),
                **held,
                "final_loss": self.final_loss(),
                "solved_step": self.solved_step,
                "nonfinite_step": self.nonfinite_step,
                "compile_s": self.timing.compile_s,
                "run_s": self.timing.run_s,
                "steps_per_s": self.timing.steps_per_s,
            }
        )

    def final_loss(self, window: int = 50) -> float:
        """Mean loss over the last ``window`` finite steps."""
        finite = self.losses[np.isfinite(self.losses)]
        return float(finite[-window:].mean()) if finite.size else math.nan

    @property
    def label(self) -> str:
        """``lstm on digits pixels`` / ``gru on adding T=50``: the cell and what it learned."""
        task = self.task.split(" #")[0]  # a data task's name ends in its fingerprint
        model = (
            self.config.cell
            if self.config.block == "cell"
            else f"{self.config.cell} block ×{self.config.layers}"
        )
        return f"{model} on {task}" + ("" if self.data_source else f" T={self.config.seq_len}")

    def weights(self, step: int | None = None) -> Weights:
        """The weights at a kept step (None: the last), for every view's ``params=``.

        Raises:
            ConfigError: ``step``, naming the kept steps, when it is not one of them (or the
                run kept no weights).
        """
        if self.config.block != "cell":
            raise ConfigError(
                "block",
                self.config.block,
                "a bare cell's run for its cell weights; a block's are run.tensors(step)",
            )
        i = self._kept_index(step)
        steps = self.weight_steps
        tree = {k: _at(v, i) for k, v in self.weight_tree.items()}
        carry = tree.get("carry")
        return Weights(
            cell=tree["cell"],
            readout=tree.get("readout"),
            carry=None if carry is None else _carry_of(carry),
            gain=float(self.config.recurrent_gain),
            step=int(steps[i]),
            label=f"{self.label}, step {int(steps[i])}",
        )

    def tensors(self, step: int | None = None) -> dict[str, np.ndarray]:
        """A reference block's tensors by name (``input_proj.*``, the design's, ``readout.*``)
        at a kept step (None: the last).

        Raises:
            ConfigError: ``step`` is not a kept step (naming them), or the run is a bare cell's
                (:meth:`weights` reads those).
        """
        if self.config.block == "cell":
            raise ConfigError(
                "block", "cell", "a reference block's run; a bare cell's weights are run.weights(step)"
            )
        i = self._kept_index(step)
        return {name: np.asarray(v[i]) for name, v in self.weight_tree.items()}

    def _kept_index(self, step: int | None) -> int:
        """The index of a kept step (None: the last) in the kept weights."""
        steps = self.weight_steps
        if steps is None or self.weight_tree is None or not steps.size:
            raise ConfigError("step", step, "this run kept no weights")
        i = steps.size - 1 if step is None else np.flatnonzero(steps == step)
        if step is not None and not i.size:
            raise ConfigError("step", step, "a step whose weights were kept: " + _listed(steps))
        return int(i if step is None else i[0])

    def save(self, path: str | Path) -> Path:
        """Write the run (curves, kept weights, config, task or data source, package
        versions) to a ``.rnnviz`` file; :func:`rnnviz.load_run` reopens it bit for bit.

        Example:
            >>> import tempfile, pathlib
            >>> from rnnviz import RunConfig, load_run, train
            >>> cfg = RunConfig(cell="gru", hidden_size=4, input_size=2, seq_len=6, batch_size=8)
            >>> run = train(cfg, "adding", steps=4, log_every=2)
            >>> path = run.save(pathlib.Path(tempfile.mkdtemp()) / "run.rnnviz")
            >>> again = load_run(path)
            >>> [int(s) for s in again.weight_steps], bool((again.losses == run.losses).all())
            ([0, 2, 4], True)
        """
        return runfile.write(path, *self.to_file())

    def to_file(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(header, arrays)`` as :mod:`rnnviz.base.runfile` stores them."""
        header = {
            "rnnviz": __version__,
            "versions": {p: _version(p) for p in ("jax", "jaxlib", "flax", "optax", "numpy")},
            "written": datetime.now(UTC).isoformat(timespec="seconds"),
            "config": self.config.to_dict(),
            "data_source": None
            if self.data_source is None
            else {"name": self.data_source[0], "options": dict(self.data_source[1])},
            **{f: getattr(self, f) for f in _SCALARS},
            "timing": list(self.timing),
            # for listing runs from the header alone (the arrays hold the same steps)
            "kept_steps": None if self.weight_steps is None else [int(x) for x in self.weight_steps],
            "label": self.label,
            "final_loss": self.final_loss(),
        }
        arrays = {f: getattr(self, f) for f in _ARRAYS if getattr(self, f) is not None}
        if self.weight_tree is not None:
            arrays["weights"] = self.weight_tree
        return header, arrays

    @classmethod
    def from_file(cls, header: dict[str, Any], arrays: dict[str, Any]) -> Training:
        """The record :meth:`to_file` wrote (``KeyError``/``TypeError`` on a malformed one)."""
        source = header["data_source"]
        return cls(
            config=RunConfig.from_mapping(header["config"]),
            **{f: header[f] for f in _SCALARS},
            timing=TrainTiming(*header["timing"]),
            **{f: arrays.get(f) for f in _ARRAYS},
            weight_tree=arrays.get("weights"),
            data_source=None
            if source is None
            else (source["name"], tuple(sorted(source["options"].items()))),
        )


#: What a run file holds in its header (JSON) and as arrays (raw bytes).
_SCALARS = (
    "task", "lag", "optimizer", "learning_rate", "clip", "steps", "metric_name", "baseline",
    "solved_step", "nonfinite_step", "stopped",
)  # fmt: skip
_ARRAYS = (
    "losses", "metric", "grad_norm", "clipped", "profile_steps", "profiles", "recurrent_grad",
    "held_out_loss", "held_out_metric", "held_out_steps", "weight_steps",
)  # fmt: skip


@dataclass(frozen=True, eq=False)
class OverTraining:
    """λ and σ(J_t) at each kept step of a run. S = kept steps analysed, k = exponents.

    Attributes:
        run: the run.
        steps: ``[S]`` the optimisation steps.
        loss: ``[S]`` the training loss there: the mean over the ``log_every`` steps before
            it (the first step's own loss at step 0).
        exponents: ``[S, k]`` the Lyapunov exponents (largest first), mean over the probe.
        spread: ``[S, k]`` their standard deviation over the probe's examples.
        singular_values: ``[S, n, k]`` σ_i(J_t) at the ``n`` analysed steps ``jacobian_steps``.
        jacobian_steps: ``[n]`` the t at which J_t was taken.
        probe: how many sequences the exponents averaged over.
    """

    run: Training
    steps: np.ndarray
    loss: np.ndarray
    exponents: np.ndarray
    spread: np.ndarray
    singular_values: np.ndarray
    jacobian_steps: np.ndarray
    probe: int

    @property
    def lambda1(self) -> np.ndarray:
        """``[S]`` λ₁ at each kept step."""
        return self.exponents[:, 0]


@dataclass(frozen=True, eq=False)
class LayersOverTraining:
    """λ₁ of each recurrent layer of a reference block at each kept step of its run. S = kept
    steps analysed, R = recurrent layers.

    Attributes:
        run: the run.
        steps: ``[S]`` the optimisation steps.
        loss: ``[S]`` the training loss there (as :attr:`OverTraining.loss`).
        layers: ``(l, …)`` the recurrent layers, 0-based.
        lambda1: ``[S, R]`` λ₁ per step of each layer along the probe's first sequence
            (:func:`~rnnviz.studies.model_lyapunov.model_lyapunov`).
        warmup: the steps left out of each λ₁'s mean.
    """

    run: Training
    steps: np.ndarray
    loss: np.ndarray
    layers: tuple[int, ...]
    lambda1: np.ndarray
    warmup: int


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _at(tree: Any, i: int) -> Any:
    if isinstance(tree, dict):
        return {k: _at(v, i) for k, v in tree.items()}
    return np.asarray(tree)[i]


def _carry_of(stored: dict[str, np.ndarray]) -> Any:
    """A learned carry as the cell makes it: one array, or a tuple of its components."""
    leaves = [stored[k] for k in sorted(stored, key=int)]
    return leaves[0] if len(leaves) == 1 else tuple(leaves)


def _listed(steps: np.ndarray) -> str:
    s = [str(int(x)) for x in steps]
    return ", ".join(s) if len(s) <= 12 else ", ".join(s[:5] + ["…"] + s[-5:])


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


def _floats(x: np.ndarray) -> list[float]:
    return np.asarray(x, np.float64).tolist()


__all__ = [
    "SOLVE_WINDOW",
    "LayersOverTraining",
    "OverTraining",
    "TrainTiming",
    "Training",
    "solved_step",
    "training_verdict",
]

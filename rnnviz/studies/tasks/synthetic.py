"""Long-range benchmark tasks: pure batch generators from a PRNG key, with their losses.

Every task is batch-first like the rest of rnnviz: inputs ``[B, T, I]`` (T = the config's
``seq_len``), targets per example. A :class:`Task` fixes the input size I, the readout's
output size and which outputs it reads, the loss, a task metric and the loss of the
trivial predictor (the baseline a network must beat).

* ``adding`` (Hochreiter & Schmidhuber 1997; Le, Jaitly & Hinton 2015): channel 0 is
  U(0, 1), channel 1 marks exactly two steps, one in each half; the target is the sum of
  the two marked values. Loss: MSE of the readout on the last output. Predicting 1 always
  gives E[(u₁ + u₂ − 1)²] = Var(u₁ + u₂) = 2/12 = 1/6.
* ``copy`` (Arjovsky, Shah & Bengio 2016), with T = seq_len − 20 the copy lag: 10 symbols
  from 8 categories, T − 1 blanks, a delimiter, 10 blanks (one-hot over 10 channels:
  8 symbols, blank, delimiter); the last 10 outputs must reproduce the symbols. Loss: the
  cross-entropy summed over those 10 outputs and divided by the whole output length T + 20,
  as in the paper (whose blank outputs are trivially right), so guessing uniformly among
  the 8 symbols gives 10·ln 8 / (T + 20). Metric: accuracy on the recalled symbols.
* ``recall``: x_t ~ N(0, 1) on one channel; the target is x_{T−k} for a chosen lag k
  (k = 0: the last input). Loss: MSE; predicting 0 gives Var x = 1. Sweeping k shows the
  lag at which a design stops learning.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.config import ConfigError
from rnnviz.tables.tasks import BLANK, COPY_CHANNELS, COPY_LENGTH, DELIMITER, N_SYMBOLS, TASK_RULES


class Batch(NamedTuple):
    """inputs ``[B, T, I]``; targets: ``[B]`` (adding, recall) or ``[B, 10]`` int32 symbols (copy)."""

    inputs: jax.Array
    targets: jax.Array


def adding_batch(key: jax.Array, batch: int, seq_len: int, lag: int = 0) -> Batch:
    """The adding problem: one marker uniformly in each half (T ≥ 2)."""
    del lag
    k_values, k_first, k_second = jax.random.split(key, 3)
    values = jax.random.uniform(k_values, (batch, seq_len), jnp.float32)
    half = seq_len // 2
    first = jax.random.randint(k_first, (batch,), 0, half)
    second = jax.random.randint(k_second, (batch,), half, seq_len)
    steps = jnp.arange(seq_len)[None, :]
    marker = ((steps == first[:, None]) | (steps == second[:, None])).astype(jnp.float32)
    targets = jnp.sum(values * marker, axis=1)
    return Batch(jnp.stack([values, marker], axis=-1), targets)


def copy_batch(key: jax.Array, batch: int, seq_len: int, lag: int = 0) -> Batch:
    """The copy memory task over ``seq_len = T + 20`` steps (T ≥ 1)."""
    del lag
    symbols = jax.random.randint(key, (batch, COPY_LENGTH), 0, N_SYMBOLS)
    tail = seq_len - COPY_LENGTH
    tokens = jnp.concatenate(
        [
            symbols,
            jnp.full((batch, tail - COPY_LENGTH - 1), BLANK, jnp.int32),
            jnp.full((batch, 1), DELIMITER, jnp.int32),
            jnp.full((batch, COPY_LENGTH), BLANK, jnp.int32),
        ],
        axis=1,
    )
    return Batch(jax.nn.one_hot(tokens, COPY_CHANNELS, dtype=jnp.float32), symbols)


def recall_batch(key: jax.Array, batch: int, seq_len: int, lag: int = 0) -> Batch:
    """Recall x_{T−lag} (0 ≤ lag < T) of a standard normal sequence."""
    x = jax.random.normal(key, (batch, seq_len), jnp.float32)
    return Batch(x[..., None], x[:, seq_len - 1 - lag])


def mse_loss(pred: jax.Array, targets: jax.Array) -> jax.Array:
    """``L = mean_b (ŷ_b − y_b)²`` with ŷ ``[B, 1]`` the readout of the last output."""
    err = pred[:, 0].astype(jnp.float32) - targets
    return jnp.mean(err * err)


def mse_metric(pred: jax.Array, targets: jax.Array) -> jax.Array:
    """The MSE tasks' metric: the loss itself (:func:`mse_loss`), a float32 scalar."""
    return mse_loss(pred, targets)


def copy_loss_of(seq_len: int) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``L = (1/(T+20)) Σ_{j<10} mean_b −log softmax(ŷ_{b,j})[s_{b,j}]``; ŷ ``[B, 10, 8]``."""

    def loss(pred: jax.Array, targets: jax.Array) -> jax.Array:
        logp = jax.nn.log_softmax(pred.astype(jnp.float32), axis=-1)
        picked = jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
        return -jnp.sum(jnp.mean(picked, axis=0)) / seq_len

    return loss


def copy_accuracy(pred: jax.Array, targets: jax.Array) -> jax.Array:
    """Fraction of the 10 recalled symbols whose arg-max is right."""
    return jnp.mean((jnp.argmax(pred, axis=-1) == targets).astype(jnp.float32))


class Task(NamedTuple):
    """One task's definition (see the module docstring).

    Attributes:
        name: how it is called (the compile key names it).
        input_size: I, fixed by the task.
        out_features: the readout's size per output.
        outputs_read: how many of the last outputs the readout sees (1, 10, or all T).
        batch: ``(key, B, T, lag) -> Batch``: a training batch.
        metric_name: what the metric is (``MSE``, ``accuracy``, ``bits/char``).
        higher_is_better: the metric's direction.
        min_seq_len: the shortest valid T.
        description: one line.
        loss_of: ``T -> (pred, targets) -> L``; None: the synthetic tasks' own.
        metric: ``(pred, targets) -> metric``; None: the synthetic tasks' own.
        baseline_loss: the trivial predictor's loss; None: the synthetic tasks' own.
        held_out: ``(key, B, T, lag) -> Batch`` evaluated at every profile (a data set's
            test split); None: a fresh batch from its own key.
        seq_len: the one T the task allows (a data set's), or None: any T ≥ ``min_seq_len``.
        probe: ``(key, B, T, lag) -> Batch``: the fixed batch the gradient profile is taken
            on (a data set's first B training sequences, so an analysis of those sequences
            at the kept weights gives the same profile); None: a batch from the probe key.
    """

    name: str
    input_size: int
    out_features: int
    outputs_read: int
    batch: Callable[..., Batch]
    metric_name: str
    higher_is_better: bool
    min_seq_len: int
    description: str
    loss_of: Callable[[int], Callable[[jax.Array, Any], jax.Array]] | None = None
    metric: Callable[[jax.Array, Any], jax.Array] | None = None
    baseline_loss: float | None = None
    held_out: Callable[..., Batch] | None = None
    seq_len: int | None = None
    probe: Callable[..., Batch] | None = None

    def loss_fn(self, seq_len: int) -> Callable[[jax.Array, Any], jax.Array]:
        """``(pred, targets) -> L`` at T = ``seq_len``: ``loss_of(T)``, else copy's cross-entropy or MSE."""
        if self.loss_of is not None:
            return self.loss_of(seq_len)
        return copy_loss_of(seq_len) if self.name == "copy" else mse_loss

    def metric_fn(self) -> Callable[[jax.Array, Any], jax.Array]:
        """``(pred, targets) -> metric``: ``metric``, else copy's accuracy or the MSE."""
        if self.metric is not None:
            return self.metric
        return copy_accuracy if self.name == "copy" else mse_metric

    def baseline(self, seq_len: int) -> float:
        """The trivial predictor's expected loss."""
        if self.baseline_loss is not None:
            return self.baseline_loss
        if self.name == "adding":
            return 1.0 / 6.0
        if self.name == "copy":
            return COPY_LENGTH * math.log(N_SYMBOLS) / seq_len
        return 1.0

    def probe_batch(self, key: jax.Array, batch: int, seq_len: int, lag: int) -> Batch:
        """The batch the gradient profile is measured on at every log step."""
        if self.probe is not None:
            return self.probe(key, batch, seq_len, lag)
        return self.batch(key, batch, seq_len, lag)

    def held_out_batch(self, key: jax.Array, batch: int, seq_len: int, lag: int) -> Batch:
        """The batch the held-out loss and metric are measured on at every profile."""
        if self.held_out is not None:
            return self.held_out(key, batch, seq_len, lag)
        return self.batch(key, batch, seq_len, lag)


#: The batches of each synthetic task (the rest of it is its :data:`~rnnviz.tables.tasks.TASK_RULES` entry).
_BATCHES = {"adding": adding_batch, "copy": copy_batch, "recall": recall_batch}

#: The synthetic tasks, by name: each one's rules (:mod:`rnnviz.tables.tasks`) and its batches.
TASKS: dict[str, Task] = {
    name: Task(**dataclasses.asdict(rules), batch=_BATCHES[name]) for name, rules in TASK_RULES.items()
}


#: Tasks built from data sets (:func:`rnnviz.studies.tasks.data.data_task`), by name.
DATA_TASKS: dict[str, Task] = {}


def get_task(name: str) -> Task:
    """The task ``name``: a synthetic one (:data:`TASKS`) or one built from a data set (:data:`DATA_TASKS`).

    Raises:
        ConfigError: there is no task of that name.
    """
    task = TASKS.get(name) or DATA_TASKS.get(name)
    if task is None:
        raise ConfigError("task", name, "one of " + ", ".join(TASKS) + ", or a data set")
    return task


def check_task(task: Task, seq_len: int, input_size: int, lag: int) -> None:
    """The config fits the task: the task fixes I, and T must hold the task."""
    if task.seq_len is not None and seq_len != task.seq_len:
        raise ConfigError(
            "seq_len", seq_len, f"the {task.name} data has {task.seq_len} steps; use seq_len={task.seq_len}"
        )
    if input_size != task.input_size:
        raise ConfigError(
            "input_size",
            input_size,
            f"the {task.name} task has {task.input_size} input features; use input_size={task.input_size}",
        )
    if seq_len < task.min_seq_len:
        raise ConfigError("seq_len", seq_len, f"at least {task.min_seq_len} steps for the {task.name} task")
    # only the recall task takes a lag: TrainSettings says so, without a config
    if task.name == "recall" and (
        isinstance(lag, bool) or not isinstance(lag, int) or not 0 <= lag < seq_len
    ):
        raise ConfigError("lag", lag, f"an integer in [0, {seq_len - 1}] (seq_len − 1)")


__all__ = [
    "Batch",
    "DATA_TASKS",
    "TASKS",
    "Task",
    "adding_batch",
    "check_task",
    "copy_batch",
    "get_task",
    "recall_batch",
]

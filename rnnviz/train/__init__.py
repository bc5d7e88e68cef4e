"""Training on a long-range task while watching ‖∂L/∂carry_t‖: does the design *learn*?

* :mod:`rnnviz.train.model` — the model, its loss, one step and one chunk (pure functions);
* :mod:`rnnviz.train.loop` — the compiled executables, :class:`Trainer`, :func:`train`,
  :func:`train_many`;
* :mod:`rnnviz.train.records` — the :class:`Training` record and its verdict (NumPy only).

Example:
    >>> from rnnviz import RunConfig, train
    >>> cfg = RunConfig(cell="lstm", forget_bias=1.0, hidden_size=8, input_size=2, seq_len=10,
    ...                 batch_size=16)
    >>> run = train(cfg, "adding", steps=20, log_every=10)
    >>> run.losses.shape, run.profiles.shape   # [steps], [logs, T+1]
    ((20,), (2, 11))
"""

from rnnviz.train.loop import (
    MAX_RUNS,
    MAX_STEPS,
    TRAIN_FLOP_BUDGET,
    TRAIN_VALUE_FIELDS,
    Trainer,
    check_training,
    train,
    train_executables,
    train_many,
)
from rnnviz.train.model import OPTIMIZERS, PROBE_BATCH, TrainSpec, task_loss
from rnnviz.train.records import SOLVE_WINDOW, Training, TrainTiming, solved_step, training_verdict

__all__ = [
    "MAX_RUNS",
    "MAX_STEPS",
    "OPTIMIZERS",
    "PROBE_BATCH",
    "SOLVE_WINDOW",
    "TRAIN_FLOP_BUDGET",
    "TRAIN_VALUE_FIELDS",
    "TrainSpec",
    "TrainTiming",
    "Trainer",
    "Training",
    "check_training",
    "solved_step",
    "task_loss",
    "train",
    "train_executables",
    "train_many",
    "training_verdict",
]

"""Training on a long-range task while watching ‖∂L/∂carry_t‖: does the design *learn*?

* :mod:`rnnviz.studies.training.settings` — :class:`TrainSettings`, what a training call is asked to do;
* :mod:`rnnviz.studies.training.model` — the model, its loss, one step and one chunk (pure functions);
* :mod:`rnnviz.studies.training.loop` — the compiled executables, :class:`Trainer`, :func:`train`,
  :func:`train_many`;
* :mod:`rnnviz.studies.training.result` — the :class:`Training` record (curves and kept weights)
  and its verdict;
* :mod:`rnnviz.studies.training.runfile` — the ``.rnnviz`` file format; :mod:`rnnviz.studies.training.saved`
  — :func:`load_run`.
"""

from rnnviz.studies.training.loop import (
    MAX_RUNS,
    TRAIN_FLOP_BUDGET,
    TRAIN_VALUE_FIELDS,
    Trainer,
    check_training,
    train,
    train_executables,
    train_many,
)
from rnnviz.studies.training.model import OPTIMIZERS, PROBE_BATCH, TrainSpec, task_loss
from rnnviz.studies.training.result import SOLVE_WINDOW, Training, TrainTiming, solved_step, training_verdict
from rnnviz.studies.training.runfile import RunFileError
from rnnviz.studies.training.saved import load_run
from rnnviz.studies.training.settings import DATA_TASK, MAX_STEPS, TrainSettings

__all__ = [
    "DATA_TASK",
    "MAX_RUNS",
    "MAX_STEPS",
    "OPTIMIZERS",
    "PROBE_BATCH",
    "RunFileError",
    "SOLVE_WINDOW",
    "TRAIN_FLOP_BUDGET",
    "TRAIN_VALUE_FIELDS",
    "TrainSettings",
    "TrainSpec",
    "TrainTiming",
    "Trainer",
    "Training",
    "check_training",
    "load_run",
    "solved_step",
    "task_loss",
    "train",
    "train_executables",
    "train_many",
    "training_verdict",
]

"""Training on a long-range task while watching ‖∂L/∂carry_t‖: does the design *learn*?

* :mod:`rnnviz.studies.training.model` — the model, its loss, one step and one chunk (pure functions);
* :mod:`rnnviz.studies.training.loop` — the compiled executables, :class:`Trainer`, :func:`train`,
  :func:`train_many`;
* :mod:`rnnviz.studies.training.saved` — :func:`load_run`.

Its records are plain (no JAX) and live in :mod:`rnnviz.base`, re-exported here:
:mod:`rnnviz.base.train_settings` (:class:`TrainSettings`, what a training call is asked to
do), :mod:`rnnviz.base.training` (the :class:`Training` record, its curves and kept weights,
and its verdict) and :mod:`rnnviz.base.runfile` (the ``.rnnviz`` file format).
"""

from rnnviz.base.runfile import RunFileError
from rnnviz.base.train_settings import DATA_TASK, MAX_STEPS, OPTIMIZERS, TrainSettings
from rnnviz.base.training import SOLVE_WINDOW, Training, TrainTiming, solved_step, training_verdict
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
from rnnviz.studies.training.model import PROBE_BATCH, TrainSpec, task_loss
from rnnviz.studies.training.saved import load_run

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

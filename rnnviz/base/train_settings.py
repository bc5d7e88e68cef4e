"""What a training call is asked to do, apart from the config it trains: one frozen,
validated :class:`TrainSettings`, the same record in the library, the CLI, the benchmarks,
the dashboard's server (which builds it without JAX) and its worker (which receives it as
:meth:`TrainSettings.to_dict`'s dict); and the optimisers a call can ask for."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rnnviz.config import ConfigError, check_number
from rnnviz.tables.tasks import TASK_RULES

#: The optimisers a training call can ask for (:func:`rnnviz.studies.training.model.optimizer_for`
#: builds them with optax).
OPTIMIZERS = ("adam", "sgd")

#: Most optimisation steps of one training call.
MAX_STEPS = 100_000

#: The task that trains on the data set given beside the settings (``data=``) instead of a
#: synthetic task: a data set is data, not a setting, so it never travels in the record.
DATA_TASK = "the chosen data"


@dataclass(frozen=True)
class TrainSettings:
    """The settings of a training call, each checked when the record is made.

    What depends on the config too (the task's input size and length, the recall lag below
    T, the FLOP and memory budgets) is checked by
    :func:`~rnnviz.studies.training.loop.check_training`.

    Example:
        >>> from rnnviz.base.train_settings import TrainSettings
        >>> s = TrainSettings("recall", steps=40, log_every=20, lag=3)
        >>> s.clip, TrainSettings.from_dict(s.to_dict()) == s
        (1.0, True)
        >>> TrainSettings(steps=10, log_every=20)
        Traceback (most recent call last):
        ...
        rnnviz.config.ConfigError: log_every=20 is not allowed: an integer in [1, 10].

    Attributes:
        task: ``adding``, ``copy`` or ``recall`` (:data:`~rnnviz.tables.tasks.TASK_RULES`),
            or :data:`DATA_TASK`: the data set passed beside the settings.
        steps: optimisation steps, 1 … :data:`MAX_STEPS` (rounded up to whole chunks; the
            records are cut back).
        learning_rate: the optimiser's step size, in (0, 10].
        optimizer: ``adam`` or ``sgd`` (momentum 0.9): :data:`OPTIMIZERS`.
        clip: the global-norm threshold c, in (0, 10⁶]; None for no clipping.
        log_every: steps per compiled chunk and between gradient profiles, 1 … ``steps``.
        lag: the recall task's k (the target is x_{T−k}); 0 for every other task.
    """

    task: str = "adding"
    steps: int = 2000
    learning_rate: float = 1e-3
    optimizer: str = "adam"
    clip: float | None = 1.0
    log_every: int = 50
    lag: int = 0

    def __post_init__(self) -> None:
        tasks = (*TASK_RULES, DATA_TASK)
        if not isinstance(self.task, str) or self.task not in tasks:
            raise ConfigError(
                "task",
                self.task,
                "one of " + ", ".join(TASK_RULES) + f", or {DATA_TASK!r} (the data set passed as data=)",
            )
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError("optimizer", self.optimizer, "one of " + ", ".join(OPTIMIZERS))
        steps = check_number("steps", self.steps, 1, MAX_STEPS, integer=True)
        # plain Python numbers (NumPy scalars and whole floats are welcome): hashable and JSON-safe
        plain = {
            "steps": steps,
            "learning_rate": float(
                check_number("learning_rate", self.learning_rate, 0.0, 10.0, lo_open=True)
            ),
            "clip": None
            if self.clip is None
            else float(check_number("clip", self.clip, 0.0, 1e6, lo_open=True)),
            "log_every": check_number("log_every", self.log_every, 1, steps, integer=True),
            "lag": check_number("lag", self.lag, 0, MAX_STEPS, integer=True),
        }
        if plain["lag"] != 0 and self.task != "recall":
            raise ConfigError("lag", self.lag, f"only the recall task takes a lag; use 0 with {self.task}")
        for name, value in plain.items():
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        """``{field: value}`` for every field, in declaration order: JSON values only
        (:meth:`from_dict` reads it back, in any process)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainSettings:
        """The settings of a :meth:`to_dict` dict; a field left out takes its default.

        Raises:
            ConfigError: a key that is not a field, or a value a field does not allow.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        for key in values:
            if key not in names:
                raise ConfigError(
                    key, values[key], "not a training setting; the settings are " + ", ".join(names)
                )
        return cls(**values)


__all__ = ["DATA_TASK", "MAX_STEPS", "OPTIMIZERS", "TrainSettings"]

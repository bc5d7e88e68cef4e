"""The task table: what validation and the dashboard need to know about each synthetic
training task, in plain data (no JAX).

Each task's batches and losses are in :mod:`rnnviz.studies.tasks.synthetic`, whose
:data:`~rnnviz.studies.tasks.synthetic.TASKS` builds one ``Task`` from each of these rules;
this table is what :class:`~rnnviz.base.train_settings.TrainSettings` is checked against
and what the dashboard offers.

Example:
    >>> tuple(TASK_RULES), TASK_RULES["copy"].input_size
    (('adding', 'copy', 'recall'), 10)
"""

from __future__ import annotations

from dataclasses import dataclass

#: The copy task's symbols, how many it recalls, and its channels (the symbols, blank, delimiter).
N_SYMBOLS = 8
COPY_LENGTH = 10
COPY_CHANNELS = N_SYMBOLS + 2
BLANK, DELIMITER = N_SYMBOLS, N_SYMBOLS + 1


@dataclass(frozen=True)
class TaskRules:
    """What a synthetic task fixes, apart from its batches and losses.

    Attributes:
        name: how it is called (the compile key names it).
        input_size: I, fixed by the task.
        out_features: the readout's size per output.
        outputs_read: how many of the last outputs the readout sees.
        metric_name: what the metric is (``MSE``, ``accuracy``).
        higher_is_better: the metric's direction.
        min_seq_len: the shortest valid T.
        description: one line.
    """

    name: str
    input_size: int
    out_features: int
    outputs_read: int
    metric_name: str
    higher_is_better: bool
    min_seq_len: int
    description: str


#: The synthetic tasks' rules, by name (the order the dashboard and the CLI offer them in).
TASK_RULES: dict[str, TaskRules] = {
    r.name: r
    for r in (
        TaskRules(
            "adding", 2, 1, 1, "MSE", False, 2,
            "sum the two marked values (Hochreiter & Schmidhuber 1997); baseline MSE 1/6",
        ),
        TaskRules(
            "copy", COPY_CHANNELS, N_SYMBOLS, COPY_LENGTH, "accuracy", True, 2 * COPY_LENGTH + 1,
            "reproduce 10 symbols after T blanks (Arjovsky et al. 2016); baseline 10·ln 8/(T+20)",
        ),
        TaskRules(
            "recall", 1, 1, 1, "MSE", False, 1,
            "output x_{T−lag} (a controllable lag); baseline MSE 1",
        ),
    )
}  # fmt: skip


__all__ = ["BLANK", "COPY_CHANNELS", "COPY_LENGTH", "DELIMITER", "N_SYMBOLS", "TASK_RULES", "TaskRules"]

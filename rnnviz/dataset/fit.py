"""Fitting a :class:`~rnnviz.config.RunConfig` to a data set: its length, features and
where its loss reads the outputs (plain data: the CLI and the app fit without JAX)."""

from __future__ import annotations

from rnnviz.config import ConfigError, RunConfig
from rnnviz.dataset.record import Dataset

#: Where each kind's loss reads the outputs (``RunConfig.loss``): the label is read at the
#: last real step, the next-step and regression targets at every real step.
LOSS_PLACEMENT = {"classification": "last", "next-step": "all", "regression": "all"}


def check_data(cfg: RunConfig, ds: Dataset) -> None:
    """Raise :class:`~rnnviz.config.ConfigError` unless ``cfg`` has the data's shape and loss
    placement (:func:`fit_to_data` makes one that has). Cheap: no config is built."""
    placed = placement(cfg, ds.kind)
    wanted = {
        "seq_len": (ds.seq_len, f"the data's {ds.seq_len} steps"),
        "input_size": (ds.input_size, f"the data's {ds.input_size} features"),
        "loss": (placed, f"{placed!r}, where a {ds.kind} loss reads its outputs"),
    }
    for name, (value, what) in wanted.items():
        if getattr(cfg, name) != value:
            raise ConfigError(
                name, getattr(cfg, name), f"{what} for {ds.name} (fit_to_data(cfg, data) sets it)"
            )


def fit_to_data(cfg: RunConfig, ds: Dataset) -> RunConfig:
    """``cfg`` with the data's sequence length, input size and loss placement
    (:func:`placement`; an unlabelled data set, or a reference block, keeps ``cfg.loss``).

    Example:
        >>> from rnnviz import RunConfig, load_dataset
        >>> from rnnviz import fit_to_data
        >>> cfg = fit_to_data(RunConfig(), load_dataset("digits", order="rows"))
        >>> cfg.seq_len, cfg.input_size, cfg.loss
        (8, 8, 'last')
    """
    return fitted_config(cfg, ds.seq_len, ds.input_size, ds.kind)


def fitted_config(cfg: RunConfig, seq_len: int, input_size: int, kind: str) -> RunConfig:
    """:func:`fit_to_data` from a data set's facts alone (T, I and kind)."""
    return cfg.replace(seq_len=seq_len, input_size=input_size, loss=placement(cfg, kind))


def placement(cfg: RunConfig, kind: str) -> str:
    """Where ``cfg``'s loss reads the outputs on data of ``kind``: :data:`LOSS_PLACEMENT`'s for a
    bare cell; a reference block keeps its own (its analysis reads its readout's last step, and
    training reads the task's outputs whatever the field says).

    >>> block = RunConfig(cell="mamba", block="reference")
    >>> placement(RunConfig(), "next-step"), placement(block, "next-step")
    ('all', 'last')
    """
    return LOSS_PLACEMENT.get(kind, cfg.loss) if cfg.block == "cell" else cfg.loss

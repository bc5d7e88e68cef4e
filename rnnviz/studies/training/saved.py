"""Reopen a saved run: :func:`load_run` reads a ``.rnnviz`` file
(:mod:`rnnviz.base.runfile`) and checks that its weights fit its config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from rnnviz.base.runfile import RunFileError, read
from rnnviz.base.training import Training
from rnnviz.config import ConfigError
from rnnviz.engine.prepare import check_weights, with_missing_biases
from rnnviz.studies.block_models import check_tensors


def load_run(path: str | Path) -> Training:
    """The :class:`~rnnviz.base.training.Training` saved at ``path`` by
    :meth:`Training.save`, its arrays bit for bit as they were saved.

    Args:
        path: a ``.rnnviz`` file.

    Returns:
        The run: its curves, its config and task (or data source), and the weights kept
        at each log step (``run.weights(step)``).

    Raises:
        RunFileError: the file is not a run, is truncated, was changed after it was saved,
            is of another format version, holds a config that is not valid, or weights
            that do not fit that config (the message names the file and the problem).

    Example:
        >>> from rnnviz import load_run
        >>> load_run("missing.rnnviz")
        Traceback (most recent call last):
        ...
        rnnviz.base.runfile.RunFileError: missing.rnnviz: cannot be read (No such file or
        directory).
    """
    name = Path(path).name
    header, arrays = read(path)
    try:
        run = Training.from_file(header, arrays)
    except ConfigError as err:
        raise RunFileError(name, f"its config is not valid ({err})") from None
    except Exception as err:  # KeyError, TypeError, ValueError, AttributeError… on a malformed run
        raise RunFileError(
            name, f"its header or arrays are incomplete ({type(err).__name__}: {_first_line(err)})"
        ) from None
    try:
        n = 0 if run.weight_steps is None else run.weight_steps.size
        if n and isinstance(run.weight_tree, dict) and "cell" in run.weight_tree:
            cell = with_missing_biases(run.config, run.weight_tree["cell"], (n,))  # an older file
            run = dataclasses.replace(run, weight_tree={**run.weight_tree, "cell": cell})
        if n and run.weight_tree is not None:
            lengths = {np.shape(leaf)[0] for leaf in _leaves(run.weight_tree)}
            if lengths != {n}:
                raise ConfigError("weights", sorted(lengths), f"{n} kept steps per leaf")
            for step in (int(run.weight_steps[0]), int(run.weight_steps[-1])):
                FITS[run.config.block](run, step)
    except ConfigError as err:
        raise RunFileError(name, f"its weights do not fit its config ({err})") from None
    except Exception as err:  # weights that are not arrays of the kept steps
        raise RunFileError(
            name, f"its weights cannot be read ({type(err).__name__}: {_first_line(err)})"
        ) from None
    return run


def _cell_fits(run: Training, step: int) -> None:
    check_weights(run.config, run.weights(step))


def _block_fits(run: Training, step: int) -> None:
    check_tensors(run.config, run.tensors(step))


#: ``RunConfig.block`` → the check that a run's kept weights fit its config.
FITS = {"cell": _cell_fits, "reference": _block_fits}


def _first_line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else ""


def _leaves(tree):
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _leaves(v)
    else:
        yield tree

"""The user's own sequences, from a file: every problem is one :class:`DataError` naming the
file and what is wrong, and nothing half-loaded is returned.

Formats:

* ``.npz`` — ``inputs`` ``[N, T, I]`` (or ``[T, I]``: one sequence); optional ``labels``
  ``[N]`` (integer classes: ``classification``) or ``targets`` (``[N, T]`` integers: the
  next token, ``next-step``; ``[N, T, O]`` numbers: ``regression``); optional ``mask``
  ``[N, T]`` (bool) or ``lengths`` ``[N]`` for ragged sequences padded at the end.
* ``.npy`` — ``inputs`` alone.
* ``.csv`` and ``.parquet`` (where pandas can read it) in long form — one row per step:
  a ``sequence`` column (any id), a ``t`` column (the step, integers), one numeric column
  per feature, and optionally ``label`` (one integer class per sequence) or ``target``
  (a number per step). Sequences of different lengths are padded at the end with a mask.

Ragged sequences are padded, never cut: the mask marks the real steps, and the losses and
per-step norms respect it.

A file is judged by its headers before its bytes: each array's ``.npy`` header
(:mod:`~rnnviz.dataset.npyfile`), a ``.parquet`` file's metadata and a table's running row
count (:mod:`~rnnviz.dataset.longform`) are checked against :data:`MAX_DATA_BYTES` before
the data are allocated, and the data are then converted chunk by chunk into float32 arrays
allocated once (an accepted file peaks near its float32 size, plus a few chunks). Any other
failure while reading (a corrupt zip, a truncated array, a parser's error, the memory
running out) is the same one :class:`DataError`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rnnviz.dataset.budget import Budget
from rnnviz.dataset.longform import read_table
from rnnviz.dataset.npyfile import read_npy, read_npz
from rnnviz.dataset.record import DataError, Dataset, reason, split

EXTENSIONS = (".npz", ".npy", ".csv", ".parquet")
#: Largest data set loaded, in bytes of float32 inputs (the dashboard's uploads are smaller:
#: its server's ``maxUploadSize``).
MAX_DATA_BYTES = 1024**3
MAX_SEQUENCES = 1_000_000
#: Sequences checked for NaN at a time (bounds the check's scratch memory).
_CHECK_BYTES = 16 * 2**20


def load_file(path: str | Path, budget: Budget | None = None) -> Dataset:
    """Load a data file.

    Args:
        path: a ``.npz``, ``.npy``, ``.csv`` or ``.parquet`` file (see the module docstring).
        budget: the most it may hold; None: :data:`MAX_DATA_BYTES` and :data:`MAX_SEQUENCES`
            (a lower one is the caller's, as the dashboard's workers hold theirs to their
            memory cap).

    Returns:
        A :class:`Dataset` named after the file, with a fixed 80/20 split.

    Raises:
        DataError: the file is missing, of an unknown kind, unreadable, claims more than
            the budget's bytes as float32, or its contents are not allowed (each message
            names the file and the problem; no other exception escapes).
    """
    path = Path(path)
    name = path.name
    if path.suffix.lower() not in EXTENSIONS:
        raise DataError(
            name, f"unknown extension {path.suffix or '(none)'!r}; allowed: {', '.join(EXTENSIONS)}"
        )
    reader = {".npz": read_npz, ".npy": read_npy, ".csv": read_table, ".parquet": read_table}
    try:
        if not path.is_file():
            raise DataError(name, f"no such file ({path})")
        budget = budget or Budget(MAX_DATA_BYTES, MAX_SEQUENCES)
        arrays = reader[path.suffix.lower()](path, name, budget)
        return _dataset(name, str(path), *arrays, budget)
    except DataError:
        raise
    except MemoryError:
        raise DataError(name, "ran out of memory while reading it") from None
    except Exception as err:  # whatever a reader meets on a hostile file: still one message
        raise DataError(name, f"cannot be read ({reason(err)})") from None


def _dataset(name: str, where: str, inputs, labels, targets, mask, budget: Budget) -> Dataset:
    """The record of a reader's arrays, checked; ``inputs`` (float32, the reader's own) are
    zeroed at the padding in place, so nothing the size of the inputs is copied."""
    inputs = np.asarray(inputs)
    if inputs.ndim == 2:  # one sequence [T, I]
        inputs = inputs[None]
        labels = None if labels is None else np.asarray(labels).reshape(-1)
        targets = None if targets is None else np.asarray(targets)[None]
        mask = None if mask is None else np.asarray(mask).reshape(1, -1)
    if inputs.ndim != 3:
        raise DataError(
            name, f"'inputs' has shape {inputs.shape}; allowed: [N, T, I] (or [T, I] for one sequence)"
        )
    if not (np.issubdtype(inputs.dtype, np.number) and not np.issubdtype(inputs.dtype, np.complexfloating)):
        raise DataError(name, f"'inputs' holds {inputs.dtype} values; allowed: real numbers")
    n, t, i = inputs.shape
    budget.check(name, n, t, i)
    mask = np.ones((n, t), bool) if mask is None else _checked_mask(name, mask, n, t)
    inputs = inputs.astype(np.float32, copy=False)
    bad = _first_nonfinite(inputs, mask)
    if bad is not None:
        raise DataError(name, f"'inputs' is NaN or infinite at sequence {bad[0]}, step {bad[1]}")
    kind, n_classes = "unlabelled", None
    if labels is not None:
        labels = _checked_labels(name, labels, n)
        kind, n_classes = "classification", int(labels.max()) + 1
    elif targets is not None:
        targets = np.asarray(targets)
        if targets.shape == (n, t) and np.issubdtype(targets.dtype, np.integer):
            if targets[mask].min(initial=0) < 0:
                raise DataError(name, "integer 'targets' are token indices: they must be ≥ 0")
            kind, n_classes = "next-step", int(targets[mask].max(initial=0)) + 1
            targets = targets.astype(np.int64, copy=False)
        elif targets.ndim == 3 and targets.shape[:2] == (n, t) and np.issubdtype(targets.dtype, np.number):
            targets = targets.astype(np.float32, copy=False)
            bad = _first_nonfinite(targets, mask)
            if bad is not None:
                raise DataError(name, f"'targets' is NaN or infinite at sequence {bad[0]}, step {bad[1]}")
            kind = "regression"
        else:
            raise DataError(
                name,
                f"'targets' has shape {targets.shape}; allowed: [{n}, {t}] integers or [{n}, {t}, O] numbers",
            )
    train, test = split(n, 0.2, seed=0)
    if not mask.all():
        inputs = inputs if inputs.flags.writeable else inputs.copy()
        inputs[~mask] = 0  # the padding may hold anything (NaN): zero it in place
    return Dataset(
        name=name,
        kind=kind,
        inputs=inputs,
        mask=mask,
        labels=labels,
        targets=targets,
        n_classes=n_classes,
        feature_names=tuple(f"x{k}" for k in range(i)),
        vocab=None,
        train=train,
        test=test,
        source=f"the file {where}",
        licence="the file owner's",
    )


def _first_nonfinite(values: np.ndarray, mask: np.ndarray) -> tuple[int, int] | None:
    """``(sequence, step)`` of the first real step of ``values`` ``[N, T, K]`` holding a NaN
    or an infinity, or None; checked a block of sequences at a time."""
    block = max(1, _CHECK_BYTES // max(values[:1].nbytes, 1))
    for a in range(0, values.shape[0], block):
        finite = np.isfinite(values[a : a + block])
        if finite.all():  # the common case, and much faster than the reduction over features
            continue
        bad = ~finite.all(axis=2) & mask[a : a + block]
        if bad.any():
            s, step = (int(v) for v in np.argwhere(bad)[0])
            return a + s, step
    return None


def _checked_mask(name: str, mask, n: int, t: int) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.shape != (n, t) or mask.dtype != bool:
        raise DataError(name, f"'mask' must be [{n}, {t}] booleans (True for real steps)")
    lengths = mask.sum(axis=1)
    if (lengths == 0).any() or not np.array_equal(mask, np.arange(t)[None, :] < lengths[:, None]):
        raise DataError(
            name, "'mask' must mark each sequence's first steps (padding at the end only, ≥ 1 step)"
        )
    return mask


def _checked_labels(name: str, labels, n: int) -> np.ndarray:
    labels = np.asarray(labels).reshape(-1) if np.ndim(labels) else np.asarray(labels)
    if labels.shape != (n,):
        raise DataError(name, f"'labels' must be [{n}]: one class per sequence")
    if (
        np.issubdtype(labels.dtype, np.floating)
        and np.all(np.isfinite(labels))
        and np.all(labels == np.round(labels))
    ):
        labels = labels.astype(np.int64)
    if not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0:
        raise DataError(name, "'labels' must be whole numbers ≥ 0 (class indices)")
    if labels.max() >= 10_000:
        raise DataError(name, "'labels' go up to 10 000 classes")
    return labels.astype(np.int64)

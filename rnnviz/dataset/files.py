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
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from rnnviz.config import MAX_INPUT, MAX_SEQ_LEN
from rnnviz.dataset.record import DataError, Dataset, split

EXTENSIONS = (".npz", ".npy", ".csv", ".parquet")
#: Largest data set loaded, in bytes of float32 inputs (the dashboard's uploads are smaller:
#: its server's ``maxUploadSize``).
MAX_DATA_BYTES = 1024**3
MAX_SEQUENCES = 1_000_000
ID_COLUMN, TIME_COLUMN, LABEL_COLUMN, TARGET_COLUMN = "sequence", "t", "label", "target"


def load_file(path: str | Path) -> Dataset:
    """Load a data file.

    Args:
        path: a ``.npz``, ``.npy``, ``.csv`` or ``.parquet`` file (see the module docstring).

    Returns:
        A :class:`Dataset` named after the file, with a fixed 80/20 split.

    Raises:
        DataError: the file is missing, of an unknown kind, unreadable, or its contents
            are not allowed (each message names the file and the problem).
    """
    path = Path(path)
    name = path.name
    if path.suffix.lower() not in EXTENSIONS:
        raise DataError(
            name, f"unknown extension {path.suffix or '(none)'!r}; allowed: {', '.join(EXTENSIONS)}"
        )
    if not path.is_file():
        raise DataError(name, f"no such file ({path})")
    reader = {".npz": _read_npz, ".npy": _read_npy, ".csv": _read_table, ".parquet": _read_table}
    arrays = reader[path.suffix.lower()](path, name)
    return _dataset(name, str(path), *arrays)


def _read_npy(path: Path, name: str) -> tuple:
    try:
        inputs = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise DataError(name, f"not a readable .npy array ({_reason(err)})") from None
    return inputs, None, None, None


def _read_npz(path: Path, name: str) -> tuple:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise DataError(name, f"not a readable .npz archive ({_reason(err)})") from None
    if "inputs" not in arrays:
        raise DataError(name, f"no 'inputs' array (it holds: {', '.join(sorted(arrays)) or 'nothing'})")
    if "labels" in arrays and "targets" in arrays:
        raise DataError(name, "give 'labels' (one class per sequence) or 'targets' (per step), not both")
    if "mask" in arrays and "lengths" in arrays:
        raise DataError(name, "give 'mask' or 'lengths', not both")
    inputs = arrays["inputs"]
    mask = arrays.get("mask")
    if "lengths" in arrays:
        mask = _mask_of_lengths(name, arrays["lengths"], inputs)
    return inputs, arrays.get("labels"), arrays.get("targets"), mask


def _mask_of_lengths(name: str, lengths: np.ndarray, inputs: np.ndarray) -> np.ndarray:
    n, t = (inputs.shape[0], inputs.shape[1]) if inputs.ndim == 3 else (1, inputs.shape[0])
    lengths = np.asarray(lengths).reshape(-1)
    if lengths.shape != (n,) or not np.issubdtype(lengths.dtype, np.integer):
        raise DataError(name, f"'lengths' must be {n} integers, one per sequence")
    if lengths.min(initial=1) < 1 or lengths.max(initial=1) > t:
        raise DataError(name, f"'lengths' must be in [1, {t}] (T)")
    return np.arange(t)[None, :] < lengths[:, None]


def _read_table(path: Path, name: str) -> tuple:
    try:
        frame = pd.read_csv(path) if path.suffix.lower() == ".csv" else pd.read_parquet(path)
    except ImportError as err:
        raise DataError(name, f"reading .parquet needs pyarrow (pip install pyarrow): {err}") from None
    except Exception as err:  # pandas raises many kinds for a malformed file
        raise DataError(name, f"not a readable table ({_reason(err)})") from None
    missing = [c for c in (ID_COLUMN, TIME_COLUMN) if c not in frame.columns]
    if missing:
        raise DataError(
            name,
            f"long form needs the columns {ID_COLUMN!r} and {TIME_COLUMN!r} (missing: {', '.join(missing)}); "
            f"then one column per feature, optionally {LABEL_COLUMN!r} or {TARGET_COLUMN!r}",
        )
    if LABEL_COLUMN in frame.columns and TARGET_COLUMN in frame.columns:
        raise DataError(name, f"give {LABEL_COLUMN!r} or {TARGET_COLUMN!r}, not both")
    special = (ID_COLUMN, TIME_COLUMN, LABEL_COLUMN, TARGET_COLUMN)
    features = [c for c in frame.columns if c not in special]
    if not features:
        raise DataError(name, "no feature columns besides the sequence id and time")
    for c in features + [c for c in (LABEL_COLUMN, TARGET_COLUMN, TIME_COLUMN) if c in frame.columns]:
        if not pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c]):
            raise DataError(name, f"column {c!r} is not numeric (e.g. {frame[c].iloc[0]!r})")
    times = frame[TIME_COLUMN].to_numpy()
    if not np.all(np.isfinite(times)) or np.any(times != np.round(times)) or times.min() < 0:
        raise DataError(name, f"column {TIME_COLUMN!r} must hold whole steps 0, 1, 2, …")
    twice = frame.duplicated([ID_COLUMN, TIME_COLUMN])
    if twice.any():
        seq, step = frame.loc[twice, ID_COLUMN].iloc[0], frame.loc[twice, TIME_COLUMN].iloc[0]
        raise DataError(name, f"sequence {_plain(seq)!r} has step {int(step)} twice")
    ids, seq_index = np.unique(frame[ID_COLUMN].to_numpy(), return_inverse=True)
    step = times.astype(np.int64)
    n, t = len(ids), int(step.max()) + 1
    _check_size(name, n, t, len(features))
    inputs = np.zeros((n, t, len(features)), np.float32)
    mask = np.zeros((n, t), bool)
    inputs[seq_index, step] = frame[features].to_numpy(np.float64)
    mask[seq_index, step] = True
    lengths = mask.sum(axis=1)
    if not np.array_equal(mask, np.arange(t)[None, :] < lengths[:, None]):
        s = int(np.flatnonzero((mask != (np.arange(t)[None, :] < lengths[:, None])).any(axis=1))[0])
        raise DataError(name, f"sequence {_plain(ids[s])!r} skips a step: steps must run 0, 1, …, length − 1")
    labels = targets = None
    if LABEL_COLUMN in frame.columns:
        per = frame.groupby(seq_index)[LABEL_COLUMN]
        if (per.nunique() > 1).any():
            s = int(np.flatnonzero((per.nunique() > 1).to_numpy())[0])
            raise DataError(name, f"sequence {_plain(ids[s])!r} has more than one {LABEL_COLUMN!r}")
        labels = per.first().to_numpy()
    if TARGET_COLUMN in frame.columns:
        targets = np.zeros((n, t, 1), np.float64)
        targets[seq_index, step, 0] = frame[TARGET_COLUMN].to_numpy(np.float64)
    return inputs, labels, targets, mask


def _check_size(name: str, n: int, t: int, i: int) -> None:
    if not 1 <= n <= MAX_SEQUENCES:
        raise DataError(name, f"{n} sequences; allowed: 1 to {MAX_SEQUENCES}")
    if not 1 <= t <= MAX_SEQ_LEN:
        raise DataError(name, f"sequences of {t} steps; allowed: 1 to {MAX_SEQ_LEN}")
    if not 1 <= i <= MAX_INPUT:
        raise DataError(name, f"{i} features per step; allowed: 1 to {MAX_INPUT}")
    if 4 * n * t * i > MAX_DATA_BYTES:
        raise DataError(
            name,
            f"{4 * n * t * i / 2**30:.1f} GiB as float32, over the {MAX_DATA_BYTES / 2**30:.0f} GiB limit",
        )


def _dataset(name: str, where: str, inputs, labels, targets, mask) -> Dataset:
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
    _check_size(name, n, t, i)
    mask = np.ones((n, t), bool) if mask is None else _checked_mask(name, mask, n, t)
    bad = ~np.isfinite(inputs.astype(np.float64)).all(axis=2) & mask
    if bad.any():
        s, step = (int(v) for v in np.argwhere(bad)[0])
        raise DataError(name, f"'inputs' is NaN or infinite at sequence {s}, step {step}")
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
            targets = targets.astype(np.int64)
        elif targets.ndim == 3 and targets.shape[:2] == (n, t) and np.issubdtype(targets.dtype, np.number):
            bad = ~np.isfinite(targets.astype(np.float64)).all(axis=2) & mask
            if bad.any():
                s, step = (int(v) for v in np.argwhere(bad)[0])
                raise DataError(name, f"'targets' is NaN or infinite at sequence {s}, step {step}")
            kind, targets = "regression", targets.astype(np.float32)
        else:
            raise DataError(
                name,
                f"'targets' has shape {targets.shape}; allowed: [{n}, {t}] integers or [{n}, {t}, O] numbers",
            )
    train, test = split(n, 0.2, seed=0)
    return Dataset(
        name=name,
        kind=kind,
        inputs=np.where(mask[..., None], inputs, 0).astype(np.float32),
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


def _plain(value: object) -> object:
    """A NumPy scalar as the Python value it holds (so messages read ``0``, not ``np.int64(0)``)."""
    return value.item() if isinstance(value, np.generic) else value


def _reason(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__

"""The long form of a ``.csv`` or ``.parquet`` file (one row per step), read in bounded
chunks: pandas' ``chunksize`` for a ``.csv``, pyarrow's batches, row group by row group, for
a ``.parquet``.

The file is read twice. The first pass checks every chunk (the columns, their kinds, the
steps) and counts rows and sequence ids as it goes, refusing as soon as the count passes the
:class:`~rnnviz.dataset.budget.Budget` (a ``.parquet`` file's metadata are checked before
it: their row count is a floor on the steps). Only then are the float32 inputs allocated,
once, at their final ``[N, T, I]``, and the second pass scatters each chunk into them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from rnnviz.config import MAX_INPUT
from rnnviz.dataset.budget import Budget
from rnnviz.dataset.record import DataError, reason

ID_COLUMN, TIME_COLUMN, LABEL_COLUMN, TARGET_COLUMN = "sequence", "t", "label", "target"
SPECIAL = (ID_COLUMN, TIME_COLUMN, LABEL_COLUMN, TARGET_COLUMN)
#: Bytes of a chunk, roughly (its rows: this over 8 bytes a column).
CHUNK_BYTES = 16 * 2**20


class _Source(NamedTuple):
    """A table's columns; the rows its metadata claim and its first rows, whose column kinds
    stand for every chunk's (a ``.parquet`` file's schema is fixed; None for a ``.csv``,
    whose every chunk is checked); and, at each call, a fresh iterator over its chunks
    (of the columns named, or all)."""

    columns: list[str]
    rows: int | None
    sample: pd.DataFrame | None
    chunks: Callable[[list[str] | None], Iterator[pd.DataFrame]]


class _Survey(NamedTuple):
    """The first pass: the sorted sequence ids, T, and the feature columns."""

    ids: np.ndarray
    t: int
    features: list[str]


def read_table(path: Path, name: str, budget: Budget) -> tuple:
    """``(inputs, labels, targets, mask)`` of a long-form ``.csv`` or ``.parquet`` file.

    Args:
        path: the file.
        name: its name, for messages.
        budget: the most it may hold.

    Returns:
        ``inputs`` ``<float32>[N, T, I]`` (zero at padding), ``labels`` ``<float64>[N]``
        (NaN where a sequence gives none) or None, ``targets`` ``<float32>[N, T, 1]`` or None,
        and ``mask`` ``<bool>[N, T]``.

    Raises:
        DataError: an unreadable table, missing or non-numeric columns, bad steps, a size
            over the budget (claimed or counted), a step given twice or skipped, or a
            sequence with two labels.
    """
    try:
        source = _parquet(path, name) if path.suffix.lower() == ".parquet" else _csv(path)
        features = _check_columns(name, source.columns)
        if source.rows is not None and 4 * source.rows * len(features) > budget.data_bytes:
            budget.refuse(
                name,
                4 * source.rows * len(features),
                f"its metadata claim {source.rows} rows of {len(features)} features: one step each",
            )
        survey = _survey(name, source, features, budget)
        return _fill(name, source, survey)
    except (DataError, MemoryError):
        raise
    except Exception as err:  # pandas and pyarrow raise many kinds for a malformed file
        raise DataError(name, f"not a readable table ({reason(err)})") from None


def _csv(path: Path) -> _Source:
    columns = list(pd.read_csv(path, nrows=0).columns)
    rows = max(1, CHUNK_BYTES // (8 * max(len(columns), 1)))

    def chunks(_: list[str] | None) -> Iterator[pd.DataFrame]:
        with pd.read_csv(path, chunksize=rows) as reader:  # every column: each chunk's kinds are checked
            yield from reader

    return _Source(columns, None, None, chunks)


def _parquet(path: Path, name: str) -> _Source:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as err:
        raise DataError(name, f"reading .parquet needs pyarrow (pip install pyarrow): {err}") from None
    with pq.ParquetFile(path) as file:
        schema, claimed = file.schema_arrow, file.metadata.num_rows
        first = next(file.iter_batches(batch_size=1), None)
    sample = (schema.empty_table() if first is None else pa.Table.from_batches([first], schema)).to_pandas()
    rows = max(1, CHUNK_BYTES // (8 * max(len(schema), 1)))

    def chunks(columns: list[str] | None) -> Iterator[pd.DataFrame]:
        with pq.ParquetFile(path) as again:
            for batch in again.iter_batches(batch_size=rows, columns=columns):
                table = pa.Table.from_batches([batch])
                yield table.replace_schema_metadata(schema.metadata if columns is None else None).to_pandas()

    return _Source(list(sample.columns), claimed, sample, chunks)  # pandas' columns: no index


def _check_columns(name: str, columns: list[str]) -> list[str]:
    """The feature columns, once the header has the columns the long form needs."""
    missing = [c for c in (ID_COLUMN, TIME_COLUMN) if c not in columns]
    if missing:
        raise DataError(
            name,
            f"long form needs the columns {ID_COLUMN!r} and {TIME_COLUMN!r} (missing: {', '.join(missing)}); "
            f"then one column per feature, optionally {LABEL_COLUMN!r} or {TARGET_COLUMN!r}",
        )
    if LABEL_COLUMN in columns and TARGET_COLUMN in columns:
        raise DataError(name, f"give {LABEL_COLUMN!r} or {TARGET_COLUMN!r}, not both")
    features = [c for c in columns if c not in SPECIAL]
    if not features:
        raise DataError(name, "no feature columns besides the sequence id and time")
    if len(features) > MAX_INPUT:
        raise DataError(name, f"{len(features)} features per step; allowed: 1 to {MAX_INPUT}")
    return features


def _survey(name: str, source: _Source, features: list[str], budget: Budget) -> _Survey:
    """The first pass: every chunk checked, rows and ids counted against the budget."""
    rows, t_max, ids = 0, -1, _Ids(name, budget.sequences)
    numeric = features + [c for c in (LABEL_COLUMN, TARGET_COLUMN, TIME_COLUMN) if c in source.columns]
    if source.sample is not None:
        _check_numeric(name, source.sample, numeric)
    for chunk in source.chunks(None if source.sample is None else [ID_COLUMN, TIME_COLUMN]):
        if not len(chunk):
            continue
        if source.sample is None:
            _check_numeric(name, chunk, numeric)
        times = chunk[TIME_COLUMN].to_numpy(np.float64)
        if not np.all(np.isfinite(times)) or np.any(times != np.round(times)) or times.min() < 0:
            raise DataError(name, f"column {TIME_COLUMN!r} must hold whole steps 0, 1, 2, …")
        t_max = max(t_max, int(times.max()))
        rows += len(chunk)
        if 4 * rows * len(features) > budget.data_bytes:
            budget.refuse(
                name,
                4 * rows * len(features),
                f"counted while reading: {rows} rows of {len(features)} features so far, one step each",
            )
        ids.add(chunk[ID_COLUMN].to_numpy())
    unique = ids.merged()
    budget.check(name, len(unique), t_max + 1, len(features))
    return _Survey(unique, t_max + 1, features)


def _check_numeric(name: str, chunk: pd.DataFrame, columns: list[str]) -> None:
    for c in columns:
        if not pd.api.types.is_numeric_dtype(chunk[c]) or pd.api.types.is_bool_dtype(chunk[c]):
            example = f" (e.g. {chunk[c].iloc[0]!r})" if len(chunk) else ""
            raise DataError(name, f"column {c!r} is not numeric{example}")


class _Ids:
    """The sorted unique sequence ids of the chunks seen, merged when the pending ones pass
    the merged count (so the sorting is amortised), refused past ``most``."""

    def __init__(self, name: str, most: int):
        self.name, self.most = name, most
        self.done: np.ndarray | None = None
        self.pending: list[np.ndarray] = []
        self.waiting = 0

    def add(self, ids: np.ndarray) -> None:
        self.pending.append(self._unique(ids[_run_starts(ids)]))  # a run of one id counts once
        self.waiting += self.pending[-1].size
        if self.waiting > max(2**20, 0 if self.done is None else self.done.size):
            self.merged()

    def merged(self) -> np.ndarray:
        parts = ([] if self.done is None else [self.done]) + self.pending
        self.done = self._unique(np.concatenate(parts)) if parts else np.zeros(0)
        self.pending, self.waiting = [], 0
        if self.done.size > self.most:
            raise DataError(
                self.name, f"over {self.most} sequences (counted while reading); allowed: 1 to {self.most}"
            )
        return self.done

    def _unique(self, ids: np.ndarray) -> np.ndarray:
        try:
            return np.unique(ids)
        except TypeError:  # e.g. text and numbers, or a missing id among text ids
            raise DataError(
                self.name,
                f"column {ID_COLUMN!r} holds ids that cannot be ordered "
                "(text mixed with numbers, or missing ids)",
            ) from None


def _fill(name: str, source: _Source, survey: _Survey) -> tuple:
    """The second pass: each chunk scattered into the arrays, allocated once."""
    ids, t, features = survey
    n = ids.size
    inputs = np.zeros((n, t, len(features)), np.float32)
    mask = np.zeros((n, t), bool)
    steps, seen = inputs.reshape(n * t, len(features)), mask.reshape(-1)  # views, by seq * t + step
    targets = labels = None
    for chunk in source.chunks(None):
        if not len(chunk):
            continue
        seq, where = _positions(name, chunk, ids, t)
        at = _check_once(name, where, seen, ids, t)
        seen[at] = True
        with np.errstate(over="ignore"):  # beyond float32's range is infinite: refused as such
            steps[at] = chunk[features].to_numpy(np.float64)
            if TARGET_COLUMN in chunk.columns:
                targets = np.zeros((n, t, 1), np.float32) if targets is None else targets
                targets.reshape(-1)[at] = chunk[TARGET_COLUMN].to_numpy(np.float64)
        if LABEL_COLUMN in chunk.columns:
            labels = np.full(n, np.nan) if labels is None else labels
            _add_labels(name, labels, seq, chunk[LABEL_COLUMN].to_numpy(np.float64), ids)
    lengths = mask.sum(axis=1)
    prefix = np.arange(t)[None, :] < lengths[:, None]
    if not np.array_equal(mask, prefix):
        s = int(np.flatnonzero((mask != prefix).any(axis=1))[0])
        raise DataError(name, f"sequence {_plain(ids[s])!r} skips a step: steps must run 0, 1, …, length − 1")
    return inputs, labels, targets, mask


def _positions(name: str, chunk: pd.DataFrame, ids: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's sequence index and its place ``seq * t + step`` in the ``[N, T]`` arrays
    (looked up once per run of rows of one sequence: the ids the first pass found)."""
    values = chunk[ID_COLUMN].to_numpy()
    starts = _run_starts(values)
    heads = values[starts]
    found = np.minimum(np.searchsorted(ids, heads), ids.size - 1)
    same = (ids[found] == heads) | (pd.isna(ids[found]) & pd.isna(heads))
    step = chunk[TIME_COLUMN].to_numpy(np.float64).astype(np.int64)
    if not same.all() or step.max() >= t:
        raise DataError(name, "changed while it was read: read it again")
    seq = np.repeat(found, np.diff(np.append(starts, values.size)))
    return seq, seq * t + step


def _run_starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal consecutive values starts (NaNs each start one)."""
    return np.flatnonzero(np.append(True, values[1:] != values[:-1]))


def _check_once(
    name: str, where: np.ndarray, seen: np.ndarray, ids: np.ndarray, t: int
) -> np.ndarray | slice:
    """``where`` as an index (a slice where the rows are consecutive steps), once no step is
    given twice: in an earlier chunk or earlier in this one (the message names the first row)."""
    rising = bool(np.all(where[1:] > where[:-1]))
    at = (
        slice(int(where[0]), int(where[-1]) + 1)
        if rising and where[-1] - where[0] == where.size - 1
        else where
    )
    twice = np.array(seen[at])
    if not rising:
        order = np.argsort(where, kind="stable")
        twice[order[1:][where[order][1:] == where[order][:-1]]] = True
    if twice.any():
        s, step = divmod(int(where[np.flatnonzero(twice)[0]]), t)
        raise DataError(name, f"sequence {_plain(ids[s])!r} has step {step} twice")
    return at


def _add_labels(name: str, labels: np.ndarray, seq: np.ndarray, values: np.ndarray, ids: np.ndarray) -> None:
    """Each sequence's label (the first given; NaN where none is): refused where it has two."""
    per = pd.Series(values).groupby(seq)
    first, count = per.first(), per.nunique()
    at = first.index.to_numpy()
    old, new = labels[at], first.to_numpy()
    clash = (count.to_numpy() > 1) | (~np.isnan(old) & ~np.isnan(new) & (old != new))
    if clash.any():
        s = int(at[np.flatnonzero(clash)[0]])
        raise DataError(name, f"sequence {_plain(ids[s])!r} has more than one {LABEL_COLUMN!r}")
    labels[at] = np.where(np.isnan(old), new, old)


def _plain(value: object) -> object:
    """A NumPy scalar as the Python value it holds (so messages read ``0``, not ``np.int64(0)``)."""
    return value.item() if isinstance(value, np.generic) else value

"""Real sequences: the data sets that ship and the user's own files, in one record.

* :func:`datasets` lists the built-ins; :func:`load_dataset` loads one by name (with its
  options) or a file by path — every source becomes a :class:`Dataset`.
* :mod:`~rnnviz.dataset.builtin` — ``digits`` (scikit-learn's 8×8 digits as sequences)
  and ``text`` (the Python documentation or standard-library source, by character);
* :mod:`~rnnviz.dataset.files` — ``.npz``, ``.npy``, ``.csv``, ``.parquet``;
* :mod:`~rnnviz.dataset.record` — :class:`Dataset`, :class:`DataError`;
* :mod:`~rnnviz.dataset.fit` — :func:`fit_to_data`: a config with the data's shape and loss;
* :mod:`~rnnviz.dataset.place` — the user's data folder (``data/``): dropped files, recorded runs.

Example:
    >>> from rnnviz import datasets, load_dataset
    >>> datasets()[:2]  # the built-ins, then any file dropped in data/
    ('digits', 'text')
    >>> ds = load_dataset("digits", order="rows")
    >>> ds.inputs.shape, ds.kind, ds.n_classes  # [N, T, I]
    ((1797, 8, 8), 'classification', 10)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rnnviz.dataset.builtin import BUILTINS
from rnnviz.dataset.files import EXTENSIONS, load_file
from rnnviz.dataset.fit import LOSS_PLACEMENT, check_data, fit_to_data
from rnnviz.dataset.place import data_dir, data_files, resolve, runs_dir
from rnnviz.dataset.record import KINDS, DataError, Dataset


def datasets() -> tuple[str, ...]:
    """The built-in data sets' names, then the data files dropped in the data folder
    (``data/`` here, or ``$RNNVIZ_DATA_DIR``: :mod:`~rnnviz.dataset.place`), by file name."""
    return tuple(BUILTINS) + data_files()


def load_dataset(name_or_path: str | Path, **options: Any) -> Dataset:
    """A built-in data set by name, or a file by path.

    Args:
        name_or_path: ``digits``, ``text``, or a ``.npz``/``.npy``/``.csv``/``.parquet`` file:
            a path, or the name of a file in the data folder.
        **options: the built-in's options (``digits``: ``order``, ``permutation_seed``;
            ``text``: ``corpus``, ``seq_len``, ``max_sequences``); none for files.

    Returns:
        A :class:`Dataset`.

    Raises:
        DataError: an unknown name or option, or a file that cannot be used (the message
            names the file and what is wrong).
    """
    key = str(name_or_path)
    if key in BUILTINS:
        loader = BUILTINS[key]
        try:
            return loader(**options)
        except TypeError as err:  # an option the loader does not take
            raise DataError(key, f"unknown option ({err})") from None
    if options:
        raise DataError(Path(key).name, f"a file takes no options (got {', '.join(options)})")
    if Path(key).suffix.lower() not in EXTENSIONS:
        raise DataError(
            Path(key).name,
            f"neither a built-in data set ({', '.join(BUILTINS)}) nor a file ({', '.join(EXTENSIONS)})",
        )
    return load_file(resolve(key))


__all__ = [
    "KINDS",
    "LOSS_PLACEMENT",
    "DataError",
    "Dataset",
    "check_data",
    "data_dir",
    "data_files",
    "datasets",
    "fit_to_data",
    "load_dataset",
    "runs_dir",
]

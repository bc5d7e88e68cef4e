"""The user's data folder: ``data/`` in the working directory (``RNNVIZ_DATA_DIR`` names
another). Data files dropped there are listed by :func:`rnnviz.datasets` and loaded by
name; recorded runs go to its ``runs/`` (``bench --record`` without a path) and the
dashboard reads them from there. ``data/README.md`` in a checkout explains the folder."""

from __future__ import annotations

import os
from pathlib import Path

from rnnviz.dataset.files import EXTENSIONS

#: The environment variable naming the data folder (default ``./data``).
DATA_DIR_ENV = "RNNVIZ_DATA_DIR"


def data_dir() -> Path:
    """The user's data folder (it need not exist)."""
    return Path(os.environ.get(DATA_DIR_ENV) or "data").expanduser()


def runs_dir() -> Path:
    """Where recorded runs are written and read by default: ``data/runs``."""
    return data_dir() / "runs"


def data_files() -> tuple[str, ...]:
    """The data files directly in the data folder (``.npz``, ``.npy``, ``.csv``,
    ``.parquet``), by file name, sorted."""
    folder = data_dir()
    if not folder.is_dir():
        return ()
    return tuple(sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix.lower() in EXTENSIONS))


def resolve(name_or_path: str | Path) -> Path:
    """A path as given when it exists, else the file of that name in the data folder
    (where it exists), else the path as given (its loader names what is wrong)."""
    path = Path(name_or_path).expanduser()
    if path.exists() or path.is_absolute():
        return path
    dropped = data_dir() / path
    return dropped if dropped.exists() else path

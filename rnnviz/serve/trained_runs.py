"""The dashboard's folder of trained runs: the Training tab writes every finished run there as
a ``.rnnviz`` file (:meth:`rnnviz.Training.save`), and the sidebar's *Weights* section lists
them from their headers alone.

The folder is under the system's temporary folder (``RNNVIZ_TRAINED_DIR`` names another),
so runs outlive page reloads and sessions for as long as the machine keeps it, held to its
caps (``RNNVIZ_TRAINED_MB``, ``RNNVIZ_TRAINED_FILES``; the least recently used run no open
session uses goes first: :func:`rnnviz.serve.folders.admit`). The server
only reads headers; the worker processes load the weights (:func:`rnnviz.serve.jobs.saved_run`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from rnnviz.base.runfile import RunFileError, read_header
from rnnviz.base.training import Training
from rnnviz.config import ConfigError, RunConfig
from rnnviz.serve.folders import admit, touch
from rnnviz.serve.settings import settings

#: The fields a trained run fixes (its weights only fit these); the rest stay the sidebar's.
FOLLOWS_RUN = ("cell", "activation", "hidden_size", "input_size", "dtype", "carry_init", "recurrent_init")


def runs_folder() -> Path:
    """Where the dashboard keeps trained runs (the server's ``trained_dir`` setting)."""
    return Path(settings().trained_dir)


def keep_run(path: Path, keep: tuple[Path, ...] = ()) -> None:
    """Hold the folder to its caps now that ``path`` is in it, never evicting ``keep`` (see
    :func:`rnnviz.serve.folders.admit`).

    Raises:
      FolderFull: the run is over the folder's cap, or open sessions use all of it.
    """
    limits = settings()
    admit(
        runs_folder(), path, limits.trained_mb * 2**20, limits.trained_files, "the trained-runs folder", keep
    )


def run_paths(key: str, seeds: list[int] | tuple[int, ...]) -> list[Path]:
    """Where the runs of one training call (its key and seeds) are kept."""
    return [runs_folder() / f"{_stem(key)}-seed{seed}.rnnviz" for seed in seeds]


def kept_paths(key: str) -> list[Path]:
    """The run files of one training call still in the folder (by seed), or none."""
    folder = runs_folder()
    if not folder.is_dir():
        return []
    return sorted(folder.glob(f"{_stem(key)}-seed*.rnnviz"), key=lambda p: _seed_of(p.name))


def write_runs(records: list[Training], key: str) -> list[Path]:
    """Write each run of one training call once (named by its settings and seed), each to a
    hidden name first and then renamed, so nobody ever reads half a file. The worker that
    trained the runs writes them (the weights never cross to the server); the server then
    admits them to the folder's caps (:func:`admit_runs`).

    Raises:
      OSError: the folder cannot be written.
    """
    folder = runs_folder()
    folder.mkdir(parents=True, exist_ok=True)
    paths = run_paths(key, [r.config.seed for r in records])
    for r, path in zip(records, paths):
        if not path.exists():
            part = folder / f".{path.name}.{os.getpid()}.part"
            r.save(part)
            os.replace(part, path)
    return paths


def admit_runs(paths: list[Path]) -> None:
    """Hold the folder to its caps now that ``paths`` (one training call's runs) are in it,
    evicting none of them to make room for another.

    Raises:
      FolderFull: see :func:`keep_run`.
    """
    for path in paths:
        keep_run(path, keep=tuple(paths))
        touch(path)


def save_runs(records: list[Training], key: str) -> list[Path]:
    """:func:`write_runs`, then :func:`admit_runs` (both in this process).

    Raises:
      FolderFull: see :func:`keep_run`.
    """
    paths = write_runs(records, key)
    admit_runs(paths)
    return paths


def _stem(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def _seed_of(name: str) -> int:
    digits = name.rsplit("-seed", 1)[-1].removesuffix(".rnnviz")
    return int(digits) if digits.isdigit() else -1


def header(path: str) -> dict[str, Any] | None:
    """A run file's header, or None when it cannot be read."""
    try:
        return read_header(path)
    except RunFileError:
        return None


def saved_runs() -> dict[str, dict[str, Any]]:
    """``{path: header}`` of the runs in the folder, newest first (unreadable files left out)."""
    folder = runs_folder()
    if not folder.is_dir():
        return {}
    files = sorted(folder.glob("*.rnnviz"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    headers = {str(p): header(str(p)) for p in files}
    return {p: h for p, h in headers.items() if h is not None and h.get("kept_steps")}


def run_label(header: dict[str, Any]) -> str:
    """One line naming a run: its label, size, seed, steps and final loss."""
    cfg = header["config"]
    return (
        f"{header.get('label', cfg['cell'])} · H={cfg['hidden_size']} seed {cfg['seed']} · "
        f"{header['kept_steps'][-1]} steps · loss {header.get('final_loss', float('nan')):.3g}"
    )


def run_config(path: str) -> RunConfig | None:
    """A saved run's config from its header (None when it cannot be read)."""
    found = header(path)
    if found is None:
        return None
    try:
        return RunConfig.from_mapping({k: v for k, v in found["config"].items() if v is not None})
    except ConfigError:
        return None


__all__ = [
    "FOLLOWS_RUN",
    "header",
    "keep_run",
    "run_config",
    "run_label",
    "runs_folder",
    "admit_runs",
    "kept_paths",
    "run_paths",
    "save_runs",
    "write_runs",
    "saved_runs",
]

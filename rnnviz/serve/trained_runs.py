"""The dashboard's folder of trained runs: the worker that trained them writes every finished
run there as a ``.rnnviz`` file, and the sidebar's *Weights* section lists them from their
headers alone (the workers load the weights). Under the system's temporary folder
(``RNNVIZ_TRAINED_DIR`` names another), it outlives page reloads and sessions, held to its
caps (``RNNVIZ_TRAINED_MB``, ``RNNVIZ_TRAINED_FILES``: :func:`rnnviz.serve.folders.admit`).
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
FOLLOWS_RUN = (
    "cell",
    "block",
    "layers",
    "activation",
    "hidden_size",
    "input_size",
    "dtype",
    "carry_init",
    "recurrent_init",
)


def runs_folder() -> Path:
    """Where the dashboard keeps trained runs (the server's ``trained_dir`` setting)."""
    return Path(settings().trained_dir)


def keep_run(path: Path, keep: tuple[Path, ...] = ()) -> None:
    """Hold the folder to its caps now that ``path`` is in it, never evicting ``keep``
    (:class:`~rnnviz.serve.folders.FolderFull` when it cannot)."""
    limits = settings()
    admit(
        runs_folder(), path, limits.trained_mb * 2**20, limits.trained_files, "the trained-runs folder", keep
    )


def kept_paths(key: str) -> list[Path]:
    """The run files of one training call still in the folder (by seed), or none."""
    return sorted(runs_folder().glob(f"{_stem(key)}-seed*.rnnviz"), key=lambda p: _seed_of(p.name))


def write_runs(records: list[Training], key: str) -> list[Path]:
    """Write each run of one training call once (named by its key and seed), to a hidden name
    first and then renamed, so nobody ever reads half a file; the server then admits them to
    the folder's caps (:func:`admit_runs`)."""
    folder = runs_folder()
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{_stem(key)}-seed{r.config.seed}.rnnviz" for r in records]
    for r, path in zip(records, paths):
        if not path.exists():
            part = folder / f".{path.name}.{os.getpid()}.part"
            r.save(part)
            os.replace(part, path)
    return paths


def admit_runs(paths: list[Path]) -> None:
    """:func:`keep_run` for each of one training call's runs, evicting none of them."""
    for path in paths:
        keep_run(path, keep=tuple(paths))
        touch(path)


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
    """``{path: header}`` of the runs in the folder, bare cells' and reference blocks', newest
    first: the weights the tabs open (unreadable files left out)."""
    files = sorted(runs_folder().glob("*.rnnviz"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
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

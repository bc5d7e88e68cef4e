"""Where the Your model tab finds checkpoints: the models in the user's data folder, an
uploaded folder archive kept in the upload folder under its caps, and the demo. The server
only lists, judges and writes files here; the worker processes load what they name. The
checkpoints layer's names for what the tab accepts and offers are re-exported (``x as x``).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import shutil
from pathlib import Path

from rnnviz.checkpoints import CheckpointError
from rnnviz.checkpoints.archive import (
    ARCHIVE_SUFFIXES,
    archive_members,
    extract_archive,
    find_models,
    one_model,
)
from rnnviz.checkpoints.archive import is_archive as is_archive
from rnnviz.checkpoints.demo import DEMO_NAME as DEMO_NAME
from rnnviz.checkpoints.demo import demo_bytes as demo_bytes
from rnnviz.checkpoints.load import MAX_BYTES
from rnnviz.checkpoints.load import STATE_DICT_SUFFIXES as STATE_DICT_SUFFIXES
from rnnviz.dataset import data_dir
from rnnviz.serve.folders import admit, touch
from rnnviz.serve.settings import settings

#: Names in the data folder that hold no models: the recorded runs.
NOT_MODELS = ("runs",)


def model_max_bytes() -> int:
    """The most bytes of weights (in float32) a worker loads: a quarter of its memory cap
    (``RNNVIZ_WORKER_MAX_RSS_MB``), at most the loader's own cap (a model a worker could hold
    only over its cap would make it retire after every job, each successor loading it again)."""
    return min(MAX_BYTES, settings().worker_max_rss_mb * 2**20 // 4)


def data_models() -> tuple[str, ...]:
    """The checkpoints in the user's data folder (:func:`~rnnviz.checkpoints.archive.find_models`,
    its recorded runs passed over), by their path in it (``"mamba-tiny"``, ``"stacks/lstm.pt"``)."""
    folder = data_dir()
    return tuple(p.relative_to(folder).as_posix() for p in find_models(folder, skip=NOT_MODELS))


def _safe_stem(name: str) -> str:
    """An archive's name without its suffix, as a folder name."""
    stem = Path(name).name
    for suffix in sorted(ARCHIVE_SUFFIXES, key=len, reverse=True):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem).lstrip(".") or "model"


def keep_archive(name: str, data: bytes) -> Path:
    """The one model (folder or state dict file) in an uploaded folder archive, judged by its
    directory before a byte is extracted, then extracted once under the upload folder by the
    hash of its bytes and held to the folder's caps (:class:`~rnnviz.serve.folders.FolderFull`).
    A refused archive, or one of no model or several, raises :class:`CheckpointError`."""
    limits = settings()
    uploads = Path(limits.uploads_dir)
    entry = uploads / hashlib.sha256(data).hexdigest()[:16]
    root = entry / _safe_stem(name)
    if not root.is_dir():
        cap = min(limits.uploads_mb * 2**20, model_max_bytes())
        members = archive_members(
            name, data, cap, cap="the smaller of the upload folder's cap and the checkpoint cap"
        )
        # extracted under a name of its own, hidden, then renamed: never a half-extracted
        # folder under the real name, nor two sessions writing one
        part = uploads / f".{entry.name}.{secrets.token_hex(4)}.part"
        try:
            extract_archive(name, data, members, part / root.name)
            if not entry.exists():
                part.replace(entry)
            elif not root.exists():  # the same bytes under another name, kept by another session
                (part / root.name).replace(root)
        except OSError as err:
            raise CheckpointError(name, f"could not be extracted ({err})") from None
        finally:
            shutil.rmtree(part, ignore_errors=True)
        admit(uploads, root, limits.uploads_mb * 2**20, limits.uploads_files, "the upload folder")
    touch(root)
    return one_model(root, name)

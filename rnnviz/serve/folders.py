"""The server's folders that users fill (uploads, trained runs), held to their caps.

A folder holds *entries* (a file, or a folder of one upload); its cap is a total size and a
count (:mod:`rnnviz.serve.settings`). After each write, :func:`enforce` evicts the least
recently used entries until both fit, never one a live session is using: each session marks
what it uses (:meth:`InUse.mark`, every run of its script, which also touches them), and a
mark counts while its session is active (the page tells :data:`IN_USE` how to know).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

log = logging.getLogger("rnnviz.folders")


class Entry(NamedTuple):
    """One entry of a folder: its path, its bytes (a folder's, summed) and its last use."""

    path: Path
    bytes: int
    last_used_ns: int


class Usage(NamedTuple):
    """A folder's use after :func:`enforce`."""

    evicted: tuple[str, ...]  # the names of the entries it removed, least recently used first
    bytes: int  # what the folder holds now
    files: int  # entries the folder holds now
    fits: bool  # both within the caps (False only when what is in use is over them)


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def entries(folder: Path) -> list[Entry]:
    """The folder's entries, least recently used first (half-written ``*.part`` files are
    entries too: they take space)."""
    if not folder.is_dir():
        return []
    found = []
    for p in folder.iterdir():
        try:
            found.append(Entry(p, _size(p), _last_used_ns(p)))
        except FileNotFoundError:  # removed meanwhile by another session's eviction
            continue
    return sorted(found, key=lambda e: e.last_used_ns)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


_lock = threading.Lock()  # one eviction at a time in this server


#: Seconds a file being written (a name starting with ".") is left alone: after that it is one a
#: crash left behind, and evicted like any other.
WRITING_S = 600


def _being_written(entry: Entry) -> bool:
    return entry.path.name.startswith(".") and time.time_ns() - entry.last_used_ns < WRITING_S * 1e9


def enforce(folder: Path, max_bytes: int, max_files: int, in_use: Iterable[str] = ()) -> Usage:
    """Evict the least recently used entries of ``folder`` not in ``in_use`` (paths of
    entries, or of files inside them) until it holds at most ``max_bytes`` and ``max_files``;
    a file being written (a hidden ``.*.part`` younger than :data:`WRITING_S`) is never evicted."""
    keep = {Path(p) for p in in_use}
    with _lock:
        found = entries(folder)
        total, count = sum(e.bytes for e in found), len(found)
        evicted = []
        for e in found:
            if total <= max_bytes and count <= max_files:
                break
            if _being_written(e) or any(k == e.path or e.path in k.parents for k in keep):
                continue
            _remove(e.path)
            evicted.append(e.path.name)
            total, count = total - e.bytes, count - 1
    if evicted:
        log.info("evicted %d entries from %s (%s)", len(evicted), folder, ", ".join(evicted))
    return Usage(tuple(evicted), total, count, total <= max_bytes and count <= max_files)


def stamp(path: str | Path) -> tuple[tuple[str, int, int], ...]:
    """Which version of a file or folder is at ``path``: each of its files' name, size and time
    (a folder's files directly in it), ``()`` when nothing is there; a worker reads what it
    keeps again when this changes."""
    p = Path(path)
    try:
        files = sorted(p.iterdir()) if p.is_dir() else [p] if p.is_file() else []
        return tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file())
    except OSError:  # removed meanwhile (another session's upload evicted): the loader says so
        return ()


def _last_used_ns(path: Path) -> int:
    """When an entry was last used: a folder's modification time; a file's access or
    modification time, whichever is later (a file's modification time is its version)."""
    st = path.stat()
    return st.st_mtime_ns if path.is_dir() else max(st.st_atime_ns, st.st_mtime_ns)


def touch(path: str | Path) -> None:
    """Mark ``path`` (and the entry folder holding it) as just used: a folder's times, a file's
    access time only, so that its version (:func:`stamp`, read from its modification time) stays."""
    p, now = Path(path), time.time_ns()
    for q in (p, p.parent):
        with contextlib.suppress(OSError):
            os.utime(q, ns=(now, now if q.is_dir() else q.stat().st_mtime_ns))


class InUse:
    """What each live session uses, across the server's sessions (thread-safe); ``active(session
    id)`` says whether a session is still live (default: all are; the page sets Streamlit's
    runtime as the judge, :meth:`judge_by`)."""

    def __init__(self, active: Callable[[str], bool] | None = None):
        self._by_session: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self._active = active or (lambda session: True)

    def judge_by(self, active: Callable[[str], bool]) -> None:
        """Say from now on whether a session is live with ``active(session id)``."""
        self._active = active

    def mark(self, session: str, paths: Iterable[str]) -> None:
        """``session`` now uses ``paths`` (replacing what it used before) and touches them."""
        paths = {str(p) for p in paths if p}
        for p in paths:
            touch(p)
        with self._lock:
            if paths:
                self._by_session[session] = paths
            else:
                self._by_session.pop(session, None)

    def paths(self) -> set[str]:
        """Every path a live session uses (forgetting the sessions that ended)."""
        with self._lock:
            for sid in [s for s in self._by_session if not self._active(s)]:
                del self._by_session[sid]
            return set().union(*self._by_session.values())


#: The server's one registry of what its sessions use.
IN_USE = InUse()


class FolderFull(RuntimeError):
    """A new entry cannot be kept: alone it is over the folder's cap, or what live sessions
    use fills the folder; the message says which, with the caps."""


def admit(
    folder: Path, new: Path, max_bytes: int, max_files: int, what: str, keep: Iterable[str | Path] = ()
) -> Usage:
    """Make room for ``new`` (just written under ``folder``) by evicting the least recently
    used entries that no live session uses and ``keep`` does not name; when that cannot make
    it fit, ``new`` is removed again and :class:`FolderFull` names the caps of ``what`` ("the
    upload folder")."""
    entry = folder / new.relative_to(folder).parts[0]
    size = _size(entry)
    if size > max_bytes:
        _remove(entry)
        raise FolderFull(f"{size / 2**20:.1f} MB is more than {what} holds ({max_bytes / 2**20:.0f} MB)")
    usage = enforce(folder, max_bytes, max_files, IN_USE.paths() | {str(entry)} | {str(k) for k in keep})
    if not usage.fits:
        _remove(entry)
        raise FolderFull(
            f"{what} is full ({usage.files} files, {usage.bytes / 2**20:.0f} MB of its "
            f"{max_bytes / 2**20:.0f} MB and {max_files} files) with files that open sessions are using; "
            "try again when one has closed"
        )
    return usage


def session_paths(state: Mapping[str, Any]) -> set[str]:
    """The files a session's state refers to: its data source, its trained weights and those
    of every pin (a pin is recomputed from them when its result has left the cache), the
    run files of its pinned training runs, and the Your model tab's checkpoint."""
    found = set()

    def add(values: Mapping[str, Any] | None) -> None:
        if not values:
            return
        data, weights = values.get("data") or {}, values.get("weights") or {}
        found.update(str(v) for v in (data.get("name"), weights.get("path")) if v)

    add({"data": state.get("data_source"), "weights": state.get("weights_source")})
    choice = state.get("weights_choice")
    if choice and choice != "initial":
        found.add(str(choice))
    for pin in state.get("pins", ()):
        try:
            add(json.loads(pin))
        except (TypeError, ValueError):
            continue
    found.update(str(p) for p in state.get("train_pinned_files", ()))
    if state.get("model_source"):  # the Your model tab's checkpoint (an upload, or the demo)
        found.add(str(state["model_source"]))
    return {p for p in found if "/" in p or os.sep in p}  # paths only, not "digits" or "text"

"""A model folder in an archive (``.zip``, ``.tar``, ``.tar.gz``, ``.tgz``), judged by its
directory before a byte of it is extracted, and the checkpoints found in a folder.

An archive is refused, whole and before anything is written, when its directory lists more
than :data:`MAX_MEMBERS` members, more bytes than the caller's cap, an absolute path or
``..``, or anything other than regular files and folders (links, devices). A compressed tar
has no directory: its headers are read through a stream that stops past the cap, so a member
that lies about its size, or a bomb, is never inflated beyond it.

>>> import io, zipfile
>>> buf = io.BytesIO()
>>> with zipfile.ZipFile(buf, "w") as z:
...     z.writestr("../outside.txt", "x")
>>> try:
...     archive_members("evil.zip", buf.getvalue(), max_bytes=2**20)
... except CheckpointError as err:
...     print(err)
evil.zip: member '../outside.txt' leaves the archive's folder; allowed: relative paths inside it.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Collection, Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO, NamedTuple

from rnnviz.checkpoints.load import MAX_BYTES, STATE_DICT_SUFFIXES
from rnnviz.checkpoints.record import CheckpointError

#: What an archive of a model may be called.
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
#: Members an archive may list: a model folder is its config, its weights (or tens of
#: shards), its tokenizer's files and a few more.
MAX_MEMBERS = 256
#: How deep under a folder (or an extracted archive) models are looked for: a model folder or
#: state dict in it, or in a folder of models inside it.
MODEL_DEPTH = 2
#: Bytes of a tar's headers beyond its members' data that a stream is read for: 512 per
#: header (a long name or extended header takes a few), and the end of the archive.
TAR_HEADER_BYTES = 512 * 4 * (MAX_MEMBERS + 4)

#: An archive's bytes, or the path of its file.
Data = bytes | str | os.PathLike


# ---- the checkpoints in a folder -------------------------------------------------------------


def find_models(folder: Path, depth: int = MODEL_DEPTH, skip: Collection[str] = ()) -> tuple[Path, ...]:
    """The checkpoints in ``folder``: each folder holding a ``config.json`` (a Hugging Face
    model, not looked into further) and each state dict file (``.pt``, ``.pth``, ``.bin``,
    ``.safetensors``) with no ``config.json`` beside it, at most ``depth`` folders down;
    hidden names and the names in ``skip`` are passed over.

    Args:
      folder: where to look (a data folder, or an extracted archive).
      depth: how many folders down (0: the files directly in it).
      skip: names of files and folders not looked at (the data folder's ``runs``).

    Returns:
      Their paths, sorted.
    """
    if not folder.is_dir():
        return ()
    if (folder / "config.json").is_file():
        return (folder,)
    found: list[Path] = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or p.name in skip:
            continue
        if p.is_file() and p.suffix.lower() in STATE_DICT_SUFFIXES:
            found.append(p)
        elif p.is_dir() and not p.is_symlink() and depth > 0:
            found += find_models(p, depth - 1, skip)
    return tuple(sorted(found))


def one_model(root: Path, name: str) -> Path:
    """The one checkpoint (:func:`find_models`) in an extracted archive.

    Args:
      root: the folder it was extracted into.
      name: the archive, named by the refusal.

    Raises:
      CheckpointError: it holds no model, or more than one.
    """
    found = find_models(root)
    if len(found) != 1:
        listed = ", ".join(p.relative_to(root).as_posix() or "." for p in found) or "none"
        raise CheckpointError(
            name,
            f"holds {len(found)} models ({listed}); allowed: one Hugging Face folder (with config.json) "
            "or one state dict file",
        )
    return found[0]


# ---- archives, judged by their directory -------------------------------------------------------


class Member(NamedTuple):
    """One entry of an archive's directory, as judged.

    Attributes:
      path: where it goes, relative to the archive's folder.
      size: its bytes, as the directory declares them (0 for a folder).
      is_dir: a folder (else a regular file).
    """

    path: PurePosixPath
    size: int
    is_dir: bool


def is_archive(name: str) -> bool:
    """Whether a file named ``name`` is a folder archive (by its suffix)."""
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def _file(data: Data) -> BinaryIO:
    """An archive's bytes as a file, or its file opened."""
    return io.BytesIO(data) if isinstance(data, bytes) else open(data, "rb")


def _relative(name: str, source: str) -> PurePosixPath:
    """A member's name as a path inside the archive's folder; refused when absolute, when it
    climbs out (``..``), or when it holds a backslash or NUL (another system's separator)."""
    if "\\" in name or "\x00" in name:
        raise CheckpointError(source, f"member {name!r} holds a backslash or NUL; allowed: plain / paths")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise CheckpointError(source, f"member {name!r} is an absolute path; allowed: relative paths")
    path = PurePosixPath(name)
    if ".." in path.parts:
        raise CheckpointError(
            source, f"member {name!r} leaves the archive's folder; allowed: relative paths inside it"
        )
    return path


def _zip_members(data: Data, source: str) -> Iterator[tuple[str, int, str]]:
    """``(name, declared size, kind)`` of each entry of a zip's central directory."""
    try:
        with _file(data) as f, zipfile.ZipFile(f) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError) as err:
        raise CheckpointError(source, f"is not a zip archive ({err})") from None
    for info in infos:
        # the Unix file type in the high bits, where the writer set one (0: none, a plain entry)
        file_type = (info.external_attr >> 16) & 0o170000
        if file_type not in (0, 0o100000, 0o040000) or (file_type == 0o040000 and not info.is_dir()):
            kind = "other"  # a link, device, fifo or socket
        else:
            kind = "dir" if info.is_dir() else "file"
        if info.flag_bits & 0x1:
            raise CheckpointError(source, f"member {info.filename!r} is encrypted; allowed: plain members")
        yield info.filename, info.file_size, kind


class _Bounded(io.RawIOBase):
    """A stream read at most ``limit`` bytes far: past it, :class:`CheckpointError`. A
    compressed tar is read through it, so that no header inflates more than the cap."""

    def __init__(self, stream, limit: int, source: str):
        self._stream, self._limit, self._source, self.read_bytes = stream, limit, source, 0

    def readable(self) -> bool:
        """True: a stream to read."""
        return True

    def readinto(self, buffer) -> int:
        """Fill ``buffer`` from the stream; past ``limit`` bytes in all, refuse the archive."""
        data = self._stream.read(min(len(buffer), self._limit + 1 - self.read_bytes))
        self.read_bytes += len(data)
        if self.read_bytes > self._limit:
            raise CheckpointError(
                self._source,
                f"inflates past {self._limit:,} bytes; allowed: members within the cap, and their headers",
            )
        buffer[: len(data)] = data
        return len(data)


@contextlib.contextmanager
def _tar_stream(data: Data, source: str, max_bytes: int) -> Iterator[tarfile.TarFile]:
    """A tar (gzip-compressed or not) opened as a stream that is read no further than its
    members' cap and their headers."""
    with _file(data) as f:
        gzipped = f.read(2) == b"\x1f\x8b"
        f.seek(0)
        raw = gzip.GzipFile(fileobj=f) if gzipped else f
        bounded = io.BufferedReader(_Bounded(raw, max_bytes + TAR_HEADER_BYTES, source))
        try:
            tar = tarfile.open(fileobj=bounded, mode="r|")
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise CheckpointError(source, f"is not a tar archive ({err})") from None
        with tar:
            yield tar


def _tar_members(data: Data, source: str, max_bytes: int) -> Iterator[tuple[str, int, str]]:
    """``(name, declared size, kind)`` of each header of a tar, read in order."""
    with _tar_stream(data, source, max_bytes) as tar:
        while True:
            try:
                info = tar.next()
            except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
                raise CheckpointError(source, f"is not a readable tar archive ({err})") from None
            if info is None:
                return
            kind = "file" if info.isreg() else "dir" if info.isdir() else "other"
            yield info.name, info.size, kind


def archive_members(
    name: str, data: Data, max_bytes: int, max_members: int = MAX_MEMBERS, cap: str = "the checkpoint cap"
) -> tuple[Member, ...]:
    """An archive's directory, judged before anything is extracted.

    Args:
      name: the archive's name (``.zip``, ``.tar``, ``.tar.gz`` or ``.tgz``), named by every refusal.
      data: its bytes, or the path of its file.
      max_bytes: the most bytes its members may declare in all.
      max_members: the most entries it may list.
      cap: what ``max_bytes`` is, as the refusal names it.

    Returns:
      Its members, folders and regular files only, in the archive's order.

    Raises:
      CheckpointError: naming the archive, what is wrong and what is allowed: too many members,
        too many bytes declared, an absolute path or ``..``, a link, device or other special
        member, a name twice, an encrypted member, or not an archive at all.
    """
    listed = (
        _zip_members(data, name) if name.lower().endswith(".zip") else _tar_members(data, name, max_bytes)
    )
    members: list[Member] = []
    seen: set[PurePosixPath] = set()
    total = 0
    for member_name, size, kind in listed:
        if len(members) >= max_members:
            raise CheckpointError(
                name, f"lists more than {max_members} members; allowed: at most {max_members}"
            )
        path = _relative(member_name, name)
        if kind == "other":
            raise CheckpointError(
                name, f"member {member_name!r} is a link or special file; allowed: regular files and folders"
            )
        total += size if kind == "file" else 0
        if total > max_bytes:
            raise CheckpointError(
                name, f"declares more than {max_bytes:,} bytes; allowed: at most {max_bytes:,} ({cap})"
            )
        if path in seen and kind == "file":
            raise CheckpointError(name, f"lists {member_name!r} twice; allowed: each name once")
        seen.add(path)
        if path.parts:  # "./" names the archive's folder itself
            members.append(Member(path, size if kind == "file" else 0, kind == "dir"))
    if not any(not m.is_dir for m in members):
        raise CheckpointError(name, "holds no files; allowed: a model folder")
    return tuple(members)


def _copy(src, dest: Path, size: int, source: str) -> None:
    """At most ``size`` bytes of ``src`` into ``dest``; more is a member that lied."""
    with open(dest, "xb") as out:
        left = size
        while chunk := src.read(min(2**20, left + 1)):
            left -= len(chunk)
            if left < 0:
                raise CheckpointError(
                    source, f"member {dest.name!r} holds more than its declared {size} bytes"
                )
            out.write(chunk)
    if left:
        raise CheckpointError(source, f"member {dest.name!r} holds fewer than its declared {size} bytes")


def _extract(name: str, data: Data, members: tuple[Member, ...], folder: Path) -> None:
    wanted = {m.path: m for m in members}
    for m in members:
        (folder / m.path if m.is_dir else folder / m.path.parent).mkdir(parents=True, exist_ok=True)
    if name.lower().endswith(".zip"):
        with _file(data) as f, zipfile.ZipFile(f) as z:
            for info in z.infolist():
                m = wanted.get(_relative(info.filename, name))
                if m is not None and not m.is_dir:
                    with z.open(info) as src:
                        _copy(src, folder / m.path, m.size, name)
        return
    with _tar_stream(data, name, sum(m.size for m in members)) as tar:
        for info in tar:
            m = wanted.get(_relative(info.name, name))
            if m is not None and not m.is_dir and info.isreg():
                _copy(tar.extractfile(info), folder / m.path, m.size, name)


def extract_archive(name: str, data: Data, members: tuple[Member, ...], folder: Path) -> None:
    """Extract the judged ``members`` (:func:`archive_members`) of an archive into ``folder``
    (which must not exist yet): folders and regular files only, each file its declared bytes
    only; a member the directory did not list is left out.

    Raises:
      CheckpointError: a member holds other bytes than declared, or the archive cannot be read.
    """
    folder.mkdir(parents=True)
    try:
        _extract(name, data, members, folder)
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as err:
        raise CheckpointError(name, f"could not be extracted ({err})") from None


# ---- an archive's model, for as long as it is read ---------------------------------------------


class Extracted(NamedTuple):
    """An archive's one model, extracted.

    Attributes:
      path: its folder or state dict file, in the temporary folder.
      name: what to call it: the archive's path and the model's inside it (``model.zip/tiny``).
    """

    path: Path
    name: str


@contextlib.contextmanager
def extracted_model(path: str | os.PathLike, max_bytes: int = MAX_BYTES) -> Iterator[Extracted]:
    """An archive's one model (:func:`one_model`), judged (:func:`archive_members`) and extracted
    into a temporary folder, which is removed when the block ends.

    Args:
      path: the archive's file.
      max_bytes: the most bytes its members may declare in all (the checkpoint cap).

    Yields:
      The :class:`Extracted` model. A :class:`CheckpointError` raised in the block that names a
      file in the temporary folder is raised again naming it inside the archive.

    Raises:
      CheckpointError: the archive is missing or refused, or holds no model or more than one.
    """
    name = str(path)
    if not Path(path).is_file():
        allowed = ", ".join(ARCHIVE_SUFFIXES)
        raise CheckpointError(name, f"does not exist; allowed: a folder archive ({allowed})")
    members = archive_members(name, path, max_bytes)
    with tempfile.TemporaryDirectory(prefix="rnnviz-archive-") as tmp:
        root = Path(tmp) / "model"
        extract_archive(name, path, members, root)
        model = one_model(root, name)
        inside = model.relative_to(root).as_posix()
        try:
            yield Extracted(model, name if inside == "." else f"{name}/{inside}")
        except CheckpointError as err:
            raise CheckpointError(str(err.value).replace(str(root), name), err.allowed) from None


__all__ = [
    "ARCHIVE_SUFFIXES",
    "MAX_MEMBERS",
    "Extracted",
    "Member",
    "archive_members",
    "extract_archive",
    "extracted_model",
    "find_models",
    "is_archive",
    "one_model",
]

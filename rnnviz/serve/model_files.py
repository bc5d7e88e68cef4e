"""Where the Your model tab finds checkpoints: the models in the user's data folder, an
uploaded folder archive judged by its directory before a byte of it is extracted, and a tiny
demo written with NumPy alone. The server only lists, judges and writes files here; the
worker processes load what they name (:func:`rnnviz.serve.jobs.model_summary`), and the
loader then judges the checkpoint by its headers.

An archive (``.zip``, ``.tar``, ``.tar.gz``, ``.tgz``) is refused, whole and before anything
is written, when its directory lists more than :data:`MAX_MEMBERS` members, more bytes than
the upload folder's cap or the checkpoint cap (:func:`rnnviz.serve.settings.model_max_bytes`), an
absolute path or ``..``, or anything other than regular files and folders (links, devices).
A compressed tar has no directory: its headers are read through a stream that stops past the
cap, so a member that lies about its size, or a bomb, is never inflated beyond it.

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

import gzip
import hashlib
import io
import re
import secrets
import shutil
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import NamedTuple

import numpy as np

from rnnviz.checkpoints import CheckpointError
from rnnviz.checkpoints.load import TORCH_SUFFIXES
from rnnviz.checkpoints.safetensors import encode
from rnnviz.dataset import data_dir
from rnnviz.serve.folders import admit, touch
from rnnviz.serve.settings import model_max_bytes, settings

#: A state dict file's suffixes (``torch.save``'s and safetensors').
STATE_DICT_SUFFIXES = (*TORCH_SUFFIXES, ".safetensors")
#: What an uploaded archive may be called.
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")
#: Members an archive may list: a model folder is its config, its weights (or tens of
#: shards), its tokenizer's files and a few more.
MAX_MEMBERS = 256
#: How deep under the data folder (or an extracted archive) models are looked for: a model
#: folder or state dict in it, or in a folder of models inside it.
MODEL_DEPTH = 2
#: Bytes of a tar's headers beyond its members' data that a stream is read for: 512 per
#: header (a long name or extended header takes a few), and the end of the archive.
TAR_HEADER_BYTES = 512 * 4 * (MAX_MEMBERS + 4)


# ---- the data folder ---------------------------------------------------------------------


def find_models(folder: Path, depth: int = MODEL_DEPTH) -> tuple[Path, ...]:
    """The checkpoints in ``folder``: each folder holding a ``config.json`` (a Hugging Face
    model, not looked into further) and each state dict file (``.pt``, ``.pth``, ``.bin``,
    ``.safetensors``) with no ``config.json`` beside it, at most ``depth`` folders down;
    hidden names and the recorded runs' ``runs/`` are passed over.

    Args:
      folder: where to look (the data folder, or an extracted archive).
      depth: how many folders down (0: the files directly in it).

    Returns:
      Their paths, sorted.
    """
    if not folder.is_dir():
        return ()
    if (folder / "config.json").is_file():
        return (folder,)
    found: list[Path] = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or p.name == "runs":
            continue
        if p.is_file() and p.suffix.lower() in STATE_DICT_SUFFIXES:
            found.append(p)
        elif p.is_dir() and not p.is_symlink() and depth > 0:
            found += find_models(p, depth - 1)
    return tuple(sorted(found))


def data_models() -> tuple[str, ...]:
    """The checkpoints in the user's data folder (:func:`find_models`), by their path in it
    (``"mamba-tiny"``, ``"stacks/lstm.pt"``)."""
    folder = data_dir()
    return tuple(p.relative_to(folder).as_posix() for p in find_models(folder))


# ---- archives, judged by their directory -----------------------------------------------------


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
    """Whether an upload named ``name`` is a folder archive (by its suffix)."""
    return name.lower().endswith(ARCHIVE_SUFFIXES)


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


def _zip_members(data: bytes, source: str) -> Iterator[tuple[str, int, str]]:
    """``(name, declared size, kind)`` of each entry of a zip's central directory."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
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


def _tar_stream(data: bytes, source: str, max_bytes: int) -> tarfile.TarFile:
    """A tar (gzip-compressed or not) opened as a stream that is read no further than its
    members' cap and their headers."""
    raw = gzip.GzipFile(fileobj=io.BytesIO(data)) if data[:2] == b"\x1f\x8b" else io.BytesIO(data)
    bounded = io.BufferedReader(_Bounded(raw, max_bytes + TAR_HEADER_BYTES, source))
    try:
        return tarfile.open(fileobj=bounded, mode="r|")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        raise CheckpointError(source, f"is not a tar archive ({err})") from None


def _tar_members(data: bytes, source: str, max_bytes: int) -> Iterator[tuple[str, int, str]]:
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
    name: str, data: bytes, max_bytes: int, max_members: int = MAX_MEMBERS
) -> tuple[Member, ...]:
    """An archive's directory, judged before anything is extracted.

    Args:
      name: the upload's name (``.zip``, ``.tar``, ``.tar.gz`` or ``.tgz``), named by every refusal.
      data: its bytes.
      max_bytes: the most bytes its members may declare in all.
      max_members: the most entries it may list.

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
                name,
                f"declares more than {max_bytes:,} bytes; allowed: at most {max_bytes:,} (the smaller of "
                "the upload folder's cap and the checkpoint cap)",
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


def extract_archive(name: str, data: bytes, members: tuple[Member, ...], folder: Path) -> None:
    """Extract the judged ``members`` (:func:`archive_members`) of an archive into ``folder``
    (which must not exist yet): folders and regular files only, each file its declared bytes
    only; a member the directory did not list is left out."""
    folder.mkdir(parents=True)
    wanted = {m.path: m for m in members}
    for m in members:
        (folder / m.path if m.is_dir else folder / m.path.parent).mkdir(parents=True, exist_ok=True)
    if name.lower().endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
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


def _safe_stem(name: str) -> str:
    """An archive's name without its suffix, as a folder name."""
    stem = Path(name).name
    for suffix in sorted(ARCHIVE_SUFFIXES, key=len, reverse=True):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return re.sub(r"[^A-Za-z0-9._-]+", "_", stem).lstrip(".") or "model"


def keep_archive(name: str, data: bytes) -> Path:
    """An uploaded folder archive judged (:func:`archive_members`), extracted once under the
    upload folder by the hash of its bytes, held to the folder's caps, and the one model in
    it (:func:`find_models`).

    Returns:
      The model's folder or state dict file.

    Raises:
      CheckpointError: the archive is refused, or holds no model or more than one.
      FolderFull: the upload folder cannot hold it (:func:`rnnviz.serve.folders.admit`).
    """
    limits = settings()
    uploads = Path(limits.uploads_dir)
    entry = uploads / hashlib.sha256(data).hexdigest()[:16]
    root = entry / _safe_stem(name)
    if not root.is_dir():
        cap = min(limits.uploads_mb * 2**20, model_max_bytes())
        members = archive_members(name, data, cap)
        # extracted under a name of its own, hidden, then renamed: never a half-extracted
        # folder under the real name, nor two sessions writing one
        part = uploads / f".{entry.name}.{secrets.token_hex(4)}.part"
        try:
            extract_archive(name, data, members, part / root.name)
            if not entry.exists():
                part.replace(entry)
            elif not root.exists():  # the same bytes under another name, kept by another session
                (part / root.name).replace(root)
        except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError) as err:
            raise CheckpointError(name, f"could not be extracted ({err})") from None
        finally:
            shutil.rmtree(part, ignore_errors=True)
        admit(uploads, root, limits.uploads_mb * 2**20, limits.uploads_files, "the upload folder")
    touch(root)
    return _one_model(root, name)


def _one_model(root: Path, name: str) -> Path:
    found = find_models(root)
    if len(found) != 1:
        listed = ", ".join(p.relative_to(root).as_posix() or "." for p in found) or "none"
        raise CheckpointError(
            name,
            f"holds {len(found)} models ({listed}); allowed: one Hugging Face folder (with config.json) "
            "or one state dict file",
        )
    return found[0]


# ---- the demo ----------------------------------------------------------------------------


#: The demo: a 2-layer ``torch.nn.LSTM`` state dict, I = 4 inputs, H = 16, as torch initialises
#: it (every weight and bias uniform in ±1/√H), drawn by a fixed seed: every visitor gets one file.
DEMO_NAME, DEMO_LAYERS, DEMO_INPUT, DEMO_HIDDEN, DEMO_SEED = "demo-lstm.safetensors", 2, 4, 16, 0


def demo_bytes() -> bytes:
    """The demo model's ``.safetensors`` file (:data:`DEMO_NAME`): torch's names and shapes,
    ``weight_ih_l{k}`` ``[4H, I_k]``, ``weight_hh_l{k}`` ``[4H, H]``, ``bias_ih_l{k}`` and
    ``bias_hh_l{k}`` ``[4H]``, written with NumPy alone (torch is not needed to run the
    dashboard)."""
    rng, h = np.random.default_rng(DEMO_SEED), DEMO_HIDDEN
    bound = 1 / np.sqrt(h)
    tensors = {}
    for k in range(DEMO_LAYERS):
        shapes = {"weight_ih": (4 * h, DEMO_INPUT if k == 0 else h), "weight_hh": (4 * h, h)}
        shapes |= {"bias_ih": (4 * h,), "bias_hh": (4 * h,)}
        for kind, shape in shapes.items():
            tensors[f"{kind}_l{k}"] = rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return encode(tensors)


__all__ = [
    "ARCHIVE_SUFFIXES",
    "DEMO_NAME",
    "MAX_MEMBERS",
    "STATE_DICT_SUFFIXES",
    "Member",
    "archive_members",
    "data_models",
    "demo_bytes",
    "extract_archive",
    "find_models",
    "is_archive",
    "keep_archive",
]

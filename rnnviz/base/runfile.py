"""The ``.rnnviz`` run file: a versioned header and the arrays, sealed by a checksum.

Layout (all integers little-endian)::

    b"RNNVIZ-RUN\\n"            11 bytes: what the file is
    u32 n, header              n bytes of UTF-8 JSON: {"format": FORMAT, versions, config, …}
    u64 m, body                m bytes: the arrays, Flax's msgpack serialization
    sha256                     32 bytes over everything before it

Arrays are stored as their raw bytes (``flax.serialization.msgpack_serialize``), so a
loaded array equals the saved one bit for bit. Reading checks, in this order: the magic
bytes (not a run file), the lengths (a truncated file), the checksum (a changed file) and
the format version (a file from another version of rnnviz); each failure is one
:class:`RunFileError` naming the file and the problem. A file is judged by its headers before
its bytes: :func:`read` checks the declared lengths against the file's size before it reads
the file, and :func:`read_header` reads no more than the file holds.

Listing runs reads their headers alone, in a process without JAX (the dashboard's server):
this module imports Flax's codec, and with it JAX, only when arrays are read or written.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path
from typing import Any

from rnnviz.config import ConfigError

MAGIC = b"RNNVIZ-RUN\n"
#: The file format's version: a reader refuses any other (the header names the writer's).
FORMAT = 1
_DIGEST = 32


class RunFileError(ConfigError):
    """A run file cannot be read; ``str(err)`` names the file and what is wrong.

    Attributes:
        field: ``"weights"``.
        value: the file's name.
        allowed: what is wrong and what is allowed.
    """

    def __init__(self, path: str, problem: str):
        super().__init__("weights", path, problem)

    def __str__(self) -> str:
        return f"{self.value}: {self.allowed}."

    def __reduce__(self):
        return type(self), (self.value, self.allowed)


def encode(header: dict[str, Any], arrays: dict[str, Any]) -> bytes:
    """The file's bytes for a JSON-able ``header`` (``format`` is added) and a tree of arrays."""
    from flax import serialization  # the arrays' codec: JAX only where arrays are written

    head = json.dumps({"format": FORMAT, **header}, sort_keys=True).encode()
    body = serialization.msgpack_serialize(arrays)
    data = MAGIC + struct.pack("<I", len(head)) + head + struct.pack("<Q", len(body)) + body
    return data + hashlib.sha256(data).digest()


def decode(data: bytes, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(header, arrays)`` of a run file's bytes.

    Raises:
        RunFileError: not a run file, truncated, changed after it was written, or of
            another format version.
    """
    if not data.startswith(MAGIC):
        raise RunFileError(
            name, "not an rnnviz run file (save one with Training.save or `rnnviz train --save`)"
        )
    at = len(MAGIC)
    try:
        (n,) = struct.unpack_from("<I", data, at)
        (m,) = struct.unpack_from("<Q", data, at + 4 + n)
    except struct.error:
        raise RunFileError(name, f"truncated: {len(data)} bytes end inside the header") from None
    end = at + 4 + n + 8 + m
    if len(data) < end + _DIGEST:
        raise RunFileError(name, f"truncated: {len(data)} bytes of the {end + _DIGEST} it declares")
    if len(data) > end + _DIGEST:
        raise RunFileError(name, f"{len(data) - end - _DIGEST} bytes after the end of the run")
    if hashlib.sha256(data[:end]).digest() != data[end:]:
        raise RunFileError(name, "its checksum does not match: the file was changed after it was saved")
    try:
        header = json.loads(data[at + 4 : at + 4 + n])
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deep
        raise RunFileError(name, "its header is not JSON") from None
    version = header.get("format") if isinstance(header, dict) else None
    if version != FORMAT:
        writer = header.get("rnnviz", "an unknown version") if isinstance(header, dict) else "?"
        raise RunFileError(
            name,
            f"run file format {version!r} (written by rnnviz {writer}); "
            f"this rnnviz reads format {FORMAT} only",
        )
    from flax import serialization  # the arrays' codec: JAX only where arrays are read

    try:
        arrays = serialization.msgpack_restore(data[at + 4 + n + 8 : end])
    except Exception as err:  # msgpack raises several types on bad bytes
        raise RunFileError(name, f"its arrays cannot be read ({type(err).__name__})") from None
    return header, arrays


def read_header(path: str | Path) -> dict[str, Any]:
    """The header alone, for listing runs (the arrays and the checksum are not read: only
    :func:`read` vouches for a file).

    Raises:
        RunFileError: not a run file, or its header is cut or not JSON.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(len(MAGIC) + 4)
            if not head.startswith(MAGIC) or len(head) < len(MAGIC) + 4:
                raise RunFileError(path.name, "not an rnnviz run file")
            (n,) = struct.unpack_from("<I", head, len(MAGIC))
            if len(head) + n > size:  # a claim past the end of the file: nothing to read
                raise RunFileError(path.name, f"its header is cut: {n} bytes declared, {size} in the file")
            raw = f.read(n)
    except OSError as err:
        raise RunFileError(path.name, f"cannot be read ({err.strerror or err})") from None
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):
        raise RunFileError(path.name, "its header is cut or not JSON") from None
    if not isinstance(header, dict):
        raise RunFileError(path.name, "its header is not a JSON object")
    return header


def write(path: str | Path, header: dict[str, Any], arrays: dict[str, Any]) -> Path:
    """Write atomically (a temporary file renamed), so a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(encode(header, arrays))
    tmp.replace(path)
    return path


def read(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(header, arrays)`` of the file at ``path`` (see :func:`decode`): the lengths it
    declares are checked against its size before the file is read.

    Raises:
        RunFileError: as :func:`decode`, or the file cannot be opened.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            _check_lengths(f, os.fstat(f.fileno()).st_size, path.name)
            f.seek(0)
            data = f.read()
    except OSError as err:
        raise RunFileError(path.name, f"cannot be read ({err.strerror or err})") from None
    return decode(data, path.name)


def _check_lengths(f: Any, size: int, name: str) -> None:
    """:func:`decode`'s checks of the magic bytes and the two declared lengths, with its
    words, on a file of ``size`` bytes, reading only those fields."""
    at = len(MAGIC)
    if f.read(at) != MAGIC:
        raise RunFileError(
            name, "not an rnnviz run file (save one with Training.save or `rnnviz train --save`)"
        )
    raw = f.read(4)
    n = struct.unpack("<I", raw)[0] if len(raw) == 4 else size
    if at + 4 + n + 8 > size:
        raise RunFileError(name, f"truncated: {size} bytes end inside the header")
    f.seek(at + 4 + n)
    raw = f.read(8)
    m = struct.unpack("<Q", raw)[0] if len(raw) == 8 else size
    if at + 4 + n + 8 + m + _DIGEST > size:
        raise RunFileError(name, f"truncated: {size} bytes of the {at + 4 + n + 8 + m + _DIGEST} it declares")

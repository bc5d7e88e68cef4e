"""NumPy's ``.npy`` arrays and ``.npz`` archives, judged by their headers before their bytes.

Each array's header (its shape, order and dtype: :func:`read_header`) is read and checked
against the :class:`~rnnviz.dataset.budget.Budget` and against the bytes the file (or the
zip directory, for a member of an archive) says follow it; only then are the data streamed,
chunk by chunk, into one array allocated once (:func:`read_data`), converted on the way
(``inputs`` become float32 without a float64 copy). A ``.npz`` is a zip of ``.npy`` members:
its directory's member count is checked before the zip is opened, and members other than
``inputs``, ``labels``, ``targets``, ``mask`` and ``lengths`` are never read.
"""

from __future__ import annotations

import io
import math
import struct
import zipfile
from contextlib import ExitStack
from pathlib import Path
from typing import IO, NamedTuple

import numpy as np
from numpy.lib import format as npy_format

from rnnviz.dataset.budget import Budget
from rnnviz.dataset.record import DataError, reason

#: The arrays a ``.npz`` data file may hold (any others are ignored, unread).
MEMBERS = ("inputs", "labels", "targets", "mask", "lengths")
#: Bytes read for a header: NumPy itself refuses headers over 10 000 characters.
HEADER_BYTES = 16 * 1024
#: Bytes converted at a time.
CHUNK_BYTES = 16 * 2**20
#: The most members a ``.npz`` directory may claim (``np.savez`` writes one per array).
MAX_MEMBERS = 1024
_END_OF_DIRECTORY = b"PK\x05\x06"


class NpyHeader(NamedTuple):
    """What a ``.npy`` header claims, and where its data start.

    Attributes:
        shape: the array's shape.
        fortran_order: whether the data are stored column-major.
        dtype: the stored dtype.
        start: the data's first bytes (read with the header).
        stored: the bytes after the header, as the file (or zip directory) says.
    """

    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype
    start: bytes
    stored: int

    @property
    def nbytes(self) -> int:
        """The bytes of data the header claims."""
        return math.prod(self.shape) * self.dtype.itemsize

    def claim(self, what: str | None) -> str:
        """``'inputs' claims [10, 5, 3] float64`` (``its header claims …`` for a ``.npy``
        file: ``what`` None), for a message."""
        return f"{what or 'its header'} claims {list(self.shape)} {self.dtype}"


def read_header(stream: IO[bytes], name: str, what: str | None, size: int) -> NpyHeader:
    """The header at the start of ``stream``, reading at most :data:`HEADER_BYTES`.

    Args:
        stream: a ``.npy`` file or zip member, at its start.
        name: the file's name, for messages.
        what: the member, for messages (``'inputs'``; None for a ``.npy`` file).
        size: the bytes the file or zip directory says the stream holds.

    Returns:
        The header; nothing past its first data bytes has been read.

    Raises:
        DataError: not a ``.npy`` array, a header that cannot be parsed, or an array of
            Python objects (reading them would unpickle).
    """
    prefix = stream.read(max(0, min(HEADER_BYTES, size)))
    head = io.BytesIO(prefix)
    try:
        version = npy_format.read_magic(head)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f".npy format version {version[0]}.{version[1]}; allowed: 1.0, 2.0")
        reader = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
        shape, fortran_order, dtype = reader(head)
        if any(d < 0 for d in shape):
            raise ValueError(f"negative shape {shape}")
    except Exception as err:  # ValueError, and the SyntaxError or TokenError of a mangled header dict
        where = f"{what} is " if what else ""
        raise DataError(name, f"{where}not a readable .npy array ({reason(err)})") from None
    if dtype.hasobject:
        raise DataError(
            name, f"{what or 'it'} holds Python objects ({dtype}): reading them would unpickle, refused"
        )
    offset = head.tell()
    return NpyHeader(tuple(shape), fortran_order, dtype, prefix[offset:], size - offset)


def read_data(
    stream: IO[bytes], header: NpyHeader, dtype: np.dtype, name: str, what: str | None
) -> np.ndarray:
    """The array ``header`` describes, streamed from ``stream`` into one new ``dtype`` array.

    Args:
        stream: the stream :func:`read_header` read ``header`` from, just past its first bytes.
        header: the array's header, already checked against the budget.
        dtype: the array returned (a cast from the stored dtype, chunk by chunk).
        name, what: the file and the array, for messages.

    Returns:
        ``<dtype>[header.shape]``, in the stored order (C or Fortran).

    Raises:
        DataError: the data end before the header's claim.
    """
    check_stored(name, header, what)
    order = "F" if header.fortran_order else "C"
    out = np.empty(header.shape, dtype, order=order)
    flat = out.reshape(-1, order=order)  # a view: the data fill it in stored order
    item = header.dtype.itemsize
    step = max(1, CHUNK_BYTES // max(item, 1))
    start, done = header.start, 0
    while done < flat.size:
        k = min(step, flat.size - done)
        raw, start = start[: k * item], start[k * item :]  # the bytes read with the header first
        raw += _read_exactly(stream, k * item - len(raw))
        if len(raw) < k * item:
            end = done * item + len(raw)
            raise DataError(name, f"truncated: {header.claim(what)}, but its data end after {end} bytes")
        with np.errstate(all="ignore"):
            flat[done : done + k] = np.frombuffer(raw, header.dtype)
        done += k
    return out


def check_stored(name: str, header: NpyHeader, what: str | None) -> None:
    """Refuse a header claiming more bytes than the file (or zip directory) says follow it.

    Raises:
        DataError: ``truncated: 'inputs' claims [100, 10, 3] float32, 12000 bytes, but only
            10 bytes follow its header``.
    """
    if header.stored < header.nbytes:
        raise DataError(
            name,
            f"truncated: {header.claim(what)}, {header.nbytes} bytes, "
            f"but only {max(header.stored, 0)} bytes follow its header",
        )


def read_npy(path: Path, name: str, budget: Budget) -> tuple:
    """``(inputs, None, None, None)`` of a ``.npy`` file: its header checked, then its data
    streamed into float32.

    Raises:
        DataError: see :func:`read_header`, :func:`check_inputs` and :func:`read_data`.
    """
    with path.open("rb") as f:
        size = f.seek(0, io.SEEK_END)
        f.seek(0)
        header = read_header(f, name, None, size)
        check_inputs(name, header, budget, None)
        return read_data(f, header, np.dtype(np.float32), name, None), None, None, None


def read_npz(path: Path, name: str, budget: Budget) -> tuple:
    """``(inputs, labels, targets, mask)`` of a ``.npz`` archive (None where absent; ``mask``
    built from ``lengths`` where that is given): every header checked before any data.

    Raises:
        DataError: a directory claiming too many members, not a zip, a missing or
            contradictory array, an array over the budget or of the wrong shape or dtype,
            a member shorter than its header claims, or a corrupt member.
    """
    _check_directory(path, name)
    try:
        with zipfile.ZipFile(path) as archive, ExitStack() as streams:
            members = _members(archive)
            _check_names(name, members)
            headers, opened = {}, {}
            for key in (k for k in MEMBERS if k in members):
                info = members[key]
                opened[key] = streams.enter_context(archive.open(info))
                headers[key] = read_header(opened[key], name, f"'{key}'", info.file_size)
            n, t, _ = check_inputs(name, headers["inputs"], budget, "'inputs'")
            one = len(headers["inputs"].shape) == 2
            dtypes = {"inputs": np.dtype(np.float32)}
            for key in (k for k in headers if k != "inputs"):
                dtypes[key] = _member_dtype(name, key, headers[key], n, t, one, budget)
            for key, header in headers.items():  # every claim against the directory, before any data
                check_stored(name, header, f"'{key}'")
            arrays = {k: read_data(opened[k], headers[k], dtypes[k], name, f"'{k}'") for k in headers}
    except (DataError, MemoryError):
        raise
    except Exception as err:  # zipfile, zlib, bz2 and lzma raise many kinds for a corrupt archive
        raise DataError(name, f"not a readable .npz archive ({reason(err)})") from None
    mask = arrays.get("mask")
    if "lengths" in arrays:
        mask = _mask_of_lengths(name, arrays["lengths"], n, t)
    return arrays["inputs"], arrays.get("labels"), arrays.get("targets"), mask


def check_inputs(name: str, header: NpyHeader, budget: Budget, what: str | None) -> tuple[int, int, int]:
    """``(N, T, I)`` of the inputs a header claims, refused unless ``[N, T, I]`` (or
    ``[T, I]``) real numbers within the budget.

    Raises:
        DataError: the shape, the dtype, or the size, naming the claim and the limit.
    """
    shape = header.shape
    if len(shape) not in (2, 3):
        raise DataError(name, f"'inputs' has shape {shape}; allowed: [N, T, I] (or [T, I] for one sequence)")
    if not _real(header.dtype):
        raise DataError(name, f"'inputs' holds {header.dtype} values; allowed: real numbers")
    n, t, i = shape if len(shape) == 3 else (1, *shape)
    budget.check(name, n, t, i, header.claim(what))
    return n, t, i


def _member_dtype(
    name: str, key: str, header: NpyHeader, n: int, t: int, one: bool, budget: Budget
) -> np.dtype:
    """The dtype to read ``labels``, ``targets``, ``mask`` or ``lengths`` into, after
    checking its claimed shape and dtype with the words :mod:`~rnnviz.dataset.files` uses
    once the values are read (so a wrong claim is refused before its data)."""
    shape, dtype, size = header.shape, header.dtype, math.prod(header.shape)
    if key == "labels":
        if size != n or not (one or shape):
            raise DataError(name, f"'labels' must be [{n}]: one class per sequence")
        if not (np.issubdtype(dtype, np.integer) or np.issubdtype(dtype, np.floating)):
            raise DataError(name, "'labels' must be whole numbers ≥ 0 (class indices)")
        return dtype
    if key == "lengths":
        if size != n or not np.issubdtype(dtype, np.integer):
            raise DataError(name, f"'lengths' must be {n} integers, one per sequence")
        return dtype
    if key == "mask":
        if (size != t if one else shape != (n, t)) or dtype.kind != "b":
            raise DataError(name, f"'mask' must be [{n}, {t}] booleans (True for real steps)")
        return dtype
    full = (1, *shape) if one else shape  # a single sequence's targets gain the N axis
    if full == (n, t) and np.issubdtype(dtype, np.integer):
        return np.dtype(np.int64)  # next tokens
    if len(full) == 3 and full[:2] == (n, t) and np.issubdtype(dtype, np.number):
        if 4 * size > budget.data_bytes:
            budget.refuse(name, 4 * size, header.claim("'targets'"))
        return np.dtype(np.float32)  # regression targets
    raise DataError(
        name, f"'targets' has shape {full}; allowed: [{n}, {t}] integers or [{n}, {t}, O] numbers"
    )


def _mask_of_lengths(name: str, lengths: np.ndarray, n: int, t: int) -> np.ndarray:
    lengths = lengths.reshape(-1)
    if lengths.min(initial=1) < 1 or lengths.max(initial=1) > t:
        raise DataError(name, f"'lengths' must be in [1, {t}] (T)")
    return np.arange(t)[None, :] < lengths[:, None]


def _members(archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """Each member by the name ``np.load`` gives it (``inputs.npy`` is ``inputs``)."""
    names = {info.filename: info for info in archive.infolist()}
    members = {(k[:-4] if k.endswith(".npy") else k): info for k, info in names.items()}
    members.update({k: names[k] for k in MEMBERS if k in names})  # np.load prefers the exact name
    return members


def _check_names(name: str, members: dict[str, zipfile.ZipInfo]) -> None:
    if "inputs" not in members:
        raise DataError(name, f"no 'inputs' array (it holds: {', '.join(sorted(members)) or 'nothing'})")
    if "labels" in members and "targets" in members:
        raise DataError(name, "give 'labels' (one class per sequence) or 'targets' (per step), not both")
    if "mask" in members and "lengths" in members:
        raise DataError(name, "give 'mask' or 'lengths', not both")


def _check_directory(path: Path, name: str) -> None:
    """Refuse a zip whose end-of-directory record claims more than :data:`MAX_MEMBERS`
    members, before ``zipfile`` builds a record per member (a missing record is left to
    ``zipfile`` to name)."""
    with path.open("rb") as f:
        size = f.seek(0, io.SEEK_END)
        f.seek(max(0, size - 22 - 65535))  # the record, then a comment of at most 64 KiB
        tail = f.read()
    at = tail.rfind(_END_OF_DIRECTORY)
    if at < 0 or len(tail) - at < 22:
        return
    (count,) = struct.unpack_from("<H", tail, at + 10)
    if count > MAX_MEMBERS:
        raise DataError(
            name, f"its zip directory claims {count} members; allowed: at most {MAX_MEMBERS} arrays"
        )


def _read_exactly(stream: IO[bytes], n: int) -> bytes:
    """``n`` bytes of the stream (fewer only at its end)."""
    parts, got = [], 0
    while got < n:
        part = stream.read(n - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _real(dtype: np.dtype) -> bool:
    return np.issubdtype(dtype, np.number) and not np.issubdtype(dtype, np.complexfloating)

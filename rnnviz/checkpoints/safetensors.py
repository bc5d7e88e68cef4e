"""``.safetensors`` files judged by their headers before their bytes.

The format: an 8-byte little-endian header length N, N bytes of JSON mapping each tensor's
name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to the end of
the header), then the data. :func:`read_header` checks every entry against the file's real
size, that each tensor's extent is what its dtype and shape need, and that no two overlap,
before anything else is read.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping

import ml_dtypes
import numpy as np

from rnnviz.checkpoints.record import CheckpointError
from rnnviz.checkpoints.tensors import TensorInfo

#: The safetensors library's own limit on a header.
MAX_HEADER_BYTES = 100 * 2**20
#: The stored dtypes read, by the format's names.
DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}


def _header_json(path: str, size: int) -> dict:
    """The JSON header of the file at ``path`` (``size`` bytes), its length checked first."""
    if size < 8:
        raise CheckpointError(path, f"{size} bytes: too short for a safetensors header")
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > MAX_HEADER_BYTES:
            raise CheckpointError(path, f"its header claims {n} bytes; allowed: at most {MAX_HEADER_BYTES}")
        if n > size - 8:
            raise CheckpointError(
                path, f"its header claims {n} bytes; the file holds {size - 8} after its length"
            )
        text = f.read(n)
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(path, f"its header is not JSON ({err.__class__.__name__})") from None
    if not isinstance(header, dict):
        raise CheckpointError(path, "its header is not a JSON object of tensors")
    return header | {"__start__": 8 + n}


def _entry(path: str, name: str, entry: object, start: int) -> TensorInfo:
    """One header entry as a :class:`TensorInfo`, its fields' types and dtype checked."""
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
        raise CheckpointError(path, f"tensor {name!r} lacks dtype, shape or data_offsets in its header")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in DTYPES:
        raise CheckpointError(path, f"tensor {name!r} is {dtype}; allowed: {', '.join(DTYPES)}")
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise CheckpointError(path, f"tensor {name!r} has shape {shape!r}; allowed: a list of sizes ≥ 0")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
        raise CheckpointError(path, f"tensor {name!r} has data_offsets {offsets!r}; allowed: [begin, end]")
    info = TensorInfo(name, path, DTYPES[dtype], tuple(shape), start + offsets[0])
    if offsets[1] - offsets[0] != info.nbytes or offsets[0] < 0:
        raise CheckpointError(
            path,
            f"tensor {name!r}: its header gives bytes {offsets[0]}–{offsets[1]}, but {dtype} "
            f"{list(shape)} needs {info.nbytes}",
        )
    return info


def read_header(path: str) -> dict[str, TensorInfo]:
    """Every tensor a ``.safetensors`` file claims, checked against its size; no data read.

    Args:
        path: the file.

    Returns:
        ``{name: TensorInfo}`` in the order of their offsets.

    Raises:
        CheckpointError: naming the file and the first entry that is malformed, lies about its
            extent, runs past the end of the file or overlaps another.
    """
    size = os.path.getsize(path)
    header = _header_json(path, size)
    start = header.pop("__start__")
    header.pop("__metadata__", None)
    infos = sorted((_entry(path, k, v, start) for k, v in header.items()), key=lambda i: i.offset)
    end = start
    for info in infos:
        if info.offset < end:
            raise CheckpointError(path, f"tensor {info.name!r} overlaps the tensor before it")
        end = info.offset + info.nbytes
    if end > size:
        raise CheckpointError(path, f"its header claims {end} bytes of data; the file holds {size}")
    return {i.name: i for i in infos}


def encode(tensors: Mapping[str, np.ndarray]) -> bytes:
    """float32 tensors as the bytes of a ``.safetensors`` file, as :func:`read_header` reads
    them: an 8-byte little-endian header length, the JSON header (``dtype``, ``shape``,
    ``data_offsets`` per tensor, padded to 8 bytes), then the data, in order.

    >>> blob = encode({"w": np.ones((2, 3), np.float32)})
    >>> n = int.from_bytes(blob[:8], "little")
    >>> json.loads(blob[8 : 8 + n])["w"], len(blob) - 8 - n
    ({'dtype': 'F32', 'shape': [2, 3], 'data_offsets': [0, 24]}, 24)
    """
    header, blobs, offset = {}, [], 0
    for key, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[key] = {
            "dtype": "F32",
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)

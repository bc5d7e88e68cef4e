"""PyTorch's ``torch.save`` files (``.pt``, ``.pth``, ``.bin``) read without running any code
they hold.

Since PyTorch 1.6 such a file is a zip: ``<archive>/data.pkl`` pickles the state dict, and each
tensor's storage lies in ``<archive>/data/<key>``, stored uncompressed. The pickle is read by an
unpickler that knows only what a state dict of tensors needs (:data:`ALLOWED`): an ordered
dict, ``torch._utils._rebuild_tensor_v2`` / ``_rebuild_parameter`` and the storage types,
each replaced by a record of this module; any other name the pickle asks for, whatever it
is, ends the read. PyTorch's own ``weights_only=True`` loader works the same way. The
tensors' extents are then checked against the zip directory before any storage is read.
"""

from __future__ import annotations

import collections
import io
import math
import pickle
import struct
import zipfile
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from rnnviz.checkpoints.record import CheckpointError
from rnnviz.checkpoints.tensors import TensorInfo

#: The most bytes of pickle read (a state dict's pickle holds names and sizes only).
MAX_PICKLE_BYTES = 64 * 2**20
#: PyTorch's storage types, by the name the pickle gives them.
STORAGES = {
    "DoubleStorage": np.dtype("<f8"),
    "FloatStorage": np.dtype("<f4"),
    "HalfStorage": np.dtype("<f2"),
    "BFloat16Storage": np.dtype(ml_dtypes.bfloat16),
    "LongStorage": np.dtype("<i8"),
    "IntStorage": np.dtype("<i4"),
    "ShortStorage": np.dtype("<i2"),
    "CharStorage": np.dtype("i1"),
    "ByteStorage": np.dtype("u1"),
    "BoolStorage": np.dtype("?"),
}


class _Storage(NamedTuple):
    key: str
    dtype: np.dtype
    numel: int


class _Tensor(NamedTuple):
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor(storage, offset, shape, stride, *_ignored) -> _Tensor:
    return _Tensor(storage, int(offset), tuple(shape), tuple(stride))


def _rebuild_parameter(tensor, *_ignored) -> _Tensor:
    return tensor


#: Every global a state dict's pickle may name, and what it becomes here.
ALLOWED: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
} | {("torch", name): name for name in STORAGES}


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickles a state dict, refusing every global outside :data:`ALLOWED`."""

    def __init__(self, data: bytes, source: str):
        super().__init__(io.BytesIO(data))
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise CheckpointError(
                self.source,
                f"its pickle asks for {module}.{name}; allowed: a state dict of tensors only "
                "(reading it would run code it names), refused",
            )
        return ALLOWED[module, name]

    def persistent_load(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and pid[1] in STORAGES):
            raise CheckpointError(
                self.source, f"its pickle names a storage {pid!r:.80}; allowed: tensor storages"
            )
        return _Storage(str(pid[2]), STORAGES[pid[1]], int(pid[4]))


def _data_offset(path: str, member: zipfile.ZipInfo) -> int:
    """The absolute offset of a stored member's first byte (past its local header)."""
    with open(path, "rb") as f:
        f.seek(member.header_offset)
        local = f.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise CheckpointError(path, f"its zip member {member.filename!r} has no local header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    return member.header_offset + 30 + name_len + extra_len


def _info(path: str, name: str, t: _Tensor, members: dict[str, zipfile.ZipInfo], prefix: str) -> TensorInfo:
    """A tensor's extent in the zip, checked against its storage member's size."""
    member = members.get(f"{prefix}data/{t.storage.key}")
    if member is None:
        raise CheckpointError(path, f"tensor {name!r}: its storage {t.storage.key!r} is not in the archive")
    if member.compress_type != zipfile.ZIP_STORED:
        raise CheckpointError(
            path, f"tensor {name!r}: its storage is compressed; allowed: stored, as torch.save writes"
        )
    contiguous = tuple(int(math.prod(t.shape[i + 1 :])) for i in range(len(t.shape)))
    if any(d > 1 and s != c for d, s, c in zip(t.shape, t.stride, contiguous)):
        raise CheckpointError(path, f"tensor {name!r} has strides {t.stride}; allowed: contiguous")
    itemsize = t.storage.dtype.itemsize
    end = (t.offset + math.prod(t.shape)) * itemsize
    if t.offset < 0 or end > member.file_size or t.storage.numel * itemsize > member.file_size:
        raise CheckpointError(
            path, f"tensor {name!r} claims bytes up to {end}; its storage holds {member.file_size}"
        )
    return TensorInfo(name, path, t.storage.dtype, t.shape, _data_offset(path, member) + t.offset * itemsize)


def read_header(path: str) -> dict[str, TensorInfo]:
    """Every tensor of a ``torch.save`` state dict, checked against the archive; no data read.

    Args:
        path: the file.

    Returns:
        ``{name: TensorInfo}``.

    Raises:
        CheckpointError: not a zip archive (a bare pickle, or PyTorch's pre-1.6 format), a
            pickle that names anything but tensors, not a flat mapping of names to tensors,
            or a tensor outside its storage.
    """
    if not zipfile.is_zipfile(path):
        raise CheckpointError(
            path,
            "is not a torch.save zip archive (a bare pickle or PyTorch's legacy format); "
            "allowed: a state dict saved by torch.save, or .safetensors",
        )
    with zipfile.ZipFile(path) as z:
        members = {m.filename: m for m in z.infolist()}
        pickles = [n for n in members if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pickles) != 1 or members[pickles[0]].file_size > MAX_PICKLE_BYTES:
            raise CheckpointError(path, "holds no single data.pkl of a state dict (at most 64 MB)")
        data = z.read(pickles[0])
    state = _load_pickle(path, data)
    prefix = pickles[0][: -len("data.pkl")]
    return {name: _info(path, name, t, members, prefix) for name, t in state.items()}


def _load_pickle(path: str, data: bytes) -> dict[str, _Tensor]:
    """The state dict the pickle holds: names to tensors, nothing else."""
    try:
        state = _StateDictUnpickler(data, path).load()
    except CheckpointError:
        raise
    except Exception as err:  # a damaged pickle: any of pickle's many errors
        raise CheckpointError(path, f"its pickle cannot be read ({err.__class__.__name__})") from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, _Tensor) for k, v in state.items()
    ):
        raise CheckpointError(path, "does not hold a state dict; allowed: a mapping of names to tensors")
    return dict(state)

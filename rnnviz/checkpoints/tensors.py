"""Where a tensor's bytes lie in its file, as a header says (:class:`TensorInfo`), and reading
them once every header has been checked (:func:`read_tensor`)."""

from __future__ import annotations

import math
from typing import NamedTuple

import ml_dtypes
import numpy as np

from rnnviz.checkpoints.record import CheckpointError

#: The float dtypes a checkpoint may hand on, by the name a caller asks for.
DTYPES = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
#: Bytes copied at a time while a tensor is read.
CHUNK_BYTES = 16 * 2**20


class TensorInfo(NamedTuple):
    """One tensor as a header describes it.

    Attributes:
        name: its name in the state dict.
        file: the file that holds its bytes.
        dtype: the stored dtype (little-endian).
        shape: the stored shape.
        offset: the absolute offset of its first byte in ``file``.
    """

    name: str
    file: str
    dtype: np.dtype
    shape: tuple[int, ...]
    offset: int

    @property
    def nbytes(self) -> int:
        """The bytes the tensor occupies in its file."""
        return math.prod(self.shape) * self.dtype.itemsize


def read_tensor(info: TensorInfo, dtype: np.dtype) -> np.ndarray:
    """The tensor's bytes, read into one array allocated once, converted to ``dtype``.

    Args:
        info: a header entry already checked against the file's size.
        dtype: the dtype to hand on (float32 or bfloat16; integer tensors keep their own).

    Returns:
        An array of ``info.shape``.

    Raises:
        CheckpointError: the file ended before the header said it would.
    """
    raw = np.empty(info.shape, info.dtype)
    view = raw.reshape(-1).view(np.uint8)
    with open(info.file, "rb") as f:
        f.seek(info.offset)
        for start in range(0, view.size, CHUNK_BYTES):
            chunk = view[start : start + CHUNK_BYTES]
            if f.readinto(chunk) != chunk.size:
                raise CheckpointError(info.file, f"ends inside tensor {info.name!r}")
    if raw.dtype.kind in "iub" or raw.dtype == dtype:
        return raw
    return raw.astype(dtype)

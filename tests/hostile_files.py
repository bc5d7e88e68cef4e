"""Builders of hostile (and of good) data and run files, small on disk, shared by the loader
tests (``tests/dataset/test_hostile.py``) and the browser soak (``scripts/soak.py``), which
uploads each of them through the page.

Nothing here imports pytest: the soak driver runs outside it. pyarrow is imported only by
:func:`constant_parquet`, so the rest works without it.
"""

from __future__ import annotations

import io
import json
import math
import struct
import zlib
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

MiB = 2**20


def npy_header(shape: tuple[int, ...], descr: str = "<f4", fortran_order: bool = False) -> bytes:
    """The bytes of a version 1.0 ``.npy`` header claiming ``shape`` of ``descr``."""
    out = io.BytesIO()
    npy_format.write_array_header_1_0(out, {"descr": descr, "fortran_order": fortran_order, "shape": shape})
    return out.getvalue()


def crc_of_zeros(crc: int, n: int) -> int:
    """``zlib.crc32(bytes(n), crc)`` without the bytes: the CRC register's map for one zero
    byte is linear over GF(2), applied ``n`` times by repeated squaring."""

    def apply(op: list[int], v: int) -> int:
        out, k = 0, 0
        while v:
            if v & 1:
                out ^= op[k]
            v, k = v >> 1, k + 1
        return out

    def one_byte(v: int) -> int:
        for _ in range(8):
            v = (v >> 1) ^ (0xEDB88320 if v & 1 else 0)
        return v

    op, state = [one_byte(1 << k) for k in range(32)], crc ^ 0xFFFFFFFF
    while n:
        if n & 1:
            state = apply(op, state)
        op = [apply(op, c) for c in op]
        n >>= 1
    return state ^ 0xFFFFFFFF


def zeros_npz(path: Path, shape: tuple[int, ...], block: int = MiB) -> Path:
    """An ``.npz`` whose ``inputs.npy`` inflates to ``shape`` float32 zeros, written as a
    ZIP64 archive by hand: one deflated block of zeros (each block flushed, so blocks
    concatenate) repeated, so a 6 GiB member costs 6 MiB and no 6 GiB of anything."""
    head, zeros = npy_header(shape), 4 * math.prod(shape)

    def deflate(data: bytes) -> bytes:
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush(zlib.Z_FULL_FLUSH)

    full, rest = divmod(zeros, block)
    body = b"".join(
        [
            deflate(head),
            deflate(bytes(block)) * full,
            deflate(bytes(rest)),
            zlib.compressobj(9, 8, -15).flush(),
        ]
    )
    size, crc, name = len(head) + zeros, crc_of_zeros(zlib.crc32(head), zeros), b"inputs.npy"
    zip64 = struct.pack("<HHQQ", 1, 16, size, len(body))
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 45, 0, 8, 0, 0x21, crc, 2**32 - 1, 2**32 - 1, len(name), 20
    )
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 8, 0, 0x21, crc, 2**32 - 1, 2**32 - 1, len(name), 20,
        0, 0, 0, 0, 0,
    )  # fmt: skip
    first = local + name + zip64 + body
    directory = central + name + zip64
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(directory), len(first), 0)
    path.write_bytes(first + directory + end)
    return path


def constant_parquet(path: Path, sequences: int, steps: int, features: int = 4) -> Path:
    """A long-form ``.parquet`` (zstd) of ``sequences × steps`` rows whose features are a
    constant 0.5, written row group by row group (about 1 M rows each)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    per = max(1, 2**20 // steps)
    t = pa.array(np.tile(np.arange(steps, dtype=np.int64), per))
    x = pa.array(np.full(per * steps, 0.5))
    names = ["sequence", "t"] + [f"x{k}" for k in range(features)]
    schema = pa.schema([(c, pa.int64() if c in ("sequence", "t") else pa.float64()) for c in names])
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for a in range(0, sequences, per):
            k = min(per, sequences - a)
            seq = pa.array(np.repeat(np.arange(a, a + k, dtype=np.int64), steps))
            writer.write_table(pa.table([seq, t[: k * steps]] + [x[: k * steps]] * features, schema=schema))
    return path


# ---- the hostile files of issue #30, by name ------------------------------------------------------


def bomb_npz(folder: Path) -> Path:
    """``bomb.npz``: 6 MiB on disk, inflating to 6 GiB of float32 zeros (refused by its header)."""
    return zeros_npz(folder / "bomb.npz", (1536, 1024, 1024))


def lying_npy(folder: Path) -> Path:
    """``claims.npy``: 4 KB whose header claims [10000, 10000, 64] float32, 23.8 GiB."""
    path = folder / "claims.npy"
    path.write_bytes(npy_header((10000, 10000, 64)) + bytes(4000))
    return path


def lying_npz(folder: Path) -> Path:
    """``lies.npz``: an ``inputs.npy`` member claiming 12 000 bytes and holding 10."""
    import zipfile

    path = folder / "lies.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("inputs.npy", npy_header((100, 10, 3)) + bytes(10))
    return path


def objects_npy(folder: Path) -> Path:
    """``objects.npy``: pickled Python objects (loading it would unpickle, so it is refused unread)."""
    path = folder / "objects.npy"
    np.save(path, np.array([{"a": 1}, print], dtype=object), allow_pickle=True)
    return path


def long_parquet(folder: Path, sequences: int = 40_000, steps: int = 1000) -> Path:
    """``long.parquet``: 40 M rows of 4 features (640 MB as float32: inside the 1 GiB budget,
    so it loads), a few MB on disk."""
    return constant_parquet(folder / "long.parquet", sequences, steps, 4)


def lying_run_files(folder: Path) -> list[Path]:
    """Two ``.rnnviz`` run files declaring more than they hold: ``arrays.rnnviz`` (an array of
    2⁶² bytes) and ``header.rnnviz`` (a header of 4 GiB)."""
    from rnnviz.base import runfile

    head = json.dumps({"format": runfile.FORMAT}).encode()
    cases = {
        "arrays.rnnviz": runfile.MAGIC
        + struct.pack("<I", len(head))
        + head
        + struct.pack("<Q", 2**62)
        + bytes(64),
        "header.rnnviz": runfile.MAGIC + struct.pack("<I", 2**32 - 1) + head,
    }
    paths = []
    for name, data in cases.items():
        path = folder / name
        path.write_bytes(data)
        paths.append(path)
    return paths


# ---- good files -----------------------------------------------------------------------------------


def waves_npz(folder: Path, name: str = "waves.npz", seed: int = 0, steps: int = 30) -> Path:
    """A valid small ``.npz``: 4 noisy sine waves of ``steps`` steps, 1 feature, as inputs
    and regression targets (``seed`` changes its bytes, so each seed is a new upload)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 6, steps, dtype=np.float32)
    series = (np.sin(t)[None, :, None] + 0.05 * rng.standard_normal((4, steps, 1))).astype(np.float32)
    path = folder / name
    np.savez(path, inputs=series, targets=series)
    return path


def small_csv(
    folder: Path, name: str = "steps.csv", seed: int = 0, sequences: int = 6, steps: int = 25
) -> Path:
    """A valid small long-form ``.csv``: ``sequence, t, x0, x1`` for ``sequences × steps`` rows."""
    rng = np.random.default_rng(seed)
    lines = ["sequence,t,x0,x1"]
    for s in range(sequences):
        for t in range(steps):
            x0, x1 = rng.normal(size=2)
            lines.append(f"{s},{t},{x0:.5f},{x1:.5f}")
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


__all__ = [
    "bomb_npz",
    "constant_parquet",
    "crc_of_zeros",
    "long_parquet",
    "lying_npy",
    "lying_npz",
    "lying_run_files",
    "npy_header",
    "objects_npy",
    "small_csv",
    "waves_npz",
    "zeros_npz",
]

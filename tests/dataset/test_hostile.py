"""Hostile files: each is judged by its headers before its bytes, and refused with one message
naming the file, what it claims and the limit before its data are allocated; an accepted
file peaks at most twice its float32 size.

Each file is small on disk (a 6 GiB deflate bomb is 6 MiB) and is loaded in a subprocess that
reports its peak RSS (``VmHWM``, or ``ru_maxrss``) before and after the load, and the
exception, as JSON.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hostile_files import constant_parquet, lying_run_files, npy_header, zeros_npz

from rnnviz.base import runfile
from rnnviz.dataset import DataError, load_dataset

MiB = 2**20
#: What a refusal may cost, peak RSS of the whole process (the interpreter, NumPy, pandas
#: and pyarrow are about 150 MiB of it).
REFUSAL_PEAK = 400 * MiB

_LOADER = r"""
import json, resource, sys
import numpy, pandas, pyarrow.parquet  # what a load imports: part of the baseline
import rnnviz
from rnnviz.dataset import files, longform, npyfile

kind, path, limit, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if limit:
    files.MAX_DATA_BYTES = limit
if chunk:
    longform.CHUNK_BYTES = npyfile.CHUNK_BYTES = chunk
if kind == "run":
    from rnnviz import load_run
    import rnnviz.studies.training.saved  # JAX, Flax: part of the baseline


def peak():
    # VmHWM: this program's own peak. ru_maxrss (KiB) would do, but Linux carries the parent's
    # peak across fork and exec into it, so a test process of 1 GiB would read as 1 GiB here.
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


base = peak()
try:
    if kind == "run":
        load_run(path)
        out = {"ok": True}
    else:
        ds = rnnviz.load_dataset(path)
        x = ds.inputs
        out = {"ok": True, "shape": list(x.shape), "nbytes": int(x.nbytes), "min": float(x.min()),
               "max": float(x.max()), "real_steps": int(ds.mask.sum())}
except BaseException as err:
    out = {"type": type(err).__module__ + "." + type(err).__qualname__, "message": str(err)}
out.update(base=base, peak=peak())
print(json.dumps(out))
"""


def _load(path: Path, *, limit: int = 0, chunk: int = 0, kind: str = "data") -> dict:
    """Load ``path`` in a fresh interpreter; its report (``peak``, ``base`` in bytes)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", _LOADER, kind, str(path), str(limit), str(chunk)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _refused(report: dict, path: Path, *words: str, error: str = "rnnviz.dataset.record.DataError") -> str:
    assert report.get("type") == error, report
    message = report["message"]
    assert message.startswith(f"{path.name}: ") and "\n" not in message, message
    for w in words:
        assert w in message, message
    assert report["peak"] < REFUSAL_PEAK, f"refusing cost {report['peak'] / MiB:.0f} MiB: {message}"
    return message


# ---- building the files, small on disk (tests/hostile_files.py, shared with the browser soak) ----


def _constant_parquet(path: Path, sequences: int, steps: int, features: int = 4) -> Path:
    pytest.importorskip("pyarrow.parquet")  # .parquet is an optional extra
    return constant_parquet(path, sequences, steps, features)


# ---- the four files of the issue ----------------------------------------------------------------


def test_the_zeros_npz_builder_writes_a_valid_archive(tmp_path):
    path = zeros_npz(tmp_path / "small.npz", (3, 1000, 700))  # 8 MiB of zeros: several blocks
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None  # every CRC checks
    with np.load(path) as z:
        x = z["inputs"]
    assert x.shape == (3, 1000, 700) and x.dtype == np.float32 and not x.any()
    assert load_dataset(path).inputs.shape == (3, 1000, 700)


def test_an_npz_inflating_to_6_gib_is_refused_by_its_header(tmp_path):
    path = zeros_npz(tmp_path / "bomb.npz", (1536, 1024, 1024))  # 6 GiB of float32 zeros
    assert path.stat().st_size < 8 * MiB
    _refused(
        _load(path),
        path,
        "6.0 GiB as float32, over the 1 GiB limit",
        "'inputs' claims [1536, 1024, 1024] float32",
    )


def test_an_npy_header_claiming_24_gib_over_4_kb_is_refused_by_its_header(tmp_path):
    path = tmp_path / "claims.npy"
    path.write_bytes(npy_header((10000, 10000, 64)) + bytes(4000))
    _refused(
        _load(path),
        path,
        "23.8 GiB as float32, over the 1 GiB limit",
        "its header claims [10000, 10000, 64] float32",
    )


@pytest.mark.slow
def test_a_parquet_of_40_m_rows_loads_within_twice_its_float32_size(tmp_path):
    sequences, steps, features = 40_000, 1000, 4  # 40 M rows: 640 MB as float32, inside 1 GiB
    path = _constant_parquet(tmp_path / "long.parquet", sequences, steps, features)
    assert path.stat().st_size < 16 * MiB
    report = _load(path)
    assert report.get("ok"), report
    assert report["shape"] == [sequences, steps, features] and report["real_steps"] == sequences * steps
    assert report["min"] == report["max"] == 0.5
    float32 = 4 * sequences * steps * features
    assert report["nbytes"] == float32
    assert report["peak"] - report["base"] <= 2 * float32, f"peaked {report['peak'] / MiB:.0f} MiB"


def test_an_npy_of_python_objects_is_refused_unread(tmp_path):
    path = tmp_path / "objects.npy"
    np.save(path, np.array([{"a": 1}, print], dtype=object), allow_pickle=True)
    _refused(_load(path), path, "holds Python objects (object)", "unpickle, refused")


# ---- the other hostile files ----------------------------------------------------------------------


def test_a_truncated_npy_is_refused_before_its_data(tmp_path):
    path = tmp_path / "cut.npy"
    np.save(path, np.ones((20, 10, 3)))
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(
        DataError, match=r"^cut\.npy: truncated: its header claims \[20, 10, 3\] float64, 4800 "
    ):
        load_dataset(path)


def test_a_corrupt_zip_is_one_message(tmp_path):
    good = tmp_path / "good.npz"
    np.savez_compressed(good, inputs=np.random.default_rng(0).normal(size=(50, 40, 3)))
    data = bytearray(good.read_bytes())
    cases = {  # name: (the change, the words)
        "deflate.npz": (
            lambda d: d[:200] + bytes(b ^ 0x5A for b in d[200:400]) + d[400:],
            "not a readable .npz",
        ),
        "directory.npz": (lambda d: d.replace(b"PK\x01\x02", b"XX\x01\x02"), "not a readable .npz archive"),
        "empty.npz": (lambda d: b"PK\x05\x06" + b"\0" * 18, "no 'inputs' array (it holds: nothing)"),
        "members.npz": (
            lambda d: d[:-12] + struct.pack("<H", 60000) + d[-10:],  # the end record's member count
            "its zip directory claims 60000 members; allowed: at most 1024",
        ),
    }
    for name, (change, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(bytes(change(data)))
        with pytest.raises(DataError) as err:
            load_dataset(path)
        message = str(err.value)
        assert message.startswith(f"{name}: ") and words in message and "\n" not in message, message


def test_an_npz_member_whose_header_lies_about_its_size_is_refused_before_its_data(tmp_path):
    path = tmp_path / "lies.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("inputs.npy", npy_header((100, 10, 3)) + bytes(10))  # claims 12 000 bytes, holds 10
    with pytest.raises(DataError) as err:
        load_dataset(path)
    assert str(err.value) == (
        "lies.npz: truncated: 'inputs' claims [100, 10, 3] float32, 12000 bytes, "
        "but only 10 bytes follow its header."
    )
    # a member claiming more than fits the budget is refused before its data, whatever it holds
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("inputs.npy", npy_header((4, 3, 1)) + bytes(48))
        z.writestr("targets.npy", npy_header((4, 3, 10**8)) + bytes(10))
    with pytest.raises(
        DataError, match=r"^lies\.npz: 4\.5 GiB as float32, over the 1 GiB limit \('targets' claims"
    ):
        load_dataset(path)
    # and labels of a shape that cannot be right are refused with the same words as ever
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("inputs.npy", npy_header((4, 3, 1)) + bytes(48))
        z.writestr("labels.npy", npy_header((10**9,), "<i8"))
    with pytest.raises(DataError, match=r"'labels' must be \[4\]: one class per sequence"):
        load_dataset(path)


def test_a_csv_larger_than_the_budget_is_refused_chunk_by_chunk(tmp_path):
    path = tmp_path / "big.csv"
    rows = 200_000  # 1.6 MB of float32 features, against a 1 MiB budget
    frame = pd.DataFrame({"sequence": np.arange(rows) // 100, "t": np.arange(rows) % 100, "x": 0.5, "y": 1.5})
    frame.to_csv(path, index=False)
    # chunks of 64 KiB (a few thousand rows): the count passes the budget long before the end
    message = _refused(
        _load(path, limit=MiB, chunk=64 * 2**10), path, "over the 1 MiB limit", "counted while reading"
    )
    counted = int(message.split("reading: ")[1].split(" rows")[0])
    assert MiB // 8 < counted < rows
    # the same file within the budget loads, and holds what was written
    ds = load_dataset(path)
    assert ds.inputs.shape == (2000, 100, 2) and ds.mask.all()
    assert np.array_equal(np.unique(ds.inputs.reshape(-1, 2), axis=0), [[0.5, 1.5]])


def test_a_parquet_whose_metadata_claim_too_many_rows_is_refused_unread(tmp_path, monkeypatch):
    from rnnviz.dataset import files

    path = _constant_parquet(tmp_path / "rows.parquet", 300, 100)
    monkeypatch.setattr(files, "MAX_DATA_BYTES", 100_000)  # 30 000 rows × 4 features = 480 000 bytes
    with pytest.raises(
        DataError, match=r"over the 97\.7 KiB limit \(its metadata claim 30000 rows of 4 features"
    ):
        load_dataset(path)


def test_a_run_file_declaring_more_than_it_holds_is_refused_unread(tmp_path):
    for path in lying_run_files(tmp_path):  # arrays.rnnviz (2⁶² bytes), header.rnnviz (4 GiB)
        name, data = path.name, path.read_bytes()
        report = _load(path, kind="run")
        assert report.get("type") == "rnnviz.base.runfile.RunFileError", report
        assert report["message"].startswith(f"{name}: truncated: {len(data)} bytes "), report
        assert report["peak"] - report["base"] < 64 * MiB, report
        with pytest.raises(runfile.RunFileError, match=f"^{name}: "):
            runfile.read_header(path) if name == "header.rnnviz" else runfile.read(path)

"""Seeded mutations of small valid files (bit flips, cuts, inserted and deleted bytes, edited
header fields, re-sealed run files) fed to ``load_dataset`` and ``load_run``: each input
either loads or is refused with its one DataError / RunFileError, never another exception,
and within a time bound.

The suite runs a short fuzz (``RNNVIZ_FUZZ_N`` inputs, 200 by default); a long one runs by
hand and prints what it met::

    python tests/dataset/test_fuzz.py --long 20000
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import os
import random
import re
import signal
import struct
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd
import pytest

from rnnviz.base import runfile
from rnnviz.dataset import DataError, load_dataset
from rnnviz.dataset import files as files_module

#: The most seconds one input may take (a tiny file: a few milliseconds is usual).
PER_INPUT_S = 10.0
#: The data budget while fuzzing: a mutated claim within it is cheap to allocate.
FUZZ_DATA_BYTES = 16 * 2**20
_TOKENS = [
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "1e308",
    "1e-320",
    "abc",
    "",
    "1.5",
    "99999999999999999999",
    "True",
]
_NUMBERS = [0, 1, 2, 3, 7, 255, 2**16, 2**31 - 1, 2**31, 2**32 - 1, 2**40, 2**63 - 1, 2**64 - 1]


class _Hang(BaseException):
    """An input that ran past :data:`PER_INPUT_S` (a BaseException: no loader may catch it)."""


class Outcome(NamedTuple):
    """What one input did: ``ok`` or the error's kind, its message, and its seconds."""

    kind: str
    message: str
    seconds: float


# ---- the seed files ---------------------------------------------------------------------------------


def seed_files(run: Path) -> dict[str, bytes]:
    """Small valid files of every kind, by name (``run`` is a saved ``.rnnviz`` run)."""
    rng = np.random.default_rng(0)
    seeds = {}
    out = io.BytesIO()
    np.savez(out, inputs=rng.normal(size=(4, 5, 2)).astype(np.float32), labels=np.array([0, 1, 1, 0]))
    seeds["stored.npz"] = out.getvalue()
    out = io.BytesIO()
    np.savez_compressed(
        out,
        inputs=rng.normal(size=(3, 6, 1)),
        targets=rng.normal(size=(3, 6, 2)),
        lengths=np.array([6, 2, 4]),
    )
    seeds["deflated.npz"] = out.getvalue()
    out = io.BytesIO()
    np.savez(out, inputs=np.ones((2, 4, 3)), mask=np.arange(4)[None] < np.array([[4], [1]]))
    seeds["masked.npz"] = out.getvalue()
    out = io.BytesIO()
    np.save(out, np.asfortranarray(rng.normal(size=(3, 4, 2))))
    seeds["fortran.npy"] = out.getvalue()
    out = io.BytesIO()
    np.save(out, rng.integers(0, 9, size=(7, 3)).astype(">i2"))  # one sequence, big-endian
    seeds["one.npy"] = out.getvalue()
    rows = [("a", t, float(t), 0.5 * t, 1) for t in range(3)] + [("b", t, -1.0, 2.0, 0) for t in range(4)]
    frame = pd.DataFrame(rows, columns=["sequence", "t", "x", "y", "label"])
    seeds["long.csv"] = frame.to_csv(index=False).encode()
    out = io.BytesIO()
    frame.drop(columns="label").assign(target=np.arange(7) / 7.0).to_parquet(out)
    seeds["long.parquet"] = out.getvalue()
    seeds["run.rnnviz"] = run.read_bytes()
    return seeds


def train_seed_run(folder: Path) -> Path:
    """A tiny trained run saved to ``folder/run.rnnviz``."""
    from rnnviz import RunConfig, train

    cfg = RunConfig(cell="lstm", hidden_size=4, input_size=2, seq_len=8, batch_size=2)
    return train(cfg, "adding", steps=4, log_every=2).save(folder / "run.rnnviz")


# ---- the mutations ----------------------------------------------------------------------------------


def _flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _cut(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def _insert(data: bytes, rng: random.Random) -> bytes:
    at, k = rng.randrange(len(data) + 1), rng.choice([1, 2, 8, 100])
    return data[:at] + bytes(rng.randrange(256) for _ in range(k)) + data[at:]


def _delete(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + data[at + rng.choice([1, 2, 8, 100]) :]


def _overwrite_number(data: bytes, rng: random.Random) -> bytes:
    """A little-endian integer field (2, 4 or 8 bytes) somewhere set to a telling value."""
    size = rng.choice([2, 4, 8])
    if len(data) < size:
        return data
    at = rng.randrange(len(data) - size + 1)
    value = rng.choice(_NUMBERS) % 2 ** (8 * size)
    return data[:at] + value.to_bytes(size, "little") + data[at + size :]


def _npy_header_edit(data: bytes, rng: random.Random) -> bytes:
    """The ``.npy`` header dict with its shape, dtype or order changed, padded to its old
    length (so the header still parses as far as its length says)."""
    match = re.search(rb"\{'descr'.*?\}", data)
    if not match:
        return _flip(data, rng)
    header = match.group().decode("latin1")
    field = rng.choice(["shape", "descr", "fortran_order"])
    if field == "shape":
        dims = [
            rng.choice([0, 1, 2, 3, 5, 64, 10**4, 2**31, 10**12, -1])
            for _ in range(rng.choice([0, 1, 2, 3, 4]))
        ]
        new = re.sub(
            r"'shape': \([^)]*\)",
            f"'shape': ({', '.join(map(str, dims))}{',' if len(dims) == 1 else ''})",
            header,
        )
    elif field == "descr":
        descr = rng.choice(
            ["<f8", "<f4", ">f2", "|O", "<c8", "|b1", "<U5", "|V0", "<M8[s]", "<m8[s]", "|S0", "<f16"]
        )
        new = re.sub(r"'descr': '[^']*'", f"'descr': '{descr}'", header)
    else:
        new = header.replace("False", "True") if "False" in header else header.replace("True", "False")
    end = data.find(b"\n", match.end())
    room = end - match.start()
    if end < 0 or len(new) > room:
        return _flip(data, rng)
    return data[: match.start()] + new.encode("latin1").ljust(room) + data[end:]


def _zip_member_edit(data: bytes, rng: random.Random) -> bytes:
    """One member of a zip changed (by any byte mutation or a header edit) and the archive
    written again, so its CRC and sizes fit: the member's own claims are what is hostile."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            members = {i.filename: (z.read(i), i.compress_type) for i in z.infolist()}
    except Exception:
        members = {}
    if not members:
        return _flip(data, rng)
    name = rng.choice(sorted(members))
    content, kind = members[name]
    change = rng.choice(
        [_npy_header_edit, _npy_header_edit, _flip, _cut, _insert, _delete, _overwrite_number]
    )
    members[name] = (change(content, rng), kind)
    if rng.random() < 0.2:  # a member renamed, or another one added
        members[rng.choice(["inputs.npy", "labels.npy", "mask.npy", "lengths", "targets.npy", "x.npy"])] = (
            content,
            kind,
        )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for member, (content, kind) in members.items():
            z.writestr(member, content, compress_type=kind)
    return out.getvalue()


def _zip_directory_edit(data: bytes, rng: random.Random) -> bytes:
    """A field of the central directory or of its end record set to a telling value: sizes,
    CRC, offsets, member counts."""
    spots = [(m.start(), [16, 20, 24, 28, 42]) for m in re.finditer(rb"PK\x01\x02", data)]
    spots += [(m.start(), [8, 10, 12, 16]) for m in re.finditer(rb"PK\x05\x06", data)]
    if not spots:
        return _flip(data, rng)
    at, offsets = rng.choice(spots)
    field = at + rng.choice(offsets)
    size = 2 if (field - at) in (8, 10, 28) else 4
    value = rng.choice(_NUMBERS) % 2 ** (8 * size)
    return data[:field] + value.to_bytes(size, "little") + data[field + size :]


def _csv_edit(data: bytes, rng: random.Random) -> bytes:
    lines = data.decode("latin1").split("\n")
    k = rng.randrange(len(lines))
    cells = lines[k].split(",")
    op = rng.choice(["cell", "cell", "cell", "rename", "drop line", "copy line", "extra cell", "drop cell"])
    if op == "cell":
        cells[rng.randrange(len(cells))] = rng.choice(_TOKENS)
    elif op == "rename":
        cells[rng.randrange(len(cells))] = rng.choice(["sequence", "t", "label", "target", "x", ""])
    elif op == "drop line":
        lines.pop(k)
        return "\n".join(lines).encode("latin1")
    elif op == "copy line":
        lines.insert(rng.randrange(len(lines) + 1), lines[k])
        return "\n".join(lines).encode("latin1")
    elif op == "extra cell":
        cells.append(rng.choice(_TOKENS))
    elif len(cells) > 1:
        cells.pop(rng.randrange(len(cells)))
    lines[k] = ",".join(cells)
    return "\n".join(lines).encode("latin1")


def _parquet_footer_edit(data: bytes, rng: random.Random) -> bytes:
    """The footer's length set to a telling value, or bytes of the footer (the metadata)
    flipped or overwritten."""
    if len(data) < 12:
        return _flip(data, rng)
    if rng.random() < 0.3:
        value = rng.choice(_NUMBERS + [len(data), len(data) - 8, len(data) - 12]) % 2**32
        return data[:-8] + struct.pack("<I", value) + data[-4:]
    (footer,) = struct.unpack("<I", data[-8:-4])
    start = max(0, len(data) - 8 - min(footer, len(data)))
    body, tail = data[:start], data[start:-8]
    return body + rng.choice([_flip, _overwrite_number, _insert, _delete])(tail, rng) + data[-8:]


def _run_fields_edit(data: bytes, rng: random.Random) -> bytes:
    """The run file's declared header or body length set to a telling value."""
    at = len(runfile.MAGIC)
    if len(data) < at + 4:
        return _flip(data, rng)
    (n,) = struct.unpack_from("<I", data, at)
    if rng.random() < 0.5 or len(data) < at + 4 + n + 8:
        return data[:at] + struct.pack("<I", rng.choice(_NUMBERS + [n - 1, n + 1]) % 2**32) + data[at + 4 :]
    (m,) = struct.unpack_from("<Q", data, at + 4 + n)
    value = rng.choice(_NUMBERS + [m - 1, m + 1, len(data)]) % 2**64
    return data[: at + 4 + n] + struct.pack("<Q", value) + data[at + 4 + n + 8 :]


def _run_sealed_edit(data: bytes, rng: random.Random) -> bytes:
    """The run's header (a JSON field) or arrays (their bytes) changed, then sealed again with
    a correct checksum: what a hostile writer can do, past every integrity check."""
    try:
        header, _ = runfile.decode(data, "seed")
    except runfile.RunFileError:
        return _flip(data, rng)
    at = len(runfile.MAGIC)
    (n,) = struct.unpack_from("<I", data, at)
    head, body = data[at + 4 : at + 4 + n], data[at + 4 + n + 8 : -32]
    if rng.random() < 0.5:
        edit = header
        if rng.random() < 0.5 and isinstance(header.get("config"), dict):
            edit = header["config"]
        key = rng.choice(sorted(edit))
        value = rng.choice(
            [None, -1, 0, 2, 10**12, 1.5, "x", "lstm", "gru", [], {}, True, [1, 2], float("nan")]
        )
        if rng.random() < 0.2:
            edit.pop(key)
        else:
            edit[key] = value
        head = json.dumps(header).encode()
    else:
        body = rng.choice([_flip, _cut, _insert, _delete, _overwrite_number])(body, rng)
    sealed = runfile.MAGIC + struct.pack("<I", len(head)) + head + struct.pack("<Q", len(body)) + body
    return sealed + hashlib.sha256(sealed).digest()


_BYTES = [_flip, _cut, _insert, _delete, _overwrite_number]
#: The mutations for each kind of file: the byte-level ones, and those that know its format.
MUTATIONS: dict[str, list[Callable[[bytes, random.Random], bytes]]] = {
    ".npz": _BYTES + [_zip_member_edit] * 4 + [_zip_directory_edit] * 2 + [_npy_header_edit],
    ".npy": _BYTES + [_npy_header_edit] * 4,
    ".csv": _BYTES + [_csv_edit] * 4,
    ".parquet": _BYTES + [_parquet_footer_edit] * 3,
    ".rnnviz": _BYTES + [_run_fields_edit] * 2 + [_run_sealed_edit] * 4,
}


def mutate(name: str, data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """``data`` after one to three of the mutations for its kind; and their names."""
    done = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        change = rng.choice(MUTATIONS[Path(name).suffix])
        try:
            data = change(data, rng) if data else data
        except Exception:  # a format-aware mutation that cannot apply to what earlier ones left
            change = _flip
            data = _flip(data, rng)
        done.append(change.__name__.strip("_"))
    return data, "+".join(done)


# ---- running it ---------------------------------------------------------------------------------------


def _on_alarm(signum, frame):
    raise _Hang()


def _kind(message: str) -> str:
    """A refusal's kind: its message without the file's name, numbers or details."""
    text = message.split(": ", 1)[-1]
    text = re.split(r" \(|: |;", text)[0]
    return re.sub(r"-?\d[\d.e+]*", "#", text)[:60]


def run_one(path: Path) -> Outcome:
    """Load ``path`` (a data file or a run file) once; ``ok`` or the refusal's kind.

    Raises:
        AssertionError: any other exception, a message not naming the file, or a hang.
    """
    from rnnviz import load_run

    signal.signal(signal.SIGALRM, _on_alarm)
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, PER_INPUT_S)
    try:
        if path.suffix == ".rnnviz":
            load_run(path)
        else:
            load_dataset(path)
        kind, message = "ok", ""
    except (DataError, runfile.RunFileError) as err:
        message = str(err)
        assert message.startswith(f"{path.name}: ") and "\n" not in message, message
        kind = f"{type(err).__name__}: {_kind(message)}"
    except _Hang:
        raise AssertionError(f"{path.name}: still loading after {PER_INPUT_S} s") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return Outcome(kind, message, time.perf_counter() - start)


def fuzz(seeds: dict[str, bytes], n: int, folder: Path, seed: int = 0) -> dict:
    """``n`` mutated inputs, round-robin over the seed files; what they did.

    Returns:
        ``{"inputs", "seconds", "slowest_s", "kinds": {kind: count}, "failures": [..]}``;
        a failure (another exception, or a hang) keeps its input in ``folder`` to replay.
    """
    names, kinds, failures = sorted(seeds), collections.Counter(), []
    slowest, began = 0.0, time.perf_counter()
    for k in range(n):
        name = names[k % len(names)]
        rng = random.Random(f"{seed}:{k}")
        data, how = mutate(name, seeds[name], rng)
        path = folder / f"fuzz{Path(name).suffix}"
        path.write_bytes(data)
        try:
            outcome = run_one(path)
        except (AssertionError, Exception) as err:  # the bug this hunts: keep the input
            kept = folder / f"failure-{k}-{name}"
            kept.write_bytes(data)
            failures.append(f"input {k} ({name}, {how}; kept as {kept}): {type(err).__name__}: {err}")
            continue
        kinds[outcome.kind] += 1
        slowest = max(slowest, outcome.seconds)
    return {
        "inputs": n,
        "seconds": round(time.perf_counter() - began, 1),
        "slowest_s": round(slowest, 3),
        "kinds": dict(kinds.most_common()),
        "failures": failures,
    }


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict[str, bytes]:
    return seed_files(train_seed_run(tmp_path_factory.mktemp("run")))


def test_the_seed_files_load(seeds, tmp_path):
    for name, data in seeds.items():
        (tmp_path / name).write_bytes(data)
        assert run_one(tmp_path / name).kind == "ok", name


def test_mutated_files_load_or_get_their_one_message(seeds, tmp_path, monkeypatch):
    monkeypatch.setattr(files_module, "MAX_DATA_BYTES", FUZZ_DATA_BYTES)
    report = fuzz(seeds, int(os.environ.get("RNNVIZ_FUZZ_N", "200")), tmp_path)
    assert not report["failures"], "\n".join(report["failures"])
    refused = sum(v for k, v in report["kinds"].items() if k != "ok")
    assert refused > report["inputs"] / 4 and report["kinds"].get("ok", 0) > 0, report["kinds"]


def main(argv: list[str] | None = None) -> int:
    """The long fuzz by hand: ``--long N`` inputs; prints the report as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", type=int, default=20_000, help="how many inputs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    files_module.MAX_DATA_BYTES = FUZZ_DATA_BYTES
    with tempfile.TemporaryDirectory(prefix="rnnviz-fuzz-") as tmp:
        folder = Path(tmp)
        report = fuzz(seed_files(train_seed_run(folder)), args.long, folder, args.seed)
        if report["failures"]:
            kept = Path(tempfile.gettempdir()) / "rnnviz-fuzz-failures"
            kept.mkdir(exist_ok=True)
            for f in folder.glob("failure-*"):
                f.replace(kept / f.name)
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())

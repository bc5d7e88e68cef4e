"""The GPU suite (``python -m rnnviz bench --suite gpu --record DIR``): what a lent GPU
should measure, in one command sized to finish within five minutes on one modern GPU.

1. **devices** — the LSTM's analysis with each strategy, and plain ``jax.grad`` of the Flax
   scan (the yardstick), at three sizes (B=8·T=50·H=32, B=32·T=200·H=128 and the long
   B=8·T=1000·H=128; I=32) on every device JAX sees: a GPU next to the CPU of the same machine,
   in the same process;
2. **cudnn** — cuDNN's LSTM forward + backward through ``jax.experimental.rnn`` on the same
   shapes (:mod:`rnnviz.bench.cudnn`), and rnnviz's run times over it; a device without cuDNN
   (every CPU) measures that module's reference scan instead, and its records say so;
3. **parallel** — the associative scan (``parallel``) against the sequential scan
   (``accumulate``) for every cell linear in its carry, at T = 1 000 and 10 000 (B=8·I=32·H=64),
   on every device too.

A GPU's three parts run first, then the CPU's: if the time budget runs short, it is the CPU's
measurements that go unstarted.

Every measurement also reads the device's **peak memory** (:func:`device_peak`): the
allocator's high-water mark during the measurement above the bytes in use before it. The
devices part compiles first and then measures in order of XLA's estimate, smallest first, so
that each measurement can raise the mark; XLA:CPU keeps no allocator statistics (null, with
the reason). Each record also carries ``peak_bytes``, XLA's own count of one call's buffers.

Records (schema 1, :mod:`rnnviz.base.measurements`) are appended to two files in ``DIR``,
named for what they hold and the backend that ran them: ``devices-<backend>.jsonl`` (kind
``bench``, suites ``gpu-devices`` and ``gpu-parallel``) and ``<backend>-cudnn.jsonl`` (kind
``peer``); on a GPU machine ``devices-gpu.jsonl`` and ``gpu-cudnn.jsonl``. A measurement that
raises becomes a ``kind: "error"`` record in its part's file and the rest still run; so does
one not started because the suite's time budget is spent. The exit status is 1 when a
measurement raised.

Without a GPU the sizes are tiny (:data:`TINY`: two sizes, one strategy, one linear cell),
so that the same command runs on a CPU in well under a minute; ``--sizes full`` asks for the
GPU's sizes anyway.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TextIO

import jax

from rnnviz.base.measurements import SCHEMA, append_records
from rnnviz.bench.cudnn import cudnn_unavailable, peer_fields, time_peer
from rnnviz.config import ConfigError, RunConfig
from rnnviz.engine.compat import memory_stats
from rnnviz.engine.environment import environment, run_stamp
from rnnviz.engine.prepare import prepared_batch
from rnnviz.studies.comparisons import (
    available_strategies,
    label,
    measure,
    measured_executable,
    present_devices,
)

#: The cells whose recurrence is linear in the carry (``parallel`` can run them).
LINEAR_CELLS = ("mingru", "minlstm", "lru", "rglru", "mamba", "mlstm")


class Profile(NamedTuple):
    """How big the suite's work is.

    Attributes:
        name: ``"full"`` or ``"tiny"``.
        sizes: the devices and cudnn parts' LSTM sizes (``RunConfig`` fields).
        strategies: the devices part's strategies (None: every one the LSTM can run here).
        parallel_cells: the parallel part's cells.
        parallel_size: their B, I and H.
        parallel_lengths: their sequence lengths T.
        repeats: timed runs per measurement, at most.
        budget_s: seconds of timed runs per measurement (slow ones get fewer runs, never under 3).
        deadline_s: seconds after which no measurement starts (recorded as not run instead); below
            300 to leave room for the one running then and for JAX's start, which it does not count.
    """

    name: str
    sizes: tuple[dict, ...]
    strategies: tuple[str, ...] | None
    parallel_cells: tuple[str, ...]
    parallel_size: dict
    parallel_lengths: tuple[int, ...]
    repeats: int
    budget_s: float
    deadline_s: float


FULL = Profile(
    name="full",
    sizes=(
        dict(batch_size=8, seq_len=50, input_size=32, hidden_size=32),
        dict(batch_size=32, seq_len=200, input_size=32, hidden_size=128),
        dict(batch_size=8, seq_len=1000, input_size=32, hidden_size=128),
    ),
    strategies=None,
    parallel_cells=LINEAR_CELLS,
    parallel_size=dict(batch_size=8, input_size=32, hidden_size=64),
    parallel_lengths=(1000, 10_000),
    repeats=10,
    budget_s=0.5,
    deadline_s=270.0,
)
TINY = Profile(
    name="tiny",
    sizes=(
        dict(batch_size=2, seq_len=8, input_size=4, hidden_size=8),
        dict(batch_size=2, seq_len=64, input_size=4, hidden_size=8),
    ),
    strategies=("accumulate",),
    parallel_cells=("minlstm",),
    parallel_size=dict(batch_size=2, input_size=4, hidden_size=8),
    parallel_lengths=(32, 256),
    repeats=3,
    budget_s=0.05,
    deadline_s=270.0,
)
PROFILES = {"full": FULL, "tiny": TINY}
#: How an error record of a measurement the time budget left unstarted begins.
NOT_STARTED = "not started: "


def choose_profile(sizes: str, devices: Sequence[jax.Device]) -> Profile:
    """``sizes`` (``auto``, ``full`` or ``tiny``) as a :class:`Profile`: ``auto`` is full where
    one of ``devices`` is a GPU, else tiny."""
    if sizes == "auto":
        return FULL if any(d.platform == "gpu" for d in devices) else TINY
    return PROFILES[sizes]


def record_files(folder: str | Path, backend: str) -> dict[str, Path]:
    """The suite's two record files in ``folder`` by part: ``devices`` and ``parallel`` →
    ``devices-<backend>.jsonl``, ``cudnn`` → ``<backend>-cudnn.jsonl``."""
    folder = Path(folder)
    devices = folder / f"devices-{backend}.jsonl"
    return {"devices": devices, "parallel": devices, "cudnn": folder / f"{backend}-cudnn.jsonl"}


def device_peak(device: jax.Device, run: Callable[[], Any]) -> tuple[Any, int | None, str]:
    """Run ``run()`` and read how much device memory it took at its peak.

    Args:
        device: the device ``run`` uses.
        run: the measurement (compiled beforehand: compiling allocates too).

    Returns:
        ``(run's result, bytes, note)``: bytes is ``peak_bytes_in_use`` after the run minus
        ``bytes_in_use`` before it, when the run raised the device's high-water mark; None
        where the backend keeps no statistics, or the run stayed under an earlier peak of
        this process (XLA's mark cannot be reset), as the note says.
    """
    before = memory_stats(device)
    out = run()
    if before is None:
        return out, None, f"{device.platform} keeps no allocator statistics (memory_stats() is None)"
    after = memory_stats(device) or {}
    peak0, in_use0, peak1 = (
        before.get("peak_bytes_in_use"),
        before.get("bytes_in_use"),
        after.get("peak_bytes_in_use"),
    )
    if peak0 is None or in_use0 is None or peak1 is None:
        return out, None, "memory_stats() has no peak_bytes_in_use or bytes_in_use"
    if peak1 > peak0:
        return out, int(peak1 - in_use0), "peak_bytes_in_use during the measurement − bytes_in_use before it"
    return (
        out,
        None,
        f"under an earlier peak of this process ({(peak0 - in_use0) / 2**20:.1f} MB above the bytes in "
        "use before it; XLA's high-water mark cannot be reset)",
    )


@dataclass
class Run:
    """One run of the suite: its profile, where it writes, and what it has written.

    Attributes:
        profile: the sizes.
        files: part → record file (None: print only).
        out: where the table goes.
        deadline: ``time.monotonic()`` past which no measurement starts.
        records: part → the records made so far.
        errors: how many measurements raised.
        not_run: how many were not started (the time budget spent).
    """

    profile: Profile
    files: dict[str, Path] | None
    out: TextIO
    deadline: float
    records: dict[str, list[dict]] = field(default_factory=dict)
    errors: int = 0
    not_run: int = 0

    def keep(self, part: str, records: list[dict]) -> None:
        """Add ``records`` to ``part``'s list and append them to its file."""
        self.records.setdefault(part, []).extend(records)
        failed = [r["error"] for r in records if r["kind"] == "error"]
        self.not_run += sum(e.startswith(NOT_STARTED) for e in failed)
        self.errors += sum(not e.startswith(NOT_STARTED) for e in failed)
        if self.files is not None and records:
            append_records(self.files[part], records)

    def row(self, *cells: Any) -> None:
        """Print one table row (see :data:`COLUMNS`)."""
        print(table_row(*cells), file=self.out, flush=True)


#: The table's columns: name, width and the format of a number in it; a ratio is this row's run
#: time over the one named in "of".
COLUMNS = (
    ("part", 8, ""),
    ("config", 37, ""),
    ("device", 6, ""),
    ("measured", 30, ""),
    ("run ms", 10, ".3f"),
    ("ratio", 7, ".2f"),
    ("of", 10, ""),
    ("XLA MB", 8, ".2f"),
    ("dev MB", 8, ".2f"),
    ("note", 0, ""),
)


def table_row(*cells: Any) -> str:
    """One line of the table: a cell per :data:`COLUMNS` entry, numbers right-aligned in
    their column's format, None as —, text left-aligned."""

    def text(value: Any, width: int, number: str) -> str:
        if value is None:
            return f"{'—':>{width}}"
        if isinstance(value, int | float) and number:
            return f"{value:>{width}{number}}"
        return f"{value!s:<{width}}"

    return " ".join(text(v, w, f) for v, (_, w, f) in zip(cells, COLUMNS)).rstrip()


def error_record(part: str, cfg: RunConfig | None, device: jax.Device, error: str) -> dict:
    """A ``kind: "error"`` record: ``part`` of the suite, for ``cfg`` on ``device``, did not
    measure, and ``error`` says why."""
    return {
        "schema": SCHEMA,
        "kind": "error",
        "suite": f"gpu-{part}",
        "label": label(cfg) if cfg is not None else part,
        "config": cfg.to_dict() if cfg is not None else {},
        **run_stamp(device),
        "part": part,
        "error": error[:2000],
    }


def guarded(run: Run, part: str, cfg: RunConfig | None, device: jax.Device, fn: Callable[[], list]) -> list:
    """``fn()``, or ``[]`` after recording an error: when it raises, or when the suite's time
    is spent before it starts (a crash in one measurement never stops the others)."""
    if time.monotonic() > run.deadline:
        error = f"{NOT_STARTED}the suite's {run.profile.deadline_s:.0f} s were spent"
    else:
        try:
            return fn()
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
    run.keep(part, [error_record(part, cfg, device, error)])
    run.row(part, label(cfg) if cfg else "", _device(device), "error", *[None] * 5, error[:160])
    return []


def _device(device: jax.Device) -> str:
    return f"{device.platform}:{device.id}"


def _mb(n: int | None) -> float | None:
    return None if n is None else n / 2**20


def timed(run: Run, cfg: RunConfig, kind: str, strategy: str, device: jax.Device, suite: str) -> dict:
    """One :func:`~rnnviz.studies.comparisons.measure` record, with its device peak."""
    # compiled outside the memory reading, the prepare executables too (compiling allocates)
    measured_executable(cfg, kind, strategy, device)
    jax.block_until_ready(prepared_batch(cfg, device))
    p = run.profile
    rec, peak, note = device_peak(
        device,
        lambda: measure(
            cfg,
            measure=kind,
            strategy=strategy,
            repeats=p.repeats,
            device=device,
            suite=suite,
            budget_s=p.budget_s,
        ),
    )
    return {**rec, "device_peak_bytes": peak, "device_peak_note": note}


def _row_of(run: Run, part: str, rec: dict, device: jax.Device, ratio: float | None, of: str | None) -> None:
    what = f"{rec['measure']} · {rec['strategy']}"
    run.row(
        part,
        rec["label"],
        _device(device),
        what,
        rec["run_s"] * 1e3,
        ratio,
        of if ratio is not None else None,
        _mb(rec["peak_bytes"]),
        _mb(rec["device_peak_bytes"]),
        "",
    )


def _compiled(run: Run, cfg: RunConfig, strategy: str, device: jax.Device) -> list[tuple]:
    """``[(XLA's peak bytes, cfg, strategy, measure)]`` once compiled, ``[]`` (and a row) when
    the config refuses the strategy (e.g. per-step tangents over the memory budget)."""
    kind = "grad" if strategy == "plain_grad" else "analyze"
    try:
        return [(measured_executable(cfg, kind, strategy, device).peak_bytes, cfg, strategy, kind)]
    except ConfigError as err:
        run.row(
            "devices", label(cfg), _device(device), f"{kind} · {strategy}", *[None] * 5, f"refused: {err}"
        )
        return []


def devices_part(run: Run, device: jax.Device) -> list[dict]:
    """Plain ``jax.grad`` and the analysis with each strategy, at every size, on ``device``:
    compiled first, measured in order of XLA's memory estimate; one table row each, by size."""
    configs = [RunConfig(cell="lstm", **size) for size in run.profile.sizes]
    order = [
        (cfg, s)
        for cfg in configs
        for s in ("plain_grad", *(run.profile.strategies or available_strategies(cfg)))
    ]
    units = []
    for cfg, s in order:
        units += guarded(run, "devices", cfg, device, lambda cfg=cfg, s=s: _compiled(run, cfg, s, device))
    done: dict[tuple[str, str], dict] = {}
    for _, cfg, s, kind in sorted(units, key=lambda u: u[0]):
        for rec in guarded(
            run,
            "devices",
            cfg,
            device,
            lambda cfg=cfg, s=s, kind=kind: [timed(run, cfg, kind, s, device, "gpu-devices")],
        ):
            done[label(cfg), s] = rec
    records = []
    for cfg, s in order:
        rec = done.get((label(cfg), s))
        if rec is None:
            continue
        base = done.get((label(cfg), "plain_grad"))
        rec["ratio_to_plain_grad"] = rec["run_s"] / base["run_s"] if base else None
        records.append(rec)
        _row_of(run, "devices", rec, device, rec["ratio_to_plain_grad"], "plain_grad")
    run.keep("devices", records)
    return records


def _lookup(records: list[dict], name: str, device: jax.Device) -> dict[str, float]:
    """strategy → run_s of the devices part's measurements of ``name`` on ``device``."""
    where = str(device.device_kind)
    return {
        r["strategy"]: r["run_s"]
        for r in records
        if r["kind"] == "bench"
        and r["label"] == name
        and r["device_kind"] == device.platform
        and r["device_name"] == where
    }


def cudnn_part(run: Run, device: jax.Device, devices: list[dict]) -> list[dict]:
    """cuDNN's LSTM forward + backward (or the reference scan where cuDNN cannot run) at every
    size on ``device``, with rnnviz's ratios to it from the devices part's records."""
    why = cudnn_unavailable(device)
    peer = "lstm_ref" if why else "cudnn"
    note = (
        f"cuDNN not measured: {why}; measured lstm_ref, the same LSTM as a lax.scan, instead"
        if why
        else "cuDNN at jax.experimental.rnn's default precision (TF32 allowed); rnnviz at jax's default"
    )
    records = []
    for size in run.profile.sizes:
        cfg = RunConfig(cell="lstm", **size)
        for rec in guarded(
            run, "cudnn", cfg, device, lambda cfg=cfg: [_peer_record(run, cfg, peer, device, note)]
        ):
            # the note once per device: it is the same for every size
            _peer_rows(run, rec, device, _lookup(devices, rec["label"], device), "" if records else note)
            records.append(rec)
    run.keep("cudnn", records)
    return records


def _peer_record(run: Run, cfg: RunConfig, peer: str, device: jax.Device, note: str) -> dict:
    p = run.profile
    timed_peer, peak, peak_note = device_peak(
        device, lambda: time_peer(cfg, peer, device, p.repeats, budget_s=p.budget_s)
    )
    return {
        "schema": SCHEMA,
        "kind": "peer",
        "suite": "gpu-cudnn",
        "label": label(cfg),
        "config": cfg.to_dict(),
        **run_stamp(device),
        **peer_fields(timed_peer),
        "device_peak_bytes": peak,
        "device_peak_note": peak_note,
        "note": note,
    }


def _peer_rows(run: Run, rec: dict, device: jax.Device, rnnviz_s: dict[str, float], note: str) -> None:
    """The peer's row, then rnnviz's over it (plain grad, accumulate, the fastest strategy);
    the ratios go into ``rec``."""
    peer_s = rec["run_s"]
    analyses = {s: t for s, t in rnnviz_s.items() if s != "plain_grad"}
    best = min(analyses, key=analyses.__getitem__) if analyses else None
    rec["ratio_plain_grad"] = rnnviz_s["plain_grad"] / peer_s if "plain_grad" in rnnviz_s else None
    rec["ratio_analyze"] = analyses["accumulate"] / peer_s if "accumulate" in analyses else None
    rec["ratio_best_analyze"] = analyses[best] / peer_s if best else None
    rec["best_strategy"] = best
    dev = _device(device)
    what = f"{rec['peer']} fwd+bwd"
    mb = (_mb(rec["peak_bytes"]), _mb(rec["device_peak_bytes"]))
    run.row("cudnn", rec["label"], dev, what, peer_s * 1e3, 1.0, rec["peer"], *mb, note)
    for what, ratio in (
        ("grad · plain_grad", rec["ratio_plain_grad"]),
        ("analyze · accumulate", rec["ratio_analyze"]),
        (f"analyze · {best} (fastest)", rec["ratio_best_analyze"] if best != "accumulate" else None),
    ):
        if ratio is not None:
            run.row(
                "cudnn", rec["label"], dev, what, ratio * peer_s * 1e3, ratio, rec["peer"], None, None, ""
            )


def parallel_part(run: Run, device: jax.Device) -> list[dict]:
    """``accumulate`` then ``parallel`` (the analysis) for each linear cell at each length on
    ``device``; ratio = parallel / accumulate run time."""
    records = []
    for t_len in run.profile.parallel_lengths:
        for cell in run.profile.parallel_cells:
            cfg = RunConfig(cell=cell, seq_len=t_len, **run.profile.parallel_size)
            pair = {}
            for s in ("accumulate", "parallel"):
                for rec in guarded(
                    run,
                    "parallel",
                    cfg,
                    device,
                    lambda s=s, cfg=cfg: [timed(run, cfg, "analyze", s, device, "gpu-parallel")],
                ):
                    pair[s] = rec
            seq = pair.get("accumulate")
            for rec in pair.values():
                _row_of(
                    run, "parallel", rec, device, rec["run_s"] / seq["run_s"] if seq else None, "accumulate"
                )
            run.keep("parallel", list(pair.values()))
            records += pair.values()
    return records


class SuiteResult(NamedTuple):
    """What :func:`gpu_suite` did.

    Attributes:
        profile: the sizes it ran.
        records: part (``devices``, ``cudnn``, ``parallel``) → its records, errors included.
        files: part → the file its records were appended to (empty without a folder).
        errors: how many measurements raised (each an error record).
        not_run: how many were not started, the time budget spent (each an error record too).
        wall_s: seconds it took.
    """

    profile: Profile
    records: dict[str, list[dict]]
    files: dict[str, Path]
    errors: int
    not_run: int
    wall_s: float


def gpu_suite(
    record_dir: str | Path | None, sizes: str | Profile = "auto", out: TextIO = sys.stdout
) -> SuiteResult:
    """Run the three parts, print one table, append the records to ``record_dir``'s two files.

    Args:
        record_dir: the folder of the record files (:func:`record_files`), created when
            missing; None prints the table only.
        sizes: ``auto`` (full with a GPU, tiny without), ``full``, ``tiny``, or a :class:`Profile`.
        out: where the table goes.

    Returns:
        The :class:`SuiteResult`.
    """
    start = time.monotonic()
    devices = sorted(present_devices(), key=lambda d: d.platform != "gpu")  # GPUs first
    profile = sizes if isinstance(sizes, Profile) else choose_profile(sizes, devices)
    files = record_files(record_dir, jax.default_backend()) if record_dir is not None else None
    run = Run(profile, files, out, start + profile.deadline_s)
    _header(run, devices, sizes)
    for device in devices:  # a GPU's three parts first: the time budget, if short, cuts the CPU's
        for part, call in (
            ("devices", lambda d: devices_part(run, d)),
            ("cudnn", lambda d: cudnn_part(run, d, run.records.get("devices", []))),
            ("parallel", lambda d: parallel_part(run, d)),
        ):
            guarded(run, part, None, device, lambda call=call, device=device: call(device))
    wall = time.monotonic() - start
    written = {p: f for p, f in (files or {}).items() if run.records.get(p)}
    for path in sorted(set(written.values())):
        n = sum(len(run.records[p]) for p, f in written.items() if f == path)
        print(f"appended {n} records to {path}", file=out)
    print(
        f"suite gpu ({profile.name}): {wall:.0f} s; {run.errors} measurements raised, "
        f"{run.not_run} not started",
        file=out,
        flush=True,
    )
    return SuiteResult(profile, run.records, written, run.errors, run.not_run, wall)


def _header(run: Run, devices: Sequence[jax.Device], sizes: str | Profile) -> None:
    env = environment()
    why = ""
    if run.profile is TINY and sizes == "auto":
        why = " (JAX sees no GPU; --sizes full runs the GPU's sizes here)"
    print(f"suite gpu, sizes {run.profile.name}{why}", file=run.out)
    for d in devices:
        stats = "" if memory_stats(d) else " (keeps no allocator statistics: dev MB is —)"
        print(f"{_device(d)}: {d.device_kind}{stats}", file=run.out)
    print(
        f"jax {env.jax_version}, "
        f"jaxlib {env.jaxlib_version}, flax {env.flax_version}, python {env.python}, {env.cpu_count} CPUs",
        file=run.out,
    )
    print(
        "ratio: this row's run time / the run time of the row named in 'of' (same device, same process); "
        "XLA MB: XLA's buffers for one call; dev MB: the device allocator's peak during the measurement",
        file=run.out,
    )
    print(table_row(*(name for name, _, _ in COLUMNS)), file=run.out, flush=True)

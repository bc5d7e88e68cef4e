"""A long browser soak with injected faults (issue #30, item 3): ``make soak``.

Starts its own ``streamlit run app.py`` (worker processes, small caps on every folder and on
the workers, all in a temporary folder), drives N concurrent Playwright sessions (one
Chromium, one context each) through seeded random interactions for the given minutes, and
meanwhile injects faults at seeded times: a worker killed with SIGKILL in the middle of a
job, a worker stopped with SIGSTOP until its time limit has it replaced, a corrupted entry
of the compilation cache, the upload folder filled to its cap, and every hostile file of
``tests/hostile_files.py`` uploaded through the page. It then checks that what the sessions
kept (pins, trained runs, URL state) is still there, and writes a JSON report (and a
Markdown summary), the server's log beside it (``REPORT.server.log``) and screenshots of
the actions it could not make (``REPORT.shots/``).

Exit status 0 only when no step hung, no uncaught exception or unclassified error box was
shown (nor a message the app writes only for a bug: "view failed", an upload gone before
it was read), the server's memory shows no upward trend (and the workers' in runs of 10
minutes or more; see :func:`memory_report`), every folder is within its cap, nothing kept
was lost, the server stayed up, the driver ran to the end and at most a quarter of its
actions failed to go through. 1 otherwise; 2 when there is no browser.

    .venv/bin/python scripts/soak.py --sessions 4 --minutes 30 --workers 2 \\
        --report soak-report.json --markdown soak-report.md

The server's settings are the soak's alone (no ``RNNVIZ_*`` of the caller's environment
reaches it); ``--set NAME=VALUE`` changes one. Linux only (it reads ``/proc``); the browser
is Debian's ``/usr/bin/chromium``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

ROOT = Path(__file__).resolve().parents[1]
PROBE_DIR = ROOT / "scripts" / "soak_probe"
sys.path.insert(0, str(ROOT / "tests"))  # the browser and the hostile files the tests use
from browser_helpers import CHROMIUM, FLAGS, FRAMES, POLL_MS, RUN_COUNTER, RUNS, SETTLED, WHERE  # noqa: E402

VIEWPORT = {"width": 1400, "height": 1000}
ERROR_BOX = '[data-testid="stAlertContentError"]'
EXCEPTION = '[data-testid="stException"]'
#: Whether the page shows what became of an upload named ``name``: an error box that was not
#: there before it (a refusal naming it, a full folder, a stopped computation) or its
#: preview's title.
UPLOAD_SHOWN = """([name, before]) => {
  const texts = (css) => [...document.querySelectorAll(css)].map((e) => e.textContent.trim());
  return texts('[data-testid="stAlertContentError"]').some((t) => !before.includes(t) || t.includes(name))
    || texts(".gtitle").some((t) => t.startsWith(name));
}"""
#: Whether a training run started from the Training tab has ended: its results, its
#: "stopped" line, or an error box that was not there before it.
TRAINING_DONE = """(before) => {
  const t = document.body.innerText;
  return t.includes("The trained weights") || t.includes("Stopped at step")
    || t.includes("These runs are not kept as files")  // done, the trained-runs folder full
    || [...document.querySelectorAll('[data-testid="stAlertContentError"]')]
         .some((e) => !before.includes(e.textContent.trim()));
}"""
#: Milliseconds an action waits for the script run it should start (none: it changed nothing).
RUN_START_MS = 2500
#: Milliseconds a fresh page's widgets may take to show the URL's values after its run ends.
URL_SETTLE_MS = 5000
#: Pins a session keeps at most (then it removes one).
MAX_PINS = 6
#: Milliseconds one click, fill or list may take before it counts as a driver error.
ACTION_MS = 20_000

#: The server's caps, small so that eviction and worker retirement happen within a soak.
#: Uploads hold three times the largest hostile file (6 MiB), so each reaches the loader.
CAPS = {
    "RNNVIZ_UPLOADS_MB": "24",
    "RNNVIZ_UPLOADS_FILES": "8",
    "RNNVIZ_TRAINED_MB": "4",
    "RNNVIZ_TRAINED_FILES": "4",
    "RNNVIZ_JAX_CACHE_MB": "16",  # the least the server allows
    "RNNVIZ_RESULT_CACHE_MB": "16",
    "RNNVIZ_WORKER_MAX_JOBS": "60",
    "RNNVIZ_WORKER_MAX_RSS_MB": "900",
}
#: The folders the server fills: (folder variable, MB cap variable, file-count cap variable).
FOLDERS = {
    "uploads": ("RNNVIZ_UPLOADS_DIR", "RNNVIZ_UPLOADS_MB", "RNNVIZ_UPLOADS_FILES"),
    "trained": ("RNNVIZ_TRAINED_DIR", "RNNVIZ_TRAINED_MB", "RNNVIZ_TRAINED_FILES"),
    "jax_cache": ("RNNVIZ_JAX_CACHE", "RNNVIZ_JAX_CACHE_MB", None),
}
#: Memory shows "no upward trend" when its fitted slope after the warm-up, over 10 minutes,
#: is under this share of its mean, or when the line fitted over the judged window rises
#: less than :data:`TREND_NOISE_MB` in all: in a short run the server's result cache
#: filling to its cap (16 MB here), the uploads its sessions hold (the largest hostile file
#: is 6 MB, held with its copies while it is hashed and written), first-use imports and
#: allocator arenas are rises of that size, not a leak. Over a 30-minute run the share is
#: the tighter bound; a 3-minute one catches only gross leaks.
TREND_SHARE_PER_10_MIN = 0.05
TREND_NOISE_MB = 32.0
#: Runs shorter than 10 minutes judge the server by its rise instead: its peak after the
#: warm-up at most this far above its first sample after the warm-up. A line fitted over 90 s
#: is no trend: a 3-minute run in the suite saw the server rise 104 MB in 80 s (a fitted
#: 80 MB/min) while its heap probe showed 50 MB of it free inside malloc's arenas between two
#: trims, and the CI run before saw 2.5 MB/min on the same seed. A gross leak (kept weights,
#: ~100 MB a training run) passes this bound within minutes; the 30-minute run judges trends.
SHORT_RUN_RISE_MB = 256.0
SAMPLE_S = 3.0
#: Seconds between two looks at the trained-runs folder (an eviction is seen with the
#: admission that caused it).
WATCH_S = 0.5
#: JavaScript: the distinct Streamlit sessions this page load has been in (:data:`RUN_COUNTER`).
SESSIONS = "() => (window.__runs ? window.__runs.sessions : 0)"

#: The documented error boxes, first match wins: (kind, is it a failure, words it holds).
ERROR_KINDS: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
    ("computation time-out", False, ("did not finish within",)),
    ("worker died", False, ("a new worker process takes over", "ended (exit code", "ended before answering")),
    ("training lost its worker", False, ("Training stopped:",)),
    # a file the page had accepted, gone before its worker read it (evicted while in use)
    ("upload vanished", True, ("FileNotFoundError", "No such file or directory")),
    ("upload folder full", False, ("folder is full", "folder holds")),
    ("data file refused", False, ("The inputs stay synthetic.",)),
    ("run file refused", False, (".rnnviz: ", "cannot be read; the weights stay initial")),
    ("weights do not fit the data", False, ("input features and these data have",)),
    ("upload over the size limit", False, ("MB upload limit",)),
    ("over budget", False, ("budget", "working set")),
    ("configuration refused", False, ("cannot run this configuration", "This combination cannot run")),
    ("training refused", False, ("Training cannot run:",)),
    ("view failed", True, ("view failed (", "The analysis failed (")),
)
UNCAUGHT = "uncaught exception"
#: What an upload no session took gets when the sessions are done.
ENDED: list[str] = ["(the soak ended)"]
UNCLASSIFIED = "unclassified"


def classify(text: str) -> tuple[str, bool]:
    """The kind of one error box's text, and whether it is a failure (a bug, not a message
    the app means to show): ``("computation time-out", False)``, ``("unclassified", True)``."""
    for kind, failure, words in ERROR_KINDS:
        if any(w in text for w in words):
            return kind, failure
    return UNCLASSIFIED, True


# ---- /proc ------------------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` after the command name (which may hold spaces): field 3 is [0]."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def cmdline(pid: int) -> str:
    """A process's command line, spaces between arguments ('' when it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def worker_pids(server: int) -> list[int]:
    """The server's worker processes: its children whose command line names ``rnnviz.serve.worker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and int(fields[1]) == server and "rnnviz.serve.worker" in cmdline(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def rss_mb(pid: int) -> float | None:
    """Resident memory in MB (``VmRSS``), None when the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def cpu_ticks(pid: int) -> int | None:
    """User + system CPU time in clock ticks."""
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[11]) + int(fields[12])


def proc_state(pid: int) -> str | None:
    """The one-letter state (``R``, ``S``, ``T`` stopped, ``Z``), None when gone."""
    fields = _stat_fields(pid)
    return None if fields is None else fields[0]


def environ_of(pid: int) -> dict[str, str]:
    """A process's environment as it started."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {k: v for k, _, v in pairs}


def folder_usage(folder: Path) -> tuple[int, int]:
    """``(bytes of every file under it, entries directly in it)``; (0, 0) when it is missing."""
    if not folder.is_dir():
        return 0, 0
    total = 0
    for base, _, files in os.walk(folder):
        for name in files:
            try:
                total += (Path(base) / name).stat().st_size
            except OSError:  # evicted meanwhile
                continue
    try:
        entries = sum(1 for _ in folder.iterdir())
    except OSError:
        entries = 0
    return total, entries


# ---- figures ------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile (0 < q ≤ 1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def slope_per_min(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(seconds, value)`` points, per minute; None for fewer than 3."""
    if len(points) < 3:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return None
    return 60 * sum((t - mt) * (v - mv) for t, v in points) / var


def trend(points: list[tuple[float, float]]) -> dict[str, Any]:
    """The fitted slope (MB/min) and mean (MB) of RSS samples, and whether that is an upward
    trend: slope × 10 min ≥ :data:`TREND_SHARE_PER_10_MIN` of the mean, and a fitted rise
    over the samples' span of at least :data:`TREND_NOISE_MB`."""
    slope = slope_per_min(points)
    mean = sum(v for _, v in points) / len(points) if points else None
    span_min = (points[-1][0] - points[0][0]) / 60 if len(points) > 1 else 0.0
    upward = None
    if slope is not None and mean:
        upward = slope * 10 >= TREND_SHARE_PER_10_MIN * mean and slope * span_min >= TREND_NOISE_MB
    return {
        "samples": len(points),
        "span_min": span_min,
        "mean_mb": mean,
        "slope_mb_per_min": slope,
        "rise_mb": None if slope is None else slope * span_min,
        "upward": upward,
    }


def short_run_rise(points: list[tuple[float, float]]) -> dict[str, Any]:
    """A short run's judgement: the rise from the first sample to the peak (MB), and whether it
    passes :data:`SHORT_RUN_RISE_MB` (None without samples)."""
    if not points:
        return {"rise_to_peak_mb": None, "upward": None}
    rise = max(v for _, v in points) - points[0][1]
    return {"rise_to_peak_mb": rise, "upward": rise > SHORT_RUN_RISE_MB}


def minima_per_minute(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The lowest value of each minute (at the minute's middle): the workers' memory at rest,
    between the teeth of their jobs, retirements and successors."""
    by_minute: dict[int, float] = {}
    for t, v in points:
        by_minute[int(t // 60)] = min(v, by_minute.get(int(t // 60), math.inf))
    return [(60 * m + 30, v) for m, v in sorted(by_minute.items())]


def fault_schedule(minutes: float, seed: int, hostile: list[str]) -> list[tuple[float, str, str | None]]:
    """Seeded ``(seconds from the start, fault, its file)``: one round of every fault per 10
    minutes (at least one), the SIGSTOP first in each round (its time limit must pass before
    the end), every hostile file once per round."""
    rng = random.Random(f"faults-{seed}")
    rounds = max(1, round(minutes / 10))
    span = minutes * 60 / rounds
    events: list[tuple[float, str, str | None]] = []
    for r in range(rounds):

        def at(lo: float, hi: float, r: int = r) -> float:
            return r * span + span * rng.uniform(lo, hi)

        events += [
            (at(0.08, 0.15), "sigstop", None),
            (at(0.2, 0.28), "corrupt_cache", None),
            (at(0.3, 0.4), "kill9", None),
            (at(0.42, 0.52), "fill_uploads", None),
        ]
        names = list(hostile)
        rng.shuffle(names)
        events += [(at(0.12, 0.6), "hostile_upload", name) for name in names]
    return sorted(events, key=lambda e: e[0])


# ---- the files uploaded ------------------------------------------------------------------------


@dataclass
class Upload:
    """A file for the page: its path, which uploader (``data`` or ``run``) and what should
    happen (``refused``: one message naming the file; ``loads``: no error box)."""

    path: Path
    uploader: str
    expect: str


def build_files(folder: Path, worker_cap_mb: int) -> dict[str, Upload]:
    """Every hostile file of ``tests/hostile_files.py`` and two good ones, by file name.

    Two long parquet files of 40 000 sequences: ``long.parquet`` (200 steps, 8 M rows, 122 MiB
    as float32) and ``big.parquet`` (1000 steps, 40 M rows, 610 MiB), each expected to load
    or be refused by the budget a worker under ``worker_cap_mb`` holds a file to (a quarter
    of its cap, at most 1 GiB: :func:`rnnviz.serve.jobs.data_budget`)."""
    import hostile_files as hf  # tests/ is on the path (above)

    folder.mkdir(parents=True, exist_ok=True)
    files = {
        p.name: Upload(p, "data", "refused")
        for p in (hf.bomb_npz(folder), hf.lying_npy(folder), hf.lying_npz(folder), hf.objects_npy(folder))
    }
    budget = min(2**30, worker_cap_mb * 2**20 // 4)
    for name, steps in (("long.parquet", 200), ("big.parquet", 1000)):
        path = hf.constant_parquet(folder / name, 40_000, steps, 4)
        files[name] = Upload(path, "data", "loads" if 4 * 40_000 * steps * 4 <= budget else "refused")
    for p in hf.lying_run_files(folder):
        files[p.name] = Upload(p, "run", "refused")
    return files


def good_file(folder: Path, rng: random.Random) -> Path:
    """A small valid upload, new bytes each time (so each is a new entry of the upload folder)."""
    import hostile_files as hf

    folder.mkdir(parents=True, exist_ok=True)
    seed = rng.randrange(10**9)
    if rng.random() < 0.5:
        return hf.waves_npz(folder, f"waves-{seed}.npz", seed=seed, steps=rng.choice([20, 30, 40]))
    return hf.small_csv(folder, f"steps-{seed}.csv", seed=seed)


# ---- the soak's shared state ------------------------------------------------------------------


@dataclass
class PageAction:
    """An upload a fault asks the next free session to make; ``done`` gets the new error
    box texts (None: the step failed)."""

    upload: Upload
    done: asyncio.Future
    why: str


@dataclass
class Soak:
    """Everything the sessions, the fault injector and the sampler share."""

    opts: argparse.Namespace
    tmp: Path
    env: dict[str, str]
    url: str = ""
    server: subprocess.Popen | None = None
    log_path: Path | None = None
    t0: float = 0.0
    deadline: float = 0.0
    step_limit_s: float = 0.0
    drain_s: float = 0.0  # after the deadline: seconds the sessions may still take queued uploads
    files: dict[str, Upload] = field(default_factory=dict)
    cells: list[tuple[str, str]] = field(default_factory=list)
    tabs: list[str] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    hangs: list[dict] = field(default_factory=list)
    driver_errors: list[dict] = field(default_factory=list)
    faults: list[dict] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    trained: list[dict] = field(default_factory=list)
    removals: list[dict] = field(default_factory=list)  # trained runs seen leaving their folder
    sessions: list[Any] = field(default_factory=list)  # the browser sessions (their in-use runs)
    url_checks: list[dict] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    pids_seen: set[int] = field(default_factory=set)
    stopped: set[int] = field(default_factory=set)
    coverage: deque = field(default_factory=deque)
    covered: Counter = field(default_factory=Counter)
    tries: Counter = field(default_factory=Counter)
    actions: asyncio.Queue | None = None
    files_ready: Any = None  # a concurrent.futures.Future of build_files
    shots: Path | None = None  # where screenshots of driver errors go
    server_exit: int | None = None  # the server's exit status when it ended before the driver
    crash: str | None = None  # what stopped the driver itself, with its traceback

    def now(self) -> float:
        """Seconds since the sessions started (0 before they have)."""
        return time.monotonic() - self.t0 if self.t0 else 0.0

    def folder(self, name: str) -> Path:
        """The folder ``name`` of :data:`FOLDERS` (``uploads``, ``trained``, ``jax_cache``)."""
        return Path(self.env[FOLDERS[name][0]])

    def cap(self, variable: str | None) -> int | None:
        """A cap given to the server (None when not set, or not a whole number)."""
        value = self.env.get(variable or "")
        return int(value) if value and value.isdigit() else None

    def log_text(self, offset: int = 0) -> str:
        """The server's log from byte ``offset`` on (its workers write there too)."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_size(self) -> int:
        """The server log's size in bytes (where a fault starts reading it)."""
        if self.log_path is None:
            return 0
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def again(self, what: str, most: int = 3) -> None:
        """Put ``what`` back at the end of the coverage plan (at most ``most`` tries in all)."""
        self.tries[what] += 1
        if self.tries[what] < most:
            self.coverage.append((what, None))

    def workers(self) -> list[int]:
        """The server's worker processes now (each one seen is remembered, to end it at the end)."""
        pids = worker_pids(self.server.pid)
        self.pids_seen.update(pids)
        return pids


# ---- one browser session --------------------------------------------------------------------------


class Session:
    """One browser context: its page, what it believes the page holds (tab, sidebar values,
    pins, trained runs), and its seeded choices."""

    def __init__(self, soak: Soak, index: int, context: Any, page: Any):
        self.soak, self.index, self.context, self.page = soak, index, context, page
        self.rng = random.Random(f"{soak.opts.seed}-session-{index}")
        self.seen: set[str] = set()
        self.tab = soak.tabs[0]
        self.values = {"hidden_size": 32, "seq_len": 50, "seed": 0, "recurrent_gain": 1.0}
        self.cell = "simple"
        self.data = "synthetic"
        self.pins = 0
        self.weights_run: str | None = None
        self.trained: list[dict] = []
        self.pinned_runs: set[str] = set()  # run files its "Pin these runs" holds in use
        self.page_sessions = 0  # Streamlit sessions this page load has been in
        self.last_train: list[str] = []  # the run files its last training call wrote
        self.failures_in_a_row = 0
        self.reloads = 0
        self.last_new_errors: list[str] = []
        self.visited: set[str] = set()  # tabs this session has drawn (cheap to draw again)
        self.after_upload = False  # its last interaction was a fault's upload

    # -- waiting --

    async def runs(self, page: Any = None) -> int:
        """The script runs the page has seen start (:data:`RUN_COUNTER`)."""
        return await (page or self.page).evaluate(RUNS)

    async def settle(self, before: int, until: float, page: Any = None, fresh: bool = False) -> bool:
        """Wait for the run an action started (if any) to end; False when it is still
        running at ``until`` (monotonic seconds): a hang. A ``fresh`` page always runs the
        script: its first run is waited for as long, not :data:`RUN_START_MS`."""
        page = page or self.page
        start_ms = max(1000, (until - time.monotonic()) * 1000) if fresh else RUN_START_MS
        try:
            await page.wait_for_function(
                f"n => ({RUNS})() > n", arg=before, timeout=start_ms, polling=POLL_MS
            )
        except Exception:
            if fresh:
                return False
            # else the action changed nothing: no run
        left_ms = max(1000, (until - time.monotonic()) * 1000)
        try:  # the run's end read from the server's messages (a short run never shows "running")
            settled_or_none = f"n => ({SETTLED})(n) || ({RUNS})() <= n"
            await page.wait_for_function(settled_or_none, arg=before, timeout=left_ms, polling=POLL_MS)
            return True
        except Exception:
            return False

    async def step(self, kind: str, label: str, act) -> bool:
        """One interaction: ``act()``, then its script run waited for (bounded by the step
        limit); its latency, the error boxes it brought and a hang are recorded."""
        soak = self.soak
        start = time.monotonic()
        until = start + soak.step_limit_s
        before = await self._runs_or_zero()
        acted = True
        try:
            await asyncio.wait_for(act(), timeout=soak.step_limit_s)
        except Exception as err:
            acted = False
            await self.driver_error(f"{kind}: {label}", err)
        if not await self.settle(before, until):
            hang = {"t": soak.now(), "session": self.index, "step": f"{kind}: {label}"}
            hang["page"] = await self._where()
            soak.hangs.append(hang)
            await self.reload("a hang")
            return False
        elapsed = time.monotonic() - start
        await self.check_session(f"{kind}: {label}")
        new = await self.collect_errors(f"{kind}: {label}")
        soak.steps.append(
            {"t": soak.now(), "session": self.index, "kind": kind, "label": label, "s": elapsed, "ok": acted}
        )
        self.failures_in_a_row = 0 if acted else self.failures_in_a_row + 1
        if any("Reload the page" in t for t in new) or self.failures_in_a_row >= 3:
            await self.reload("the page asked for a reload" if acted else "three failed actions in a row")
        self.last_new_errors = new
        return acted

    async def check_session(self, step: str) -> None:
        """A page whose connection came back in a new Streamlit session (not a reload of
        the driver's) has lost what the old session held: recorded as lost, with what it held,
        and the driver's expectations reset."""
        try:
            seen = await self.page.evaluate(SESSIONS)
        except Exception:
            return
        if seen > max(1, self.page_sessions):
            where = await self._where()
            held = f"{self.pins} pins, {len(self.pinned_runs)} pinned trained runs"
            self.soak.lost.append(
                f"session {self.index}: its page came back in a new server session after {step!r} "
                f"at {self.soak.now():.0f} s ({held}; {where})"
            )
            self.pins, self.pinned_runs, self.weights_run = 0, set(), None
        self.page_sessions = max(self.page_sessions, seen)

    async def driver_error(self, step: str, err: BaseException) -> None:
        """An action the driver could not make (a widget not there in time): recorded, with a
        screenshot of the page for the first few."""
        soak = self.soak
        record = {"t": soak.now(), "session": self.index, "step": step, "error": _short(err)}
        soak.driver_errors.append(record)
        if soak.shots is not None and len(soak.driver_errors) <= 20:
            path = soak.shots / f"{len(soak.driver_errors):02d}-session{self.index}.png"
            try:
                await self.page.screenshot(path=str(path), full_page=True, timeout=10_000)
                record["screenshot"] = str(path)
            except Exception:
                pass

    async def _where(self) -> str:
        """What the page showed at a hang: the runs it saw begin and end and whether the
        server last said it runs (its messages, :data:`RUN_COUNTER`), and the app root's state."""
        try:
            return await self.page.evaluate(WHERE)
        except Exception as err:
            return f"unreadable ({_short(err)})"

    async def _runs_or_zero(self) -> int:
        try:
            return await self.runs()
        except Exception:
            return 0

    async def collect_errors(self, step: str) -> list[str]:
        """The error boxes and exceptions on the page that were not there after the last step."""
        try:
            # text, not innerText: a box inside a folded expander has no rendered text
            exceptions = await self.page.locator(EXCEPTION).all_text_contents()
            boxes = await self.page.locator(ERROR_BOX).all_text_contents()
        except Exception:
            return []
        now = {f"exception: {t.strip()}" for t in exceptions} | {t.strip() for t in boxes}
        new = sorted(now - self.seen)
        self.seen = now
        for text in new:
            if text.startswith("exception: "):
                kind, failure = UNCAUGHT, True
            else:
                kind, failure = classify(text)
            self.soak.errors.append(
                {
                    "t": self.soak.now(),
                    "session": self.index,
                    "step": step,
                    "kind": kind,
                    "failure": failure,
                    "text": text,
                }
            )
        return new

    async def reload(self, why: str) -> None:
        """Open the page again (a new Streamlit session: its pins are gone, so expected none)."""
        soak = self.soak
        self.reloads += 1
        soak.observations.append(f"session {self.index} reloaded its page at {soak.now():.0f} s: {why}")
        try:
            await self.page.goto(self.page.url or soak.url, timeout=ACTION_MS)
            await self.settle(0, time.monotonic() + soak.step_limit_s, fresh=True)
        except Exception as err:
            soak.driver_errors.append(
                {"t": soak.now(), "session": self.index, "step": "reload", "error": _short(err)}
            )
        self.pins, self.seen, self.weights_run, self.failures_in_a_row = 0, set(), None, 0
        self.pinned_runs = set()
        try:
            self.page_sessions = await self.page.evaluate(SESSIONS)
        except Exception:
            self.page_sessions = 0
        self.tab = await self._open_tab()

    async def _open_tab(self) -> str:
        for title in self.soak.tabs:
            tab = self.page.get_by_role("tab", name=title, exact=True)
            try:
                if await tab.get_attribute("aria-selected", timeout=2000) == "true":
                    return title
            except Exception:
                continue
        return self.soak.tabs[0]

    async def idle(self) -> None:
        """Wait until the page's script run has ended (every run begun has ended)."""
        await self.page.wait_for_function(
            SETTLED, arg=-1, timeout=self.soak.step_limit_s * 1000, polling=POLL_MS
        )

    # -- widgets --

    async def choose(self, key: str, name: str | re.Pattern, exact: bool = True) -> None:
        """Pick ``name`` in the select box keyed ``key`` (a rerun that lands between the click
        and the list closes the list: open it again)."""
        option = self.page.get_by_role("option", name=name, exact=exact if isinstance(name, str) else None)
        for _ in range(3):
            await self.page.locator(f".st-key-{key}").get_by_role("combobox").click(timeout=ACTION_MS)
            try:
                await option.first.wait_for(timeout=8000)
                break
            except Exception:
                await self.idle()
        await option.first.click(timeout=ACTION_MS)

    async def number(self, key: str, value: Any) -> None:
        """Type ``value`` into the number input keyed ``key`` and press Enter."""
        box = self.page.locator(f".st-key-{key} input")
        await box.fill(str(value), timeout=ACTION_MS)
        await box.press("Enter", timeout=ACTION_MS)

    async def click(self, selector: str) -> None:
        """Click the first element ``selector`` finds."""
        await self.page.locator(selector).first.click(timeout=ACTION_MS)

    # -- interactions --

    async def goto_tab(self, title: str) -> None:
        """Open the tab ``title`` (nothing when it is open already)."""
        if title == self.tab:
            return
        await self.step(
            "tab",
            title,
            lambda: self.page.get_by_role("tab", name=title, exact=True).click(timeout=ACTION_MS),
        )
        self.tab = await self._open_tab()
        if self.tab != title:
            return
        self.visited.add(title)
        self.soak.covered[f"tab {title}"] += 1

    async def set_cell(self, name: str, label: str) -> None:
        """Choose the cell ``name`` (its option reads ``label``) in the sidebar."""
        if name == self.cell:
            return
        if await self.step("cell", name, lambda: self.choose("cfg_cell", label)):
            self.cell = name
            self.soak.covered[f"cell {name}"] += 1

    async def set_value(self, name: str, value: Any) -> None:
        """Set the sidebar's number input of the config field ``name``."""
        if self.values.get(name) == value:
            return
        if await self.step("value", f"{name}={value}", lambda: self.number(f"cfg_{name}", value)):
            self.values[name] = value

    async def set_data(self, choice: str) -> None:
        """``synthetic``, ``digits``, ``text`` or ``upload`` in the sidebar's Data choice."""
        if choice == self.data:
            return
        pattern = re.compile({"upload": r"^upload a file"}.get(choice, rf"^{choice}\b"))
        if await self.step("data", choice, lambda: self.choose("data_choice", pattern)):
            self.data = choice
            self.soak.covered[f"data {choice}"] += 1

    async def upload(self, item: Upload) -> list[str] | None:
        """Upload a file through its uploader; the error boxes it brought (None: it failed)."""
        if item.uploader == "data":
            await self.set_data("upload")
            if self.data != "upload":
                return None  # the choice did not take (a driver time-out): no uploader to use
            selector = '.st-key-data_upload input[type="file"]'
        else:
            await self._open_saved_run_expander()
            selector = '.st-key-weights_upload input[type="file"]'
        self.last_new_errors = []

        async def act() -> None:
            before = [t.strip() for t in await self.page.locator(ERROR_BOX).all_text_contents()]
            await self.page.locator(selector).set_input_files(str(item.path))
            await self.page.wait_for_function(
                UPLOAD_SHOWN,
                arg=[item.path.name, before],
                timeout=self.soak.step_limit_s * 1000,
                polling=POLL_MS,
            )

        ok = await self.step("upload", item.path.name, act)
        self.soak.covered[f"upload {item.uploader} {item.expect}"] += 1
        if not ok:
            return None
        # The same file again in an uploader that still holds it changes nothing on the page:
        # its refusal is already there (not new), and counts as its answer.
        shown = [t.strip() for t in await self.page.locator(ERROR_BOX).all_text_contents()]
        return list(dict.fromkeys(self.last_new_errors + [t for t in shown if item.path.name in t]))

    async def _open_saved_run_expander(self) -> None:
        expander = self.page.locator('[data-testid="stSidebar"] details').filter(has_text="Open a saved run")
        try:
            if await expander.first.get_attribute("open", timeout=5000) is None:
                await expander.first.locator("summary").click(timeout=ACTION_MS)
        except Exception:
            pass  # the uploader's input is set even when it is folded

    async def pin(self) -> None:
        """Pin the current run on the Compare tab; past :data:`MAX_PINS`, remove the first
        instead (every pin is recomputed on each rerun when its result left the cache)."""
        await self.goto_tab("Compare")
        if self.tab != "Compare":
            return
        if self.pins >= MAX_PINS:
            ok = await self.step("pin", "Remove", lambda: self.click(".st-key-unpin_0 button"))
        else:
            ok = await self.step("pin", "Pin current run", lambda: self.click(".st-key-pin button"))
        if ok:
            self.pins = await self.count_pins()
            self.soak.covered["pin"] += 1

    async def count_pins(self) -> int:
        """The pinned runs the Compare tab lists, once the page is idle and drawn."""
        try:
            await self.idle()
            await self.page.evaluate(FRAMES)
        except Exception:
            pass
        return await self.page.locator("[class*='st-key-unpin_']").count()

    async def train(self) -> None:
        """A short training run from the Training tab (T ≤ 100, H ≤ 32, a few dozen steps);
        its run file is remembered, and sometimes pinned."""
        # None: not known (a trained run opened since set the sizes): set them, as if too large
        if (self.values["seq_len"] or 10**9) > 100:
            await self.set_value("seq_len", self.rng.choice([20, 30, 50]))
        if (self.values["hidden_size"] or 10**9) > 32:
            await self.set_value("hidden_size", self.rng.choice([8, 16, 32]))
        await self.goto_tab("Training")
        steps = self.rng.choice([20, 30, 40, 50])
        await self.step("value", f"train_steps={steps}", lambda: self.number("train_steps", steps))
        await self.step("value", "train_log_every=10", lambda: self.number("train_log_every", 10))
        await self.step("value", "train_batch=16", lambda: self.number("train_batch", 16))
        folder = self.soak.folder("trained")
        before = set(folder.glob("*.rnnviz")) if folder.is_dir() else set()
        if not await self.step("train", f"{steps} steps", self._train_and_wait):
            return
        self.soak.covered["train"] += 1
        self.last_train = [str(p) for p in sorted(set(folder.glob("*.rnnviz")) - before)]
        for path in self.last_train:
            self._remember_run(Path(path))
        if not self.soak.trained:
            self.soak.again("train")  # stopped (a fault, a time-out): try once more later
        if self.rng.random() < 0.5 and await self.page.locator(".st-key-train_pin button").count():
            if await self.step("pin", "Pin these runs", lambda: self.click(".st-key-train_pin button")):
                # its files are in use for the rest of this session (a training call that
                # wrote nothing new pins older files, which the driver cannot name: not counted)
                self.pinned_runs.update(p for p in self.last_train if Path(p).exists())

    async def _train_and_wait(self) -> None:
        before = [t.strip() for t in await self.page.locator(ERROR_BOX).all_text_contents()]
        await self.click(".st-key-train_start button")
        # Training redraws itself (st.rerun) chunk after chunk: done when its results, a
        # message or a new error box show, whatever the run state says in between.
        await self.page.wait_for_function(
            TRAINING_DONE, arg=before, timeout=self.soak.step_limit_s * 1000, polling=POLL_MS
        )

    def _remember_run(self, path: Path) -> None:
        from rnnviz.serve.trained_runs import header, run_label

        found = header(str(path))
        if found is None or not found.get("kept_steps"):
            return
        run = {
            "path": str(path),
            "label": run_label(found),
            "session": self.index,
            "created": self.soak.now(),
        }
        run["last_used"] = run["created"]
        self.trained.append(run)
        self.soak.trained.append(run)

    async def open_run(self) -> None:
        """Open the newest trained run still on disk in every tab, then the initial weights again."""
        runs = [r for r in reversed(self.soak.trained) if Path(r["path"]).exists()]
        if not runs:
            self.soak.again("open_run")  # nothing trained yet: later
            return
        run = runs[0]
        if await self.step(
            "weights", "open a trained run", lambda: self.choose("weights_choice", run["label"])
        ):
            run["last_used"] = self.soak.now()
            self.weights_run = run["path"]
            self.soak.covered["open trained run"] += 1
            await self.step(
                "weights", "initial", lambda: self.choose("weights_choice", "initial (from the seed)")
            )
            self.weights_run = None
            # the run set the sidebar to its cell and sizes: no longer what this session set
            self.cell, self.values["hidden_size"] = "?", None

    async def url_check(self) -> None:
        """A URL with query parameters, in a new page of this context (a new session: this
        one's pins stay): the sidebar and the open tab must follow it."""
        # mostly this session's own shape (compiled already: a URL check should not be a
        # compile), another cell now and then
        cell = (
            self.cell if self.cell != "?" and self.rng.random() < 0.7 else self.rng.choice(self.soak.cells)[0]
        )
        want = {
            "cell": cell,
            "hidden_size": str(self.values["hidden_size"] or self.rng.choice(self.soak.opts.hidden)),
            "seq_len": str(self.values["seq_len"] or 50),
            "seed": str(self.rng.randrange(1, 9)),
            "recurrent_gain": self.rng.choice(["0.9", "1.1", "1.25"]),
        }
        tab = self.rng.choice(["Gradients", "Carry", "Compare", "Learn"])
        url = f"{self.soak.url}/?{urlencode({**want, 'tab': tab})}"
        start = time.monotonic()
        page = await self.context.new_page()
        check = {"t": self.soak.now(), "session": self.index, "url": url}
        try:
            await page.goto(url, timeout=ACTION_MS)
            if not await self.settle(0, start + self.soak.step_limit_s, page, fresh=True):
                self.soak.hangs.append({"t": self.soak.now(), "session": self.index, "step": f"url: {url}"})
                return
            check["mismatches"] = await url_mismatches(page, want, tab)
            if check["mismatches"]:
                check["error_boxes"] = await page.locator(ERROR_BOX).all_text_contents()
            self.soak.steps.append(
                {
                    "t": self.soak.now(),
                    "session": self.index,
                    "kind": "url",
                    "label": url,
                    "s": time.monotonic() - start,
                    "ok": True,
                }
            )
            self.soak.covered["url"] += 1
        except Exception as err:
            check["error"] = _short(err)
            self.soak.driver_errors.append(
                {"t": self.soak.now(), "session": self.index, "step": f"url: {url}", "error": _short(err)}
            )
        finally:
            self.soak.url_checks.append(check)
            await page.close()
            await self.page.bring_to_front()  # a page in the background may not draw its lists

    # -- choosing --

    async def next_action(self) -> None:
        """A fault's upload first (but never two in a row while the run is not ending: a
        session goes on between them, as a user would); then, while some tab, cell, data
        source, upload or feature has not been tried by any session, often that; otherwise
        a seeded random one."""
        soak = self.soak
        job = None
        if not self.after_upload or self.ending():
            try:
                job = soak.actions.get_nowait()
            except asyncio.QueueEmpty:
                pass
        self.after_upload = job is not None
        if job is not None:
            errors = await self.upload(job.upload)
            if not job.done.done():
                job.done.set_result(errors)
            if job.upload.expect == "loads" and job.upload.uploader == "data":
                # as a user would after a long file: back to synthetic, or every rerun loads it again
                await self.set_data("synthetic")
            return
        if not await self.page.get_by_role("tab").count():
            await self.retry()
            return
        if self.weights_run is not None:
            await self.step(
                "weights", "initial", lambda: self.choose("weights_choice", "initial (from the seed)")
            )
            self.weights_run = None
            return
        if self.ending():
            what, arg = self.cheap_action()
        elif soak.coverage and self.rng.random() < 0.7:
            what, arg = soak.coverage.popleft()
        else:
            what, arg = self.random_action()
        await self.do(what, arg)

    def ending(self) -> bool:
        """In the run's last tenth (at least its last 20 s) only cheap interactions start,
        so the last one ends soon after the deadline."""
        left = self.soak.deadline - time.monotonic()
        return left < max(20.0, 0.1 * self.soak.opts.minutes * 60)

    def cheap_action(self) -> tuple[str, Any]:
        """A value that compiles nothing (seed, gain) or a tab this session has drawn already."""
        if self.visited and self.rng.random() < 0.5:
            return "tab", self.rng.choice(sorted(self.visited))
        if self.rng.random() < 0.5:
            return "value", ("seed", self.rng.randrange(0, 12))
        return "value", ("recurrent_gain", self.rng.choice([0.8, 0.9, 1.0, 1.1, 1.2]))

    async def retry(self) -> None:
        """The page stopped before its tabs (a computation stopped, a worker died): try
        again, as its message says, by changing the seed (or reload without a sidebar)."""
        if not await self.page.locator(".st-key-cfg_seed input").count():
            await self.reload("the page showed neither tabs nor a sidebar")
            return
        seed = (self.values["seed"] or 0) + 1
        if await self.step("retry", f"seed={seed}", lambda: self.number("cfg_seed", seed)):
            self.values["seed"] = seed

    def random_action(self) -> tuple[str, Any]:
        """A seeded ``(interaction, its argument)``, weighted toward tabs and values."""
        rng = self.rng
        kinds = ["tab", "value", "cell", "data", "upload", "pin", "url", "train", "open_run"]
        weights = [30, 25, 10, 8, 4, 6, 4, 3, 2]
        what = rng.choices(kinds, weights)[0]
        if what == "tab":
            return what, rng.choice([t for t in self.soak.tabs if t != self.tab])
        if what == "cell":
            return what, rng.choice([c for c in self.soak.cells if c[0] != self.cell])
        if what == "data":
            return what, rng.choice([d for d in ("synthetic", "digits", "text") if d != self.data])
        if what == "value":
            name = rng.choices(["seed", "recurrent_gain", "hidden_size", "seq_len"], [4, 3, 2, 2])[0]
            values = {
                "seed": list(range(0, 12)),
                "recurrent_gain": [0.8, 0.9, 1.0, 1.1, 1.2],
                "hidden_size": self.soak.opts.hidden,
                "seq_len": self.soak.opts.lengths,
            }[name]
            return what, (name, rng.choice(values))
        return what, None

    async def do(self, what: str, arg: Any) -> None:
        """Make the interaction ``what`` (see :meth:`random_action`)."""
        if what == "tab":
            await self.goto_tab(arg)
        elif what == "cell":
            await self.set_cell(*arg)
        elif what == "data":
            await self.set_data(arg)
        elif what == "value":
            await self.set_value(*arg)
        elif what == "upload":
            await self.upload(Upload(good_file(self.soak.tmp / "good", self.rng), "data", "loads"))
        elif what == "pin":
            await self.pin()
        elif what == "url":
            await self.url_check()
        elif what == "train":
            await self.train()
        elif what == "open_run":
            await self.open_run()

    async def run(self) -> None:
        """Interact until the soak's deadline."""
        start = time.monotonic()
        await self.page.goto(self.soak.url + "/", timeout=60_000)
        if not await self.settle(0, start + self.soak.step_limit_s, fresh=True):
            self.soak.hangs.append({"t": self.soak.now(), "session": self.index, "step": "first page"})
        await self.collect_errors("first page")
        self.soak.steps.append(
            {"t": self.soak.now(), "session": self.index, "kind": "first page", "label": "/",
             "s": time.monotonic() - start, "ok": True}
        )  # fmt: skip
        while time.monotonic() < self.soak.deadline:
            await self.next_action()
        # A fault's upload queued while both sessions were in long steps (a stopped worker's
        # time limit, first compiles on a loaded machine) is still made: a hostile file that
        # never reached the page tested nothing (CI's run of stop 36 ended with three queued).
        # Only the queue is drained; the memory and latency figures end at the deadline.
        while not self.soak.actions.empty() and time.monotonic() < self.soak.deadline + self.soak.drain_s:
            await self.next_action()

    # -- at the end --

    async def check_kept(self) -> None:
        """What this session kept must still be there: its pins on the Compare tab, its URL
        (a new session opened on it shows the same state), its newest trained run listed."""
        soak = self.soak
        if self.weights_run is not None:
            await self.step(
                "weights", "initial", lambda: self.choose("weights_choice", "initial (from the seed)")
            )
        await self.goto_tab("Compare")
        shown = await self.count_pins()
        if shown != self.pins:
            boxes = await self.page.locator(ERROR_BOX).all_text_contents()
            shot = soak.shots / f"pins-session{self.index}.png" if soak.shots else None
            if shot is not None:
                await self.page.screenshot(path=str(shot), full_page=True, timeout=10_000)
            soak.lost.append(
                f"session {self.index}: {self.pins} pinned runs, the Compare tab shows {shown} "
                f"(open tab {await self._open_tab()}; {await self._where()}; error boxes {boxes}; {shot})"
            )
        await self.check_url()
        mine = [r for r in self.trained if Path(r["path"]).exists()]
        if mine:
            await self.check_listed(mine[-1])

    async def check_url(self) -> None:
        """This session's URL, opened in a new page, must give the same URL and sidebar."""
        url = self.page.url
        want = dict(parse_qsl(urlsplit(url).query))
        page = await self.context.new_page()
        try:
            await page.goto(url, timeout=ACTION_MS)
            if not await self.settle(0, time.monotonic() + self.soak.step_limit_s, page, fresh=True):
                self.soak.hangs.append(
                    {"t": self.soak.now(), "session": self.index, "step": "reopening its URL"}
                )
                return
            got = dict(parse_qsl(urlsplit(page.url).query))
            if got != want:
                self.soak.lost.append(f"session {self.index}: its URL {want} reopened as {got}")
            tab = want.get("tab", self.soak.tabs[0])
            wanted = {k: v for k, v in want.items() if k in ("cell", "hidden_size", "seed", "seq_len")}
            problems = await url_mismatches(page, wanted, tab)
            if problems:
                boxes = await page.locator(ERROR_BOX).all_text_contents()
                shot = self.soak.shots / f"url-session{self.index}.png" if self.soak.shots else None
                if shot is not None:
                    await page.screenshot(path=str(shot), full_page=True, timeout=10_000)
                for problem in problems:
                    self.soak.lost.append(
                        f"session {self.index}: reopening {url}: {problem} (error boxes: {boxes}; {shot})"
                    )
        except Exception as err:
            self.soak.driver_errors.append(
                {"t": self.soak.now(), "session": self.index, "step": "reopen URL", "error": _short(err)}
            )
        finally:
            await page.close()
            await self.page.bring_to_front()  # a page in the background may not draw its lists

    async def check_listed(self, run: dict) -> None:
        """The run must be one of the Weights choices (the list opened, looked at, closed)."""
        option = self.page.get_by_role("option", name=run["label"], exact=True)
        try:
            for _ in range(3):  # a rerun that lands between the click and the list closes the list
                await (
                    self.page.locator(".st-key-weights_choice")
                    .get_by_role("combobox")
                    .click(timeout=ACTION_MS)
                )
                try:
                    await option.wait_for(timeout=8000)
                    await self.page.keyboard.press("Escape")
                    return
                except Exception:
                    await self.page.keyboard.press("Escape")
                    await self.idle()
        except Exception as err:
            await self.driver_error("list trained runs", err)
            return
        self.soak.lost.append(f"session {self.index}: its trained run {run['label']!r} is not in Weights")


async def url_mismatches(page: Any, want: dict[str, str], tab: str) -> list[str]:
    """What of a URL's state the page does not show: the sidebar's cell, sizes and seed,
    the gain, and the open tab. Each is waited for a few seconds: right after a fresh page's
    first run ends, its number inputs may still show their defaults for a moment."""
    problems = []
    for name, value in want.items():
        if name == "cell":
            box = page.locator('.st-key-cfg_cell [role="combobox"]')
            ok = "(el, v) => el.value.startsWith(v + ' · ')"
        else:
            box = page.locator(f".st-key-cfg_{name} input")
            ok = "(el, v) => Math.abs(parseFloat(el.value) - parseFloat(v)) <= 1e-6 * Math.abs(parseFloat(v))"
        try:
            await box.first.wait_for(timeout=ACTION_MS)
            handle = await box.first.element_handle()
            await page.wait_for_function(
                f"([el, v]) => ({ok})(el, v)",
                arg=[handle, value],
                timeout=URL_SETTLE_MS,
                polling=POLL_MS,
            )
        except Exception:
            shown = await box.first.input_value(timeout=ACTION_MS) if await box.count() else "(not drawn)"
            problems.append(f"{name}: asked {value}, the sidebar shows {shown!r}")
    selected = await page.get_by_role("tab", name=tab, exact=True).get_attribute("aria-selected")
    if selected != "true":
        problems.append(f"tab: asked {tab}, it is not the open tab")
    return problems


def trained_run_losses(soak: Soak) -> tuple[list[dict], list[str]]:
    """Each trained run the sessions made, with whether it is still on disk and when it left
    (:func:`watch_trained`), and the losses: a run that left while its folder was within
    its caps, or while a live session used it, or that is gone with no leaving seen."""
    removed = {r["name"]: r for r in soak.removals}
    runs, lost = [], []
    for run in soak.trained:
        name = Path(run["path"]).name
        left = removed.get(name)
        record = {**run, "exists": Path(run["path"]).exists(), "removed": left}
        runs.append(record)
        what = f"trained run {run['label']!r} ({name})"
        if record["exists"]:
            continue
        if left is None:
            lost.append(f"{what} is gone, and its leaving was not seen")
        elif not left["over_cap"]:
            lost.append(f"{what} left at {left['t']:.0f} s while the folder was within its caps")
        elif left["in_use_by"]:
            users = left["in_use_by"]
            lost.append(f"{what} was evicted at {left['t']:.0f} s while session(s) {users} used it")
    return runs, lost


def _short(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}"
    return text.splitlines()[0][:300] if text else type(err).__name__


# ---- faults ------------------------------------------------------------------------------------------


async def busy_worker(soak: Soak, wait_s: float = 30.0) -> tuple[int | None, bool]:
    """A running (not stopped) worker whose CPU time is rising (≥ 20 % of a core over half a
    second): one in the middle of a job. Waits up to ``wait_s``; then any running worker."""
    tick = os.sysconf("SC_CLK_TCK")
    end = time.monotonic() + wait_s
    pids: list[int] = []
    while time.monotonic() < end:
        pids = [p for p in soak.workers() if p not in soak.stopped and proc_state(p) not in ("T", "Z", None)]
        before = {p: cpu_ticks(p) for p in pids}
        await asyncio.sleep(0.5)
        rising = [
            (after - before[p], p)
            for p in pids
            if before[p] is not None
            and (after := cpu_ticks(p)) is not None
            and after - before[p] >= 0.1 * tick
        ]
        if rising:
            return max(rising)[1], True
    return (pids[-1] if pids else None), False


async def inject(soak: Soak, kind: str, arg: str | None) -> None:
    """One fault, recorded with its outcome (watched meanwhile, as a task of its own)."""
    record: dict[str, Any] = {"kind": kind, "at_s": round(soak.now(), 1), "target": arg, "outcome": None}
    soak.faults.append(record)
    record["log_offset"] = soak.log_size()
    handler = {
        "kill9": fault_kill9,
        "sigstop": fault_sigstop,
        "corrupt_cache": fault_corrupt_cache,
        "fill_uploads": fault_fill_uploads,
        "hostile_upload": fault_hostile_upload,
    }[kind]
    try:
        await handler(soak, record)
    except Exception as err:
        record["outcome"] = f"the driver failed injecting it: {_short(err)}"
        record["resolved"] = False


def _worker_lines(text: str) -> list[str]:
    return [
        line.strip() for line in text.splitlines() if "replacing worker" in line or "retiring worker" in line
    ]


async def fault_kill9(soak: Soak, record: dict) -> None:
    """SIGKILL a worker in the middle of a job; resolved once the pool replaced it (its log
    line) or a new worker appeared."""
    pid, busy = await busy_worker(soak)
    if pid is None:
        record.update(outcome="no worker process to kill", resolved=False)
        return
    before = set(soak.workers())
    record.update(target=pid, busy=busy, at_s=round(soak.now(), 1), log_offset=soak.log_size())
    os.kill(pid, signal.SIGKILL)
    end = min(time.monotonic() + soak.opts.time_limit + 30, soak.deadline + 5)
    while time.monotonic() < end:
        lines = [x for x in _worker_lines(soak.log_text(record["log_offset"])) if "replacing" in x]
        new = set(soak.workers()) - before
        if lines or new:
            record.update(
                outcome=f"replaced: {lines[0] if lines else f'new worker {sorted(new)}'}", resolved=True
            )
            return
        await asyncio.sleep(1)
    record.update(outcome="not replaced yet: no call reached its worker since", resolved=False)


async def fault_sigstop(soak: Soak, record: dict) -> None:
    """SIGSTOP a worker in the middle of a job; resolved once the pool killed it at its time
    limit (resumed with SIGCONT if no call waited on it)."""
    pid, busy = await busy_worker(soak)
    if pid is None:
        record.update(outcome="no worker process to stop", resolved=False)
        return
    record.update(target=pid, busy=busy, at_s=round(soak.now(), 1), log_offset=soak.log_size())
    os.kill(pid, signal.SIGSTOP)
    soak.stopped.add(pid)
    began = time.monotonic()
    end = min(began + soak.opts.time_limit + 45, max(soak.deadline + 5, began + soak.opts.time_limit + 10))
    while time.monotonic() < end:
        if proc_state(pid) in (None, "Z"):
            soak.stopped.discard(pid)
            lines = _worker_lines(soak.log_text(record["log_offset"]))
            record.update(
                outcome=f"killed by the pool after {time.monotonic() - began:.0f} s"
                + (f": {lines[0]}" if lines else ""),
                resolved=True,
            )
            return
        await asyncio.sleep(1)
    os.kill(pid, signal.SIGCONT)
    soak.stopped.discard(pid)
    record.update(
        outcome=f"no call waited on it: resumed after {time.monotonic() - began:.0f} s", resolved=False
    )


async def fault_corrupt_cache(soak: Soak, record: dict) -> None:
    """Overwrite 64 bytes in the middle of a compilation-cache entry (a replaced worker reads
    it back from disk; JAX should warn and compile again)."""
    folder = soak.folder("jax_cache")
    entries = [p for p in folder.rglob("*") if p.is_file() and not p.name.endswith("-atime")]
    entries = [p for p in entries if p.stat().st_size >= 256] if entries else []
    if not entries:
        record.update(outcome=f"no entry in {folder} to corrupt", resolved=False)
        return
    preferred = [p for p in entries if p.name.endswith("-cache")] or entries
    path = random.Random(f"corrupt-{soak.opts.seed}-{soak.now():.0f}").choice(preferred)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size // 2)
        chunk = f.read(64)
        f.seek(size // 2)
        f.write(bytes(b ^ 0xFF for b in chunk))
    record.update(target=path.name, outcome=f"{len(chunk)} bytes flipped at byte {size // 2} of {size}")
    record["resolved"] = True


async def fault_fill_uploads(soak: Soak, record: dict) -> None:
    """Fill the upload folder to its caps with files of our own, then upload a good file
    through the page: the server must make room (evicting what no session uses) or say
    that the folder is full, and the folder must stay within its caps."""
    folder = soak.folder("uploads")
    cap_mb, cap_files = soak.cap(FOLDERS["uploads"][1]), soak.cap(FOLDERS["uploads"][2])
    used, count = folder_usage(folder)
    room_bytes = (cap_mb or 0) * 2**20 - used
    room_files = (cap_files or 0) - count
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    pieces = max(1, min(room_files, 4))
    for i in range(pieces if room_bytes > 0 else 0):
        entry = folder / f"soak-filler-{int(soak.now())}-{i}"
        entry.mkdir(exist_ok=True)
        (entry / "filler.bin").write_bytes(os.urandom(room_bytes // pieces))
        written += room_bytes // pieces
    after, entries = folder_usage(folder)
    item = Upload(good_file(soak.tmp / "good", random.Random(f"fill-{soak.now()}")), "data", "loads")
    done = asyncio.get_running_loop().create_future()
    await soak.actions.put(PageAction(item, done, "fill_uploads"))
    record["target"] = (
        f"{written / 2**20:.1f} MB in {pieces} entries → {after / 2**20:.1f} MB, {entries} entries"
    )
    try:
        errors = await asyncio.wait_for(done, timeout=soak.step_limit_s * 2)
    except TimeoutError:
        record.update(outcome="no session made the upload in time", resolved=False)
        return
    if errors is ENDED:
        record.update(outcome="the soak ended before a session made the upload", resolved=False)
        return
    final, final_entries = folder_usage(folder)
    fillers = sum(1 for p in folder.glob("soak-filler-*")) if folder.is_dir() else 0
    within = (cap_mb is None or final <= cap_mb * 2**20) and (cap_files is None or final_entries <= cap_files)
    message = "; ".join(errors or []) or "no error box"
    record.update(
        outcome=f"{item.path.name} uploaded: {message}; the folder holds {final / 2**20:.1f} MB in "
        f"{final_entries} entries ({fillers} fillers left), {'within' if within else 'OVER'} its caps",
        resolved=errors is not None and within,
    )


#: Tries of one hostile upload whose step failed in the driver (a widget not there in time on a
#: loaded machine), or whose file the server did not judge because the soak's own fault had
#: stopped the worker reading it: the fault is the file reaching a reader, so either is retried.
UPLOAD_TRIES = 3
#: Error-box kinds that say the computation was stopped, not what the file holds.
STOPPED = ("worker died", "computation time-out")


def unjudged(item: Upload, errors: list[str]) -> bool:
    """Whether the page's only words on ``item`` were that its reader was stopped (a worker
    killed or timed out while it read the file): the file itself was not judged."""
    named = [e for e in errors if item.path.name in e]
    return bool(named) and all(classify(e)[0] in STOPPED for e in named)


async def fault_hostile_upload(soak: Soak, record: dict) -> None:
    """Have the next free session upload a hostile file; resolved when a refused one is
    refused by name, or the loadable one loads. A step that failed in the driver (the page
    never showed the uploader, or the file never appeared on it), or a file the page did not
    judge because its worker was stopped (:func:`unjudged`), is tried again, up to
    :data:`UPLOAD_TRIES` times, while the run has time left; the tries are recorded."""
    item = soak.files[record["target"]]
    for attempt in range(1, UPLOAD_TRIES + 1):
        done = asyncio.get_running_loop().create_future()
        await soak.actions.put(PageAction(item, done, "hostile_upload"))
        try:
            errors = await asyncio.wait_for(done, timeout=soak.step_limit_s * 2)
        except TimeoutError:
            record.update(outcome="no session made the upload in time", resolved=False)
            return
        record["tries"] = attempt
        record["made_s"] = round(soak.now(), 1)  # past minutes × 60: made while draining the queue
        if errors is ENDED or soak.deadline - time.monotonic() < 20:
            break
        if errors is not None and not unjudged(item, errors):
            break
    if errors is None or errors is ENDED:
        outcome = "the soak ended before a session took it" if errors is ENDED else "the upload step failed"
        record.update(outcome=f"{outcome} (tries: {record['tries']})", resolved=False)
        return
    named = [e for e in errors if item.path.name in e]
    if item.expect == "refused":
        kinds = sorted({classify(e)[0] for e in named})
        record.update(
            outcome=(
                f"refused ({', '.join(kinds)}): {named[0]}" if named else f"not refused by name: {errors}"
            ),
            resolved=bool(named),
        )
    else:
        record.update(
            outcome=f"not loaded: {named[0]}" if named else f"loaded ({len(errors)} other error boxes)",
            resolved=not named,
        )
    if record["tries"] > 1:  # the driver failed before: say so beside what the server did
        record["outcome"] += f" (on try {record['tries']})"


async def run_faults(soak: Soak) -> None:
    """Inject the seeded schedule; every fault's watch runs as its own task."""
    soak.files = await asyncio.wrap_future(soak.files_ready)
    schedule = fault_schedule(soak.opts.minutes, soak.opts.seed, sorted(soak.files))
    tasks = []
    for at, kind, arg in schedule:
        delay = soak.t0 + at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if time.monotonic() >= soak.deadline:
            break
        tasks.append(asyncio.create_task(inject(soak, kind, arg)))
    await asyncio.gather(*tasks)


# ---- sampling ------------------------------------------------------------------------------------


async def sample(soak: Soak, stop: asyncio.Event) -> None:
    """Every few seconds: the server's and each worker's RSS, and each folder's disk use."""
    while not stop.is_set():
        if soak.server.poll() is not None and soak.server_exit is None:
            soak.server_exit = soak.server.returncode
            soak.observations.append(f"the server exited ({soak.server_exit}) at {soak.now():.0f} s")
        workers = {p: rss_mb(p) for p in soak.workers()}
        disk = {name: folder_usage(soak.folder(name)) for name in FOLDERS}
        fallback = Path(soak.env["TMPDIR"]) / "rnnviz-uploads"
        if fallback != soak.folder("uploads"):
            disk["uploads (outside RNNVIZ_UPLOADS_DIR)"] = folder_usage(fallback)
        soak.samples.append(
            {
                "t": round(soak.now(), 1),
                "server_mb": rss_mb(soak.server.pid),
                "workers_mb": {str(p): m for p, m in workers.items() if m is not None},
                "disk": {k: list(v) for k, v in disk.items()},
            }
        )
        try:
            await asyncio.wait_for(stop.wait(), timeout=SAMPLE_S)
        except TimeoutError:
            pass


def folder_entries(folder: Path) -> dict[str, int]:
    """Every entry directly in ``folder`` (half-written hidden files too: they count
    against its caps) and its size in bytes."""
    found = {}
    try:
        names = list(folder.iterdir())
    except OSError:
        return found
    for p in names:
        try:
            found[p.name] = p.stat().st_size
        except OSError:  # gone meanwhile
            continue
    return found


async def watch_trained(soak: Soak, stop: asyncio.Event) -> None:
    """Every :data:`WATCH_S`: the trained-runs folder's entries. Each run file that leaves
    it is recorded with whether the folder was over one of its caps just then (counting the
    entries that arrived in the same look: the admission that evicts it), and whether a live
    session held it in use (pinned with its training call, or its weights open). A run that
    leaves a folder within its caps, or that a session uses, was lost."""
    folder = soak.folder("trained")
    cap_files = soak.cap(FOLDERS["trained"][2]) or 10**9
    cap_bytes = (soak.cap(FOLDERS["trained"][1]) or 10**9) * 2**20
    before = folder_entries(folder)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), timeout=WATCH_S)
        except TimeoutError:
            pass
        now = folder_entries(folder)
        gone = [n for n in before if n not in now and n.endswith(".rnnviz") and not n.startswith(".")]
        if gone:
            both = {**before, **now}
            over = len(both) > cap_files or sum(both.values()) > cap_bytes
            for name in gone:
                path = str(folder / name)
                users = [s.index for s in soak.sessions if path in s.pinned_runs or s.weights_run == path]
                soak.removals.append(
                    {"t": round(soak.now(), 1), "name": name, "over_cap": over, "in_use_by": users}
                )
        before = now


# ---- the server ------------------------------------------------------------------------------------


def free_port() -> int:
    """A port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(opts: argparse.Namespace, tmp: Path) -> dict[str, str]:
    """The server's environment: its workers, time limit, folders under ``tmp`` and the caps
    (``--set`` overrides them, and adds any other setting); TMPDIR too, so anything it
    writes to the system's temporary folder stays in the soak's."""
    folders = {variable: str(tmp / name) for name, (variable, _, _) in FOLDERS.items()}
    (tmp / "tmp").mkdir(parents=True, exist_ok=True)
    # the server's settings are the soak's alone: none leaks in from the caller's environment
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("RNNVIZ_")}
    env = {
        **inherited,
        **folders,
        **CAPS,
        "RNNVIZ_WORKERS": str(opts.workers),
        "RNNVIZ_TIME_LIMIT_S": str(opts.time_limit),
        "TMPDIR": str(tmp / "tmp"),
        "PYTHONUNBUFFERED": "1",
        # the heap probe (scripts/soak_probe/sitecustomize.py), in the server process only
        "PYTHONPATH": os.pathsep.join(p for p in (str(PROBE_DIR), inherited.get("PYTHONPATH", "")) if p),
        "SOAK_HEAP_PROBE": str(tmp / "heap.jsonl"),
        "SOAK_HEAP_PROBE_S": "20",
        "SOAK_TRACEMALLOC": str(opts.tracemalloc or ""),
    }
    for item in opts.set:
        name, _, value = item.partition("=")
        env[name] = value
    return env


def start_server(soak: Soak) -> None:
    """``python -m streamlit run app.py`` from the repository root; returns once it listens."""
    port = soak.opts.port or free_port()
    soak.log_path = soak.tmp / "server.log"
    soak.server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless=true",
            f"--server.port={port}",
            "--server.address=127.0.0.1",
        ],
        cwd=ROOT,
        env=soak.env,
        stdout=soak.log_path.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its workers with it: Ctrl-C of the driver reaches neither
    )
    soak.url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if soak.server.poll() is not None:
            raise RuntimeError(f"the server exited ({soak.server.returncode}): {soak.log_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("streamlit did not start within 60 s")


def stop_server(soak: Soak) -> None:
    """End the server, then any worker of it still there (by the ids seen, never by name)."""
    for pid in list(soak.stopped):
        _signal(pid, signal.SIGCONT)
    if soak.server is not None and soak.server.poll() is None:
        soak.server.terminate()
        try:
            soak.server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            soak.server.kill()
            soak.server.wait(timeout=30)
    for pid in soak.pids_seen:
        if "rnnviz.serve.worker" in cmdline(pid):
            _signal(pid, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


# ---- the run ------------------------------------------------------------------------------------------


def coverage_plan(soak: Soak, rng: random.Random) -> deque:
    """Every tab, cell, data source and feature once: pinning, a URL and training first (a
    short run reaches them), then the rest shuffled. The sessions take from it first."""
    items: list[tuple[str, Any]] = [("tab", t) for t in soak.tabs[1:]]
    items += [("cell", c) for c in soak.cells[1:]]
    items += [("data", d) for d in ("digits", "text", "synthetic")]
    items += [("upload", None), ("upload", None), ("open_run", None)]
    items += [
        ("value", ("seq_len", max(soak.opts.lengths))),
        ("value", ("hidden_size", max(soak.opts.hidden))),
    ]
    rng.shuffle(items)
    return deque([("pin", None), ("url", None), ("train", None), *items])


async def faults_after_the_sessions(soak: Soak, faults: asyncio.Task) -> None:
    """The sessions are done: uploads no session took are answered None (their faults say
    so), and the faults' watches finish (each is bounded)."""
    while True:
        await asyncio.sleep(0)
        try:
            job = soak.actions.get_nowait()
        except asyncio.QueueEmpty:
            if faults.done():
                break
            await asyncio.sleep(0.5)
            continue
        if not job.done.done():
            job.done.set_result(ENDED)
    await faults


async def drive(soak: Soak) -> None:
    """One Chromium, a context per session: the sessions, the faults and the sampler
    together until the deadline, then the end checks."""
    from playwright.async_api import async_playwright

    soak.actions = asyncio.Queue()
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            sessions = []
            for i in range(soak.opts.sessions):
                context = await browser.new_context(viewport=VIEWPORT)
                await context.add_init_script(RUN_COUNTER)
                sessions.append(Session(soak, i, context, await context.new_page()))
            soak.t0 = time.monotonic()
            soak.deadline = soak.t0 + soak.opts.minutes * 60
            stop = asyncio.Event()
            soak.sessions = sessions
            sampler = asyncio.create_task(sample(soak, stop))
            watcher = asyncio.create_task(watch_trained(soak, stop))
            faults = asyncio.create_task(run_faults(soak))
            await asyncio.gather(*(s.run() for s in sessions))
            await faults_after_the_sessions(soak, faults)
            await asyncio.gather(*(s.check_kept() for s in sessions))
            stop.set()
            await sampler
            await watcher
            for s in sessions:
                await s.context.close()
        finally:
            await browser.close()


def report(soak: Soak) -> dict[str, Any]:
    """The figures and the verdict (see the module doc for the pass conditions)."""
    by_kind: dict[str, list[float]] = {}
    for s in soak.steps:
        by_kind.setdefault(s["kind"], []).append(s["s"])
    latency = {
        k: {"count": len(v), "p50_s": percentile(v, 0.5), "p95_s": percentile(v, 0.95), "max_s": max(v)}
        for k, v in sorted(by_kind.items())
    }
    failures = [e for e in soak.errors if e["failure"]]
    memory = memory_report(soak)
    disk = disk_report(soak)
    log = soak.log_text()
    worker_lines = _worker_lines(log)
    url_failures = [c for c in soak.url_checks if c.get("mismatches")]
    lost = soak.lost + [f"URL {c['url']}: {c['mismatches']}" for c in url_failures]
    trained, runs_lost = trained_run_losses(soak)
    lost += runs_lost
    checks = {
        "no_hang": not soak.hangs,
        "no_uncaught_or_unclassified_error": not failures,
        "rss_without_upward_trend": all(m["upward"] is False for m in memory["judged"].values())
        and memory["workers_total"]["upward"] is not True,
        "folders_within_caps": all(d["within"] is not False for d in disk.values()),
        "nothing_lost": not lost,
        # beyond the list: a server that died, or a page the driver could not work,
        # would otherwise pass with few error boxes
        "server_stayed_up": soak.server_exit is None,
        "driver_ran_to_the_end": soak.crash is None,
        "interactions_went_through": len(soak.driver_errors) <= max(3, 0.25 * len(soak.steps)),
    }
    settings = {k: v for k, v in sorted(environ_of_server(soak).items()) if k.startswith("RNNVIZ_")}
    return {
        "options": {k: v for k, v in vars(soak.opts).items() if k != "set"} | {"set": soak.opts.set},
        "duration_s": round(soak.now(), 1),
        "step_limit_s": soak.step_limit_s,
        "server": {"settings": settings, "log": str(soak.log_path)},
        "interactions": {"count": len(soak.steps), "by_kind": latency},
        "coverage": dict(sorted(soak.covered.items())),
        "hangs": soak.hangs,
        "errors": {
            "by_kind": dict(Counter(e["kind"] for e in soak.errors).most_common()),
            "failures": [{k: e[k] for k in ("t", "session", "step", "kind", "text")} for e in failures],
            "examples": {e["kind"]: e["text"] for e in reversed(soak.errors)},
        },
        "driver_errors": soak.driver_errors,
        "timeline": soak.steps,
        "all_errors": soak.errors,
        "memory": memory,
        "heap": heap_report(soak),
        "disk": disk,
        "workers": {
            "replacing": sum("replacing worker" in line for line in worker_lines),
            "retiring": sum("retiring worker" in line for line in worker_lines),
            "processes_seen": len(soak.pids_seen),
            "log_lines": worker_lines[-40:],
        },
        "faults": [{k: v for k, v in f.items() if k != "log_offset"} for f in soak.faults],
        "fault_kinds": dict(Counter(f["kind"] for f in soak.faults)),
        "kept": {
            "trained_runs": trained,
            "url_checks": soak.url_checks,
            "lost": lost,
        },
        "observations": soak.observations + settings_observations(soak, disk, log),
        "crash": soak.crash,
        "checks": checks,
        "passed": all(checks.values()),
    }


def environ_of_server(soak: Soak) -> dict[str, str]:
    """The server's environment as its process has it (what we gave it, when /proc cannot tell)."""
    found = environ_of(soak.server.pid) if soak.server is not None and soak.server.poll() is None else {}
    return found or {k: v for k, v in soak.env.items() if k.startswith("RNNVIZ_")}


def memory_report(soak: Soak) -> dict[str, Any]:
    """RSS of the server and of the workers together, with their fitted trends between the
    warm-up and the deadline (the end checks open sessions of their own: not counted).

    The warm-up is half the run, at least one minute and at most five. The server is judged
    on every sample. The workers are judged on the lowest total of each minute (their
    memory at rest: each one's is a sawtooth of its jobs, its retirement and its
    successor), and only in runs of 10 minutes or more: a few minutes hold too few teeth.
    """
    duration = soak.opts.minutes * 60
    warmup = min(300.0, max(60.0, duration / 2))
    server = [(s["t"], s["server_mb"]) for s in soak.samples if s["server_mb"] is not None]
    workers = [(s["t"], sum(s["workers_mb"].values())) for s in soak.samples if s["workers_mb"]]
    peak_worker = max((m for s in soak.samples for m in s["workers_mb"].values()), default=None)

    def judged(points):
        return [(t, v) for t, v in points if warmup <= t <= duration]

    workers_trend = trend(minima_per_minute(judged(workers)))
    server_trend = trend(judged(server))
    criterion = (
        f"upward trend: the least-squares line from {warmup:.0f} s to the deadline "
        f"({duration:.0f} s) rises, per 10 min, by at least {TREND_SHARE_PER_10_MIN:.0%} of the mean, and by "
        f"at least {TREND_NOISE_MB:g} MB over that window (workers: their total's lowest value of each "
        "minute, judged in runs of 10 min or more)"
    )
    if duration < 600:
        workers_trend["upward"] = None
        workers_trend["not_judged"] = "a run shorter than 10 minutes"
        server_trend.update(short_run_rise(judged(server)))
        criterion = (
            f"a run shorter than 10 minutes: the server's peak from {warmup:.0f} s to the deadline "
            f"({duration:.0f} s) at most {SHORT_RUN_RISE_MB:g} MB above its first sample there (a line "
            "fitted over so short a window is no trend); the workers are not judged"
        )
    return {
        "criterion": criterion,
        "warmup_s": warmup,
        "judged": {"server": server_trend},
        "workers_total": workers_trend,
        "server_peak_mb": max((v for _, v in server), default=None),
        "worker_peak_mb": peak_worker,
        "samples": [[s["t"], s["server_mb"], s["workers_mb"]] for s in soak.samples],
    }


def heap_report(soak: Soak) -> dict[str, Any] | None:
    """What the server's memory is made of, from the heap probe's lines: at the end of the
    warm-up and at the end, the RSS, Python's allocated blocks, glibc's bytes in use and free
    inside its arenas, threads and sessions, and the object types that grew most. A leak
    grows the Python heap or the bytes in use; fragmentation grows the free bytes in the
    arenas while those in use stay."""
    path = soak.tmp / "heap.jsonl"
    if not path.exists():
        return None
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    warmup = min(300.0, max(60.0, soak.opts.minutes * 60 / 2))
    after = [x for x in lines if x["t"] >= warmup] or lines[-1:]
    if not after:
        return None
    first, last = after[0], after[-1]
    fields = (
        "rss_mb",
        "py_blocks",
        "malloc_in_use_mb",
        "malloc_free_mb",
        "mmapped_mb",
        "threads",
        "sessions",
    )
    typed = [x for x in after if "types" in x]
    grew: dict[str, int] = {}
    if len(typed) >= 2:
        a, b = typed[0]["types"], typed[-1]["types"]
        grew = dict(
            sorted(((k, b.get(k, 0) - a.get(k, 0)) for k in set(a) | set(b)), key=lambda kv: -kv[1])[:8]
        )
    traced = [x for x in lines if "grown" in x]
    start, end = {f: first.get(f) for f in fields}, {f: last.get(f) for f in fields}
    if typed:  # the result cache is read with the object counts, every sixth sample
        for f in ("result_cache_mb", "result_cache_entries"):
            start[f], end[f] = typed[0].get(f), typed[-1].get(f)
    return {
        "from_s": first["t"],
        "to_s": last["t"],
        "start": start,
        "end": end,
        "types_grown": grew,
        "sites_grown": traced[-1]["grown"] if traced else [],
        "sites_from_to_s": (
            (next(x["t"] for x in lines if x.get("traced_from")), traced[-1]["t"]) if traced else None
        ),
        "path": str(path),
    }


def disk_report(soak: Soak) -> dict[str, Any]:
    """Each folder's use at the end and at most, against its caps."""
    out = {}
    for name, (_, mb_var, files_var) in FOLDERS.items():
        used, entries = folder_usage(soak.folder(name))
        cap_mb, cap_files = soak.cap(mb_var), soak.cap(files_var)
        seen = [s["disk"][name] for s in soak.samples if name in s["disk"]]
        within = (cap_mb is None or used <= cap_mb * 2**20) and (cap_files is None or entries <= cap_files)
        out[name] = {
            "path": str(soak.folder(name)),
            "mb": round(used / 2**20, 2),
            "entries": entries,
            "max_mb_seen": round(max((b for b, _ in seen), default=0) / 2**20, 2),
            "max_entries_seen": max((e for _, e in seen), default=0),
            "cap_mb": cap_mb,
            "cap_files": cap_files,
            "within": within,
        }
    fallback = Path(soak.env["TMPDIR"]) / "rnnviz-uploads"
    if fallback.is_dir():
        used, entries = folder_usage(fallback)
        out["uploads outside RNNVIZ_UPLOADS_DIR"] = {
            "path": str(fallback),
            "mb": round(used / 2**20, 2),
            "entries": entries,
            "within": None,  # not a folder the server was given: not judged
        }
    return out


def settings_observations(soak: Soak, disk: dict, log: str) -> list[str]:
    """What the server visibly did, or did not, with the settings it was given."""
    notes = []
    uploads = soak.folder("uploads")
    ours = [p for p in uploads.iterdir() if not p.name.startswith("soak-filler-")] if uploads.is_dir() else []
    uploaded = sum(1 for s in soak.steps if s["kind"] == "upload")
    if uploaded and not ours and "uploads outside RNNVIZ_UPLOADS_DIR" in disk:
        notes.append(
            "RNNVIZ_UPLOADS_DIR not honoured: the uploads went to "
            f"{disk['uploads outside RNNVIZ_UPLOADS_DIR']['path']} (so its caps were not exercised)"
        )
    if "retiring worker" not in log:
        notes.append(
            "no worker retired (RNNVIZ_WORKER_MAX_JOBS="
            f"{soak.env.get('RNNVIZ_WORKER_MAX_JOBS')}, RNNVIZ_WORKER_MAX_RSS_MB="
            f"{soak.env.get('RNNVIZ_WORKER_MAX_RSS_MB')}): no 'retiring worker' line in the server's log"
        )
    trained = soak.folder("trained")
    cap_files = soak.cap(FOLDERS["trained"][2])
    if cap_files and len(soak.trained) > cap_files and len(list(trained.glob("*.rnnviz"))) > cap_files:
        notes.append(f"RNNVIZ_TRAINED_FILES={cap_files} not honoured: the trained folder holds more runs")
    tracebacks = log.count("Traceback (most recent call last)")
    if tracebacks:
        last = [line for line in log.splitlines() if re.match(r"^\w+(\.\w+)*(Error|Exception)\b", line)]
        notes.append(
            f"the server's log holds {tracebacks} traceback(s); the last error line: {last[-1:] or '?'}"
        )
    if "persistent compilation cache" in log:
        notes.append(
            "JAX reported a compilation-cache entry it could not read (the corrupted one): it recompiled"
        )
    return notes


def markdown(result: dict[str, Any]) -> str:
    """The report in a few tables."""
    lines = [
        f"# Soak: {'PASSED' if result['passed'] else 'FAILED'}",
        "",
        f"{result['options']['sessions']} sessions, {result['options']['minutes']} min, "
        f"{result['options']['workers']} workers, seed {result['options']['seed']}; "
        f"{result['interactions']['count']} interactions in {result['duration_s']:.0f} s "
        f"(step limit {result['step_limit_s']:.0f} s).",
        "",
        "Server settings: " + ", ".join(f"`{k}={v}`" for k, v in result["server"]["settings"].items()) + ".",
        "",
        "| check | |",
        "|---|---|",
        *[f"| {k.replace('_', ' ')} | {'yes' if v else '**no**'} |" for k, v in result["checks"].items()],
        "",
        "## Latency by interaction",
        "",
        "| kind | count | p50 s | p95 s | max s |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind, v in result["interactions"]["by_kind"].items():
        lines.append(f"| {kind} | {v['count']} | {v['p50_s']:.2f} | {v['p95_s']:.2f} | {v['max_s']:.2f} |")
    lines += ["", "## Error boxes by kind", "", "| kind | count |", "|---|---:|"]
    lines += [f"| {k} | {n} |" for k, n in result["errors"]["by_kind"].items()] or ["| none | 0 |"]
    for f in result["errors"]["failures"]:
        lines.append(f"- **failure** (session {f['session']}, {f['step']}): {f['text'][:300]}")
    mem = result["memory"]
    lines += [
        "",
        "## Memory",
        "",
        mem["criterion"] + ".",
        "",
        "| process | mean MB | slope MB/min | upward |",
    ]
    lines.append("|---|---:|---:|---|")
    for name, m in [*mem["judged"].items(), ("workers (total)", mem["workers_total"])]:
        upward = m.get("not_judged") and f"not judged: {m['not_judged']}" or m["upward"]
        if m.get("rise_to_peak_mb") is not None:
            upward = f"{upward} (rise to peak {m['rise_to_peak_mb']:.0f} MB)"
        lines.append(f"| {name} | {_num(m['mean_mb'])} | {_num(m['slope_mb_per_min'], 2)} | {upward} |")
    heap = result.get("heap")
    if heap:
        lines += [
            "",
            f"The server's heap from {heap['from_s']:.0f} s to {heap['to_s']:.0f} s (scripts/soak_probe):",
            "",
            "| | " + " | ".join(heap["start"]) + " |",
            "|---|" + "---:|" * len(heap["start"]),
            "| start | " + " | ".join(str(v) for v in heap["start"].values()) + " |",
            "| end | " + " | ".join(str(v) for v in heap["end"].values()) + " |",
            "",
            "Object types grown most: "
            + (", ".join(f"{k} {v:+d}" for k, v in heap["types_grown"].items()) or "–"),
        ]
        if heap.get("sites_grown"):
            lo, hi = heap["sites_from_to_s"]
            lines += ["", f"Allocation sites grown most from {lo:.0f} s to {hi:.0f} s (tracemalloc):", ""]
            lines += ["| KB | blocks | at | innermost |", "|---:|---:|---|---|"]
            lines += [
                f"| {g['kb']} | {g['count']} | {g['at']} | {g['innermost']} |" for g in heap["sites_grown"]
            ]
    lines += ["", "## Disk", "", "| folder | MB | entries | max MB seen | cap MB | cap files | within |"]
    lines.append("|---|---:|---:|---:|---:|---:|---|")
    for name, d in result["disk"].items():
        lines.append(
            f"| {name} | {d['mb']} | {d['entries']} | {d.get('max_mb_seen', '')} | {d.get('cap_mb', '')} | "
            f"{d.get('cap_files', '')} | {d['within']} |"
        )
    w = result["workers"]
    lines += [
        "",
        f"Workers: {w['replacing']} replaced, {w['retiring']} retired, {w['processes_seen']} processes seen.",
        "",
        "## Faults",
        "",
        "| at s | fault | target | outcome |",
        "|---:|---|---|---|",
    ]
    for f in result["faults"]:
        outcome = str(f.get("outcome")).replace("|", "/")[:300]
        lines.append(f"| {f['at_s']} | {f['kind']} | {f.get('target')} | {outcome} |")
    lines += ["", "## Kept", ""]
    lines += [f"- lost: {item}" for item in result["kept"]["lost"]] or ["- nothing lost"]
    runs = result["kept"]["trained_runs"]
    evicted = sum(bool(r["removed"]) for r in runs)
    lines.append(
        f"- trained runs: {len(runs)}, {sum(r['exists'] for r in runs)} still on disk, "
        f"{evicted} evicted by the folder's caps"
    )
    lines.append(f"- URL checks: {len(result['kept']['url_checks'])}")
    lines += [
        "",
        "## Coverage",
        "",
        ", ".join(f"{k} ×{n}" for k, n in result["coverage"].items()) or "nothing",
    ]
    if result["driver_errors"]:
        lines += ["", f"## Driver errors ({len(result['driver_errors'])})", ""]
        lines += [
            f"- session {d['session']} at {d['t']:.0f} s, {d['step']}: {d['error']}"
            for d in result["driver_errors"]
        ]
    lines += ["", "## Observations", ""] + [f"- {o}" for o in result["observations"]]
    if result["crash"]:
        lines += ["", "## The driver stopped", "", "```", result["crash"].rstrip(), "```"]
    if result["hangs"]:
        lines += ["", "## Hangs", ""] + [
            f"- session {h['session']} at {h['t']:.0f} s: {h['step']} ({h.get('page', 'page not read')})"
            for h in result["hangs"]
        ]
    return "\n".join(lines) + "\n"


def _num(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see ``--help``)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--sessions", type=int, default=4, help="concurrent browser sessions (default 4)")
    p.add_argument("--minutes", type=float, default=30.0, help="how long the sessions interact (default 30)")
    p.add_argument("--workers", type=int, default=2, help="the server's worker processes (default 2)")
    p.add_argument("--seed", type=int, default=0, help="seeds the interactions and the fault schedule")
    p.add_argument("--report", type=Path, required=True, help="where the JSON report goes")
    p.add_argument("--markdown", type=Path, help="where a Markdown summary goes")
    p.add_argument("--port", type=int, help="the server's port (default: a free one)")
    p.add_argument("--time-limit", type=float, default=60.0, help="RNNVIZ_TIME_LIMIT_S (default 60)")
    p.add_argument(
        "--step-limit",
        type=float,
        help="seconds a step may take before it counts as hung (default 2 × limit + 60)",
    )
    p.add_argument(
        "--drain",
        type=float,
        help="seconds after the deadline for queued fault uploads (default: the step limit)",
    )
    p.add_argument("--hidden", type=_ints, default=[8, 16, 24, 32, 48, 64], help="hidden sizes H to try")
    p.add_argument(
        "--lengths",
        type=_ints,
        default=[20, 30, 50, 80, 100, 150, 200, 300],
        help="sequence lengths T to try",
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="override a server setting"
    )
    p.add_argument(
        "--tracemalloc",
        type=float,
        metavar="SECONDS",
        help="trace the server's Python allocations and report the sites that grew most from then on "
        "(a diagnosis: the server runs slower)",
    )
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (uploads, caches, log)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the soak; 0 when it passed, 1 when not, 2 when it could not start."""
    opts = parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is not installed (make browser installs it)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="rnnviz-soak-"))
    soak = Soak(opts, tmp, server_env(opts, tmp))
    soak.step_limit_s = opts.step_limit or 2 * opts.time_limit + 60
    soak.drain_s = opts.drain if opts.drain is not None else soak.step_limit_s
    soak.shots = opts.report.with_suffix(".shots")
    shutil.rmtree(soak.shots, ignore_errors=True)
    soak.shots.mkdir(parents=True)
    from rnnviz.tables.cells import cell_names, cell_spec
    from rnnviz.ui.tabs import TABS

    soak.cells = [(n, f"{n} · {cell_spec(n).group}") for n in cell_names()]
    soak.tabs = [t.TITLE for t in TABS]
    with ThreadPoolExecutor(1) as pool:
        # the files take seconds to build (the 40 M-row parquet): meanwhile the server starts
        cap = int(soak.env["RNNVIZ_WORKER_MAX_RSS_MB"])
        soak.files_ready = pool.submit(build_files, tmp / "files", cap)
        try:
            start_server(soak)
            soak.coverage = coverage_plan(soak, random.Random(f"coverage-{opts.seed}"))
            asyncio.run(drive(soak))
        except Exception as err:  # still a report: what ran until then, and why it stopped
            soak.crash = f"{type(err).__name__}: {err}\n{traceback.format_exc()}"
        finally:
            try:
                result = report(soak)
            finally:
                stop_server(soak)
    opts.report.parent.mkdir(parents=True, exist_ok=True)
    if soak.log_path is not None and soak.log_path.exists():
        log_copy = opts.report.with_suffix(".server.log")
        shutil.copyfile(soak.log_path, log_copy)
        result["server"]["log"] = str(log_copy)
    opts.report.write_text(json.dumps(result, indent=1, default=str) + "\n")
    if opts.markdown:
        opts.markdown.write_text(markdown(result))
    if not opts.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"soak {'passed' if result['passed'] else 'FAILED'}: {opts.report}", file=sys.stderr)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""The server's limits, in one place: every resource the dashboard lets grow has a cap here,
read from the environment (``RNNVIZ_*``) and validated once.

``rnnviz app`` shows each as a flag (``rnnviz app --help``) and exports what it is given to
the server's environment; the docs' *Running it for a team* page lists the same table
(:data:`SETTINGS`, from which both are made).

>>> s = ServerSettings.from_env({"RNNVIZ_WORKERS": "3", "RNNVIZ_UPLOADS_MB": "500"})
>>> s.workers, s.uploads_mb, s.result_cache_mb
(3, 500, 512)
>>> try:
...     ServerSettings.from_env({"RNNVIZ_UPLOADS_FILES": "0"})
... except SettingsError as err:
...     for part in str(err).split(": ", 1):
...         print(part)
RNNVIZ_UPLOADS_FILES='0' is out of range
files the upload folder may hold (oldest unused evicted first) is a whole number from 1 to 1000000
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


class SettingsError(ValueError):
    """A server setting outside what is allowed; the message names the variable, the value
    and what is allowed."""


def _setting(default, env: str, what: str, low=None, high=None):
    """A field with its environment variable, its meaning and its bounds (None: a folder)."""
    return field(default=default, metadata={"env": env, "what": what, "low": low, "high": high})


def _tmp(name: str) -> str:
    return str(Path(tempfile.gettempdir()) / name)


@dataclass(frozen=True)
class ServerSettings:
    """Every limit of the dashboard's server (defaults fit a 2-core, 8 GiB machine with a
    few users); each field's ``what`` says what it limits (:data:`SETTINGS`)."""

    workers: int = _setting(
        2,
        "RNNVIZ_WORKERS",
        "the number of worker processes for visitors (one more, of lower priority, prepares idle "
        "time's work; 0: compute in the server, for profiling only)",
        0,
        64,
    )
    time_limit_s: float = _setting(
        90.0, "RNNVIZ_TIME_LIMIT_S", "seconds one computation may run before its worker is replaced", 1, 86400
    )
    view_budget_s: float = _setting(
        15.0,
        "RNNVIZ_VIEW_BUDGET_S",
        "seconds a tab plans its work for (it asks for less past this)",
        1e-6,
        3600,
    )
    worker_max_jobs: int = _setting(
        500,
        "RNNVIZ_WORKER_MAX_JOBS",
        "jobs after which a worker retires (its successor started first)",
        1,
        10**9,
    )
    worker_max_rss_mb: int = _setting(
        4096,
        "RNNVIZ_WORKER_MAX_RSS_MB",
        "MB of resident memory past which a worker retires between jobs",
        64,
        2**24,
    )
    result_cache_mb: int = _setting(
        512, "RNNVIZ_RESULT_CACHE_MB", "MB of finished results the server keeps for every session", 0, 2**24
    )
    uploads_dir: str = _setting(
        _tmp("rnnviz-uploads"), "RNNVIZ_UPLOADS_DIR", "the folder of uploaded data files"
    )
    uploads_mb: int = _setting(
        2048, "RNNVIZ_UPLOADS_MB", "MB the upload folder may hold (oldest unused evicted first)", 1, 2**24
    )
    uploads_files: int = _setting(
        100,
        "RNNVIZ_UPLOADS_FILES",
        "files the upload folder may hold (oldest unused evicted first)",
        1,
        10**6,
    )
    trained_dir: str = _setting(
        _tmp("rnnviz-trained"), "RNNVIZ_TRAINED_DIR", "the folder of trained runs and uploaded run files"
    )
    trained_mb: int = _setting(
        2048,
        "RNNVIZ_TRAINED_MB",
        "MB the trained-runs folder may hold (oldest unused evicted first)",
        1,
        2**24,
    )
    trained_files: int = _setting(
        200,
        "RNNVIZ_TRAINED_FILES",
        "runs the trained-runs folder may hold (oldest unused evicted first)",
        1,
        10**6,
    )
    # holds a 130M-parameter Mamba to about 75 tokens, its compile and run well within the time
    # limit on 2 cores (docs/dev/benchmarks.md, "The Your model tab's work limit")
    model_work_m: int = _setting(
        10_000,
        "RNNVIZ_MODEL_WORK_M",
        "millions of parameters × tokens (B·T) one analysis of a user's own model may take",
        1,
        10**9,
    )
    jax_cache: str = _setting(
        str(Path.home() / ".cache" / "rnnviz" / "jax"),
        "RNNVIZ_JAX_CACHE",
        "the folder of JAX's persistent compilation cache (off: no cache)",
    )
    jax_cache_mb: int = _setting(
        2048,
        "RNNVIZ_JAX_CACHE_MB",
        "MB the compilation cache may hold (least recently used evicted)",
        16,
        2**24,
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ServerSettings:
        """The settings the environment gives (unset or empty: the default).

        Raises:
          SettingsError: a value that is not a number of the field's kind or is out of its bounds.
        """
        environ = os.environ if environ is None else environ
        given = {f: environ.get(f.metadata["env"], "") for f in dataclasses.fields(cls)}
        return cls(**{f.name: parse(f, raw) for f, raw in given.items() if raw.strip()})

    def env(self) -> dict[str, str]:
        """The settings as environment variables (what ``rnnviz app`` hands the server)."""
        return {f.metadata["env"]: str(getattr(self, f.name)) for f in dataclasses.fields(self)}


#: Every setting's field (its ``metadata``: ``env``, ``what``, ``low``, ``high``).
SETTINGS: tuple[dataclasses.Field, ...] = dataclasses.fields(ServerSettings)


def kind(f: dataclasses.Field) -> str:
    """``"int"``, ``"float"`` or ``"folder"``."""
    return {"int": "int", "float": "float"}.get(str(f.type), "folder")


def allowed(f: dataclasses.Field) -> str:
    """What a setting allows, in words."""
    k, low, high = kind(f), f.metadata["low"], f.metadata["high"]
    if k == "folder":
        return "a folder"
    if k == "int":
        return f"a whole number from {low} to {high}"
    return f"a number of seconds from {low:g} to {high:g}"


def parse(f: dataclasses.Field, raw: str, given_as: str | None = None) -> int | float | str:
    """One setting's value from its text, or :class:`SettingsError` naming it as ``given_as``
    (default: its environment variable; ``rnnviz app`` names its flag)."""
    k, env, what = kind(f), given_as or f.metadata["env"], f.metadata["what"]
    text = raw.strip()
    if k == "folder":
        return str(Path(text).expanduser())
    try:
        value = int(text) if k == "int" else float(text)
    except ValueError:
        noun = "a whole number" if k == "int" else "a number"
        raise SettingsError(f"{env}={raw!r} is not {noun}: {what} is {allowed(f)}") from None
    if not f.metadata["low"] <= value <= f.metadata["high"]:
        raise SettingsError(f"{env}={raw!r} is out of range: {what} is {allowed(f)}")
    return value


def settings() -> ServerSettings:
    """This process's settings, from its environment (read on each call: cheap, and a test's
    changed environment is seen)."""
    return ServerSettings.from_env()


def markdown_table() -> str:
    """The settings as a Markdown table (variable, flag, default, what it limits) for the docs
    (a folder's default shows this machine's own paths by name)."""
    rows = ["| variable | `rnnviz app` flag | default | what it sets |", "|---|---|---|---|"]
    for f in SETTINGS:
        named = str(f.default).replace(tempfile.gettempdir(), "$TMPDIR").replace(str(Path.home()), "~")
        default = f"`{named}`" if kind(f) == "folder" else f.default
        rows.append(f"| `{f.metadata['env']}` | `--{flag_name(f)}` | {default} | {f.metadata['what']} |")
    return "\n".join(rows)


def flag_name(f: dataclasses.Field) -> str:
    """The setting's ``rnnviz app`` flag (``worker_max_jobs`` → ``worker-max-jobs``)."""
    return f.name.replace("_", "-")


# ---- the dashboard's timing constants -----------------------------------------------------
# One line each on why; what they were tuned on (this 2-core machine, its browsers beside the
# server) and the measurements behind them: docs/dev/benchmarks.md, "The dashboard's timing
# constants". Not settings a user sets: a change here is a change to measure again.

#: Seconds between a waiting caller's checks of its worker (each check may redraw its line).
POLL_S = 0.2
#: Seconds a worker must be free of a visitor's job before idle time uses it: longer than
#: the gap between two calls of one page run (an idle-time job's end starts no such wait).
IDLE_S = 0.5
#: The longest an idle-time job may hold its worker: a visitor who arrives meanwhile waits for it.
IDLE_LIMIT_S = 20.0
#: How much lower the OS priority of idle time's own worker is (its niceness): it gives way.
IDLE_NICE = 10
#: Seconds a pure call waits for its route's busy worker before it takes any free one: one
#: visitor's heavy view never queues another's light one.
SPILL_S = 0.3
#: Seconds after a page run begins during which idle-time work does not start:
#: the page's browser and the server's static files need the cores.
VISIT_GRACE_S = 3.0
#: Seconds of drawing each fresh page (a session's first run) adds to that grace; the pages'
#: drawing queues, one after another.
PAGE_DRAW_S = 2.5
#: The longest grace any crowd of fresh pages gives (idle time is put off, never lost).
MAX_GRACE_S = 30.0
#: Seconds between idle time's looks for an idle worker (an answer wakes the next look at once).
PREPARER_POLL_S = 0.25
#: Seconds without a page run or a visitor's job before idle time compiles the other cells:
#: a compile under way when a visitor's call needs its worker is waited for.
NEIGHBOURS_QUIET_S = 8.0
#: An interleaved job's partial picture is drawn again at most this often (each redraw is
#: the browser's work while another visitor's page may be opening).
PART_GAP_S = 1.0
#: Seconds of training per page run before the page redraws and continues.
TRAIN_SLICE_S = 0.5
#: The page times its analysis until about this much is spent (at least one run, at most five).
TIMING_BUDGET_S = 0.3
#: A shape's quiet timing, the unit of every tab's budget: at most this many runs, fewer
#: once they pass this many seconds (a tab opened before idle time timed it waits for it).
QUIET_REPEATS, QUIET_TIMING_S = 3, 0.25
#: The Strategies and Devices tabs time each run until the 90 % interval of its mean is within
#: this fraction of it (at least 3 runs): a steady executable stops at 3.
TIMING_PRECISION = 0.10
#: A reference block's Strategies view times each way of computing its gradients at most this
#: many rounds, fewer (at least 3) once a way's runs would pass this many seconds.
BLOCK_STRATEGY_REPEATS, BLOCK_STRATEGY_S = 10, 1.0


__all__ = [
    "SETTINGS",
    "ServerSettings",
    "SettingsError",
    "allowed",
    "flag_name",
    "kind",
    "markdown_table",
    "parse",
    "settings",
]

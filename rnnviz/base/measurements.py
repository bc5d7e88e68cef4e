"""Versioned run records: one JSON object per line in ``rnnviz/data/runs/*.jsonl``.

Schema 1 (documented in ``rnnviz/data/README.md``)::

    {"schema": 1, "kind": "bench", "suite": str, "label": str, "config": {RunConfig fields},
     "strategy": "plain_grad" or a registered strategy (accumulate, per_step, split_transpose,
                 parallel, fused, checkpoint),
     "measure": "grad" | "analyze" | "connectivity" | "log_pass",
     "device_kind": "cpu" | "gpu" | ..., "device_name": str, "backend": str,
     "jax_version": str, "jaxlib_version": str, "flax_version": str, "cpu_count": int,
     "timestamp": ISO-8601 UTC, "compile_s": float, "run_s": float (median),
     "run_min_s": float, "run_max_s": float, "repeats": int, "peak_bytes": int,
     "flops": float, "flops_per_s": float, "ratio_to_plain_grad": float | null}

A second kind, ``"train"`` (:data:`TRAIN_FIELDS`), records training runs; a third,
``"gradient"`` (:data:`GRADIENT_FIELDS`), a design's gradient decay and λ₁ at initialisation;
a fourth, ``"peer"`` (:data:`PEER_FIELDS`), another implementation's LSTM gradient (cuDNN's)
and rnnviz's ratios to it; a fifth, ``"error"`` (:data:`ERROR_FIELDS`), a part of a suite
that crashed or did not run, and why; a sixth, ``"model"`` (:data:`MODEL_FIELDS`), rnnviz's
analysis of a whole model against transformers' forward + backward. A bench record may carry
the measured device peak (:data:`OPTIONAL_FIELDS`).
Reading never raises on bad data: lines that are not JSON, have another schema, miss a
field or hold a wrong type are counted and skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rnnviz.tables.strategies import strategy_names

SCHEMA = 1
MAX_LINE_BYTES = 1_000_000

#: field → accepted Python types (None allowed where listed).
FIELDS: dict[str, tuple[type, ...]] = {
    "schema": (int,),
    "kind": (str,),
    "suite": (str,),
    "label": (str,),
    "config": (dict,),
    "strategy": (str,),
    "measure": (str,),
    "device_kind": (str,),
    "device_name": (str,),
    "backend": (str,),
    "jax_version": (str,),
    "jaxlib_version": (str,),
    "flax_version": (str,),
    "cpu_count": (int,),
    "timestamp": (str,),
    "compile_s": (int, float),
    "run_s": (int, float),
    "run_min_s": (int, float),
    "run_max_s": (int, float),
    "repeats": (int,),
    "peak_bytes": (int,),
    "flops": (int, float),
    "flops_per_s": (int, float),
    "ratio_to_plain_grad": (int, float, type(None)),
}
MEASURE_VALUES = ("grad", "analyze", "connectivity", "log_pass")
#: Fields a bench or peer record may carry, checked when present: ``device_peak_bytes``, the
#: device allocator's high-water mark during the measurement above the bytes in use before it
#: (null where it could not be read), and ``device_peak_note``, how it was read or why not;
#: a text run's ``reach_1pct`` and ``reach_10pct`` (:func:`rnnviz.bench.learning.text_reach`).
OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {
    "reach_1pct": (int, float),
    "reach_10pct": (int, float),
    "device_peak_bytes": (int, type(None)),
    "device_peak_note": (str,),
}

_COMMON = (
    "schema",
    "kind",
    "suite",
    "label",
    "config",
    "device_kind",
    "device_name",
    "backend",
    "jax_version",
    "jaxlib_version",
    "flax_version",
    "cpu_count",
    "timestamp",
    "compile_s",
    "run_s",
)
_NUMBER = (int, float)
_MAYBE_INT = (int, type(None))

#: Fields of a ``kind: "train"`` record (``python -m rnnviz bench --suite train``): one
#: training run, its outcome and its speed. ``mode``: ``chunked`` (lax.scan chunks) or
#: ``loop`` (a Python loop over one jitted step, the benchmark's yardstick).
TRAIN_FIELDS: dict[str, tuple[type, ...]] = {
    **{name: FIELDS[name] for name in _COMMON},
    "mode": (str,),
    "task": (str,),
    "lag": (int,),
    "optimizer": (str,),
    "learning_rate": _NUMBER,
    "clip": (int, float, type(None)),
    "steps": (int,),
    "steps_run": (int,),
    "baseline": _NUMBER,
    "final_loss": (int, float, type(None)),
    "solved_step": _MAYBE_INT,
    "nonfinite_step": _MAYBE_INT,
    "clip_count": (int,),
    "steps_per_s": _NUMBER,
    "ms_per_step": _NUMBER,
}
#: Fields of a ``kind: "gradient"`` record (``python -m rnnviz bench --suite designs``): a
#: design's gradient at initialisation over T steps: ``decay_per_step``, the least-squares slope
#: of ln‖∂L/∂carry_{T−k}‖ per step of lag k (None where it cannot be fitted), ``lambda1`` its
#: leading Lyapunov exponent (natural log per step), ``log10_first`` / ``log10_last`` the
#: exact log₁₀‖∂L/∂carry_t‖ at t = 0 and t = T.
GRADIENT_FIELDS: dict[str, tuple[type, ...]] = {
    **{name: FIELDS[name] for name in _COMMON},
    "decay_per_step": (int, float, type(None)),
    "lambda1": _NUMBER,
    "log10_first": _NUMBER,
    "log10_last": _NUMBER,
}
_STAMP = tuple(name for name in _COMMON if name not in ("compile_s", "run_s"))
#: Fields of a ``kind: "peer"`` record (``python -m rnnviz bench --suite gpu``): one other
#: implementation's LSTM forward + backward (``peer``: ``cudnn``, cuDNN's LSTM through
#: ``jax.experimental.rnn.lstm``, or ``lstm_ref``, that module's reference scan) on the shape
#: of ``config``, and rnnviz's run times over it on the same device in the same process:
#: ``ratio_plain_grad`` (plain ``jax.grad`` of the Flax scan), ``ratio_analyze`` (the analysis
#: with ``accumulate``) and ``ratio_best_analyze`` (the fastest strategy's, ``best_strategy``);
#: null where that measurement is missing. ``note`` says what the peer stands for.
PEER_FIELDS: dict[str, tuple[type, ...]] = {
    **{name: FIELDS[name] for name in _COMMON},
    "peer": (str,),
    "implementation": (str,),
    "measure": (str,),
    "run_min_s": _NUMBER,
    "run_max_s": _NUMBER,
    "repeats": (int,),
    "peak_bytes": (int,),
    "ratio_plain_grad": (int, float, type(None)),
    "ratio_analyze": (int, float, type(None)),
    "ratio_best_analyze": (int, float, type(None)),
    "best_strategy": (str, type(None)),
    "note": (str,),
}
#: Fields of a ``kind: "error"`` record: a ``part`` of a suite (``devices``, ``cudnn``,
#: ``parallel``) that raised or was not started, for ``label`` on the stamped device; ``error``
#: is the exception's type and message, or why it did not run.
ERROR_FIELDS: dict[str, tuple[type, ...]] = {
    **{name: FIELDS[name] for name in _STAMP},
    "part": (str,),
    "error": (str,),
}
_MAYBE_NUMBER = (int, float, type(None))
#: Fields of a ``kind: "model"`` record (``python -m rnnviz bench --suite models``): rnnviz's
#: analysis of a whole model (``model_type``, ``n_params``, ``seq_len`` T, ``batch_size`` B,
#: weights in ``dtype``, why in ``dtype_note``) built with transformers at ``config``'s fields
#: (``size``: ``real`` or ``tiny``), with ``threads`` CPU threads for XLA and torch alike.
#: rnnviz: ``load_s``, ``compile_s``, ``first_call_s`` (the first ``analyze_model`` call's wall
#: seconds, compiling included) and ``first_run_s`` (its run), ``run_s`` (the median wall seconds of
#: ``repeats`` later calls, ``run_min_s``/``run_max_s``), ``pass_run_s`` (the median of their own
#: ``run_s``: the float32 pass alone), ``run_cpu_s`` (the median of the process's CPU seconds
#: during each, every thread) and ``log10_source`` (whether the float64 pass ran too).
#: transformers' forward + backward of the same checkpoint: its first call (``reference_first_forward_s`` +
#: ``reference_first_backward_s`` = ``reference_first_s``) and the medians of
#: ``reference_repeats`` steady calls (``reference_forward_s``, ``reference_backward_s``,
#: ``reference_run_s``, the median of their sums), what it ran in ``reference``;
#: ``ratio_to_reference`` = ``run_s / reference_run_s`` (null where not measured); CPU seconds
#: likewise (``reference_first_cpu_s``, ``reference_run_cpu_s``, ``cpu_ratio_to_reference`` =
#: ``run_cpu_s / reference_run_cpu_s``: less moved than wall time by other processes), and the
#: 1-minute load average as each phase began (``load_average``, ``reference_load_average``). The GEMM floor:
#: ``floor_flops`` = 6 · n_params · B · T, ``gemm_flops_per_s`` measured in the same run at
#: ``gemm_shape`` [m, k, n], ``floor_s`` = floor_flops / gemm_flops_per_s, ``ratio_to_floor`` =
#: run_s / floor_s. Memory: ``estimated_bytes`` (before loading) against ``available_bytes``, and
#: each phase's resident bytes at its start and its peak (``start_rss_bytes``, ``peak_rss_bytes``
#: for rnnviz; ``reference_start_rss_bytes``, ``reference_peak_rss_bytes``), read as ``rss_note`` says.
MODEL_FIELDS: dict[str, tuple[type, ...]] = {
    **{name: FIELDS[name] for name in _COMMON},
    "size": (str,),
    "model_type": (str,),
    "n_params": (int,),
    "seq_len": (int,),
    "batch_size": (int,),
    "dtype": (str,),
    "dtype_note": (str,),
    "threads": (int,),
    "load_s": _NUMBER,
    "first_call_s": _NUMBER,
    "first_run_s": _NUMBER,
    "run_min_s": _NUMBER,
    "run_max_s": _NUMBER,
    "repeats": (int,),
    "pass_run_s": _NUMBER,
    "run_cpu_s": _NUMBER,
    "log10_source": (str,),
    "reference_first_forward_s": _MAYBE_NUMBER,
    "reference_first_backward_s": _MAYBE_NUMBER,
    "reference_first_s": _MAYBE_NUMBER,
    "reference_forward_s": _MAYBE_NUMBER,
    "reference_backward_s": _MAYBE_NUMBER,
    "reference_run_s": _MAYBE_NUMBER,
    "reference_repeats": (int,),
    "ratio_to_reference": _MAYBE_NUMBER,
    "reference_first_cpu_s": _MAYBE_NUMBER,
    "reference_run_cpu_s": _MAYBE_NUMBER,
    "cpu_ratio_to_reference": _MAYBE_NUMBER,
    "load_average": _NUMBER,
    "reference_load_average": _MAYBE_NUMBER,
    "reference": (str,),
    "gemm_flops_per_s": _NUMBER,
    "gemm_shape": (list,),
    "floor_flops": _NUMBER,
    "floor_s": _NUMBER,
    "ratio_to_floor": _NUMBER,
    "estimated_bytes": (int,),
    "available_bytes": (int,),
    "start_rss_bytes": (int,),
    "peak_rss_bytes": (int,),
    "reference_start_rss_bytes": _MAYBE_INT,
    "reference_peak_rss_bytes": _MAYBE_INT,
    "rss_note": (str,),
}
KINDS: dict[str, dict[str, tuple[type, ...]]] = {
    "bench": FIELDS,
    "train": TRAIN_FIELDS,
    "gradient": GRADIENT_FIELDS,
    "peer": PEER_FIELDS,
    "error": ERROR_FIELDS,
    "model": MODEL_FIELDS,
}


def now_utc() -> str:
    """Now in UTC as ISO-8601 to the second (``2026-01-02T03:04:05+00:00``): a record's timestamp."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def validate(record: Any) -> str | None:
    """None for a valid schema-1 record, else a short reason."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if record.get("schema") != SCHEMA:
        return f"unknown schema {record.get('schema')!r}"
    fields = KINDS.get(record.get("kind"))  # type: ignore[arg-type]
    if fields is None:
        return f"unknown kind {record.get('kind')!r}"
    for name, types in fields.items():
        if name not in record:
            return f"missing field {name!r}"
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, types):
            return f"field {name!r} has type {type(value).__name__}"
    for name, types in OPTIONAL_FIELDS.items():
        if name in record and (isinstance(record[name], bool) or not isinstance(record[name], types)):
            return f"field {name!r} has type {type(record[name]).__name__}"
    if record["kind"] == "error":
        return None
    if record["run_s"] < 0 or record["compile_s"] < 0 or record.get("peak_bytes", 0) < 0:
        return "negative time or size"
    if record["kind"] == "train":
        return None if record["mode"] in ("chunked", "loop") else f"unknown mode {record['mode']!r}"
    if record["kind"] in ("gradient", "model"):
        return None
    if record["kind"] == "peer":
        return None if record["measure"] == "grad" else f"unknown measure {record['measure']!r}"
    if record["strategy"] not in ("plain_grad",) + strategy_names():
        return f"unknown strategy {record['strategy']!r}"
    if record["measure"] not in MEASURE_VALUES:
        return f"unknown measure {record['measure']!r}"
    return None


@dataclass
class LoadResult:
    """Valid records plus what was skipped: ``skipped`` holds ``(file:line, reason)``."""

    records: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def append_records(path: str | os.PathLike, records: Iterable[dict[str, Any]]) -> int:
    """Append valid records to ``path`` (created with its folder); returns how many."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a", encoding="utf-8") as fh:
        for rec in records:
            reason = validate(rec)
            if reason:
                raise ValueError(f"refusing to write an invalid record: {reason}")
            fh.write(json.dumps(rec, sort_keys=True) + "\n")
            n += 1
    return n


def load_records(paths: Iterable[str | os.PathLike]) -> LoadResult:
    """Read every line of every file; invalid lines are skipped and counted, never raised."""
    out = LoadResult()
    for path in paths:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as err:
            out.skipped.append((str(path), f"unreadable: {err.strerror}"))
            continue
        for no, line in enumerate(raw.split(b"\n"), start=1):
            if not line.strip():
                continue
            where = f"{path.name}:{no}"
            if len(line) > MAX_LINE_BYTES:
                out.skipped.append((where, "line too long"))
                continue
            try:
                rec = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                out.skipped.append((where, "not valid JSON"))
                continue
            reason = validate(rec)
            if reason:
                out.skipped.append((where, reason))
            else:
                out.records.append(rec)
    return out


def load_dir(folder: str | os.PathLike) -> LoadResult:
    """All ``*.jsonl`` files directly in ``folder`` (a missing folder gives no records)."""
    folder = Path(folder)
    return load_records(sorted(folder.glob("*.jsonl")) if folder.is_dir() else [])

"""Cost frames: an analysis's compile/run timing, recorded measurements (JSONL records) as one
table, and speed-ups over a baseline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rnnviz.base.analysis import Analysis


def timing_frame(a: Analysis) -> pd.DataFrame:
    """One row of the analysis's cost: strategy, device, compile seconds, run milliseconds
    (median, min, max, repeats), peak MB and achieved GFLOP/s (from the analytic FLOPs)."""
    t = a.timing
    return pd.DataFrame(
        [
            {
                "strategy": a.config.strategy,
                "device": t.device,
                "compile_s": t.compile_s,
                "run_ms": t.run_s * 1e3,
                "run_min_ms": t.run_min_s * 1e3,
                "run_max_ms": t.run_max_s * 1e3,
                "repeats": t.repeats,
                "peak_MB": t.peak_bytes / 2**20,
                "GFLOP/s": t.flops / t.run_s / 1e9 if t.run_s > 0 else np.nan,
            }
        ]
    )


def records_frame(records: list[dict]) -> pd.DataFrame:
    """Schema-1 bench records → one row each with the config flattened and a readable
    source (other kinds, e.g. training records, are left out)."""
    records = [r for r in records if r.get("kind", "bench") == "bench"]
    if not records:
        return pd.DataFrame(
            columns=["label", "strategy", "measure", "device", "run_s", "compile_s", "peak_bytes", "source"]
        )
    rows = []
    for r in records:
        cfg = r["config"]
        rows.append(
            {
                "label": r["label"],
                "strategy": r["strategy"],
                "measure": r["measure"],
                "suite": r["suite"],
                "device_kind": r["device_kind"],
                "device": f"{r['device_kind']} · {r['device_name']}",
                "run_s": r["run_s"],
                "compile_s": r["compile_s"],
                "peak_bytes": r["peak_bytes"],
                "seq_len": cfg.get("seq_len"),
                "hidden_size": cfg.get("hidden_size"),
                "batch_size": cfg.get("batch_size"),
                "cell": cfg.get("cell"),
                "source": f"recorded {r['timestamp'][:10]} · jax {r['jax_version']}",
            }
        )
    return pd.DataFrame(rows)


def speedup_frame(df: pd.DataFrame, over: str) -> pd.DataFrame:
    """From a records frame with CPU and GPU rows: ``<over>, strategy, speedup`` where
    speedup = median CPU run_s / median GPU run_s at equal configs, averaged over the rest."""
    if df.empty or set(df["device_kind"]) < {"cpu", "gpu"}:
        return pd.DataFrame(columns=[over, "strategy", "speedup"])
    keys = ["label", "strategy", "measure"]
    med = df.groupby(keys + ["device_kind", over], dropna=False)["run_s"].median().unstack("device_kind")
    med = med.dropna(subset=["cpu", "gpu"])
    med["speedup"] = med["cpu"] / med["gpu"]
    out = med.reset_index().groupby([over, "strategy"], as_index=False)["speedup"].median()
    return out


def recorded_selection(recorded: pd.DataFrame, suite: str, measure: str, strategy: str) -> pd.DataFrame:
    """The rows of a records frame the Devices tab draws against T: one suite, one measure and
    one strategy (``plain_grad`` is the yardstick, never drawn on its own)."""
    rec = recorded[(recorded["suite"] == suite) & (recorded["strategy"] != "plain_grad")]
    return rec[(rec["measure"] == measure) & (rec["strategy"] == strategy)]


def recorded_times_frame(sel: pd.DataFrame) -> pd.DataFrame:
    """Median recorded run time against T, one series per device and size: ``seq_len, value``
    (ms) and ``series`` (``"gpu · NVIDIA H200 · H=128 B=32"``; ``" · mingru"`` after it where
    more than one cell was recorded on that device at that size)."""
    keys = ["device", "hidden_size", "batch_size"]
    agg = sel.groupby([*keys, "cell", "seq_len"], as_index=False, dropna=False)["run_s"].median()
    shared = agg.groupby(keys, dropna=False)["cell"].transform("nunique") > 1
    size = " · H=" + agg["hidden_size"].astype(str) + " B=" + agg["batch_size"].astype(str)
    series = (agg["device"] + size).where(~shared, agg["device"] + size + " · " + agg["cell"].astype(str))
    return pd.DataFrame({"seq_len": agg["seq_len"], "value": agg["run_s"] * 1e3, "series": series})

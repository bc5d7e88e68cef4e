"""Analysis records → tidy pandas frames: the one JAX/NumPy → table boundary.

Charts (``rnnviz.charts``) and CSV exports read only these frames.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rnnviz.analysis import Analysis


def config_label(a: Analysis) -> str:
    """Short human label of a run's config, for legends and tables."""
    c = a.config
    cell = f"{c.cell}/{c.activation}" if c.cell == "simple" else c.cell
    extra = f" fb={c.forget_bias:g}" if c.cell == "lstm" and c.forget_bias else ""
    return f"{cell} H={c.hidden_size} T={c.seq_len} g={c.recurrent_gain:g}{extra} {c.dtype} seed={c.seed}"


def timestep_frame(a: Analysis) -> pd.DataFrame:
    """One row per t = 0..T: ``grad_norm`` ‖∂L/∂carry_t‖, ``grad_norm_<comp>``,
    ``carry_norm``, ``carry_norm_<comp>``, ``input_grad_norm`` ‖∂L/∂x_t‖ (NaN at t = 0,
    where no input is consumed)."""
    t_len = a.config.seq_len
    data: dict[str, np.ndarray] = {"t": np.arange(t_len + 1), "grad_norm": a.grad_norms}
    for comp, v in a.component_grad_norms.items():
        data[f"grad_norm_{comp}"] = v
    data["carry_norm"] = a.carry_norms
    for comp, v in a.component_carry_norms.items():
        data[f"carry_norm_{comp}"] = v
    data["input_grad_norm"] = np.concatenate([[np.nan], a.input_grad_norms.astype(np.float64)])
    return pd.DataFrame({k: np.asarray(v, dtype=np.float64) if k != "t" else v for k, v in data.items()})


def gradient_long_frame(a: Analysis, label: str | None = None) -> pd.DataFrame:
    """Long form for the gradient chart: ``t, series, value, run`` where series is
    ``total``, a carry component, or ``example <b>`` (per-example totals, batched only)."""
    label = label or config_label(a)
    t = np.arange(a.config.seq_len + 1)
    parts = [pd.DataFrame({"t": t, "series": "total", "value": a.grad_norms.astype(np.float64)})]
    if len(a.component_grad_norms) > 1:
        for comp, v in a.component_grad_norms.items():
            parts.append(pd.DataFrame({"t": t, "series": comp, "value": v.astype(np.float64)}))
    if a.config.batch_size is not None and a.config.batch_size > 1:
        for b in range(a.example_grad_norms.shape[1]):
            parts.append(pd.DataFrame({"t": t, "series": f"example {b}", "value": a.example_grad_norms[:, b].astype(np.float64)}))
    out = pd.concat(parts, ignore_index=True)
    out["run"] = label
    return out

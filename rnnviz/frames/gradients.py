"""Per-step gradient frames of one :class:`~rnnviz.analysis.Analysis`: ‖∂L/∂carry_t‖ (exact log₁₀ too),
input gradients, carry norms and heat maps, the PCA path, gate means, the closed-form bound and
the per-step contributions to ∂L/∂W.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rnnviz.base.analysis import Analysis
from rnnviz.base.theory import theory_overlay
from rnnviz.frames.verdicts import gate_means, pca_path
from rnnviz.tables.cells import cell_spec


def config_label(a: Analysis) -> str:
    """Short human label of a run's config, for legends and tables."""
    c = a.config
    cell = f"{c.cell}/{c.activation}" if len(cell_spec(c.cell).display.activations) > 1 else c.cell
    extra = f" fb={c.forget_bias:g}" if c.forget_bias else ""
    return f"{cell} H={c.hidden_size} T={c.seq_len} g={c.recurrent_gain:g}{extra} {c.dtype} seed={c.seed}"


def timestep_frame(a: Analysis) -> pd.DataFrame:
    """One row per t = 0..T: ``grad_norm`` ‖∂L/∂carry_t‖ as float32 holds it and
    ``log10_grad_norm`` its exact log₁₀ (finite where float32 underflowed; −inf only for
    a true zero), the same per component (``grad_norm_<comp>``, ``log10_grad_norm_<comp>``),
    ``carry_norm``, ``carry_norm_<comp>``, ``input_grad_norm`` ‖∂L/∂x_t‖ (NaN at t = 0,
    where no input is consumed)."""
    t_len = a.config.seq_len
    data: dict[str, np.ndarray] = {
        "t": np.arange(t_len + 1),
        "grad_norm": a.grad_norms,
        "log10_grad_norm": a.log10_grad_norms,
    }
    for comp, v in a.component_grad_norms.items():
        data[f"grad_norm_{comp}"] = v
        data[f"log10_grad_norm_{comp}"] = a.log10_component_grad_norms[comp]
    data["carry_norm"] = a.carry_norms
    for comp, v in a.component_carry_norms.items():
        data[f"carry_norm_{comp}"] = v
    data["input_grad_norm"] = np.concatenate([[np.nan], a.input_grad_norms.astype(np.float64)])
    return pd.DataFrame({k: np.asarray(v, dtype=np.float64) if k != "t" else v for k, v in data.items()})


def gradient_long_frame(a: Analysis, label: str | None = None) -> pd.DataFrame:
    """Long form for the gradient chart: ``t, series, value, log10_value, run`` where
    series is ``total``, a carry component, or ``example <b>`` (per-example totals, batched
    only); value is float32's norm, log10_value the exact log₁₀ magnitude."""
    label = label or config_label(a)
    t = np.arange(a.config.seq_len + 1)

    def part(series: str, value: np.ndarray, log10_value: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "t": t,
                "series": series,
                "value": value.astype(np.float64),
                "log10_value": log10_value.astype(np.float64),
            }
        )

    parts = [part("total", a.grad_norms, a.log10_grad_norms)]
    if len(a.component_grad_norms) > 1:
        for comp, v in a.component_grad_norms.items():
            parts.append(part(comp, v, a.log10_component_grad_norms[comp]))
    if a.config.batch_size is not None and a.config.batch_size > 1:
        for b in range(a.example_grad_norms.shape[1]):
            parts.append(part(f"example {b}", a.example_grad_norms[:, b], a.log10_example_grad_norms[:, b]))
    out = pd.concat(parts, ignore_index=True)
    out["run"] = label
    return out


def input_grad_frame(a: Analysis, label: str | None = None) -> pd.DataFrame:
    """``t, series, value, run`` for ‖∂L/∂x_t‖, t = 1..T."""
    t = np.arange(1, a.config.seq_len + 1)
    return pd.DataFrame(
        {
            "t": t,
            "series": "‖∂L/∂x_t‖",
            "value": a.input_grad_norms.astype(np.float64),
            "run": label or config_label(a),
        }
    )


def carry_norm_frame(a: Analysis, label: str | None = None) -> pd.DataFrame:
    """``t, series, value, run``: ‖carry_t‖ per component (over batch and units)."""
    t = np.arange(a.config.seq_len + 1)
    parts = [
        pd.DataFrame({"t": t, "series": f"‖{c}_t‖", "value": v.astype(np.float64)})
        for c, v in a.component_carry_norms.items()
    ]
    out = pd.concat(parts, ignore_index=True)
    out["run"] = label or config_label(a)
    return out


#: Singular values per matrix drawn for a matrix memory (the largest first).
MATRIX_SINGULAR_VALUES = 8


def carry_heatmap_frame(a: Analysis, component: str = "h", example: int = 0) -> pd.DataFrame:
    """One example's carry component over time, columns t = 0..T: units × time (index
    ``unit``) for a vector component; for a matrix memory (``[heads, d_v, d_k]``, Mamba's
    ``[H, N]``, a normaliser's ``[heads, d]``) its leading singular values per head × time
    (index ``singular value``, rows ``"head g σi"``: up to :data:`MATRIX_SINGULAR_VALUES`
    a head), not its d² entries."""
    path = np.asarray(a.carries[component], dtype=np.float64)
    if a.config.batch_size is not None:
        path = path[:, example]
    t = np.arange(path.shape[0])
    if path.ndim == 2:
        return pd.DataFrame(path.T, index=pd.RangeIndex(path.shape[1], name="unit"), columns=t)
    mats = path.reshape((path.shape[0], -1) + path.shape[-2:])  # [T+1, heads, rows, cols]
    mats = np.where(np.isfinite(mats), mats, 0.0)
    sv = np.linalg.svd(mats, compute_uv=False)[..., :MATRIX_SINGULAR_VALUES]  # [T+1, heads, k]
    heads, k = sv.shape[1:]
    labels = [f"head {g} σ{i + 1}" if heads > 1 else f"σ{i + 1}" for g in range(heads) for i in range(k)]
    return pd.DataFrame(
        sv.reshape(sv.shape[0], -1).T, index=pd.Index(labels, name="singular value"), columns=t
    )


def projection_frame(
    a: Analysis, label: str | None = None, component: str = "h"
) -> tuple[pd.DataFrame, np.ndarray]:
    """``t, pc1, pc2, run`` of example 0's carry path, plus the explained variance ratios."""
    proj = pca_path(a, component)
    df = pd.DataFrame(
        {"t": np.arange(a.config.seq_len + 1), "pc1": proj.coords[:, 0], "pc2": proj.coords[:, 1]}
    )
    df["run"] = label or config_label(a)
    return df, proj.explained


def gates_frame(a: Analysis) -> pd.DataFrame:
    """``t, series, value``: mean gate activation per step (empty for the simple cell)."""
    means = gate_means(a)
    if not means:
        return pd.DataFrame(columns=["t", "series", "value"])
    t = np.arange(1, a.config.seq_len + 1)
    return pd.concat(
        [
            pd.DataFrame({"t": t, "series": f"gate {g}", "value": v.astype(np.float64)})
            for g, v in means.items()
        ],
        ignore_index=True,
    )


def bound_frame(a: Analysis) -> pd.DataFrame | None:
    """``t, value, log10_value, label``: the cell's closed-form curve when it has one (the
    Pascanu bound for the simple cell, the exact diagonal product for indrnn, mingru and
    minlstm; loss "last"). log10_value is exact; value is 0 below float64's range."""
    overlay = theory_overlay(a)
    if overlay is None:
        return None
    with np.errstate(over="ignore", under="ignore"):
        value = 10.0**overlay.log10
    return pd.DataFrame(
        {
            "t": np.arange(a.config.seq_len + 1),
            "value": value,
            "log10_value": overlay.log10,
            "label": overlay.label,
        }
    )


def contributions_frame(a: Analysis) -> pd.DataFrame:
    """Parameter group × t: ‖step t's contribution to ∂L/∂W_group‖ (``per_step`` only)."""
    if a.param_grad_by_step is None:
        return pd.DataFrame()
    m = np.asarray(a.param_grad_by_step, dtype=np.float64).T
    return pd.DataFrame(m, index=list(a.param_groups), columns=np.arange(1, a.config.seq_len + 1))

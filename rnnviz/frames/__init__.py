"""Analysis records → tidy pandas frames: the one JAX/NumPy → table boundary.

Charts (``rnnviz.charts``) and CSV exports read only these frames.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rnnviz.analysis import Analysis
from rnnviz.base.readings import decay_fit
from rnnviz.engine.cells import cell_spec
from rnnviz.engine.cells.theory import theory_overlay
from rnnviz.frames.verdicts import gate_means, pca_path
from rnnviz.studies.connectivity import Connectivity
from rnnviz.studies.over_training import OverTraining


def config_label(a: Analysis) -> str:
    """Short human label of a run's config, for legends and tables."""
    c = a.config
    cell = f"{c.cell}/{c.activation}" if len(cell_spec(c.cell).activations) > 1 else c.cell
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


def carry_heatmap_frame(a: Analysis, component: str = "h", example: int = 0) -> pd.DataFrame:
    """Units × time: index unit, columns t = 0..T, one example's carry component."""
    path = np.asarray(a.carries[component], dtype=np.float64)
    if a.config.batch_size is not None:
        path = path[:, example]
    return pd.DataFrame(
        path.T, index=pd.RangeIndex(path.shape[1], name="unit"), columns=np.arange(path.shape[0])
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


def timing_frame(a: Analysis) -> pd.DataFrame:
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


SURVIVAL_LOG10 = -2.0  # "survives" = still at least 1 % of the gradient at T


def phase_frames(sweep_df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """From a gain × seed sweep (component ``total``): the phase-diagram matrix and the
    survival line.

    matrix: index ``lag`` (T − t), columns ``recurrent_gain``, values the seed-mean of
    log₁₀(‖∂L/∂carry_{T−lag}‖ / ‖∂L/∂carry_T‖), from the exact ``log10_grad_norm`` (so
    ratios below 10⁻³⁸ are values, not gaps). survival: per lag, the smallest gain whose
    ratio is ≥ 10^SURVIVAL_LOG10, as ``lag, gain_mean, gain_min, gain_max`` over seeds.
    """
    df = sweep_df[sweep_df["component"] == "total"].copy()
    if "seed" not in df.columns:
        df["seed"] = 0
    if "log10_grad_norm" not in df.columns:
        with np.errstate(divide="ignore"):
            df["log10_grad_norm"] = np.log10(df["grad_norm"].to_numpy(dtype=np.float64))
    end = df[df["lag"] == 0].set_index(["recurrent_gain", "seed"])["log10_grad_norm"]
    df = df.join(end.rename("l_end"), on=["recurrent_gain", "seed"])
    with np.errstate(invalid="ignore"):
        ratio = df["log10_grad_norm"].to_numpy() - df["l_end"].to_numpy()
    df["log10_ratio"] = np.where(np.isfinite(ratio), ratio, np.nan)
    matrix = (
        df.groupby(["lag", "recurrent_gain"])["log10_ratio"].mean().unstack("recurrent_gain").sort_index()
    )
    surv = []
    for (seed, lag), s in df.groupby(["seed", "lag"]):
        ok = s[s["log10_ratio"] >= SURVIVAL_LOG10]["recurrent_gain"]
        surv.append({"seed": seed, "lag": lag, "gain": ok.min() if not ok.empty else np.nan})
    s = pd.DataFrame(surv)
    survival = s.groupby("lag")["gain"].agg(gain_mean="mean", gain_min="min", gain_max="max").reset_index()
    return matrix, survival


# ---- Jacobians and Lyapunov exponents (rnnviz.studies.lyapunov records) -------------------------


def singular_values_frame(j) -> pd.DataFrame:
    """``t, series (σ₁ … σ_k), value``: the top singular values of each step Jacobian."""
    steps, k = j.singular_values.shape
    return pd.DataFrame(
        {
            "t": np.tile(j.steps, k),
            "series": np.repeat([f"σ{i}" for i in range(1, k + 1)], steps),
            "value": j.singular_values.T.reshape(-1),
        }
    )


def spectrum_frame(ly) -> pd.DataFrame:
    """``i, lyapunov, spread, factor``: the exponents (mean, std over examples) and the
    per-step factor e^λ."""
    with np.errstate(over="ignore"):
        factor = np.exp(ly.exponents)
    return pd.DataFrame(
        {
            "i": np.arange(1, ly.k + 1),
            "lyapunov": ly.exponents,
            "spread": ly.exponents_spread,
            "factor": factor,
        }
    )


def running_frame(ly) -> pd.DataFrame:
    """``t, value, lo, hi``: the running estimate of λ₁ after step t (mean over examples,
    range over examples); steps before the warm-up ends are left out."""
    lam1 = ly.running[:, :, 0]
    keep = np.isfinite(lam1).any(axis=1)
    t = np.arange(1, lam1.shape[0] + 1)[keep]
    lam1 = lam1[keep]
    return pd.DataFrame(
        {
            "t": t,
            "value": np.nanmean(lam1, axis=1),
            "lo": np.nanmin(lam1, axis=1),
            "hi": np.nanmax(lam1, axis=1),
        }
    )


def decay_frame(a: Analysis, ly) -> pd.DataFrame:
    """``lag, series, value`` (log₁₀): the measured ‖∂L/∂carry_{T−lag}‖ of ``a``, the line
    fitted to it over the fit window (:func:`rnnviz.base.readings.decay_fit`), and the line of
    slope λ₁ through the same point at the window's start (the prediction)."""
    logs = np.asarray(a.log10_grad_norms, np.float64)[::-1]
    lags = np.arange(logs.size)
    parts = [pd.DataFrame({"lag": lags, "series": "measured ‖∂L/∂carry_{T−lag}‖", "value": logs})]
    fit = decay_fit(a.log10_grad_norms)
    if fit is not None:
        window = np.arange(fit.lag_lo, fit.lag_hi + 1)
        ln10 = np.log(10.0)
        start = (fit.intercept + fit.slope * fit.lag_lo) / ln10
        parts.append(
            pd.DataFrame(
                {
                    "lag": window,
                    "series": f"fit: {fit.slope:+.4f} per step",
                    "value": (fit.intercept + fit.slope * window) / ln10,
                }
            )
        )
        parts.append(
            pd.DataFrame(
                {
                    "lag": window,
                    "series": f"predicted by λ₁ = {ly.lambda1:+.4f}",
                    "value": start + ly.lambda1 * (window - fit.lag_lo) / ln10,
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


# ---- training records (rnnviz.studies.training) --------------------------------------------------------

SMOOTH_STEPS = 20


def training_frame(records, label: str | None = None) -> pd.DataFrame:
    """``run, step, loss, loss_smooth (trailing mean over SMOOTH_STEPS), metric, grad_norm,
    clipped`` for every step of every run (``run``: seed, or ``label``'s prefix + seed)."""
    parts = []
    for r in records:
        loss = pd.Series(r.losses)
        parts.append(
            pd.DataFrame(
                {
                    "run": f"{label + ' · ' if label else ''}seed {r.config.seed}"
                    + (f" lr {r.learning_rate:g}" if label is None else ""),
                    "step": np.arange(r.steps_run),
                    "loss": r.losses,
                    "loss_smooth": loss.rolling(SMOOTH_STEPS, min_periods=1).mean().to_numpy(),
                    "metric": r.metric,
                    "grad_norm": r.grad_norm,
                    "clipped": r.clipped,
                }
            )
        )
    return (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=["run", "step", "loss", "loss_smooth", "metric", "grad_norm", "clipped"])
    )


def profile_matrix(r) -> pd.DataFrame:
    """log₁₀ ‖∂L/∂carry_t‖ of one run: index the training step of each profile, columns t."""
    return pd.DataFrame(
        r.profiles,
        index=pd.Index(r.profile_steps, name="training step"),
        columns=pd.Index(np.arange(r.profiles.shape[1]), name="t"),
    )


# ---- trained networks (rnnviz.connectivity, rnnviz.over_training) ------------------------------


def connectivity_frame(runs: list[tuple[str, Connectivity]]) -> pd.DataFrame:
    """``label, t, lag, log10, shade``: each labelled connectivity up to its output step
    (``shade``: the opacity the charts give it, 1 at the maximum, over three decades)."""
    parts = []
    for label, c in runs:
        t = np.arange(1, c.step + 1)
        logs = c.log10[: c.step]
        parts.append(
            pd.DataFrame(
                {
                    "label": label,
                    "t": t,
                    "lag": c.step - t,
                    "log10": logs,
                    "relative": c.relative()[: c.step],
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=["label", "t", "lag", "log10", "relative"])
    return pd.concat(parts, ignore_index=True)


def sequence_gates_frame(c: Connectivity) -> pd.DataFrame:
    """``t, series, value``: the mean gate activations along the connectivity's sequence."""
    return gates_frame(c)  # the record has what gate_means reads: config, params, carries, inputs


def over_training_frame(ot: OverTraining) -> pd.DataFrame:
    """``step, series, value``: λ1 … λk and the loss at every analysed kept step, and the
    median σ_i(J_t) over t (series ``σ1 (median)`` …)."""
    parts = [
        pd.DataFrame({"step": ot.steps, "series": f"λ{i + 1}", "value": ot.exponents[:, i]})
        for i in range(ot.exponents.shape[1])
    ]
    parts.append(pd.DataFrame({"step": ot.steps, "series": "loss", "value": ot.loss}))
    median = np.median(ot.singular_values, axis=1)
    parts += [
        pd.DataFrame({"step": ot.steps, "series": f"σ{i + 1} (median over t)", "value": median[:, i]})
        for i in range(median.shape[1])
    ]
    return pd.concat(parts, ignore_index=True)

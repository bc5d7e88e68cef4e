"""Dynamics frames: the phase diagram of a gain sweep, step-Jacobian singular values, the
Lyapunov spectrum and its running estimate, and the gradient's decay against λ₁.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rnnviz.base.analysis import Analysis
from rnnviz.base.readings import decay_fit

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
    # per seed and lag, the smallest gain that passes (NaN where none does), in one groupby:
    # a loop over the (seed, lag) groups was most of the Phase tab's rerun at T = 1000 (profile_tab.py)
    every = pd.MultiIndex.from_frame(df[["seed", "lag"]].drop_duplicates())
    passing = df[df["log10_ratio"] >= SURVIVAL_LOG10]
    first = passing.groupby(["seed", "lag"])["recurrent_gain"].min().reindex(every).sort_index()
    survival = first.groupby("lag").agg(gain_mean="mean", gain_min="min", gain_max="max").reset_index()
    return matrix, survival


def survival_sentence(matrix: pd.DataFrame, survival: pd.DataFrame) -> str:
    """What :func:`phase_frames`' survival line says when it lies along an edge of the diagram,
    where it reads as the frame rather than as data; "" when it crosses the range.

    Example:
        >>> m = pd.DataFrame({0.5: [0.0, -0.1], 2.0: [0.0, 0.1]}, index=pd.Index([0, 1], name="lag"))
        >>> s = pd.DataFrame({"lag": [0, 1], "gain_mean": [0.5, 0.5]})
        >>> survival_sentence(m, s)
        'The lowest gain here already keeps at least 1 % at every lag: the line lies on the left edge.'
        >>> survival_sentence(m, s.assign(gain_mean=[0.5, np.nan]))
        'No gain here keeps 1 % beyond lag 0, in any seed: the line stops there.'
        >>> survival_sentence(m, s.assign(gain_mean=[0.5, 2.0]))
        ''
    """
    lowest = float(matrix.columns.min())
    beyond = survival[survival["lag"] > 0]["gain_mean"]
    if beyond.empty:
        return ""
    if beyond.isna().all():
        return "No gain here keeps 1 % beyond lag 0, in any seed: the line stops there."
    if (beyond == lowest).all():
        return "The lowest gain here already keeps at least 1 % at every lag: the line lies on the left edge."
    return ""


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

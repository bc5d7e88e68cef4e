"""Pure chart builders: tidy pandas frames in, ``plotly.graph_objects.Figure`` out.

No JAX, no Streamlit. One theme (Okabe–Ito colours, safe for colour-blind readers;
Cividis for heatmaps). Every builder returns a figure with titles even for an empty
frame, never raises on NaN/Inf: non-finite values are left out of lines and marked.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rnnviz.text import pow10_text, superscript

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
HEATMAP_SCALE = "Cividis"
_LAYOUT = dict(
    template="plotly_white",
    colorway=list(OKABE_ITO),
    hovermode="x unified",
    margin=dict(l=60, r=20, t=60, b=50),
    legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    font=dict(size=13),
)


#: Most points a chart draws per line, and most columns per heatmap. Longer series are
#: thinned for drawing only (frames, CSV exports and the library keep every step), and the
#: chart's title says so.
MAX_POINTS = 2000
MAX_COLUMNS = 1000


def thin(
    df: pd.DataFrame, x: str = "t", value: str = "value", max_points: int = MAX_POINTS
) -> tuple[pd.DataFrame, int]:
    """``(rows to draw, k)``: per line (``run``, ``series``) and per bucket of k consecutive
    ``x`` values, the rows with the smallest and the largest ``value`` — the min/max
    envelope, so a spike, a zero or a NaN is never dropped. ``k = 1``: nothing was left out."""
    keys = [c for c in ("run", "series") if c in df.columns]
    longest = int(df.groupby(keys, sort=False).size().max()) if keys and not df.empty else len(df)
    if longest <= max_points:
        return df, 1
    k = math.ceil(2 * longest / max_points)
    v = df[value].to_numpy(dtype=np.float64)
    finite = np.isfinite(v)
    frame = df[keys].copy() if keys else pd.DataFrame(index=df.index)
    frame["_bucket"] = (df[x].to_numpy() - df[x].min()) // k
    # Non-finite rows sort first in both orders, so a bucket holding one keeps it (it is marked).
    frame["_lo"], frame["_hi"] = np.where(finite, v, -np.inf), np.where(finite, -v, -np.inf)
    groups = frame.groupby(keys + ["_bucket"], sort=False)
    keep = np.union1d(groups["_lo"].idxmin().to_numpy(), groups["_hi"].idxmin().to_numpy())
    return df.loc[keep], k


def _thinned(title: str, k: int) -> str:
    return title if k == 1 else f"{title} — drawn: min/max of every {k} steps"


@functools.lru_cache(maxsize=1)
def _base_layout() -> dict:
    """The theme as a plain layout dict, validated once (template resolved): a figure built
    from it skips Plotly's validation and the template's deep copy (≈ 15 ms a figure)."""
    fig = go.Figure()
    fig.update_layout(**_LAYOUT)
    return fig.layout.to_plotly_json()


def _figure(title: str, x_title: str, y_title: str, *, log_y: bool = False) -> go.Figure:
    # Unvalidated: this module builds every property itself (the chart tests read them back).
    fig = go.Figure(layout={**_base_layout(), "title": {"text": title}}, _validate=False)
    fig.update_xaxes(title_text=x_title)
    # Non-log axes stay "auto" so categorical values (heatmap rows by name) are drawn.
    fig.update_yaxes(
        title_text=y_title, type="log" if log_y else "-", exponentformat="power" if log_y else "none"
    )
    return fig


#: Hover text of a magnitude from :func:`_pow10_parts`' two columns: ``3.47×10⁻²²⁸``.
POW10_HOVER = "%{customdata[0]:.2f}×10<sup>%{customdata[1]}</sup>"


def _pow10_parts(logs: np.ndarray) -> np.ndarray:
    """``[n, 2]`` numbers (mantissa, exponent) of magnitudes given by their log₁₀, for
    :data:`POW10_HOVER`: numeric columns, so a long trace needs no per-point strings (they
    cost more to build and validate than the rest of the figure)."""
    logs = np.asarray(logs, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        e = np.floor(logs)
        m = 10.0 ** (logs - e)
    e = np.where(np.isfinite(logs), e, np.nan)
    m = np.where(logs == -np.inf, 0.0, np.where(np.isfinite(logs), m, np.nan))
    return np.column_stack([m, e])


def _positive_finite(values: pd.Series) -> np.ndarray:
    """Values a log axis can show; zeros, negatives and NaN/Inf become gaps."""
    v = values.to_numpy(dtype=np.float64, copy=True)
    v[~np.isfinite(v) | (v <= 0)] = np.nan
    return v


def _mark_nonfinite(
    fig: go.Figure, df: pd.DataFrame, x: str = "t", y: str = "value", label: str = "NaN/Inf"
) -> None:
    """A dotted vermilion line, annotated, at the first step whose value is NaN/Inf."""
    bad = df[~np.isfinite(df[y].to_numpy(dtype=np.float64))]
    if bad.empty:
        return
    first = float(bad[x].min())
    fig.add_vline(
        x=first,
        line=dict(color="#D55E00", dash="dot", width=2),
        annotation_text=f"{label} ({len(bad)} steps, first t={first:g})",
        annotation_position="top",
    )


def _log10_column(df: pd.DataFrame) -> np.ndarray:
    """The exact ``log10_value`` column when the frame has one, else log₁₀ of ``value``."""
    if "log10_value" in df.columns:
        return df["log10_value"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log10(df["value"].to_numpy(dtype=np.float64))


def _drawable(logs: np.ndarray) -> np.ndarray:
    """Finite log values; −inf (a true zero), +inf and NaN become gaps."""
    return np.where(np.isfinite(logs), logs, np.nan)


def pow10_ticks(lo: float, hi: float, max_ticks: int = 8) -> tuple[list[float], list[str]]:
    """Tick positions (integer exponents) and labels ``10⁻²²⁸`` for a log₁₀ axis spanning
    ``[lo, hi]``: a step of 1, 2 or 5 decades times a power of ten, at most ``max_ticks``."""
    lo, hi = math.floor(lo), math.ceil(hi)
    span = max(hi - lo, 1)
    step = next(
        m * 10**p for p in range(0, 12) for m in (1, 2, 5) if math.ceil(span / (m * 10**p)) + 1 <= max_ticks
    )
    first, last = math.floor(lo / step) * step, math.ceil(hi / step) * step
    vals = list(range(first, last + 1, step))
    return [float(v) for v in vals], [f"10{superscript(v)}" for v in vals]


def gradient_figure(
    df: pd.DataFrame, bound: pd.DataFrame | None = None, title: str = "‖∂L/∂carry_t‖ through time"
) -> go.Figure:
    """Gradient magnitudes vs t, drawn as log₁₀ on a linear axis labelled in powers of ten,
    so the axis spans the real range (10⁻²²⁸ and beyond, past float64's too).

    df: ``t, series, value, run`` and optionally ``log10_value`` (exact magnitudes, used
    when present) — series ``total``, a carry component (``c``, ``h``) or ``example <b>``
    (drawn faint). bound: optional ``t, value, label`` (+ ``log10_value``) theory curve.
    A true zero (log −∞) is a gap; the first NaN/Inf of the total is marked.
    """
    df = df.assign(log10_value=_log10_column(df)) if not df.empty else df
    df, k = thin(df, value="log10_value") if not df.empty else (df, 1)
    fig = _figure(_thinned(title, k), "timestep t", "‖∂L/∂carry_t‖ (log scale)")
    if df.empty:
        return fig
    runs = list(df["run"].unique())  # in order of appearance
    for r_i, run in enumerate(runs):
        colour = OKABE_ITO[r_i % len(OKABE_ITO)]
        sub = df[df["run"] == run]
        prefix = f"{run}: " if len(runs) > 1 else ""
        first_example = True
        for series in sub["series"].unique():
            s = sub[sub["series"] == series]
            is_example = str(series).startswith("example")
            dash = {"total": "solid", "c": "dash", "h": "dot"}.get(series, "solid")
            logs = s["log10_value"].to_numpy()
            fig.add_trace(
                go.Scatter(
                    x=s["t"].to_numpy(),
                    y=_drawable(logs),
                    mode="lines",
                    name=(prefix + "per example") if is_example else prefix + str(series),
                    legendgroup=f"{run}-examples" if is_example else f"{run}-{series}",
                    showlegend=not is_example or first_example,
                    opacity=0.25 if is_example else 1.0,
                    line=dict(color=colour, width=1 if is_example else 2.5, dash=dash),
                    customdata=_pow10_parts(logs),
                    hovertemplate="t=%{x}<br>" + POW10_HOVER + "<extra>" + prefix + str(series) + "</extra>",
                    _validate=False,  # numeric arrays built here: skip Plotly's per-element checks
                )
            )
            first_example = first_example and not is_example
        total = sub[sub["series"] == "total"]
        _mark_nonfinite(
            fig,
            total.assign(marker=np.where(total["log10_value"] == -np.inf, 0.0, total["log10_value"])),
            y="marker",
        )
    if bound is not None and not bound.empty:
        bound = thin(bound.assign(log10_value=_log10_column(bound)), value="log10_value")[0]
        logs = _log10_column(bound)
        fig.add_trace(
            go.Scatter(
                x=bound["t"],
                y=_drawable(logs),
                mode="lines",
                name=str(bound["label"].iloc[0]),
                line=dict(color="#000000", width=1.5, dash="longdash"),
                customdata=_pow10_parts(logs),
                hovertemplate="t=%{x}<br>bound " + POW10_HOVER + "<extra></extra>",
                _validate=False,
            )
        )
    ys = np.concatenate([np.asarray(t.y, dtype=np.float64) for t in fig.data]) if fig.data else np.array([])
    ys = ys[np.isfinite(ys)]
    if ys.size:
        vals, text = pow10_ticks(float(ys.min()), float(ys.max()))
        fig.update_yaxes(tickmode="array", tickvals=vals, ticktext=text)
    return fig


def line_figure(
    df: pd.DataFrame,
    title: str,
    y_title: str,
    *,
    log_y: bool = False,
    x: str = "t",
    x_title: str = "timestep t",
) -> go.Figure:
    """Generic lines: ``x, series, value`` (+ optional ``run``), one trace per (run, series)."""
    df, k = thin(df, x=x) if not df.empty else (df, 1)
    fig = _figure(_thinned(title, k), x_title, y_title, log_y=log_y)
    if df.empty:
        return fig
    group_cols = [c for c in ("run", "series") if c in df.columns]
    for keys, s in df.groupby(group_cols, sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        name = " · ".join(str(k) for k in keys)
        y = _positive_finite(s["value"]) if log_y else s["value"].to_numpy(dtype=np.float64)
        fig.add_trace(
            go.Scatter(
                x=s[x].to_numpy(),
                y=y,
                mode="lines",
                name=name,
                hovertemplate=f"{x}=%{{x}}<br>%{{y:.4g}}<extra>{name}</extra>",
                _validate=False,
            )
        )
    _mark_nonfinite(fig, df, x=x)
    return fig


def heatmap_figure(
    matrix: pd.DataFrame,
    title: str,
    *,
    x_title: str = "timestep t",
    y_title: str = "unit",
    colorbar: str = "value",
    log10: bool = False,
) -> go.Figure:
    """Heatmap of a frame whose index is the y axis and columns the x axis (every k-th
    column drawn when there are more than :data:`MAX_COLUMNS`, said in the title)."""
    step = math.ceil(matrix.shape[1] / MAX_COLUMNS) if matrix.shape[1] > MAX_COLUMNS else 1
    matrix = matrix.iloc[:, ::step]
    fig = _figure(title if step == 1 else f"{title} — drawn: one column in every {step}", x_title, y_title)
    fig.update_layout(hovermode="closest")
    if matrix.empty:
        return fig
    z = matrix.to_numpy(dtype=np.float64)
    if log10:
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(z > 0, np.log10(z), np.nan)
        colorbar = f"log₁₀ {colorbar}"
    z = np.where(np.isfinite(z), z, np.nan)
    fig.add_trace(
        go.Heatmap(
            z=z,
            x=list(matrix.columns),
            y=list(matrix.index),
            colorscale=HEATMAP_SCALE,
            colorbar=dict(title=colorbar),
            hovertemplate=f"{x_title}=%{{x}}<br>{y_title}=%{{y}}<br>%{{z:.4g}}<extra></extra>",
        )
    )
    return fig


def projection_figure(df: pd.DataFrame, title: str = "Carry path, 2-D PCA projection") -> go.Figure:
    """``t, pc1, pc2, run`` → path coloured by time (one path per run)."""
    fig = _figure(title, "PC 1", "PC 2")
    fig.update_layout(hovermode="closest")
    if df.empty:
        return fig
    runs = list(dict.fromkeys(df["run"])) if "run" in df.columns else [None]
    for i, run in enumerate(runs):
        s = df if run is None else df[df["run"] == run]
        if len(s) > MAX_POINTS:  # a path: every k-th point (and the last), said in the title
            k = math.ceil(len(s) / MAX_POINTS)
            s = s.iloc[sorted(set(range(0, len(s), k)) | {len(s) - 1})]
            fig.update_layout(title=dict(text=f"{title} — drawn: one step in every {k}"))
        fig.add_trace(
            go.Scatter(
                x=s["pc1"],
                y=s["pc2"],
                mode="lines+markers",
                name=str(run or "carry"),
                line=dict(color="rgba(120,120,120,0.5)", width=1),
                marker=dict(
                    color=s["t"],
                    colorscale=HEATMAP_SCALE,
                    size=6,
                    showscale=i == 0,
                    colorbar=dict(title="t"),
                    symbol=["circle", "diamond", "square", "triangle-up"][i % 4],
                ),
                hovertemplate="t=%{marker.color}<br>(%{x:.3g}, %{y:.3g})<extra></extra>",
            )
        )
    return fig


def bar_panels(
    df: pd.DataFrame,
    x: str,
    panels: Sequence[tuple[str, str]],
    title: str,
    *,
    color: str | None = None,
    log_y: bool = False,
) -> go.Figure:
    """Side-by-side bar panels: one per ``(column, panel title)``; bars along ``x``,
    grouped by ``color`` when given."""
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=[p[1] for p in panels])
    legend = dict(
        orientation="h", yanchor="top", y=-0.12, xanchor="left", x=0
    )  # below: the panel titles sit on top
    fig.update_layout(
        title=dict(text=title), **{**_LAYOUT, "hovermode": "closest", "legend": legend}, barmode="group"
    )
    if df.empty:
        return fig
    groups = list(dict.fromkeys(df[color])) if color else [None]
    for col_i, (column, _) in enumerate(panels, start=1):
        for g_i, g in enumerate(groups):
            s = df if g is None else df[df[color] == g]
            fig.add_trace(
                go.Bar(
                    x=s[x].astype(str),
                    y=s[column],
                    name=str(g if g is not None else column),
                    marker_color=OKABE_ITO[g_i % len(OKABE_ITO)],
                    showlegend=col_i == 1 and g is not None,
                    legendgroup=str(g),
                    hovertemplate="%{x}<br>%{y:.4g}<extra>" + str(g or "") + "</extra>",
                ),
                row=1,
                col=col_i,
            )
        if log_y:
            fig.update_yaxes(type="log", row=1, col=col_i)
    return fig


def scaling_figure(df: pd.DataFrame, title: str = "Cost over sequence length") -> go.Figure:
    """``strategy, seq_len, run_s, peak_bytes`` → run time and peak memory vs T (log–log)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["run time (ms)", "peak memory (MB)"])
    fig.update_layout(title=dict(text=title), **_LAYOUT)
    for i, (strategy, s) in enumerate(df.groupby("strategy", sort=False) if not df.empty else []):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        s = s.sort_values("seq_len")
        fig.add_trace(
            go.Scatter(
                x=s["seq_len"],
                y=s["run_s"] * 1e3,
                name=strategy,
                mode="lines+markers",
                line=dict(color=colour),
                legendgroup=strategy,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=s["seq_len"],
                y=s["peak_bytes"] / 2**20,
                name=strategy,
                mode="lines+markers",
                line=dict(color=colour),
                legendgroup=strategy,
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(type="log", title_text="seq_len T")
    fig.update_yaxes(type="log")
    return fig


def speedup_figure(df: pd.DataFrame, x: str, title: str) -> go.Figure:
    """``<x>, strategy, speedup`` → GPU speed-up over CPU vs a size; the line y = 1 is the crossover."""
    fig = _figure(title, x, "CPU time / GPU time (log)", log_y=True)
    if df.empty:
        return fig
    for strategy, s in df.groupby("strategy", sort=False):
        s = s.sort_values(x)
        fig.add_trace(
            go.Scatter(x=s[x], y=_positive_finite(s["speedup"]), mode="lines+markers", name=str(strategy))
        )
    fig.add_hline(
        y=1.0,
        line=dict(color="#000000", dash="dot"),
        annotation_text="same speed",
        annotation_position="bottom right",
    )
    fig.update_xaxes(type="log")
    return fig


def empty_figure(title: str, message: str) -> go.Figure:
    fig = _figure(title, "", "")
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def decades(values: Sequence[float]) -> float:
    """How many powers of ten the positive finite values span (0 when fewer than two)."""
    v = np.asarray([x for x in values if x > 0 and math.isfinite(x)], dtype=np.float64)
    return float(np.log10(v.max() / v.min())) if v.size >= 2 else 0.0


def phase_figure(
    matrix: pd.DataFrame,
    survival: pd.DataFrame | None = None,
    boundary_gain: float | None = None,
    title: str = "Phase diagram: log₁₀ ‖∂L/∂carry_{T−lag}‖ / ‖∂L/∂carry_T‖",
) -> go.Figure:
    """Heatmap over (recurrent gain × lag) with the survival line and its seed band, and
    the Pascanu boundary σ₁·γ = 1 as a vertical line (simple cell)."""
    fig = heatmap_figure(
        matrix, title, x_title="recurrent gain g", y_title="lag T − t", colorbar="log₁₀ ratio"
    )
    if matrix.empty:
        return fig
    fig.data[0].update(colorscale="RdBu", zmid=0.0)
    if survival is not None and not survival.empty:
        fig.add_trace(
            go.Scatter(
                x=survival["gain_max"],
                y=survival["lag"],
                mode="lines",
                line=dict(width=0),
                showlegend=False,
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=survival["gain_min"],
                y=survival["lag"],
                mode="lines",
                line=dict(width=0),
                fill="tonextx",
                fillcolor="rgba(0,0,0,0.15)",
                name="seed range",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=survival["gain_mean"],
                y=survival["lag"],
                mode="lines",
                line=dict(color="#000000", width=2),
                name="gain where ≥1% survives lag k",
            )
        )
    if boundary_gain is not None:
        fig.add_trace(
            go.Scatter(
                x=[boundary_gain, boundary_gain],
                y=[matrix.index.min(), matrix.index.max()],
                mode="lines",
                line=dict(color="#E69F00", width=3, dash="dash"),
                name=f"Pascanu σ₁·γ = 1 (g = {boundary_gain:.3f})",
            )
        )
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0))
    return fig


def spectrum_figure(
    df: pd.DataFrame, title: str = "Lyapunov spectrum λ_i (per step; > 0 stretches, < 0 shrinks)"
) -> go.Figure:
    """``i, lyapunov, spread`` → bars with ±1 std error bars (over examples) and the λ = 0 line."""
    fig = _figure(title, "exponent i", "λ_i (natural log per step)")
    fig.update_layout(hovermode="closest")
    if df.empty:
        return fig
    finite = np.isfinite(df["lyapunov"].to_numpy(dtype=np.float64))
    s = df[finite]
    colours = [OKABE_ITO[5] if v > 0 else OKABE_ITO[0] for v in s["lyapunov"]]
    fig.add_trace(
        go.Bar(
            x=s["i"],
            y=s["lyapunov"],
            marker_color=colours,
            name="λ_i",
            error_y=dict(type="data", array=s["spread"], visible=True),
            hovertemplate="λ%{x} = %{y:.5f}<extra></extra>",
        )
    )
    fig.add_hline(y=0.0, line=dict(color="#000000", dash="dot"))
    if (~finite).any():
        fig.add_annotation(
            text=f"{int((~finite).sum())} exponent(s) are −∞ (a direction the step maps to 0, e.g. dead "
            "ReLU units)",
            showarrow=False,
            x=0.5,
            y=1.0,
            xref="paper",
            yref="paper",
            yanchor="bottom",
        )
    return fig


def _band(fig: go.Figure, x, lo, hi, name: str, colour: str) -> None:
    """A filled band between ``lo`` and ``hi`` (two traces: an invisible upper edge, then
    the lower edge filled up to it), legend entry ``name``."""
    fig.add_trace(go.Scatter(x=x, y=hi, mode="lines", line=dict(width=0), showlegend=False, hoverinfo="skip"))
    fig.add_trace(
        go.Scatter(x=x, y=lo, mode="lines", line=dict(width=0), fill="tonexty", fillcolor=colour, name=name)
    )


def running_figure(df: pd.DataFrame, title: str = "Running estimate of λ₁ (convergence)") -> go.Figure:
    """``t, value, lo, hi`` → the running mean with the range over examples as a band."""
    fig = _figure(title, "timestep t", "λ₁ estimate after t steps")
    if df.empty:
        return fig
    _band(fig, df["t"], df["lo"], df["hi"], "range over examples", "rgba(0,114,178,0.2)")
    fig.add_trace(
        go.Scatter(
            x=df["t"], y=df["value"], mode="lines", line=dict(color=OKABE_ITO[0], width=2), name="λ₁ (mean)"
        )
    )
    fig.add_hline(y=0.0, line=dict(color="#000000", dash="dot"))
    return fig


def decay_figure(df: pd.DataFrame, title: str = "Predicted (λ₁) vs measured gradient decay") -> go.Figure:
    """``lag, series, value`` (log₁₀) → the measured curve, its fitted line and the λ₁ line,
    on a linear axis of log₁₀ values labelled as powers of ten."""
    fig = _figure(title, "lag k = T − t (steps back from T)", "‖∂L/∂carry_{T−k}‖")
    if df.empty:
        return fig
    dashes = {0: "solid", 1: "dash", 2: "dot"}
    for i, (name, s) in enumerate(df.groupby("series", sort=False)):
        y = _drawable(s["value"].to_numpy(dtype=np.float64))
        fig.add_trace(
            go.Scatter(
                x=s["lag"],
                y=y,
                mode="lines",
                name=str(name),
                line=dict(dash=dashes.get(i, "solid"), width=2 if i else 1.5),
                customdata=[pow10_text(v) for v in y],
                hovertemplate="lag %{x}: %{customdata}<extra>" + str(name) + "</extra>",
            )
        )
    finite = df["value"].to_numpy(dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    if finite.size:
        vals, text = pow10_ticks(float(finite.min()), float(finite.max()))
        fig.update_yaxes(tickmode="array", tickvals=vals, ticktext=text)
    return fig


def lyapunov_phase_figure(
    df: pd.DataFrame,
    edge_gain: float | None = None,
    title: str = "λ₁ against the recurrent gain: the edge of chaos",
) -> go.Figure:
    """``recurrent_gain, lyapunov, lo, hi`` → λ₁ (mean over seeds, band: range), the λ₁ = 0
    line and the gain where it is crossed."""
    fig = _figure(title, "recurrent gain g", "λ₁ (natural log per step)")
    if df.empty:
        return fig
    _band(fig, df["recurrent_gain"], df["lo"], df["hi"], "seed range", "rgba(0,0,0,0.15)")
    fig.add_trace(
        go.Scatter(
            x=df["recurrent_gain"],
            y=_drawable(df["lyapunov"].to_numpy(dtype=np.float64)),
            mode="lines+markers",
            line=dict(color=OKABE_ITO[0], width=2),
            name="λ₁",
        )
    )
    fig.add_hline(
        y=0.0,
        line=dict(color="#000000", dash="dot"),
        annotation_text="λ₁ = 0: edge of chaos",
        annotation_position="bottom right",
    )
    if edge_gain is not None:
        fig.add_vline(
            x=edge_gain,
            line=dict(color=OKABE_ITO[5], dash="dash", width=2),
            annotation_text=f"λ₁ crosses 0 at g = {edge_gain:.3f}",
            annotation_position="top left",
        )
    return fig


def training_figure(
    df: pd.DataFrame,
    column: str,
    title: str,
    y_title: str,
    *,
    baseline: float | None = None,
    log_y: bool = True,
) -> go.Figure:
    """``run, step, <column>`` → one line per run over training steps; ``baseline`` as a
    dashed line (the trivial predictor's loss)."""
    fig = line_figure(
        df.rename(columns={column: "value"}).assign(series=df["run"])[["step", "series", "value"]]
        if not df.empty
        else df,
        title,
        y_title,
        log_y=log_y,
        x="step",
        x_title="training step",
    )
    if baseline is not None:
        fig.add_hline(
            y=baseline,
            line=dict(color="#000000", dash="dash"),
            annotation_text=f"baseline {baseline:.3g} (trivial predictor)",
            annotation_position="top right",
        )
    return fig


def clipping_figure(
    df: pd.DataFrame, clip: float | None, title: str = "Global gradient norm ‖∇L‖ (before clipping)"
) -> go.Figure:
    """``run, step, grad_norm, clipped`` → the norm per run, clipped steps as vermilion
    markers, the threshold as a dotted line."""
    fig = training_figure(df, "grad_norm", title, "‖∇L‖ (log)")
    if df.empty:
        return fig
    hit = df[df["clipped"].astype(bool)]
    if not hit.empty:
        fig.add_trace(
            go.Scatter(
                x=hit["step"],
                y=_positive_finite(hit["grad_norm"]),
                mode="markers",
                name=f"clipped ({len(hit)} steps)",
                marker=dict(color=OKABE_ITO[5], size=5, symbol="x"),
            )
        )
    if clip is not None:
        fig.add_hline(
            y=clip,
            line=dict(color=OKABE_ITO[5], dash="dot"),
            annotation_text=f"clip at {clip:g}",
            annotation_position="bottom right",
        )
    return fig

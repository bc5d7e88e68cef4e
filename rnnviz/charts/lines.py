"""Per-step series: the gradient-norm figure, generic lines and heatmaps, the carry's PCA path."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rnnviz.charts.base import (
    HEATMAP_SCALE,
    MAX_COLUMNS,
    MAX_POINTS,
    OKABE_ITO,
    POW10_HOVER,
    drawable,
    log10_column,
    mark_nonfinite,
    new_figure,
    positive_finite,
    pow10_parts,
    pow10_ticks,
    thin,
    thinned_title,
)

#: Most per-example lines a run draws; more cross into a tangle a class cannot read, so they
#: are drawn as bands instead: the range over the examples and its middle half, per step.
MAX_EXAMPLE_LINES = 5


def _example_bands(fig: go.Figure, examples: pd.DataFrame, run: str, prefix: str, colour: str) -> None:
    """The examples' log₁₀ magnitudes as two bands over t: min…max (light) and the 25–75 %
    quantiles (darker); a true zero or a NaN leaves that example out of the step's band."""
    wide = examples.pivot_table(index="t", columns="series", values="log10_value", aggfunc="first")
    logs = wide.to_numpy(dtype=np.float64)
    logs = np.where(np.isfinite(logs), logs, np.nan)
    t = wide.index.to_numpy()
    n = logs.shape[1]
    rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a step where every example is 0 or NaN
        edges = [
            (np.nanmin(logs, axis=1), np.nanmax(logs, axis=1), f"examples (range of {n})", 0.15),
            (*np.nanpercentile(logs, [25, 75], axis=1), "examples (middle half)", 0.3),
        ]
    for lo, hi, name, alpha in edges:
        for y, fill in ((hi, None), (lo, "tonexty")):
            fig.add_trace(
                go.Scatter(
                    x=t,
                    y=y,
                    mode="lines",
                    line=dict(width=0),
                    fill=fill,
                    fillcolor=f"rgba({rgb[0]},{rgb[1]},{rgb[2]},{alpha})",
                    name=prefix + name,
                    legendgroup=f"{run}-examples",
                    showlegend=fill is not None,
                    hoverinfo="skip",
                    _validate=False,
                )
            )


def gradient_figure(
    df: pd.DataFrame, bound: pd.DataFrame | None = None, title: str = "‖∂L/∂carry_t‖ through time"
) -> go.Figure:
    """Gradient magnitudes vs t, drawn as log₁₀ on a linear axis labelled in powers of ten,
    so the axis spans the real range (10⁻²²⁸ and beyond, past float64's too).

    df: ``t, series, value, run`` and optionally ``log10_value`` (exact magnitudes, used
    when present) — series ``total``, a carry component (``c``, ``h``) or ``example <b>``
    (drawn faint; more than :data:`MAX_EXAMPLE_LINES` as bands over the examples instead).
    bound: optional ``t, value, label`` (+ ``log10_value``) theory curve.
    A true zero (log −∞) is a gap; the first NaN/Inf of the total is marked.
    """
    df = df.assign(log10_value=log10_column(df)) if not df.empty else df
    df, k = thin(df, value="log10_value") if not df.empty else (df, 1)
    fig = new_figure(thinned_title(title, k), "timestep t", "‖∂L/∂carry_t‖ (log scale)")
    if df.empty:
        return fig
    runs = list(df["run"].unique())  # in order of appearance
    for r_i, run in enumerate(runs):
        colour = OKABE_ITO[r_i % len(OKABE_ITO)]
        sub = df[df["run"] == run]
        prefix = f"{run}: " if len(runs) > 1 else ""
        first_example = True
        is_examples = sub["series"].astype(str).str.startswith("example")
        banded = sub.loc[is_examples, "series"].nunique() > MAX_EXAMPLE_LINES
        if banded:
            _example_bands(fig, sub[is_examples], run, prefix, colour)
            sub = sub[~is_examples]
        for series in sub["series"].unique():
            s = sub[sub["series"] == series]
            is_example = str(series).startswith("example")
            dash = {"total": "solid", "c": "dash", "h": "dot"}.get(series, "solid")
            logs = s["log10_value"].to_numpy()
            fig.add_trace(
                go.Scatter(
                    x=s["t"].to_numpy(),
                    y=drawable(logs),
                    mode="lines",
                    name=(prefix + "per example") if is_example else prefix + str(series),
                    legendgroup=f"{run}-examples" if is_example else f"{run}-{series}",
                    showlegend=not is_example or first_example,
                    opacity=0.25 if is_example else 1.0,
                    line=dict(color=colour, width=1 if is_example else 2.5, dash=dash),
                    customdata=pow10_parts(logs),
                    hovertemplate="t=%{x}<br>" + POW10_HOVER + "<extra>" + prefix + str(series) + "</extra>",
                    _validate=False,  # numeric arrays built here: skip Plotly's per-element checks
                )
            )
            first_example = first_example and not is_example
        total = sub[sub["series"] == "total"]
        mark_nonfinite(
            fig,
            total.assign(marker=np.where(total["log10_value"] == -np.inf, 0.0, total["log10_value"])),
            y="marker",
        )
    if bound is not None and not bound.empty:
        bound = thin(bound.assign(log10_value=log10_column(bound)), value="log10_value")[0]
        logs = log10_column(bound)
        fig.add_trace(
            go.Scatter(
                x=bound["t"],
                y=drawable(logs),
                mode="lines",
                name=str(bound["label"].iloc[0]),
                line=dict(color="#000000", width=1.5, dash="longdash"),
                customdata=pow10_parts(logs),
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
    fig = new_figure(thinned_title(title, k), x_title, y_title, log_y=log_y)
    if df.empty:
        return fig
    group_cols = [c for c in ("run", "series") if c in df.columns]
    for keys, s in df.groupby(group_cols, sort=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        name = " · ".join(str(k) for k in keys)
        y = positive_finite(s["value"]) if log_y else s["value"].to_numpy(dtype=np.float64)
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
    mark_nonfinite(fig, df, x=x)
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
    fig = new_figure(title if step == 1 else f"{title} — drawn: one column in every {step}", x_title, y_title)
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
    fig = new_figure(title, "PC 1", "PC 2")
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

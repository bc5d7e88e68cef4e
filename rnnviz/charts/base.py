"""What every chart shares: the theme (Okabe–Ito colours, Cividis heatmaps), thinning of long
series for drawing, exact powers of ten on log axes, and the marks of non-finite values."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rnnviz.base.formatting import pow10_text, superscript

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")


HEATMAP_SCALE = "Cividis"


LAYOUT = dict(
    template="plotly_white",
    colorway=list(OKABE_ITO),
    hovermode="x unified",
    # the title at the very top and room for two legend rows under it: a legend that wraps
    # (a run's bands, several pins) grows up from the plot into the margin, never over the title
    margin=dict(l=60, r=20, t=80, b=50),
    title=dict(y=0.985, yanchor="top"),
    legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
    font=dict(size=13),
    # Plotly's 450 px, less a row: with a tab's controls above it, a chart then still fits a
    # 1366×768 projector under the page's header (scripts/screenshots.py checks every tab)
    height=420,
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


def thinned_title(title: str, k: int) -> str:
    """``title``, plus "— drawn: min/max of every k steps" when :func:`thin` thinned (``k > 1``)."""
    return title if k == 1 else f"{title} — drawn: min/max of every {k} steps"


@functools.lru_cache(maxsize=1)
def base_layout() -> dict:
    """The theme as a plain layout dict, validated once (template resolved): a figure built
    from it skips Plotly's validation and the template's deep copy, which each figure would repeat."""
    fig = go.Figure()
    fig.update_layout(**LAYOUT)
    return fig.layout.to_plotly_json()


def new_figure(title: str, x_title: str, y_title: str, *, log_y: bool = False) -> go.Figure:
    """An empty figure in the house theme (:func:`base_layout`) with its title and axis titles.

    Args:
        title: the figure's title.
        x_title: the x axis title.
        y_title: the y axis title.
        log_y: a log y axis with ``10⁻²`` tick labels (else a linear or categorical one, "auto").

    Returns:
        The unvalidated ``go.Figure``, no traces.
    """
    # Unvalidated: this module builds every property itself (the chart tests read them back).
    theme = base_layout()
    fig = go.Figure(layout={**theme, "title": {**theme.get("title", {}), "text": title}}, _validate=False)
    fig.update_xaxes(title_text=x_title)
    # Non-log axes stay "auto" so categorical values (heatmap rows by name) are drawn.
    fig.update_yaxes(
        title_text=y_title, type="log" if log_y else "-", exponentformat="power" if log_y else "none"
    )
    return fig


#: Hover text of a magnitude from :func:`pow10_parts`' two columns: ``3.47×10⁻²²⁸``.
POW10_HOVER = "%{customdata[0]:.2f}×10<sup>%{customdata[1]}</sup>"


def pow10_parts(logs: np.ndarray) -> np.ndarray:
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


def positive_finite(values: pd.Series) -> np.ndarray:
    """Values a log axis can show; zeros, negatives and NaN/Inf become gaps."""
    v = values.to_numpy(dtype=np.float64, copy=True)
    v[~np.isfinite(v) | (v <= 0)] = np.nan
    return v


def mark_nonfinite(
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


def log10_column(df: pd.DataFrame) -> np.ndarray:
    """The exact ``log10_value`` column when the frame has one, else log₁₀ of ``value``."""
    if "log10_value" in df.columns:
        return df["log10_value"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log10(df["value"].to_numpy(dtype=np.float64))


def drawable(logs: np.ndarray) -> np.ndarray:
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


def colorbar_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Ticks of a log₁₀ colour bar that spans exactly ``[lo, hi]`` (the data's range, so the
    colours keep their contrast): the powers of ten of :func:`pow10_ticks` inside it, or where
    fewer than two lie inside (a range within a decade showed no label at all), its ends and
    middle as ``m×10ⁿ``.

    Example:
        >>> values, labels = colorbar_ticks(-3.2, -0.5)
        >>> labels
        ['10⁻³', '10⁻²', '10⁻¹']
        >>> values, labels = colorbar_ticks(-1.7, -1.3)
        >>> labels
        ['2.0×10⁻²', '3.2×10⁻²', '5.0×10⁻²']
    """
    inside = [(v, t) for v, t in zip(*pow10_ticks(lo, hi), strict=True) if lo <= v <= hi]
    if len(inside) >= 2:
        return [v for v, _ in inside], [t for _, t in inside]
    values = [lo, (lo + hi) / 2, hi] if hi > lo else [lo]
    return values, [pow10_text(v, digits=2) for v in values]


def pow10_range(ticks: Sequence[float], pad: float = 0.03) -> list[float]:
    """A log₁₀ axis range from its outer ticks (:func:`pow10_ticks`), widened by ``pad`` of
    their span each side: a line lying on an outer tick (σ₁ = 1 exactly) is drawn inside the
    frame, not on its edge."""
    margin = pad * max(ticks[-1] - ticks[0], 1.0)
    return [ticks[0] - margin, ticks[-1] + margin]


def empty_figure(title: str, message: str) -> go.Figure:
    """A figure with no traces and ``message`` written in its middle: what empty input draws."""
    fig = new_figure(title, "", "")
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def decades(values: Sequence[float]) -> float:
    """How many powers of ten the positive finite values span (0 when fewer than two)."""
    v = np.asarray([x for x in values if x > 0 and math.isfinite(x)], dtype=np.float64)
    return float(np.log10(v.max() / v.min())) if v.size >= 2 else 0.0


def band(fig: go.Figure, x, lo, hi, name: str, colour: str) -> None:
    """A filled band between ``lo`` and ``hi`` (two traces: an invisible upper edge, then
    the lower edge filled up to it), legend entry ``name``."""
    fig.add_trace(go.Scatter(x=x, y=hi, mode="lines", line=dict(width=0), showlegend=False, hoverinfo="skip"))
    fig.add_trace(
        go.Scatter(x=x, y=lo, mode="lines", line=dict(width=0), fill="tonexty", fillcolor=colour, name=name)
    )

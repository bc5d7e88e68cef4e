"""What a trained network remembers, drawn on the input: the connectivity of one output to
every earlier input (``rnnviz.connectivity``) as shaded characters, a shaded digit or a
shaded band under a series, and its exact magnitude against the lag; and how training
moved λ (``rnnviz.over_training``).

Shading is logarithmic: a character (pixel, step) is fully coloured at the strongest
connectivity and fades over :data:`SHADE_DECADES` powers of ten, so 1 % of the maximum is
still visible (a linear scale would show only the last few steps).
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rnnviz.charts.base import (
    HEATMAP_SCALE,
    OKABE_ITO,
    POW10_HOVER,
    drawable,
    new_figure,
    pow10_parts,
    pow10_ticks,
)

#: Powers of ten the shading spans below the maximum (0 … 1 opacity).
SHADE_DECADES = 3.0


def shade(log10: np.ndarray) -> np.ndarray:
    """Opacity 0 … 1 per input: ``1 + (log₁₀ c − max) / SHADE_DECADES``, clipped (0 for a
    true zero and for every input past the output step)."""
    logs = np.asarray(log10, np.float64)
    finite = np.isfinite(logs)
    if not finite.any():
        return np.zeros_like(logs)
    top = logs[finite].max()
    return np.where(finite, np.clip(1.0 + (logs - top) / SHADE_DECADES, 0.0, 1.0), 0.0)


def shaded_text_html(text: str, log10: np.ndarray, step: int, colour: str = "0, 114, 178") -> str:
    """The characters of ``text`` as HTML spans, each with a background of the colour at its
    :func:`shade` opacity and a tooltip with its exact magnitude; the output step τ is
    outlined and the characters after it are greyed (they cannot matter)."""
    alpha = shade(log10)
    parts = []
    for t, ch in enumerate(text):
        shown = {"\n": "↵", " ": "\u00a0", "\t": "→"}.get(ch, ch)
        mag = log10[t]
        tip = f"t={t + 1}, lag {step - 1 - t}: " + (
            f"10^{mag:.2f}" if np.isfinite(mag) else "exactly 0" if t < step else "after τ"
        )
        style = f"background: rgba({colour}, {alpha[t]:.3f});"
        if t == step - 1:
            style += " outline: 2px solid #D55E00;"
        if t >= step:
            style += " color: #999;"
        parts.append(
            f'<span class="rnnviz-char" data-t="{t + 1}" data-shade="{alpha[t]:.3f}" '
            f'title="{html.escape(tip)}" style="{style}">{html.escape(shown)}</span>'
        )
    return (
        '<div class="rnnviz-shaded" style="font-family: monospace; font-size: 1.05em; line-height: 1.9; '
        'word-break: break-all;">' + "".join(parts) + "</div>"
    )


def connectivity_figure(df: pd.DataFrame, title: str) -> go.Figure:
    """log₁₀ connectivity against the lag τ − t, one line per ``label`` (exact magnitudes on a
    log₁₀ axis with 10ⁿ ticks; true zeros are gaps). Columns: ``label, lag, log10``."""
    fig = new_figure(title, "lag τ − t (steps back from the output)", "connectivity (log scale)")
    if df.empty:
        return fig
    logs = df["log10"].to_numpy(np.float64)
    finite = logs[np.isfinite(logs)]
    for i, (label, s) in enumerate(df.groupby("label", sort=False)):
        y = drawable(s["log10"].to_numpy(np.float64))
        fig.add_trace(
            go.Scatter(
                x=s["lag"].to_numpy(),
                y=y,
                mode="lines",
                name=str(label),
                line=dict(color=OKABE_ITO[i % len(OKABE_ITO)]),
                customdata=pow10_parts(y),
                hovertemplate=f"lag %{{x}}: {POW10_HOVER}<extra>{html.escape(str(label))}</extra>",
                _validate=False,
            )
        )
    if finite.size:
        vals, text = pow10_ticks(float(finite.min()), float(finite.max()))
        fig.update_yaxes(tickvals=vals, ticktext=text)
    return fig


def digit_connectivity_figure(
    image: np.ndarray, pixel_steps: np.ndarray, log10: np.ndarray, title: str
) -> go.Figure:
    """The digit and, beside it, each pixel shaded by the connectivity of the step it entered
    at (log₁₀, exact; ``pixel_steps`` maps pixels to steps)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("the digit", "connectivity of each pixel (log₁₀)"))
    fig.update_layout(title={"text": title}, height=360)
    fig.add_trace(go.Heatmap(z=image, colorscale="Greys", showscale=False, hoverinfo="skip"), 1, 1)
    per_pixel = drawable(np.asarray(log10, np.float64)[pixel_steps])
    fig.add_trace(
        go.Heatmap(
            z=per_pixel,
            colorscale=HEATMAP_SCALE,
            colorbar=dict(title="log₁₀"),
            customdata=pixel_steps + 1,
            hovertemplate="input step %{customdata}: log₁₀ %{z:.2f}<extra></extra>",
        ),
        1,
        2,
    )
    for col in (1, 2):
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{col}", showticklabels=False, row=1, col=col)
        fig.update_xaxes(showticklabels=False, row=1, col=col)
    return fig


def series_connectivity_figure(inputs: np.ndarray, log10: np.ndarray, step: int, title: str) -> go.Figure:
    """The input series (its first features) over a band shaded by each step's connectivity
    (log₁₀), the output step marked."""
    fig = new_figure(title, "timestep t", "input")
    t = np.arange(1, inputs.shape[0] + 1)
    alpha = shade(log10)
    lo, hi = float(np.nanmin(inputs)), float(np.nanmax(inputs))
    pad = 0.05 * (hi - lo or 1.0)
    fig.add_trace(
        go.Bar(
            x=t,
            y=np.full(t.shape, hi - lo + 2 * pad),
            base=lo - pad,
            width=1.0,
            marker=dict(color=[f"rgba(0, 114, 178, {a:.3f})" for a in alpha], line=dict(width=0)),
            name="connectivity (shade, log)",
            customdata=pow10_parts(drawable(np.asarray(log10, np.float64))),
            hovertemplate=f"t=%{{x}}: {POW10_HOVER}<extra></extra>",
        )
    )
    for i in range(min(inputs.shape[1], 4)):
        fig.add_trace(
            go.Scatter(
                x=t, y=inputs[:, i], mode="lines", name=f"x[{i}]", line=dict(color=OKABE_ITO[(i + 1) % 8])
            )
        )
    fig.add_vline(x=step, line=dict(color="#D55E00", dash="dot"), annotation_text="τ")
    fig.update_layout(bargap=0)
    return fig


def over_training_figure(df: pd.DataFrame, title: str) -> go.Figure:
    """λ₁ … λ_k (left axis, with λ = 0 marked: the edge of chaos) and the training loss (right
    axis, log) against the training step. Columns: ``step, series, value`` with series
    ``λ1 …`` and ``loss``."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.update_layout(title={"text": title}, hovermode="x unified")
    lam = df[df["series"].str.startswith("λ")]
    for i, (name, s) in enumerate(lam.groupby("series", sort=False)):
        fig.add_trace(
            go.Scatter(
                x=s["step"],
                y=s["value"],
                mode="lines+markers",
                name=str(name),
                line=dict(color=OKABE_ITO[i % 8]),
            ),
            secondary_y=False,
        )
    loss = df[df["series"] == "loss"]
    if not loss.empty:
        fig.add_trace(
            go.Scatter(
                x=loss["step"],
                y=loss["value"],
                mode="lines",
                name="loss",
                line=dict(color="#000000", dash="dash"),
            ),
            secondary_y=True,
        )
    fig.add_hline(y=0.0, line=dict(color="#D55E00", dash="dot"), annotation_text="λ = 0 (edge of chaos)")
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="Lyapunov exponent (per step)", secondary_y=False)
    fig.update_yaxes(title_text="training loss (log)", type="log", secondary_y=True)
    return fig

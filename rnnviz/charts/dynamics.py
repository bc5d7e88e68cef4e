"""Dynamics: the phase diagram, Jacobian spectra, Lyapunov exponents and their convergence,
predicted against measured decay."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from rnnviz.base.formatting import pow10_text
from rnnviz.charts.base import OKABE_ITO, band, drawable, new_figure, pow10_ticks
from rnnviz.charts.lines import heatmap_figure


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


def singular_values_figure(
    df: pd.DataFrame, title: str = "Singular values σ_i(J_t) of each step Jacobian"
) -> go.Figure:
    """``t, series (σ₁ … σ_k), value`` → a heatmap of log₁₀ σ_i over (step t, index i), σ₁ on top.

    k crossing noisy lines over a thousand steps cannot be read; one row per singular value,
    coloured by its order of magnitude, can: a band of colour says where a direction stretches
    (σ > 1) or shrinks. The colour scale diverges at σ = 1 (log₁₀ σ = 0) and its ticks read
    ``10⁻²``; a zero σ (a direction the step maps to 0) is a gap. Columns are strided past
    :data:`~rnnviz.charts.base.MAX_COLUMNS`, said in the title.

    Example:
        >>> import pandas as pd
        >>> from rnnviz.charts import singular_values_figure
        >>> df = pd.DataFrame(
        ...     {"t": [1, 2, 1, 2], "series": ["σ1", "σ1", "σ2", "σ2"], "value": [2.0, 1.5, 0.5, 0.1]}
        ... )
        >>> fig = singular_values_figure(df)
        >>> [round(float(v), 3) for v in fig.data[0].z[0]]  # σ₁'s row: log₁₀ 2, log₁₀ 1.5
        [0.301, 0.176]
    """
    if df.empty:
        return heatmap_figure(pd.DataFrame(), title, y_title="singular value i")
    order = list(dict.fromkeys(df["series"]))
    matrix = df.pivot(index="series", columns="t", values="value").reindex(order)
    fig = heatmap_figure(matrix, title, y_title="singular value i", colorbar="σ_i", log10=True)
    z = np.asarray(fig.data[0].z, dtype=np.float64)
    finite = z[np.isfinite(z)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 1.0)
    reach = max(abs(lo), abs(hi), 1e-3)
    ticks, labels = (
        pow10_ticks(-reach, reach, max_ticks=7)
        if reach >= 1
        else ([-reach, 0.0, reach], [f"{10**-reach:.3g}", "1", f"{10**reach:.3g}"])
    )
    fig.data[0].update(
        colorscale="RdBu_r",
        zmid=0.0,
        zmin=-reach,
        zmax=reach,
        colorbar=dict(title="σ_i", tickvals=ticks, ticktext=labels),
        hovertemplate="t=%{x}<br>%{y} = 10<sup>%{z:.3f}</sup><extra></extra>",
    )
    fig.update_yaxes(autorange="reversed", type="category")
    return fig


def spectrum_figure(
    df: pd.DataFrame, title: str = "Lyapunov spectrum λ_i (per step; > 0 stretches, < 0 shrinks)"
) -> go.Figure:
    """``i, lyapunov, spread`` → bars with ±1 std error bars (over examples) and the λ = 0 line."""
    fig = new_figure(title, "exponent i", "λ_i (natural log per step)")
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


def running_figure(df: pd.DataFrame, title: str = "Running estimate of λ₁ (convergence)") -> go.Figure:
    """``t, value, lo, hi`` → the running mean with the range over examples as a band."""
    fig = new_figure(title, "timestep t", "λ₁ estimate after t steps")
    if df.empty:
        return fig
    band(fig, df["t"], df["lo"], df["hi"], "range over examples", "rgba(0,114,178,0.2)")
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
    fig = new_figure(title, "lag k = T − t (steps back from T)", "‖∂L/∂carry_{T−k}‖")
    if df.empty:
        return fig
    dashes = {0: "solid", 1: "dash", 2: "dot"}
    for i, (name, s) in enumerate(df.groupby("series", sort=False)):
        y = drawable(s["value"].to_numpy(dtype=np.float64))
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
    fig = new_figure(title, "recurrent gain g", "λ₁ (natural log per step)")
    if df.empty:
        return fig
    band(fig, df["recurrent_gain"], df["lo"], df["hi"], "seed range", "rgba(0,0,0,0.15)")
    fig.add_trace(
        go.Scatter(
            x=df["recurrent_gain"],
            y=drawable(df["lyapunov"].to_numpy(dtype=np.float64)),
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

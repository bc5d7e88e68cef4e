"""Your own model, drawn: the gradient over layers × steps (a heatmap and one line per
layer), each recurrent layer's state gradient, its step Jacobians' σ₁ and its state over the
steps (a panel per layer), the connectivity over the tokens, and what each way of computing its
gradients costs (on each device too).

Every magnitude is drawn as its exact log₁₀ with 10ⁿ ticks; a true zero is a gap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from rnnviz.charts.base import (
    HEATMAP_SCALE,
    LAYOUT,
    OKABE_ITO,
    POW10_HOVER,
    colorbar_ticks,
    drawable,
    empty_figure,
    new_figure,
    pow10_parts,
    pow10_range,
    pow10_ticks,
    thin,
    thinned_title,
)
from rnnviz.charts.costs import bar_panels
from rnnviz.charts.dynamics import phase_figure

#: The most token labels an x axis prints: a report sets three charts side by side, and Plotly
#: thins no labels given as an array; the hover names every position's token.
MOST_TOKEN_LABELS = 12


def _tokens_known(df: pd.DataFrame) -> bool:
    """Whether the positions' labels carry tokens (``t: token``), not the positions alone."""
    return bool((df["token"] != df["t"].astype(str)).any())


def _tick_labels(df: pd.DataFrame) -> dict:
    """The x axis labelled by the positions' tokens, at most :data:`MOST_TOKEN_LABELS` of them
    evenly spaced; without tokens, Plotly's own numeric ticks."""
    if not _tokens_known(df):
        return {}
    steps = df.drop_duplicates("t").sort_values("t")
    shown = steps.iloc[:: -(-len(steps) // MOST_TOKEN_LABELS)]
    return dict(tickmode="array", tickvals=shown["t"].tolist(), ticktext=shown["token"].tolist())


def _where(df: pd.DataFrame) -> dict:
    """A trace's hover label of each position: its token where known (``t: token``), else ``t``."""
    if "token" in df.columns and _tokens_known(df):
        return dict(text=df["token"].to_numpy(), where="%{text}")
    return dict(where="t=%{x}")


def layer_heatmap(df: pd.DataFrame, title: str = "‖∂L/∂x_t‖ through every layer") -> go.Figure:
    """A layer × step heatmap of log₁₀ ‖∂L/∂x_t^{(l)}‖ (rows bottom up: embeddings to the final
    norm). Columns: ``row, layer, t, token, log10`` (:func:`~rnnviz.frames.models.layer_frame`)."""
    if df.empty:
        return empty_figure(title, "no gradients to draw")
    grid = df.pivot(index="layer", columns="t", values="log10").sort_index()
    names = df.drop_duplicates("layer").sort_values("layer")["row"].tolist()
    z = drawable(grid.to_numpy(np.float64))
    finite = z[np.isfinite(z)]
    fig = new_figure(title, "position t", "residual stream entering")
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    ticks, labels = colorbar_ticks(lo, hi)
    fig.add_trace(
        go.Heatmap(
            x=grid.columns.to_numpy(),
            y=names,
            z=z,
            colorscale=HEATMAP_SCALE,
            colorbar=dict(title="‖∂L/∂x‖", tickvals=ticks, ticktext=labels),
            customdata=np.stack([pow10_parts(r) for r in grid.to_numpy(np.float64)]),
            hovertemplate="%{y}, t=%{x}: " + POW10_HOVER + "<extra></extra>",
        )
    )
    fig.update_xaxes(**_tick_labels(df))
    return fig


def _isolated(finite: np.ndarray) -> np.ndarray:
    """The finite points with no finite neighbour: a line draws nothing there, so they get a
    marker (a stack's top row reaches the loss at its last position alone)."""
    padded = np.concatenate([[False], finite, [False]])
    return finite & ~padded[:-2] & ~padded[2:]


def _log_lines(df: pd.DataFrame, series: str, title: str, x_title: str, y_title: str) -> go.Figure:
    """One line of log₁₀ values per ``series`` over ``t``, on a 10ⁿ axis."""
    if df.empty:
        return empty_figure(title, "nothing to draw")
    fig = new_figure(title, x_title, y_title)
    logs = df["log10"].to_numpy(np.float64)
    finite = logs[np.isfinite(logs)]
    for i, (name, s) in enumerate(df.groupby(series, sort=False)):
        values = s["log10"].to_numpy(np.float64)
        alone = _isolated(np.isfinite(values))
        hover = _where(s)
        # a series of exact zeros draws no line: its legend entry says why it has none
        zero = " (exactly 0 at every step)" if np.isneginf(values).all() else ""
        fig.add_trace(
            go.Scatter(
                x=s["t"].to_numpy(),
                text=hover.get("text"),
                y=drawable(values),
                mode="lines+markers" if alone.any() else "lines",
                marker=dict(size=np.where(alone, 7, 0)) if alone.any() else None,
                name=f"{name}{zero}",
                line=dict(color=OKABE_ITO[i % len(OKABE_ITO)]),
                customdata=pow10_parts(values),
                hovertemplate=f"{name}, {hover['where']}: " + POW10_HOVER + "<extra></extra>",
            )
        )
    if finite.size:
        ticks, labels = pow10_ticks(float(finite.min()), float(finite.max()))
        # the range reaches the outer ticks, so a span of less than a decade still shows two
        fig.update_yaxes(tickmode="array", tickvals=ticks, ticktext=labels, range=pow10_range(ticks))
    if "token" in df.columns:
        fig.update_xaxes(**_tick_labels(df))
    return fig


def layer_lines(df: pd.DataFrame, title: str = "‖∂L/∂x_t‖ per layer") -> go.Figure:
    """One line per row of the residual stream: log₁₀ ‖∂L/∂x_t^{(l)}‖ against t."""
    return _log_lines(df, "row", title, "position t", "‖∂L/∂x_t‖ (log scale)")


def state_lines(df: pd.DataFrame, title: str = "‖∂L/∂state_t‖ of each recurrent layer") -> go.Figure:
    """One line per recurrent layer and state leaf (:func:`~rnnviz.frames.models.state_frame`)."""
    return _log_lines(df, "series", title, "step t", "‖∂L/∂state_t‖ (log scale)")


def layer_sigma_lines(
    df: pd.DataFrame, title: str = "σ₁ of each recurrent layer's step Jacobian"
) -> go.Figure:
    """One line per recurrent layer: log₁₀ σ₁(J_t) against t
    (:func:`~rnnviz.frames.models.layer_sigma_frame`); above 10⁰ a step stretches its state."""
    return _log_lines(df, "series", title, "step t", "σ₁(J_t) (log scale)")


#: Height of one layer's panel, in pixels: the theme's height holds two.
_PANEL_HEIGHT = 170


def _layer_panels(df: pd.DataFrame, line: str, title: str, y_title: str) -> go.Figure:
    """One panel per ``layer`` (top: the first), stacked on one x axis, one line of ``y`` per
    value of ``line`` in each: the same value has the same colour and one legend entry in every
    panel. Where ``log10`` is a column, ``y`` is drawn from it and the hover reads it as 10ⁿ."""
    layers = sorted(df["layer"].unique())
    fig = make_subplots(
        rows=len(layers),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=min(0.08, 0.3 / len(layers)),
        subplot_titles=[f"layer {layer}" for layer in layers],
    )
    # each panel's name at its right: the legend runs from the left above the first (8 entries
    # reached the centred name and overlapped it)
    fig.update_annotations(x=1.0, xanchor="right")
    height = max(LAYOUT["height"], 110 + _PANEL_HEIGHT * len(layers))
    fig.update_layout(**{**LAYOUT, "title": {**LAYOUT["title"], "text": title}, "height": height})
    colours = {name: OKABE_ITO[i % len(OKABE_ITO)] for i, name in enumerate(dict.fromkeys(df[line]))}
    logged = "log10" in df.columns
    for row, layer in enumerate(layers, start=1):
        for name, s in df[df["layer"] == layer].groupby(line, sort=False):
            fig.add_trace(
                go.Scatter(
                    x=s["t"].to_numpy(),
                    y=s["y"].to_numpy(np.float64),
                    mode="lines",
                    name=str(name),
                    legendgroup=str(name),
                    showlegend=row == 1,
                    line=dict(color=colours[name]),
                    # a magnitude's hover reads its exact log₁₀, a value's the value
                    **({"customdata": pow10_parts(s["log10"].to_numpy(np.float64))} if logged else {}),
                    hovertemplate=f"layer {layer} · {name}, t=%{{x}}: "
                    + (POW10_HOVER if logged else "%{y:.4g}")
                    + "<extra></extra>",
                ),
                row=row,
                col=1,
            )
        fig.update_yaxes(title_text=y_title, row=row, col=1)
    fig.update_xaxes(title_text="step t", row=len(layers), col=1)
    return fig


def layer_state_norms(df: pd.DataFrame, title: str = "‖state_t‖ of each recurrent layer") -> go.Figure:
    """One panel per recurrent layer, one line per state leaf: log₁₀ ‖state_t‖ against t on
    10ⁿ ticks, the same in every panel so that the layers compare
    (:func:`~rnnviz.frames.models.layer_state_frame`; a zero state is a gap)."""
    if df.empty:
        return empty_figure(title, "no recurrent layer")
    df, k = thin(df, value="log10")
    logs = df["log10"].to_numpy(np.float64)
    fig = _layer_panels(df.assign(y=drawable(logs)), "leaf", thinned_title(title, k), "‖state_t‖")
    finite = logs[np.isfinite(logs)]
    if finite.size:
        ticks, labels = pow10_ticks(float(finite.min()), float(finite.max()))
        fig.update_yaxes(tickmode="array", tickvals=ticks, ticktext=labels, range=pow10_range(ticks))
    return fig


def layer_state_units(df: pd.DataFrame, title: str = "The first numbers of each layer's state") -> go.Figure:
    """One panel per recurrent layer, one line per number of a state leaf, its value against t
    (:func:`~rnnviz.frames.models.layer_units_frame`)."""
    if df.empty:
        return empty_figure(title, "no recurrent layer")
    df, k = thin(df)
    names = df["leaf"].astype(str) + "[" + df["unit"].astype(str) + "]"  # "h[3]": alike in every layer
    return _layer_panels(df.assign(y=df["value"], name=names), "name", thinned_title(title, k), "value")


def layer_reach_bars(
    df: pd.DataFrame, title: str = "How far back the gradient reaches, layer by layer"
) -> go.Figure:
    """Grouped bars of each stream row's reach (:func:`~rnnviz.frames.models.layer_reach_frame`):
    a group per row, a bar per fraction, each labelled with its count of steps.

    A reach of 0 is a bar of no height, so the label says it; the axis counts steps from 0
    (whole numbers while they are few), so a stack whose rows all reach 0 steps shows a row of
    zeros, not an empty frame around −1…1.
    """
    if df.empty:
        return empty_figure(title, "no rows")
    fig = new_figure(title, "the gradient with respect to", "steps back from the last")
    for i, (fraction, part) in enumerate(df.groupby("fraction", sort=False)):
        fig.add_trace(
            go.Bar(
                x=part["row"].to_numpy(),
                y=part["reach"].to_numpy(),
                text=part["reach"].to_numpy(),
                textposition="outside",
                cliponaxis=False,
                name=f"≥ {fraction:.0%} of its largest",
                marker_color=OKABE_ITO[i % len(OKABE_ITO)],
                hovertemplate="%{x}: %{y} steps back<extra></extra>",
            )
        )
    top = int(df["reach"].max())
    fig.update_layout(barmode="group")
    fig.update_yaxes(rangemode="nonnegative", tickformat="d")
    if top < 5:  # Plotly would tick 0.5, 1.5, … or draw −1…1 around bars of no height
        fig.update_yaxes(range=[0, max(top, 1) * 1.2], dtick=1)
    return fig


def token_connectivity(
    df: pd.DataFrame, title: str = "How much the last prediction reads each token"
) -> go.Figure:
    """Bars of log₁₀ ‖∂ℓ_p/∂x_t‖ over the tokens up to p
    (:func:`~rnnviz.frames.models.token_connectivity_frame`)."""
    if df.empty:
        return empty_figure(title, "no tokens")
    logs = df["log10"].to_numpy(np.float64)
    finite = logs[np.isfinite(logs)]
    floor = float(finite.min()) - 1 if finite.size else 0.0
    fig = new_figure(title, "token", "‖∂ℓ_p/∂x_t‖ (log scale)")
    hover = _where(df)
    fig.add_trace(
        go.Bar(
            x=df["t"].to_numpy(),
            text=hover.get("text"),
            textposition="none",
            y=np.where(np.isfinite(logs), logs - floor, 0.0),
            base=floor,
            marker_color=OKABE_ITO[0],
            customdata=pow10_parts(logs),
            hovertemplate=f"{hover['where']}: " + POW10_HOVER + "<extra></extra>",
            name="connectivity",
        )
    )
    if finite.size:
        ticks, labels = pow10_ticks(floor, float(finite.max()))
        fig.update_yaxes(tickmode="array", tickvals=ticks, ticktext=labels)
    fig.update_xaxes(**_tick_labels(df))
    return fig


def way_bars(df: pd.DataFrame, title: str = "Each way of computing the gradients: median run") -> go.Figure:
    """``way, run_ms, ratio`` (:func:`~rnnviz.frames.models.way_frame`) → a bar per way, its
    median run in ms, labelled with its ratio to plain ``jax.grad`` (``×1.00`` for plain)."""
    shown = df.assign(ratio_text=[f"×{r:.2f}" for r in df["ratio"]])
    return bar_panels(shown, "way", [("run_ms", "run, median (ms)")], title, color="way", text="ratio_text")


def device_way_bars(
    df: pd.DataFrame, title: str = "Each way of computing the gradients, on each device"
) -> go.Figure:
    """``device, way, compile_s, run_ms, ratio`` (:func:`~rnnviz.frames.models.device_way_frame`)
    → three panels, compile seconds, median run in ms and the ratio to plain ``jax.grad`` on the
    same device: a group of bars per device, a bar (and legend entry) per way."""
    panels = [("compile_s", "compile (s)"), ("run_ms", "run, median (ms)"), ("ratio", "× plain jax.grad")]
    return bar_panels(df, "device", panels, title, color="way")


def block_phase_figure(
    matrix: pd.DataFrame, axis: str, log_x: bool = False, reach: pd.DataFrame | None = None
) -> go.Figure:
    """The bare cell's phase heatmap (:func:`~rnnviz.charts.dynamics.phase_figure`) over a
    reference block's memory knob × lag (:func:`~rnnviz.frames.models.block_phase_matrix`):
    log₁₀ of how much of the gradient reaching the last input reaches the input ``lag`` before it,
    and the line of how far back 1 % of it arrives.

    Args:
        matrix: index ``lag``, columns the knob's values.
        axis: the knob's name and letter, the x axis's title.
        log_x: a scale's values on a log axis.
        reach: ``value, lag`` (:func:`~rnnviz.frames.models.block_phase_reach`), or None.
    """
    title = "Phase diagram of the block: log₁₀ ‖∂L/∂x_{T−1−lag}‖ / ‖∂L/∂x_{T−1}‖"
    fig = phase_figure(matrix, title=title)
    fig.update_xaxes(title_text=axis, type="log" if log_x else "linear")
    if reach is not None and not matrix.empty:
        # the colours span the whole sweep's range; the line shows the structure near 0 too
        fig.add_trace(
            go.Scatter(
                x=reach["value"].to_numpy(),
                y=reach["lag"].to_numpy(),
                mode="lines+markers",
                line=dict(color="#000000", width=2),
                name="furthest lag where ≥ 1 % arrives",
                hovertemplate=f"{axis} = %{{x:.4g}}: ≥ 1 % arrives up to lag %{{y}}<extra></extra>",
            )
        )
        fig.update_layout(showlegend=True)  # Plotly shows no legend for one line beside a heatmap
    return fig

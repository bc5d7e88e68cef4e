"""What the page draws above its tabs: its name (in the sidebar) and the header, the verdict
and the analysis's numbers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import plotly.graph_objects as go
import streamlit as st

from rnnviz.base.analysis import Analysis
from rnnviz.base.formatting import pow10_text
from rnnviz.frames.verdicts import verdict
from rnnviz.tables.blocks import BLOCK_DESIGNS
from rnnviz.tables.strategies import strategy_rules

if TYPE_CHECKING:
    from rnnviz.config import RunConfig
    from rnnviz.serve.requests import ModelSummary

#: Streamlit leaves 6rem above a wide page's content: on a 1366×768 projector every row above
#: a tab's chart counts, so 2rem.
STYLE = (
    "<style>[data-testid='stMainBlockContainer']{padding-top:2rem}.st-key-chart_preload{display:none}</style>"
)


def title() -> None:
    """The page's name, in the sidebar so the main column starts with the verdict, after a hidden
    empty chart: the browser then fetches Plotly's bundle while the script still runs."""
    st.html(STYLE)
    with st.sidebar.container(key="chart_preload"):
        st.plotly_chart(go.Figure(), key="chart_preload_figure")
    st.sidebar.markdown("### ∇ rnnviz")
    st.sidebar.caption("How gradients flow back through time in recurrent networks.")


def header(a: Analysis, compiled_now: bool = False) -> None:
    """The verdict, what the inputs and weights are, and one line of numbers, each explained on
    hover (``compiled_now``: this page run compiled the analysis, and the compile figure says so)."""
    v = verdict(a)
    text = f"**Verdict:** {v.text}"
    if v.kind == "overflow":
        st.warning(text)
    else:
        st.markdown(text)
    if a.data is not None:
        st.caption(
            f"Inputs: {a.config.batch_size or 1} sequence(s) of **{a.data}** drawn by the seed from its "
            "training split; L is the data's task loss through "
            + ("the trained readout." if a.readout == "trained" else "a readout drawn by the seed.")
        )
    if a.weights is not None:
        st.caption(
            f"Weights: **{a.weights}** (trained), in every tab; a gain g (the Phase diagram's too) runs "
            "its recurrent kernels × g / the run's gain."
        )
    # one line (not st.metric boxes, three times as tall), widths so that none wraps at 1366 px
    cols = st.columns([0.8, 1.5, 1.45, 1.1, 1.4], gap="small")
    for col, (key, label, value, meaning) in zip(cols, metrics(a, compiled_now)):
        with col.container(key=f"metric_{key}"):  # .st-key-metric_<key> for the browser tests
            st.markdown(f"{label} **{value}**", help=meaning)


def block_header(
    cfg: RunConfig, summary: ModelSummary, data: dict | None = None, weights: dict | None = None
) -> None:
    """What a reference block's page analyses, in one paragraph (``data``: the sidebar's data
    source, whose first B training sequences it reads, or None for the bare cell's inputs;
    ``weights``: the trained run whose tensors it holds, or None for the seed's draw)."""
    design = BLOCK_DESIGNS[cfg.cell]
    inputs = (
        "the bare cell's inputs"
        if data is None
        else f"the first {cfg.batch_size or 1} sequences of {Path(data['name']).name}"
    )
    drawn = (
        f"drawn as its reference draws it from seed {cfg.seed}"
        if weights is None
        else f"at the trained weights of {Path(weights['path']).name}, step {weights['step']}"
    )
    readout = "a readout to H outputs" if weights is None else "its trained readout to the task's outputs"
    st.markdown(
        f"**Block:** the {cfg.cell} cell's design as {design.reference}, **{cfg.layers}** deep at D = H = "
        f"{cfg.hidden_size} ({summary.n_params:,} parameters), {drawn}. It reads {inputs} [B, T, I] "
        + (
            "through an input projection"
            if design.projects
            else "itself (a torch stack reads the I features)"
        )
        + f" and ends in {readout}; L = ½‖ŷ_T‖², the bare cell's loss on its readout."
    )


def metrics(a: Analysis, compiled_now: bool = False) -> list[tuple[str, str, str, str]]:
    """The header's numbers as ``(key, label, value, what it means)``."""
    t = a.timing
    runs = f"{t.repeats} run{'s' if t.repeats != 1 else ''}"
    return [
        ("loss", "loss", f"{a.loss:.4g}", "the loss L of this configuration's run"),
        (
            "grad0",
            "‖∂L/∂carry₀‖",
            pow10_text(float(a.log10_grad_norms[0])),
            "exact magnitude ("
            + ("float32 held it" if a.log10_source == "float32" else "log-magnitude reverse pass")
            + f"); float32 value {a.grad_norms[0]:.3e}",
        ),
        (
            "compile",
            "compiled just now" if compiled_now else "compile",
            f"{t.compile_s:.2f} s",
            "compiling this shape, once; reused for every seed, gain and scale"
            + (" (reused now)" if t.cache_hit else "")
            + ("; a small shape, compiled for compile speed (LLVM -O0)" if t.quick_compiled else ""),
        ),
        (
            "run",
            "run",
            f"{t.run_s * 1e3:.2f} ms",
            f"median of {runs} on {t.device} with the '{a.config.strategy}' strategy "
            f"({strategy_rules(a.config.strategy).summary}); the dashboard times runs until about 0.3 s "
            "is spent (at least one, at most five) and draws the last one",
        ),
        (
            "peak",
            "peak memory",
            f"{t.peak_bytes / 2**20:.1f} MB",
            "temp + arguments + outputs of the compiled reverse pass",
        ),
    ]

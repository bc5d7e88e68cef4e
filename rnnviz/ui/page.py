"""What the page draws above its tabs: the verdict and the analysis's numbers (the header),
and the warnings a URL left."""

from __future__ import annotations

import streamlit as st

from rnnviz.analysis import Analysis
from rnnviz.base.formatting import pow10_text
from rnnviz.frames.verdicts import verdict
from rnnviz.tables.strategies import strategy_rules


def header(a: Analysis) -> None:
    """The verdict, what the inputs and weights are, and the loss, ‖∂L/∂carry₀‖ and costs."""
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
    _metrics(a)


def _metrics(a: Analysis) -> None:
    t = a.timing
    cols = st.columns(5)
    cols[0].metric("loss", f"{a.loss:.4g}")
    cols[1].metric(
        "‖∂L/∂carry₀‖",
        pow10_text(float(a.log10_grad_norms[0])),
        help="exact magnitude ("
        + ("float32 held it" if a.log10_source == "float32" else "log-magnitude reverse pass")
        + f"); float32 value {a.grad_norms[0]:.3e}",
    )
    cols[2].metric(
        "compile",
        f"{t.compile_s:.2f} s",
        help="compiling this shape, once; cached afterwards" + (" (reused now)" if t.cache_hit else ""),
    )
    cols[3].metric(
        f"run (median of {t.repeats})",
        f"{t.run_s * 1e3:.2f} ms",
        help=f"median of {t.repeats} run{'s' if t.repeats != 1 else ''} on {t.device} with the "
        f"'{a.config.strategy}' strategy ({strategy_rules(a.config.strategy).summary}); the dashboard "
        "times runs until "
        "about 0.3 s is spent (at least one, at most five) and draws the last one",
    )
    cols[4].metric(
        "peak memory",
        f"{t.peak_bytes / 2**20:.1f} MB",
        help="temp + arguments + outputs of the compiled reverse pass",
    )


def url_warnings(warnings: list[str]) -> None:
    """One warning per URL parameter that could not be used."""
    for w in warnings:
        st.warning(w)

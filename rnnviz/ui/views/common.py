"""What every view shares: the header with the verdict, the budget gate, CSV buttons, captions."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz.analysis import Analysis
from rnnviz.base.formatting import pow10_text
from rnnviz.config import FIELD_SPECS
from rnnviz.frames.verdicts import verdict
from rnnviz.tables.strategies import strategy_rules
from rnnviz.ui import budget


def cost_of(a: Analysis) -> budget.Cost:
    """What the analysis of ``a.config`` cost here: the unit every view's budget counts in."""
    return budget.Cost(a.timing.run_s, a.timing.compile_s)


def within_budget(plan: budget.Plan, key: str) -> bool:
    """Show the plan's note; True when the view may compute (it fits, or the user asked for
    the over-budget version with the button, which names the estimate)."""
    if plan.note:
        st.info(plan.note)
    if plan.fits:
        return True
    return st.button(f"Run anyway (≈ {plan.estimate_s:.0f} s)", key=f"anyway_{key}")


def csv_button(df: pd.DataFrame, name: str, key: str, label: str = "Download CSV") -> None:
    keep_index = not isinstance(df.index, pd.RangeIndex)  # e.g. a units × time matrix
    st.download_button(
        label,
        df.to_csv(index=keep_index).encode(),
        file_name=name,
        mime="text/csv",
        key=key,
        on_click="ignore",
    )


def header(a: Analysis) -> None:
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
    for w in warnings:
        st.warning(w)


def limits_caption() -> None:
    st.sidebar.caption(
        f"Limits: T ≤ {FIELD_SPECS['seq_len'].hi:g}, H ≤ {FIELD_SPECS['hidden_size'].hi:g}, B ≤ "
        f"{FIELD_SPECS['batch_size'].hi:g}, "
        "and an estimated working set ≤ 4 GiB."
    )

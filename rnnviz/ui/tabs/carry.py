"""The Carry tab: the carry's norm over time (pinned runs overlaid), one component as a
units × time heatmap, its path in two principal components, and the gates; for a reference
block, each recurrent layer's state over the steps."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from rnnviz import charts
from rnnviz.charts.models import layer_state_norms, layer_state_units
from rnnviz.frames.gradients import carry_heatmap_frame, carry_norm_frame, gates_frame, projection_frame
from rnnviz.frames.models import layer_state_frame, layer_units_frame
from rnnviz.serve.requests import Request, jobs
from rnnviz.tables.cells import cell_spec
from rnnviz.ui.tabs.common import csv_button
from rnnviz.ui.tabs.context import BlockContext, TabContext

TITLE = "Carry"


def requests(ctx: TabContext) -> list[Request]:
    """Nothing: the tab draws the page's analysis and the pins."""
    return []


def render(ctx: TabContext) -> None:
    """The norm chart, the chosen component's heatmap and PCA path, and the mean gates."""
    a = ctx.analysis
    norms = pd.concat(map(carry_norm_frame, (a, *ctx.pins.overlays)), ignore_index=True)
    log_y = charts.decades(norms["value"].tolist()) > 2
    st.plotly_chart(
        charts.line_figure(norms, "Carry norm over time", "‖carry_t‖", log_y=log_y), key="chart_carry_norms"
    )
    comps = a.config.carry_components
    c1, c2 = st.columns(2)
    comp = c1.radio("Component", comps, index=len(comps) - 1, horizontal=True, key="carry_component")
    n_ex = a.config.batch_size or 1
    example = c2.number_input("Example", 0, n_ex - 1, 0, key="carry_example", disabled=n_ex == 1)
    heat = carry_heatmap_frame(a, comp, int(min(example, n_ex - 1)))
    what = "units" if heat.index.name == "unit" else "leading singular values"
    title = f"{comp}_t: {what} × time (example {example})"
    st.plotly_chart(charts.heatmap_figure(heat, title, colorbar=comp), key="chart_carry_heatmap")
    if what != "units":
        st.caption(
            f"{comp} is a matrix memory: drawn as the singular values of each head's matrix (its norm is "
            "the Frobenius norm above), not as its entries."
        )
    proj, explained = projection_frame(a, component=comp)
    share = f"{explained[0]:.0%} + {explained[1]:.0%} of variance"
    title = f"Path of {comp}_t in its top two principal components ({share})"
    st.plotly_chart(charts.projection_figure(proj, title), key="chart_projection")
    gates = gates_frame(a)
    if not gates.empty:
        figure = charts.line_figure(gates, "Mean gate activation over time", "mean activation")
        st.plotly_chart(figure, key="chart_gates")
        if "f" in cell_spec(a.config.cell).gates:
            f = gates[gates["series"] == "gate f"]["value"]
            st.caption(
                f"Forget gate mean {f.mean():.3f} (range {f.min():.3f}–{f.max():.3f}); a gate near 1 lets "
                "∂L/∂c pass almost unchanged."
            )
    csv_button(norms, "rnnviz_carry_norms.csv", "csv_carry")


def block_requests(ctx: BlockContext) -> list[Request]:
    """Each recurrent layer's states over the steps."""
    return [ctx.request(jobs.block_states, what="the states of each layer")]


def render_block(ctx: BlockContext) -> None:
    """A reference block's recurrent layers: the norm of each state leaf over t, a panel per
    layer, then the first numbers of the leaf chosen."""
    s = ctx.get(*block_requests(ctx))
    if not s.layers:
        st.info("This block has no recurrent layer: no state to follow.")
        return
    norms = layer_state_frame(s)
    st.plotly_chart(layer_state_norms(norms), key="chart_block_state_norms")
    sizes = ", ".join(f"{leaf} {n}" for leaf, n in zip(s.leaves, s.leaf_sizes))
    st.caption(
        f"‖state_t‖ of each leaf of each recurrent layer's state after step t, example {s.example} of the "
        f"config's inputs, over all the leaf's numbers ({sizes} per layer); the state before step 0 is zero."
    )
    if st.session_state.get("block_carry_leaf") not in s.leaves:  # another design's leaf: its first
        st.session_state["block_carry_leaf"] = s.leaves[0]
    leaf = st.radio("State leaf", s.leaves, horizontal=True, key="block_carry_leaf")
    units = layer_units_frame(s, leaf)
    count = units["unit"].nunique()
    title = f"The first {count} numbers of {leaf}_t in each layer (flattened, example {s.example})"
    st.plotly_chart(layer_state_units(units, title), key="chart_block_state_units")
    csv_button(norms, "rnnviz_block_state_norms.csv", "csv_block_states")

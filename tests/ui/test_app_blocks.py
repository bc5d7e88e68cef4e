"""A design as its reference block in the dashboard (AppTest): the URL's ``block=reference``
and ``layers`` reach the sidebar, the Gradients tab draws the layer × step heatmap of the
library's analysis of the same config, every other tab says in one line that it reads a bare
cell, and a cell without a reference block is refused, naming the cells that have one."""

from __future__ import annotations

import numpy as np
import pytest
from apptest_helpers import decode, figures, run_app

import rnnviz
from rnnviz import RunConfig, analyze_block
from rnnviz.studies.block_models import block_inputs, block_states
from rnnviz.ui.tabs import TABS

URL = {"cell": "mamba", "block": "reference", "layers": "3", "hidden_size": "16", "seq_len": "12"}


def _heatmap(at) -> dict:
    found = [f for f in figures(at) if any(t.get("type") == "heatmap" for t in f["data"])]
    assert len(found) == 1, [f["layout"].get("title") for f in figures(at)]
    return found[0]


@pytest.mark.slow
def test_the_gradients_tab_draws_every_layer_of_the_librarys_analysis():
    at = run_app(URL)
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert at.sidebar.selectbox(key="cfg_block").value == "reference"
    assert at.sidebar.number_input(key="cfg_layers").value == 3
    assert at.sidebar.selectbox(key="cfg_strategy").disabled  # a block fixes it
    assert any("Block:" in m.value and "3** deep" in m.value for m in at.markdown)
    heat = next(t for t in _heatmap(at)["data"] if t.get("type") == "heatmap")
    cfg = RunConfig(cell="mamba", block="reference", layers=3, hidden_size=16, seq_len=12)
    z = np.asarray(decode(heat["z"]), np.float64)
    expected = analyze_block(cfg).log10_grad_norms
    assert z.shape == expected.shape
    reached = np.isfinite(expected)  # the top row reads step T − 1 alone: true zeros, left blank
    np.testing.assert_allclose(z[reached], expected[reached], atol=1e-4)
    assert np.isnan(z[~reached]).all() and (~reached).sum() == 11


@pytest.mark.slow
def test_every_other_tab_says_it_reads_a_bare_cell():
    for tab in TABS:
        if hasattr(tab, "render_block"):
            continue
        at = run_app({**URL, "tab": tab.TITLE})
        assert not at.exception and not at.error, (tab.TITLE, [e.value for e in (*at.exception, *at.error)])
        lines = [i.value for i in at.info if "reads a bare cell" in i.value]
        assert lines == [
            f"The {tab.TITLE} view reads a bare cell: choose Block 'cell' in the sidebar for it."
        ], tab.TITLE


def test_a_cell_without_a_reference_block_is_one_message():
    """From the URL: a warning per field, and the bare cell's page; from the sidebar: one error."""
    at = run_app({**URL, "cell": "simple"})
    assert not at.exception and not at.error
    assert [w.value.split(":")[1].strip() for w in at.warning] == [
        "block='reference' is not allowed",
        "layers=3 is not allowed",
    ]
    at.sidebar.selectbox(key="cfg_block").set_value("reference").run()
    assert [e.value for e in at.error] == [
        "This combination cannot run: block='reference' is not allowed: the simple cell has no reference "
        "block; cells that have one: lstm, gru, mamba, rglru, mlstm, slstm, gated_deltanet."
    ]


@pytest.mark.slow
def test_the_jacobians_tab_draws_each_layers_sigma1_as_the_library_takes_it():
    at = run_app({**URL, "tab": "Jacobians"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    (fig,) = [f for f in figures(at) if "step Jacobian" in str(f["layout"].get("title"))]
    names = [t["name"] for t in fig["data"]]
    assert names == ["layer 1", "layer 2", "layer 3"]
    cfg = RunConfig(cell="mamba", block="reference", layers=3, hidden_size=16, seq_len=12)
    j = rnnviz.model_jacobians(rnnviz.block_model(cfg), block_inputs(cfg), k=4)
    got = np.asarray(decode(fig["data"][1]["y"]), np.float64)
    np.testing.assert_allclose(got, np.log10(j.singular_values[1, :, 0]), atol=1e-5)
    assert any("Mean ln σ₁(J_t)" in m.value for m in at.markdown)


@pytest.mark.slow
def test_the_carry_tab_draws_each_layers_state_as_the_library_follows_it():
    at = run_app({**URL, "tab": "Carry"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    cfg = RunConfig(cell="mamba", block="reference", layers=3, hidden_size=16, seq_len=12)
    s = block_states(cfg)
    (norms,) = [f for f in figures(at) if "‖state_t‖" in str(f["layout"].get("title"))]
    assert [(t["name"], t["yaxis"]) for t in norms["data"]] == [("h", "y"), ("h", "y2"), ("h", "y3")]
    assert [a["text"] for a in norms["layout"]["annotations"]] == ["layer 1", "layer 2", "layer 3"]
    got = np.asarray(decode(norms["data"][2]["y"]), np.float64)
    np.testing.assert_allclose(got, np.log10(s.norms[2, 0]), atol=1e-5)
    (units,) = [f for f in figures(at) if "numbers of h_t" in str(f["layout"].get("title"))]
    assert [t["name"] for t in units["data"]] == [f"h[{i}]" for i in range(8)] * 3
    np.testing.assert_allclose(
        np.asarray(decode(units["data"][9]["y"]), np.float64), s.units[0][1, 1], atol=1e-6
    )
    assert any("‖state_t‖ of each leaf" in c.value for c in at.caption)
    assert at.radio(key="block_carry_leaf").options == ["h"]

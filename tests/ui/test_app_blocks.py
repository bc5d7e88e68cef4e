"""A design as its reference block in the dashboard (AppTest): the URL's ``block=reference``
and ``layers`` reach the sidebar, the Gradients tab draws the layer × step heatmap of the
library's analysis of the same config, the Strategies tab times each way of computing it, the
Compare tab puts pinned designs side by side, the tabs that do not read the model draw as on a
bare cell's page, and a cell without a reference block is refused, naming the cells that have
one."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from apptest_helpers import decode, figures, run_app

import rnnviz
from rnnviz import RunConfig, analyze_block
from rnnviz.frames.models import phase_reach_sentence
from rnnviz.studies.block_models import block_inputs, block_states
from rnnviz.studies.block_phase import block_phase
from rnnviz.studies.model_lyapunov import model_lyapunov
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
    blank = [c.value for c in at.caption if c.value.startswith("Blank cells")]
    assert blank == [
        "Blank cells are gradients of exactly 0, not missing values: no path leads from there "
        "to the loss (after block 3 at 11 of 12 positions)."
    ]


@pytest.mark.slow
def test_the_compare_tab_draws_the_pinned_designs_side_by_side_and_reports_them(monkeypatch):
    """Pin a Mamba and a GRU stack: one line per design of what reaches its inputs (the library's
    analysis), their counts and losses, the HTML report of both; a bare cell's page keeps its own
    pins."""
    import streamlit as st

    from rnnviz.serve.requests import describe

    offered, real = {}, st.download_button

    def spy(label, data, **kw):
        offered[kw.get("key")] = data
        return real(label, data, **kw)

    monkeypatch.setattr(st, "download_button", spy)
    at = run_app({**URL, "layers": "2", "tab": "Compare"})
    assert not at.exception and not at.error and [i.value for i in at.info] == ["No pinned runs yet."]
    at.button(key="pin").click().run()
    at.sidebar.selectbox(key="cfg_cell").set_value("gru").run()
    at.button(key="pin").click().run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    mamba = RunConfig(cell="mamba", block="reference", layers=2, hidden_size=16, seq_len=12)
    designs = [mamba.replace(cell="gru"), mamba]  # the current first
    (fig,) = [f for f in figures(at) if "at the inputs" in str(f["layout"].get("title"))]
    assert [t["name"] for t in fig["data"]] == [describe(c) for c in designs]
    (table,) = [d.value for d in at.dataframe]
    shown = json.loads(at.dataframe[0].proto.columns)["parameters"]["type_config"]
    assert shown["format"] == "localized"  # 41,184 in an English browser, as the pins list them
    for trace, cfg, row in zip(fig["data"], designs, table.itertuples()):
        logs = analyze_block(cfg).log10_grad_norms[0]
        np.testing.assert_allclose(np.asarray(decode(trace["y"]), np.float64), logs, atol=1e-4)
        assert row.parameters == rnnviz.block_model(cfg).n_params
        assert row.decades == pytest.approx(logs[-1] - logs[0], abs=1e-4)
    assert sum("(current)" in m.value for m in at.markdown) == 1
    at.button(key="compare_make_report").click().run()
    html = offered["html_compare_blocks"].decode()
    for cfg in designs:
        assert f"{rnnviz.block_model(cfg).n_params:,}" in html
    at.button(key="unpin_0").click().run()  # the Mamba
    (fig,) = [f for f in figures(at) if "at the inputs" in str(f["layout"].get("title"))]
    assert [t["name"] for t in fig["data"]] == [describe(designs[0])]
    at.sidebar.selectbox(key="cfg_block").set_value("cell").run()
    assert [i.value for i in at.info] == ["No pinned runs yet."]  # the block's pin is not a bare cell's


@pytest.mark.slow
def test_the_tabs_that_do_not_read_the_model_draw_as_on_a_bare_cells_page():
    """Learn: the lessons, and a preset loads its bare cell; Your model: the demo's layers."""
    at = run_app({**URL, "tab": "Learn"})
    assert not at.exception and not at.error and len(at.subheader) >= 6
    next(b for b in at.button if b.label.startswith("Show me")).click().run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert at.sidebar.selectbox(key="cfg_block").value == "cell"
    at = run_app({**URL, "tab": "Your model"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert [f for f in figures(at) if "through every layer" in str(f["layout"].get("title"))]


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
    (lam,) = [f for f in figures(at) if "λ₁ of each recurrent layer" in str(f["layout"].get("title"))]
    ly = model_lyapunov(rnnviz.block_model(cfg), block_inputs(cfg))
    assert [t["name"] for t in lam["data"]] == ["layer 1", "layer 2", "layer 3"]
    np.testing.assert_allclose(
        np.asarray(decode(lam["data"][2]["y"]), np.float64), ly.running()[2], atol=1e-6
    )
    assert any(f"layer 3: {ly.lambda1[2]:+.4f}" in m.value for m in at.markdown)


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


@pytest.mark.slow
def test_the_strategies_tab_times_each_way_against_plain_grad():
    """A bar per way (its ratio to plain jax.grad written on it) and the table of times, ratios
    and agreement: the two analyses' norms and every loss within float rounding."""
    at = run_app({**URL, "tab": "Strategies"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    ways = ["plain jax.grad", "analysis, one reverse pass", "analysis, two cotangents"]
    (fig,) = [f for f in figures(at) if "Each way" in str(f["layout"].get("title"))]
    bars = [t for t in fig["data"] if t.get("type") == "bar"]
    assert [x for t in bars for x in t["x"]] == ways
    assert bars[0]["text"] == ["×1.00"] and all(t["text"][0].startswith("×") for t in bars)
    (table,) = [d.value for d in at.dataframe]
    assert table["way"].tolist() == ways
    assert table["× plain jax.grad"].iloc[0] == 1.0 and (table["× plain jax.grad"] > 0).all()
    assert table["agrees"].all() and table["per-step norms vs one pass (rel.)"].iloc[2] <= 1e-5
    assert any("equal to float rounding" in c.value for c in at.caption)
    assert any("**analysis, two cotangents**" in m.value for m in at.markdown)


def test_the_phase_tab_draws_the_blocks_knob_by_lag_heatmap_of_the_librarys_sweep():
    url = {"cell": "gru", "block": "reference", "layers": "2", "hidden_size": "8", "seq_len": "8"}
    at = run_app({**url, "tab": "Phase diagram"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert (at.number_input(key="block_phase_lo").value, at.number_input(key="block_phase_hi").value) == (
        0.5,
        2.0,
    )
    at.number_input(key="block_phase_n").set_value(3)
    at.number_input(key="block_phase_seeds").set_value(2).run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    (fig,) = [f for f in figures(at) if "Phase diagram of the block" in str(f["layout"].get("title"))]
    heat = next(t for t in fig["data"] if t.get("type") == "heatmap")
    z = np.asarray(decode(heat["z"]), np.float64)
    assert z.shape == (8, 3)  # lag 0 … T − 1 × the 3 gains
    assert list(heat["x"]) == [0.5, 1.25, 2.0] and list(heat["y"]) == list(range(8))
    cfg = RunConfig(cell="gru", block="reference", layers=2, hidden_size=8, seq_len=8)
    inputs = block_phase(cfg, [0.5, 1.25, 2.0], seeds=[0, 1]).log10_grad_norms[:, :, 0]  # [V, S, T]
    expected = (inputs[:, :, ::-1] - inputs[:, :, -1:]).mean(axis=1).T  # [lag, V]
    np.testing.assert_allclose(z, expected, atol=1e-6)
    # the line: per gain, the furthest lag whose seed-mean ratio is still ≥ 10⁻² (1 %)
    (line,) = [t for t in fig["data"] if t.get("name") == "furthest lag where ≥ 1 % arrives"]
    furthest = [max(lag for lag in range(8) if expected[lag, v] >= -2) for v in range(3)]
    assert list(decode(line["x"])) == [0.5, 1.25, 2.0] and list(decode(line["y"])) == furthest
    assert fig["layout"]["xaxis"]["title"]["text"] == "gain on the recurrent weights g"
    assert any("weight_hh_l* × g" in c.value and "g = 1: torch's U(±1/√H)" in c.value for c in at.caption)
    # and the line in words, from the same numbers
    words = phase_reach_sentence(pd.DataFrame({"value": [0.5, 1.25, 2.0], "lag": furthest}), "g", 7)
    assert any(c.value.endswith(words) for c in at.caption), words


def test_a_blocks_phase_diagram_over_the_budget_waits_for_run_anyway(monkeypatch):
    """Over a view's budget the sweep is not started: the plan's note and its button; pressed,
    the smallest sweep (2 values, 1 seed) is drawn."""
    from rnnviz.serve import budget

    monkeypatch.setattr(budget, "VIEW_BUDGET_S", 1e-6)
    url = {"cell": "gru", "block": "reference", "layers": "2", "hidden_size": "8", "seq_len": "8"}
    at = run_app({**url, "tab": "Phase diagram"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert any(i.value.startswith("Even the smallest version") for i in at.info)
    assert not [f for f in figures(at) if "Phase diagram of the block" in str(f["layout"].get("title"))]
    at.button(key="anyway_block_phase").click().run()
    (fig,) = [f for f in figures(at) if "Phase diagram of the block" in str(f["layout"].get("title"))]
    heat = next(t for t in fig["data"] if t.get("type") == "heatmap")
    assert list(heat["x"]) == [0.5, 2.0] and np.asarray(decode(heat["z"])).shape == (8, 2)


SIZED = {"block": "reference", "layers": "2", "seq_len": "6", "batch_size": "2"}


def _drawn_params(at) -> int:
    """The parameter count the block header states (the drawn model's, ``ModelSummary.n_params``)."""
    (line,) = [m.value for m in at.markdown if m.value.startswith("**Block:**")]
    return int(re.search(r"\(([\d,]+) parameters\)", line)[1].replace(",", ""))


@pytest.mark.slow
def test_two_designs_asked_for_about_n_parameters_are_drawn_within_5_percent():
    """The Size control's "about N parameters": each design's drawn model (the header's count)
    lies within 5 % of N, the sidebar says the width picked and its count, the URL keeps N
    beside that width, and back to "width H" the width stays the one picked."""
    at = run_app({**SIZED, "cell": "gru"})
    at.sidebar.radio(key="size_by").set_value("about N parameters").run()
    at.sidebar.text_input(key="size_params").set_value("10k").run()
    counts = {}
    for cell in ("gru", "slstm"):  # the sLSTM's count jumps with its heads: the nearest width still found
        at.sidebar.selectbox(key="cfg_cell").set_value(cell).run()
        assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
        counts[cell] = _drawn_params(at)
        width = int(at.query_params["hidden_size"])
        assert abs(counts[cell] - 10_000) <= 0.05 * 10_000, (cell, width, counts[cell])
        off = 100 * (counts[cell] - 10_000) / 10_000
        notes = [c.value for c in at.sidebar.caption if "→" in c.value]
        assert notes == [f"H = {width} → {counts[cell]:,} parameters (target 10,000, {off:+.1f} %)"]
        assert at.query_params["params"] == "10k"
        cfg = RunConfig(cell=cell, block="reference", layers=2, hidden_size=width, seq_len=6, batch_size=2)
        assert rnnviz.block_model(cfg).n_params == counts[cell]
    assert abs(counts["gru"] - counts["slstm"]) <= 0.05 * 10_000
    at.sidebar.radio(key="size_by").set_value("width H").run()
    assert at.sidebar.number_input(key="cfg_hidden_size").value == width
    assert "params" not in at.query_params and not at.error


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"cell": "gru", "params": "lots"},
            "params='lots' is not allowed: a count ≥ 1: an integer, or a number with k or M (100k, 1.5M).",
        ),
        (
            {"cell": "lstm", "layers": "8", "params": "1k"},
            "params=1000 is not allowed: a count the lstm block of 8 layers reaches within 5%: its nearest, "
            "at H = 3, has 840; another count, or another depth.",
        ),
    ],
)
def test_a_count_that_cannot_be_drawn_is_one_message(fields, message):
    """From the URL (a copied link, as a typed count): what is wrong and what is allowed, once."""
    at = run_app({**SIZED, **fields})
    assert not at.exception and not at.warning
    assert at.sidebar.radio(key="size_by").value == "about N parameters"
    assert [e.value for e in at.error] == [f"This combination cannot run: {message}"]


def test_the_width_job_picks_the_count_the_block_draws():
    """jobs.block_width: the width sized_block picks and the drawn model's count, the same for any
    seed or length (only the cell, depth and inputs set it); none within 5 % is its ConfigError."""
    from rnnviz.serve import jobs

    for cell in ("mamba", "slstm"):
        width, count = jobs.block_width(cell, 2, 8, 30_000)
        assert abs(count - 30_000) <= 0.05 * 30_000, (cell, width, count)
        cfg = RunConfig(cell=cell, block="reference", layers=2, hidden_size=width, seq_len=5, seed=3)
        assert rnnviz.block_model(cfg).n_params == count
    with pytest.raises(rnnviz.ConfigError, match=r"params=1000 .* at H = 3, has 840"):
        jobs.block_width("lstm", 8, 8, 1000)


@pytest.mark.slow
def test_the_training_tab_trains_the_block_as_the_library_does_and_its_weights_open_in_every_tab():
    """Train on a block's page: the profile heatmap is the library's run of the same settings
    (‖∂L/∂x_t‖ over the T inputs). *Open seed 0 in every tab* then sets the page to the run: the
    header names its weights and the sidebar's Weights holds it. λ over training draws each
    layer's λ₁ at every kept step, as the library computes it."""
    from rnnviz.serve.trained_runs import saved_runs
    from rnnviz.studies.over_training import layers_over_training
    from rnnviz.studies.training import TrainSettings, train

    at = run_app({**URL, "layers": "2", "hidden_size": "8", "seq_len": "10", "tab": "Training"})
    assert not at.exception and any("Press Train" in i.value for i in at.info)
    for name, value in dict(task="recall", steps=40, batch=8, log_every=20).items():
        (at.selectbox if name == "task" else at.number_input)(key=f"train_{name}").set_value(value)
    at.run()
    at.button(key="train_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(m.value.startswith("**Training:**") for m in at.markdown)
    (heat,) = [f for f in figures(at) if "‖∂L/∂x_t‖ on a fixed probe batch" in str(f["layout"].get("title"))]
    cfg = RunConfig(
        cell="mamba", block="reference", layers=2, hidden_size=8, seq_len=10, input_size=1, batch_size=8
    )
    run = train(cfg, settings=TrainSettings("recall", 40, log_every=20))
    z = np.asarray(decode(heat["data"][0]["z"]), np.float64)
    np.testing.assert_allclose(z, run.profiles, atol=1e-4)
    assert z.shape == (2, 10)
    assert [h["config"]["block"] for h in saved_runs().values()] == ["reference"]

    at.toggle(key="train_dynamics").set_value(True).run()  # λ₁ of each layer at every kept step
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    (lam,) = [
        f for f in figures(at) if "λ₁ of each recurrent layer over training" in str(f["layout"].get("title"))
    ]
    want = layers_over_training(run, max_points=32)
    assert [t["name"] for t in lam["data"]] == ["λ₁ layer 1", "λ₁ layer 2", "loss"]
    for trace, column in zip(lam["data"], want.lambda1.T):
        np.testing.assert_allclose(np.asarray(decode(trace["x"])), want.steps)
        np.testing.assert_allclose(np.asarray(decode(trace["y"])), column, atol=1e-3)

    at.button(key="train_use_0").click().run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert at.sidebar.selectbox(key="weights_choice").value in saved_runs()
    assert any("at the trained weights of" in m.value and "step 40" in m.value for m in at.markdown)
    assert any("follow the trained run (mamba block ×2, H=8)" in c.value for c in at.sidebar.caption)


#: The trained block the next test opens: a Mamba stack on the recall task.
TRAINED = RunConfig(
    cell="mamba", block="reference", layers=2, hidden_size=8, seq_len=10, input_size=1, batch_size=8
)


@pytest.fixture(scope="module")
def block_run():
    from rnnviz.studies.training import TrainSettings, train

    return train(TRAINED, settings=TrainSettings("recall", 40, log_every=20))


@pytest.mark.slow
@pytest.mark.parametrize("tab", [t.TITLE for t in TABS])
def test_every_tab_runs_at_a_trained_blocks_weights(block_run, tmp_path, monkeypatch, tab):
    """A block's run chosen under *Weights* on a bare cell's page turns it into the block's page
    at the run's last tensors, and every tab runs there: the layer × step heatmap and the σ₁
    lines are the library's at those tensors; the Phase diagram says it sweeps fresh draws."""
    from rnnviz.studies.model_jacobians import model_jacobians

    monkeypatch.setenv("RNNVIZ_TRAINED_DIR", str(tmp_path))
    path = str(block_run.save(tmp_path / "mamba.rnnviz"))
    at = run_app({"cell": "gru", "tab": tab})
    at.sidebar.selectbox(key="weights_choice").set_value(path).run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert at.sidebar.selectbox(key="cfg_block").value == "reference"
    assert any("at the trained weights of mamba.rnnviz, step 40" in m.value for m in at.markdown)
    tensors = block_run.tensors()
    page = TRAINED.replace(batch_size=at.sidebar.number_input(key="cfg_batch_size").value)  # B is the page's
    if tab == "Gradients":
        want = analyze_block(page, tensors=tensors).log10_grad_norms
        got = np.asarray(decode(next(t for t in _heatmap(at)["data"] if t.get("type") == "heatmap")["z"]))
        reached = np.isfinite(want)
        np.testing.assert_allclose(got[reached], want[reached], atol=1e-4)
        assert not np.allclose(got[reached], analyze_block(page).log10_grad_norms[reached], atol=1e-2)
    if tab == "Jacobians":
        (sigma,) = [f for f in figures(at) if "step Jacobian" in str(f["layout"].get("title"))]
        j = model_jacobians(rnnviz.block_model(page, tensors), block_inputs(page), k=4)
        assert len(sigma["data"]) == len(j.layers)
        for trace, row in zip(sigma["data"], np.log10(j.singular_values[:, :, 0])):
            np.testing.assert_allclose(np.asarray(decode(trace["y"])), row, atol=1e-4)
    if tab == "Phase diagram":  # the sweep draws fresh blocks: keyed without the weights, shared
        from rnnviz.ui import calls

        assert any("a trained run's weights are not swept" in c.value for c in at.caption)
        sweeps = [key for key, _ in calls.results().items() if "block_phase" in str(key)]
        assert sweeps and not any("weights" in str(key) for key in sweeps)
    if tab == "Compare":  # the report's job: a trained pin beside a fresh one
        from rnnviz.serve import jobs
        from rnnviz.serve.requests import job_key

        keys = (job_key(page, None, {"path": path, "step": 40}), job_key(page))
        rows = jobs.block_report(keys).rows
        for row, read in zip(rows, (tensors, None)):
            want = analyze_block(page, tensors=read).grad_norms
            np.testing.assert_allclose(row.analysis.grad_norms, want, rtol=1e-5)


@pytest.mark.slow
def test_the_memory_tab_draws_how_far_back_each_layers_gradient_reaches():
    from rnnviz.base.connectivity import reach

    at = run_app({**URL, "tab": "Memory"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    (bars,) = [f for f in figures(at) if "How far back the gradient reaches" in str(f["layout"].get("title"))]
    cfg = RunConfig(cell="mamba", block="reference", layers=3, hidden_size=16, seq_len=12)
    logs = analyze_block(cfg).log10_grad_norms
    assert [t["name"] for t in bars["data"]] == ["≥ 10% of its largest", "≥ 1% of its largest"]
    assert list(bars["data"][1]["x"]) == ["input", "after block 1", "after block 2", "after block 3"]
    assert [int(v) for v in decode(bars["data"][1]["y"])] == [reach(row, 12, 0.01) for row in logs]
    # the loss reads the last step alone: the top row is not compared, it is said to reach 0 by construction
    assert np.isneginf(logs[-1, :-1]).all() and np.isfinite(logs[-2, :-1]).any()
    below = reach(logs[-2], 12, 0.01)
    steps = f"{below} step{'' if below == 1 else 's'} back"
    said = f"At 1 %, after block 2 reaches {steps} and the inputs {reach(logs[0], 12, 0.01)}."
    assert any(
        said in m.value and "after block 3 is read at the last step alone" in m.value for m in at.markdown
    )


@pytest.mark.slow
def test_a_block_reads_the_sidebars_data_set_and_trains_on_it():
    """With digits chosen, the block's views read its first B training sequences (the heatmap is
    the library's analysis of them), and the Training tab offers the data set; the prose text
    (whose bare-cell loss reads every step) opens too, the block keeping its own loss."""
    from rnnviz.dataset import load_dataset
    from rnnviz.studies.models import analyze_model

    at = run_app({**URL, "layers": "2", "data": "digits:rows", "batch_size": "4"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert any("the first 4 sequences of digits" in m.value for m in at.markdown)
    ds = load_dataset("digits", order="rows")
    cfg = RunConfig(
        cell="mamba", block="reference", layers=2, hidden_size=16, seq_len=8, input_size=8, batch_size=4
    )
    expected = analyze_model(rnnviz.block_model(cfg), block_inputs(cfg, ds)).log10_grad_norms
    (layers,) = [f for f in figures(at) if "through every layer" in str(f["layout"].get("title"))]
    heat = next(t for t in layers["data"] if t.get("type") == "heatmap")
    z = np.asarray(decode(heat["z"]), np.float64)
    reached = np.isfinite(expected)
    np.testing.assert_allclose(z[reached], expected[reached], atol=1e-4)
    at = run_app({**URL, "layers": "2", "data": "digits:rows", "batch_size": "4", "tab": "Training"})
    assert "the chosen data" in at.selectbox(key="train_task").options
    at = run_app({**URL, "layers": "2", "data": "text:prose", "seq_len": "20", "batch_size": "4"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]

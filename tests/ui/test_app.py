"""The dashboard through streamlit.testing.v1.AppTest: widgets by key, charts by data."""

import json

import numpy as np
import pytest
from apptest_helpers import decode, figure_by_title, figures, run_app, total_gradient, trace

from rnnviz import RunConfig, analyze
from rnnviz.base.presets import PRESETS, config_to_params
from rnnviz.ui import page
from rnnviz.ui.tabs.common import QUICK_NOTE

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _as_drawn(log10_values):
    """What the gradient chart draws: log₁₀ magnitudes, with −inf (true zero) and NaN/Inf as gaps (NaN)."""
    v = np.asarray(log10_values, dtype=np.float64).copy()
    v[~np.isfinite(v)] = np.nan
    return v


def _clean(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_defaults_render_the_engine_numbers():
    at = run_app()
    _clean(at)
    got = total_gradient(at)
    want = analyze(RunConfig(), repeats=1).log10_grad_norms
    np.testing.assert_allclose(got, want, rtol=1e-6)
    fig = figure_by_title(at, "‖∂L/∂carry_t‖")
    ticks = fig["layout"]["yaxis"]["ticktext"]
    assert ticks and all(t.startswith("10") for t in ticks)  # log₁₀ drawn on a powers-of-ten axis
    assert any(t["name"].startswith("bound") for t in fig["data"])  # theory overlay for the simple cell
    assert any("Verdict" in m.value for m in at.markdown)


@pytest.mark.parametrize("title", list(PRESETS))
def test_every_preset_runs_and_sets_its_config(title):
    at = run_app()
    assert not at.button  # the presets' expander is closed: its buttons are not even built
    at.session_state["presets_open"] = True  # opened: the page runs again and draws them
    at.run()
    at.button(key=f"preset_{title}").click().run()
    _clean(at)
    cfg = PRESETS[title].config()
    for field, value in PRESETS[title].changes.items():
        assert at.session_state[f"cfg_{field}"] == value, field
    np.testing.assert_allclose(
        total_gradient(at), _as_drawn(analyze(cfg, repeats=1).log10_grad_norms), rtol=1e-5, atol=1e-6
    )
    assert dict(at.query_params) == config_to_params(cfg)


def test_reset_to_defaults_sets_every_widget_back():
    at = run_app({"cell": "gru", "seq_len": "30", "batch_size": "None"})
    at.session_state["presets_open"] = True
    at.run()
    assert at.session_state["cfg_cell"] == "gru" and at.session_state["cfg_batched"] is False
    at.button(key="preset_reset").click().run()
    _clean(at)
    for field, value in RunConfig().to_dict().items():
        assert at.session_state[f"cfg_{field}"] == value, field
    assert at.session_state["cfg_batched"] is True and dict(at.query_params) == {}


# (widget kind, key, new value, what to check in the gradient chart)
CHANGES = [
    ("selectbox", "cfg_cell", "gru", None),
    ("selectbox", "cfg_activation", "relu", None),
    ("number_input", "cfg_hidden_size", 12, None),
    ("number_input", "cfg_input_size", 3, None),
    ("number_input", "cfg_seq_len", 17, "len"),
    ("toggle", "cfg_batched", False, "examples"),
    ("number_input", "cfg_batch_size", 2, "examples"),
    ("selectbox", "cfg_dtype", "bfloat16", None),
    ("selectbox", "cfg_carry_init", "normal", None),
    ("selectbox", "cfg_recurrent_init", "normal", None),
    ("number_input", "cfg_recurrent_gain", 0.7, None),
    ("selectbox", "cfg_inputs", "sine", None),
    ("number_input", "cfg_input_scale", 0.3, None),
    ("selectbox", "cfg_loss", "all", None),
    ("number_input", "cfg_seed", 3, None),
]


@pytest.mark.parametrize("kind,key,value,check", CHANGES, ids=[c[1] for c in CHANGES])
def test_each_widget_changes_the_chart(kind, key, value, check):
    at = run_app()
    before = total_gradient(at)
    widget = getattr(at, kind)(key=key)
    (widget.select(value) if kind == "selectbox" else widget.set_value(value)).run()
    _clean(at)
    after = total_gradient(at)
    field = key.removeprefix("cfg_")
    if check == "len":
        assert after.shape == (value + 1,)
    elif check == "examples":
        n = sum(
            1
            for t in figure_by_title(at, "‖∂L/∂carry_t‖")["data"]
            if t.get("legendgroup", "").endswith("examples")
        )
        assert n == (0 if value is False else value)
    else:
        assert after.shape != before.shape or not np.allclose(after, before, rtol=1e-6, atol=0), field
    if field not in ("batched",):
        assert at.query_params.get(field) == str(value)


def test_lstm_shows_components_and_forget_bias_and_carry_scale_change_it():
    at = run_app()
    at.selectbox(key="cfg_cell").select("lstm").run()
    fig = figure_by_title(at, "‖∂L/∂carry_t‖")
    names = {t["name"] for t in fig["data"]}
    assert {"total", "c", "h"} <= names
    c = decode(trace(fig, "c")["y"])
    assert np.isnan(c[-1])  # ∂L/∂c_T = 0 is left off the log axis
    before = total_gradient(at)
    at.number_input(key="cfg_forget_bias").set_value(1.0).run()
    _clean(at)
    mid = total_gradient(at)
    assert mid[0] > before[0] * 10  # forget bias 1 lets the gradient reach further back
    at.selectbox(key="cfg_carry_init").select("normal").run()
    at.number_input(key="cfg_carry_scale").set_value(0.5).run()
    _clean(at)
    assert not np.allclose(total_gradient(at), mid)


def test_strategy_widget_and_tabs_render():
    at = run_app({"tab": "Strategies", "strategy": "per_step", "seq_len": "20"})
    _clean(at)
    bars = figure_by_title(at, "Cost of each strategy")
    assert [t["name"] for t in bars["data"][:3]] == ["accumulate", "per_step", "split_transpose"]
    heat = figure_by_title(at, "Per-step contributions")
    assert heat["data"][0]["type"] == "heatmap" and heat["data"][0]["y"] == ["recurrent", "input", "bias"]
    # a small shape's code is compiled for compile speed, and the table's note says so
    assert any(QUICK_NOTE in c.value for c in at.caption)
    for tab, title in [
        ("Carry", "Carry norm over time"),
        ("Devices", "This configuration, live"),
        ("Gradients", "‖∂L/∂carry_t‖"),
        ("Phase diagram", "Phase diagram"),
    ]:
        at2 = run_app({"tab": tab})
        _clean(at2)
        figure_by_title(at2, title)
    learn = run_app({"tab": "Learn"})
    _clean(learn)
    assert len(learn.get("latex")) >= 4
    learn.button(key="learn_1").click().run()
    assert learn.session_state["cfg_recurrent_gain"] == 0.8


@pytest.mark.parametrize(
    "start, cell",
    [
        ({"activation": "relu"}, "lstm"),  # lstm has no activation to choose: its first
        ({"cell": "lstm", "forget_bias": "1.5"}, "gru"),  # no forget gate: 0.0
        ({"cell": "lstm", "forget_bias": "1.5"}, "minlstm"),  # a forget gate: kept
        ({"cell": "lru", "strategy": "parallel"}, "lstm"),  # a nonlinear cell: accumulate
    ],
)
def test_switching_the_cell_gives_the_config_with_cell_names(start, cell):
    """What idle time compiles ahead for a cell switch (calls.neighbours) is the config the
    sidebar then makes: RunConfig.with_cell and the selector agree."""
    small = {"hidden_size": "4", "seq_len": "6", **start}
    at = run_app(small)
    before = RunConfig.from_mapping(small)
    at.selectbox(key="cfg_cell").select(cell).run()
    _clean(at)
    assert dict(at.query_params) == config_to_params(before.with_cell(cell))


def test_url_round_trip_reopens_the_same_view():
    at = run_app()
    at.selectbox(key="cfg_cell").select("mgu").run()
    at.number_input(key="cfg_seq_len").set_value(33).run()
    at.toggle(key="cfg_batched").set_value(False).run()
    params = dict(at.query_params)
    assert params == config_to_params(RunConfig(cell="mgu", seq_len=33, batch_size=None))
    again = run_app(params)
    _clean(again)
    assert again.session_state["cfg_cell"] == "mgu" and again.session_state["cfg_batched"] is False
    np.testing.assert_array_equal(total_gradient(again), total_gradient(at))


def test_tampered_url_warns_and_recovers():
    at = run_app(
        {
            "seq_len": "-5",
            "cell": "<script>alert(1)</script>",
            "hidden_size": "1e9",
            "nonsense": "1",
            "activation": "relu",
            "batch_size": "abc",
        }
    )
    assert not at.exception
    warnings = " ".join(w.value for w in at.warning)
    for field in ("seq_len", "cell", "hidden_size", "nonsense", "batch_size"):
        assert field in warnings
    np.testing.assert_allclose(
        total_gradient(at), analyze(RunConfig(activation="relu"), repeats=1).log10_grad_norms, rtol=1e-6
    )


def test_too_big_config_is_an_error_message_not_a_crash():
    # Per-step tangents need T copies of the params: H=2048 at T=2000 is ~134 GiB.
    at = run_app({"strategy": "per_step", "seq_len": "2000", "hidden_size": "4"})
    _clean(at)
    at.number_input(key="cfg_hidden_size").set_value(2048).run()
    assert not at.exception
    assert at.error and "largest seq_len that fits" in at.error[0].value and "GiB" in at.error[0].value
    assert (
        at.main.get("plotly_chart") == [] and at.number_input(key="cfg_hidden_size").value == 2048
    )  # sidebar stays usable
    at.number_input(key="cfg_hidden_size").set_value(8).run()
    _clean(at)


def test_rerun_keeps_state_and_pins_overlay_per_session():
    at = run_app({"tab": "Compare"})
    at.button(key="pin").click().run()
    at.selectbox(key="cfg_cell").select("gru").run()
    at.button(key="pin").click().run()
    at.selectbox(key="cfg_cell").select("lstm").run()
    at.run()  # a plain rerun must not lose or duplicate anything
    _clean(at)
    assert len(at.session_state["pins"]) == 2
    fig = figure_by_title(at, "‖∂L/∂carry_t‖: current and pinned")
    assert len([t for t in fig["data"] if t["name"].endswith("total")]) == 3
    at.button(key="unpin_0").click().run()
    assert len(at.session_state["pins"]) == 1
    at.button(key="clear_pins").click().run()
    assert at.session_state["pins"] == []
    other = run_app({"tab": "Compare"})
    assert other.session_state["pins"] == [] if "pins" in other.session_state else True
    assert figures(other) == []


def test_strategies_tab_leaves_out_a_strategy_over_budget(monkeypatch):
    # per_step keeps T copies of the parameters. The memory budget is set between its need and
    # every other strategy's, so the rule is tested, not the size: at the real 4 GiB budget that
    # took H=1024 (1M params × 600 steps), minutes of computing at the suite's -O0.
    from rnnviz import config

    cfg = RunConfig(hidden_size=64, seq_len=600, batch_size=1)
    per_step = config.estimate_memory_bytes(cfg, strategy="per_step")
    others = max(
        config.estimate_memory_bytes(cfg, strategy=s)
        for s in ("accumulate", "split_transpose", "fused", "checkpoint")
    )
    assert 2 * others < per_step
    monkeypatch.setattr(config, "MEMORY_BUDGET_BYTES", (others + per_step) // 2)
    at = run_app({"tab": "Strategies", "hidden_size": "64", "seq_len": "600", "batch_size": "1"})
    _clean(at)
    assert any("Left out" in i.value and "per_step" in i.value for i in at.info)
    bars = figure_by_title(at, "Cost of each strategy")
    assert {t["name"] for t in bars["data"]} == {"accumulate", "split_transpose", "fused", "checkpoint"}


def test_a_long_sequence_with_checkpoint_is_drawn_thinned():
    # T = 20 000 fits the budget with checkpoint; the charts draw ≤ MAX_POINTS per line and say so.
    at = run_app({"seq_len": "20000", "hidden_size": "16", "strategy": "checkpoint", "batch_size": "4"})
    _clean(at)
    fig = figure_by_title(at, "‖∂L/∂carry_t‖ through time")
    assert "drawn: min/max of every" in fig["layout"]["title"]["text"]
    assert all(len(decode(tr["x"])) <= 2000 for tr in fig["data"])


def test_the_sidebar_starts_plotly_loading_with_a_hidden_empty_chart():
    at = run_app({})
    _clean(at)
    preload = [el for el in at.sidebar.get("plotly_chart") if "chart_preload" in el.proto.id]
    assert len(preload) == 1 and json.loads(preload[0].proto.spec)["data"] == []
    assert ".st-key-chart_preload{display:none}" in page.STYLE
    assert at.main.get("plotly_chart")  # the page's own charts are in the main part


def test_a_fresh_compile_is_said_in_the_header_line_not_in_a_toast_over_the_tabs():
    # a shape nothing else in the suite compiles: this page run compiles it
    at = run_app({"hidden_size": "13", "seq_len": "17"})
    assert not at.exception
    assert not at.toast  # a toast covered the tab bar's right end (the Learn tab) at 1366 px

    def compile_line(at) -> str:
        return next(m.value for m in at.markdown if "s**" in m.value and "compile" in m.value)

    assert compile_line(at).startswith("compiled just now **")
    at.run()  # the same page again: its analysis comes from the cache, nothing compiles
    assert compile_line(at).startswith("compile **") and not at.toast

"""A tab is one module: the page shows exactly ``rnnviz.ui.tabs.TABS``, each tab exposes
``TITLE``, ``requests(ctx)``, ``render(ctx)``, ``block_requests(ctx)`` and
``render_block(ctx)``, a tab renders from a fake context with no worker process, and a module
added to the tuple appears on the page (its errors stay inside it)."""

from __future__ import annotations

import inspect
import re
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from apptest_helpers import decode, fake_context, figure_by_title, run_app, total_gradient, trace
from streamlit.testing.v1 import AppTest

from rnnviz import RunConfig, analyze
from rnnviz.ui import tabs
from rnnviz.ui.tabs import TABS
from rnnviz.ui.tabs.common import _sections, parse_sections

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TITLES = [t.TITLE for t in TABS]
ROOT = Path(__file__).resolve().parents[2]


def _clean(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _render(tab, ctx):
    """The script AppTest runs: one tab's render, nothing else of the page."""
    tab.render(ctx)


def _render_tab(tab, ctx) -> AppTest:
    return AppTest.from_function(_render, args=(tab, ctx), default_timeout=120).run()


# ---- the list of tabs --------------------------------------------------------------------


def test_the_page_shows_exactly_the_tabs_of_the_tuple_in_order():
    at = run_app()
    _clean(at)
    assert [t.label for t in at.tabs] == TITLES
    # the titles are the dashboard's URL values (?tab=…): they must not change
    assert TITLES == [
        "Gradients",
        "Carry",
        "Strategies",
        "Phase diagram",
        "Jacobians",
        "Training",
        "Memory",
        "Your model",
        "Devices",
        "Compare",
        "Learn",
    ]


@pytest.mark.parametrize("tab", TABS, ids=TITLES)
def test_each_tab_module_exposes_a_title_and_render_and_requests_of_one_context(tab):
    assert isinstance(tab.TITLE, str) and tab.TITLE.strip() == tab.TITLE != ""
    for fn in (tab.render, tab.requests):
        params = list(inspect.signature(fn).parameters.values())
        assert [p.name for p in params] == ["ctx"]
        assert params[0].annotation in ("TabContext", tabs.context.TabContext)
    assert inspect.signature(tab.requests).return_annotation == "list[Request]"
    assert tab.__name__.startswith("rnnviz.ui.tabs.") and tab.__doc__
    # a reference block's page calls it: its own view, or the same render where the tab does not
    # read the page's model
    for fn, same in ((tab.render_block, tab.render), (tab.block_requests, tab.requests)):
        (param,) = inspect.signature(fn).parameters.values()
        assert param.name == "ctx" and (fn is same or param.annotation == "BlockContext")


def test_titles_are_unique_and_every_tab_module_is_in_the_tuple():
    assert len(set(TITLES)) == len(TITLES)
    shared = {"__init__", "common", "context"}
    modules = {p.stem for p in (ROOT / "rnnviz" / "ui" / "tabs").glob("*.py")} - shared
    assert modules == {t.__name__.rpartition(".")[2] for t in TABS}  # no tab module left out of the page


@pytest.mark.parametrize("tab", TABS, ids=TITLES)
def test_every_text_a_tab_reads_from_its_markdown_file_is_there(tab):
    names = re.findall(r'prose\(__name__, "([^"]+)"', inspect.getsource(tab))
    for name in names:
        assert name in _sections(tab.__name__), (tab.__name__, name)


def test_every_markdown_file_of_the_tabs_ships_with_the_package():
    import fnmatch
    import tomllib

    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    files = sorted((ROOT / "rnnviz" / "ui" / "tabs").glob("*.md"))
    assert {p.stem for p in files} >= {"learn", "phase", "jacobians", "memory", "training"}
    for md in files:
        rel = md.relative_to(ROOT / "rnnviz").as_posix()
        assert any(fnmatch.fnmatch(rel, pattern) for pattern in shipped["rnnviz"]), rel


def test_markdown_sections_are_joined_into_paragraphs():
    text = "# title\n\nnote\n\n## intro\n\nOne line\nand the next.\n\nA second {x}.\n\n## other\nB\n"
    assert parse_sections(text) == {"intro": "One line and the next.\n\nA second {x}.", "other": "B"}


# ---- a tab from a fake context ------------------------------------------------------------


def _live(cfg_seen: list):
    rows = {
        "accumulate": dict(compile_s=0.25, run_s=0.002, run_halfwidth_s=0.0001, repeats=3),
        "per_step": dict(compile_s=0.5, run_s=0.004, run_halfwidth_s=0.0004, repeats=5),
    }

    def devices_live(key, repeats, only):
        from rnnviz.serve.requests import config_of

        cfg_seen.append((config_of(key), repeats, only))
        return pd.DataFrame(
            [dict(device_kind="cpu", device_name="TFRT_CPU_0", strategy=s, **rows[s]) for s in only]
        )

    return devices_live


def test_the_devices_tab_draws_what_its_compute_calls_return():
    cfg = RunConfig(seq_len=9, hidden_size=4)
    # the page's own timing ran beside a page being drawn: far over the budget; the tab
    # plans with the unit its cost request gives (the quiet timing), and computes
    a = types.SimpleNamespace(config=cfg, timing=types.SimpleNamespace(run_s=100.0, compile_s=0.1))
    seen: list = []
    ctx = fake_context(
        a,
        quiet_run_s=lambda shape: 1e-3,
        strategy_availability=lambda key: (("accumulate", "per_step"), {}),
        compiled_strategies=lambda key: ("accumulate",),
        devices_live=_live(seen),
        recorded=lambda: (pd.DataFrame(), [("runs.jsonl:3", "not JSON")]),
    )
    at = _render_tab(TABS[TITLES.index("Devices")], ctx)
    assert not at.exception, [e.value for e in at.exception]
    # one call per strategy, each drawn as it arrives; repeats: the budget's plan
    assert [only for *_, only in seen] == [("accumulate",), ("per_step",)]
    assert seen[0][0] == cfg and seen[0][1] >= 1
    fig = figure_by_title(at, "This configuration, live")
    run_panel = [t for t in fig["data"] if t.get("xaxis") == "x2"]  # the second panel: run (ms)
    assert [t["name"] for t in run_panel] == ["accumulate", "per_step"]
    np.testing.assert_allclose(decode(trace({"data": run_panel}, "per_step")["y"]), [4.0])
    assert list(trace({"data": run_panel}, "accumulate")["x"]) == ["cpu · TFRT_CPU_0 (live)"]
    assert any("± the 90 % confidence interval of their mean" in c.value for c in at.caption)
    assert any("No GPU here (JAX sees no GPU on this machine)" in i.value for i in at.info)
    assert any("Skipped 1 unreadable record lines: runs.jsonl:3: not JSON" in w.value for w in at.warning)
    assert any(i.value.startswith("No recorded runs") for i in at.info)


def test_the_gradients_tab_draws_the_analysis_and_a_pinned_run_over_it():
    a = analyze(RunConfig(seq_len=12, hidden_size=4, batch_size=2), repeats=1)
    pinned = analyze(RunConfig(seq_len=12, hidden_size=4, batch_size=2, recurrent_gain=0.5), repeats=1)
    at = _render_tab(TABS[TITLES.index("Gradients")], fake_context(a))
    _clean(at)
    np.testing.assert_allclose(total_gradient(at), a.log10_grad_norms, rtol=1e-6)
    assert any(t["name"].startswith("bound") for t in figure_by_title(at, "‖∂L/∂carry_t‖")["data"])
    over = _render_tab(TABS[TITLES.index("Gradients")], fake_context(a, pins=(a, pinned)))
    _clean(over)
    fig = figure_by_title(over, "‖∂L/∂carry_t‖")
    assert not any(t["name"].startswith("bound") for t in fig["data"])  # no bound with overlays
    totals = [decode(t["y"]) for t in fig["data"] if t["name"].endswith("total") or t["name"] == "total"]
    assert len(totals) == 2 and not np.allclose(totals[0], totals[1])  # the current run and the pin


def test_the_gradients_tab_says_which_state_an_xlstm_cell_stores():
    notes = {}
    for cell in ("mlstm", "gru"):
        a = analyze(RunConfig(cell=cell, seq_len=6, hidden_size=4, batch_size=2), repeats=1)
        at = _render_tab(TABS[TITLES.index("Gradients")], fake_context(a))
        _clean(at)
        notes[cell] = " ".join(c.value for c in at.caption)
    assert "C and n curves are of the state as stored" in notes["mlstm"] and "e^(−m_t)" in notes["mlstm"]
    assert "as stored" not in notes["gru"]


# ---- a tab added to the tuple -------------------------------------------------------------


def _tab(title: str, render) -> types.ModuleType:
    module = types.ModuleType(f"rnnviz.ui.tabs.{title.lower()}", f"The {title} tab (a test's).")
    module.TITLE, module.render, module.requests = title, render, lambda ctx: []
    return module


def _scratch(ctx):
    import streamlit as st

    st.markdown(f"scratch tab at T={ctx.config.seq_len}, {len(ctx.pins.analyses)} pins")


def _broken(ctx):
    raise RuntimeError("this tab is broken")


def test_a_module_added_to_the_tuple_appears_on_the_page_and_renders(monkeypatch):
    monkeypatch.setattr(tabs, "TABS", TABS + (_tab("Scratch", _scratch),))
    at = run_app({"tab": "Scratch", "seq_len": "11"})
    _clean(at)
    assert [t.label for t in at.tabs] == [*TITLES, "Scratch"]
    assert any(m.value == "scratch tab at T=11, 0 pins" for m in at.markdown)
    assert at.query_params["tab"] == "Scratch"


def test_a_failing_tab_shows_its_error_in_itself_and_the_page_stays(monkeypatch):
    monkeypatch.setattr(tabs, "TABS", TABS + (_tab("Broken", _broken),))
    at = run_app({"tab": "Broken", "seq_len": "11"})
    assert not at.exception
    assert [e.value for e in at.error] == ["The Broken view failed (RuntimeError: this tab is broken)."]
    assert any("Verdict" in m.value for m in at.markdown)  # the header above the tabs is drawn
    assert any(m.value.startswith("loss **") for m in at.markdown)  # the header's numbers, one line
    assert [t.label for t in at.tabs][-1] == "Broken"


def test_the_training_progress_bar_and_its_text_are_one_figure():
    """The bar's fraction and the text's count and percentage come from one count; no rate or
    time left before the first step (compiling), clamped to [0, 1]."""
    from rnnviz.serve.requests import TrainProgress
    from rnnviz.ui.tabs.training import progress_figure

    for done in (0, 1, 600, 950, 1000):
        fraction, text = progress_figure(TrainProgress(done, 1000, 2.0, False, False, None))
        assert fraction == done / 1000 and text.startswith(f"{done} of 1000 steps ({done / 10:.0f} %)")
        assert ("compiling" in text) == (done == 0) and ("left" in text) == (done > 0)
    fraction, text = progress_figure(TrainProgress(400, 200, 4.0, True, True, None))  # stopped past a cut
    assert fraction == 1.0
    assert progress_figure(TrainProgress(100, 400, 2.0, False, False, None))[1].endswith(
        "50 steps/s per run · about 6 s left"
    )


def test_rows_are_drawn_as_they_arrive_and_a_name_left_out_draws_nothing_new():
    from rnnviz.ui.tabs.common import rows_as_they_arrive

    drawn, asked = [], []

    def row_of(name):
        asked.append((name, len(drawn)))  # how many draws the page had when it asked
        return pd.DataFrame() if name == "left_out" else pd.DataFrame({"strategy": [name]})

    draw = lambda rows, final: drawn.append((list(rows["strategy"]), final))  # noqa: E731
    rows = rows_as_they_arrive(("a", "left_out", "b", "c"), row_of, draw)
    assert list(rows["strategy"]) == ["a", "b", "c"]
    assert asked == [("a", 0), ("left_out", 1), ("b", 1), ("c", 2)]  # a is on screen while the rest run
    assert drawn == [(["a"], False), (["a", "b"], False), (["a", "b", "c"], True)]
    drawn.clear()
    ends_left_out = rows_as_they_arrive(("a", "left_out"), row_of, draw)
    assert list(ends_left_out["strategy"]) == ["a"] and drawn == [(["a"], False), (["a"], True)]


def test_rows_that_come_quickly_are_drawn_together_and_the_first_and_last_always(monkeypatch):
    from rnnviz.ui.tabs import common

    now = [0.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: now[0])
    arrive = {"0": 0.5, "1": 0.4, "2": 0.4, "3": 0.4, "4": 2.0, "5": 0.3}  # seconds each part takes
    drawn = []

    def part_of(p):
        now[0] += arrive[str(p)]
        return pd.DataFrame({"part": [p]})

    rows = common.interleaved_parts(
        6, part_of, lambda rows, final: drawn.append((list(rows["part"]), final)), "x"
    )
    assert list(rows["part"]) == [0, 1, 2, 3, 4, 5]
    # drawn at 0.5 s (the first), 1.7 s (over a second after it: parts 1–3 together), 3.7 s
    # (part 4 came slowly), and at the end: 4 redraws for 6 parts, none of them left out
    assert drawn == [
        ([0], False),
        ([0, 1, 2, 3], False),
        ([0, 1, 2, 3, 4], False),
        ([0, 1, 2, 3, 4, 5], True),
    ]
    assert common.PART_GAP_S == 1.0
    drawn.clear()
    common.rows_as_they_arrive(
        ("a", "b", "c"), lambda n: pd.DataFrame({"part": [n]}), lambda r, f: drawn.append(f)
    )
    assert drawn == [False, False, True]  # no gap asked for (Strategies): every row is drawn


def test_a_long_phase_diagram_is_drawn_in_interleaved_parts_and_ends_with_every_gain():
    from rnnviz.serve import jobs
    from rnnviz.serve.budget import PHASE_PARTS
    from rnnviz.serve.requests import config_of

    cfg = RunConfig(hidden_size=4, seq_len=8, batch_size=2)
    asked = []

    def phase(key, lo, hi, n, k, part, parts):
        assert config_of(key) == cfg.replace(recurrent_gain=1.0)  # one executable for every gain
        asked.append((n, k, part, parts))
        return jobs.phase(key, lo, hi, n, k, part, parts)

    # what this config's analysis cost "here": enough work for the tab to draw as parts arrive
    a = types.SimpleNamespace(config=cfg, timing=types.SimpleNamespace(run_s=0.05, compile_s=0.1))
    ctx = fake_context(
        a, quiet_run_s=lambda shape: 1.0, phase=phase, lyapunov_phase_table=jobs.lyapunov_phase_table
    )
    at = _render_tab(TABS[TITLES.index("Phase diagram")], ctx)
    _clean(at)
    assert asked == [(41, 3, part, PHASE_PARTS) for part in range(PHASE_PARTS)] and PHASE_PARTS > 1
    heat = next(t for t in figure_by_title(at, "Phase diagram")["data"] if t["type"] == "heatmap")
    np.testing.assert_allclose(decode(heat["x"]), np.linspace(0.5, 1.5, 41))  # every gain, in order


def test_the_learn_tab_makes_each_lessons_page_for_a_class_then_offers_its_file(monkeypatch):
    import streamlit as st

    from rnnviz.base.presets import PAGES
    from rnnviz.ui.tabs import learn

    asked, buttons = [], {}
    real = st.download_button

    def spy(label, data, **kw):
        buttons[kw.get("key")] = (label, data, kw)
        return real(label, data, **kw)

    def page(name):
        asked.append(name)
        return f"<html>{name}</html>"

    monkeypatch.setattr(st, "download_button", spy)
    monkeypatch.setattr(learn, "explorable_html", lambda data: data)  # the page's data: here its HTML
    a = analyze(RunConfig(hidden_size=4, seq_len=5), repeats=1)
    at = _render_tab(learn, fake_context(a, teaching_page=page))
    _clean(at)
    offered = [b.key for b in at.button if b.key.startswith("learn_make_")]
    # every lesson whose preset has a page offers it, once
    assert offered == [
        f"learn_make_{n}" for n in ("vanishing", "exploding", "forget-bias", "underflow", "lru", "chaos")
    ]
    assert not asked  # nothing computed before a teacher asks
    at.button(key="learn_make_underflow").click().run()
    _clean(at)
    assert asked == ["underflow"]
    label, data, kw = buttons["learn_page_download_underflow"]
    assert data == b"<html>underflow</html>" and kw["mime"] == "text/html"
    assert kw["file_name"] == "rnnviz_underflow.html" and "underflow.html" in label
    assert "learn_make_underflow" not in [b.key for b in at.button]
    assert set(PAGES) >= {"vanishing", "edge", "carry-init"}  # the others: rnnviz explorable --preset

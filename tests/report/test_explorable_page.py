"""The explorable page: its stored values are the grid's (to the quantisation step), it holds
plotly.js and its data and nothing else, a grid over the size cap is refused before any work,
and in Chromium from ``file://`` with the network off every slider and menu redraws the charts
with the values :func:`rnnviz.analyze`, :func:`rnnviz.jacobians` and the verdict give at that
point, with no console error and no request."""

from __future__ import annotations

import base64
import gzip
import json
import re
import types

import numpy as np
import pytest
from browser_helpers import CLEAR, TITLES_CLEAR, open_offline

from rnnviz import RunConfig, analyze, jacobians
from rnnviz.charts.embed import plotly_js
from rnnviz.config import ConfigError
from rnnviz.frames.explorable import point_view
from rnnviz.frames.verdicts import verdict
from rnnviz.report.explorable import check_page_size, explorable_html, grid_html, write_explorable
from rnnviz.report.explorable_data import LOG_STEP, decode
from rnnviz.studies.explorable import explorable_grid, product_of

BASE = RunConfig(hidden_size=8, input_size=3, seq_len=10, batch_size=2, recurrent_gain=1.0)
OVER = {"activation": ["tanh", "identity"], "recurrent_gain": [0.6, 1.0, 1.4], "seq_len": [10, 20]}
#: A stored log-magnitude is within half a step of the grid's.
TOLERANCE = LOG_STEP / 2 + 1e-9


@pytest.fixture(scope="module")
def grid():
    return explorable_grid(BASE, OVER)  # k = 4, as every page


@pytest.fixture(scope="module")
def page(grid, tmp_path_factory):
    return write_explorable(
        grid_html(grid, "Gain & <length>", "Try the gain."),
        tmp_path_factory.mktemp("page") / "page.html",
    )


def _unpacked(text: str, element: str) -> bytes:
    found = re.search(f'<script type="application/octet-stream" id="{element}">([^<]*)</script>', text)
    return gzip.decompress(base64.b64decode(found.group(1)))


def test_the_stored_values_are_the_grids_to_the_quantisation_step(grid, page):
    text = page.read_text(encoding="utf-8")
    data = json.loads(_unpacked(text, "rnnviz-data-gz"))
    assert [c["name"] for c in data["page"]["controls"]] == list(OVER)
    assert [c["kind"] for c in data["page"]["controls"]] == ["menu", "slider", "slider"]
    assert [c["start"] for c in data["page"]["controls"]] == [0, 1, 0]  # the base config's values
    for stored, point in zip(data["points"], grid.points):
        view = point_view(point)
        got = decode(stored["grad"]["total"], LOG_STEP)
        want = view.grad["total"]
        assert np.array_equal(np.isfinite(got), np.isfinite(want))
        assert np.nanmax(np.abs(got - want)) <= TOLERANCE
        for s, v in zip(stored["sv"], view.log10_singular_values):
            assert np.nanmax(np.abs(decode(s, LOG_STEP) - v)) <= TOLERANCE
        for s, u in zip(stored["units"], view.units):
            assert np.max(np.abs(decode(s["codes"], s["step"]) - u)) <= s["step"] / 2 + 1e-12
        assert stored["verdict"] == view.verdict
        assert (stored["bound"] is None) == (view.bound is None)


def test_the_page_holds_plotly_and_its_data_inline_and_escapes_its_text(page):
    text = page.read_text(encoding="utf-8")
    assert _unpacked(text, "rnnviz-plotly-gz").decode() == plotly_js()
    assert "<h1>Gain &amp; &lt;length&gt;</h1>" in text
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)  # nothing loaded from elsewhere
    assert page.stat().st_size < 2_600_000  # plotly.js gzipped (about 2 MB) and a small grid's data


def test_a_grid_over_the_cap_is_refused_with_the_size_it_would_have():
    with pytest.raises(ConfigError, match=r"at most 5 MB; this grid's would be about \d+ MB"):
        check_page_size({"seed": list(range(400)), "seq_len": [1000]}, 50, max_bytes=5_000_000)
    check_page_size(OVER, 10, max_bytes=5_000_000)  # a small grid passes


#: The traces of the gradient and Jacobian charts, the verdict and the point shown.
READ = """() => ({
  point: Number(document.getElementById('rnnviz-app').dataset.point),
  grad: document.getElementById('rnnviz-gradients').data.map(t => ({name: t.name, x: t.x, y: t.y})),
  sv: document.getElementById('rnnviz-jacobians').data.map(t => ({x: t.x, y: t.y})),
  verdict: document.getElementById('rnnviz-verdict').textContent,
  ms: window.rnnviz.lastRedrawMs,
})"""


def _matches_the_library(shown: dict, grid) -> None:
    values = product_of(grid.over)[shown["point"]]
    cfg = BASE.replace(**values)
    a = analyze(cfg, repeats=1)
    total = next(t for t in shown["grad"] if t["name"] == "total")
    assert total["x"] == list(range(cfg.seq_len + 1))
    y = np.array([np.nan if v is None else v for v in total["y"]], np.float64)
    assert np.nanmax(np.abs(y - a.log10_grad_norms)) <= TOLERANCE + 1e-5, values
    assert shown["verdict"] == verdict(a).text
    j = jacobians(cfg, k=4)
    assert shown["sv"][0]["x"] == j.steps.tolist()
    sv = np.array([t["y"] for t in shown["sv"]], np.float64)
    np.testing.assert_allclose(sv, np.log10(j.singular_values).T, atol=TOLERANCE + 1e-4)


@pytest.mark.browser
def test_chromium_offline_every_control_redraws_the_library_values_at_its_point(browser, page, grid):
    context, tab, aborted, errors = open_offline(browser, page, viewport={"width": 1366, "height": 900})
    tab.wait_for_function("document.getElementById('rnnviz-app').dataset.ready !== '0'", timeout=60_000)
    assert tab.get_attribute("#rnnviz-app", "data-ready") == "1", tab.text_content("#rnnviz-verdict")
    first = tab.evaluate(READ)
    assert first["point"] == 2  # tanh, gain 1.0, T=10: the base config
    _matches_the_library(first, grid)
    seen = {first["point"]}
    # each control as a student moves it: the menu by choosing, each slider by its arrow key
    tab.select_option("#rnnviz-control-0", "1")
    seen.add(tab.evaluate(READ)["point"])
    _matches_the_library(tab.evaluate(READ), grid)
    for k in (1, 2):
        tab.focus(f"#rnnviz-control-{k}")
        tab.keyboard.press("ArrowRight")
        shown = tab.evaluate(READ)
        assert shown["point"] not in seen  # a new point each time
        seen.add(shown["point"])
        _matches_the_library(shown, grid)
    assert tab.text_content("#rnnviz-value-2") == "20"
    assert tab.locator("#rnnviz-value-0").count() == 0  # a menu shows its choice once, itself
    # the fixed axes: unchecking lets each chart fit its own point
    fixed = tab.evaluate("document.getElementById('rnnviz-jacobians').layout.yaxis.range")
    tab.uncheck("#rnnviz-fixed")
    assert tab.evaluate("document.getElementById('rnnviz-jacobians').layout.yaxis.range") != fixed
    # on a phone's width the page is one column as wide as the screen: nothing scrolls sideways,
    # and each chart's title is wrapped inside it, clear of its legend (Plotly wraps neither)
    assert tab.evaluate(TITLES_CLEAR) == CLEAR  # at 1366 px as well
    tab.set_viewport_size({"width": 420, "height": 900})
    tab.wait_for_function("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    tab.wait_for_function(
        "document.querySelector('#rnnviz-jacobians .gtitle').getBoundingClientRect().right"
        " <= document.getElementById('rnnviz-jacobians').getBoundingClientRect().right"
    )
    tab.wait_for_timeout(500)  # the relayout that clears a legend follows the redraw
    assert tab.evaluate(TITLES_CLEAR) == CLEAR
    assert tab.evaluate("document.querySelectorAll('#rnnviz-jacobians .gtitle tspan.line').length") >= 2
    print(f"redraw in Chromium: {tab.evaluate(READ)['ms']:.0f} ms")  # measured, not asserted
    context.close()
    assert not aborted, aborted
    assert not errors, errors


def test_the_dashboards_page_is_the_commands_byte_for_byte(monkeypatch, grid):
    """The Learn tab's page: its data from the worker's job (no plotly there), put in the page by
    the server; the same bytes ``rnnviz explorable`` writes for that grid."""
    from rnnviz.base.presets import PagePreset
    from rnnviz.serve import jobs

    tiny = PagePreset(
        "tiny", "A tiny lesson", "Try it.", BASE.to_dict(), {k: tuple(v) for k, v in OVER.items()}
    )
    monkeypatch.setitem(jobs.PAGES, "tiny", tiny)
    data = jobs.teaching_page("tiny")
    assert json.loads(json.dumps(data)) == data  # plain JSON values: what a worker sends back
    assert explorable_html(data) == grid_html(grid, "A tiny lesson", "Try it.")
    # the Learn tab offers exactly that page, built from the job's answer
    import streamlit as st
    from apptest_helpers import fake_context
    from streamlit.testing.v1 import AppTest

    offered = {}
    real = st.download_button

    def spy(label, data, **kw):
        offered[kw.get("key")] = data
        return real(label, data, **kw)

    monkeypatch.setattr(st, "download_button", spy)
    ctx = fake_context(types.SimpleNamespace(config=BASE), teaching_page=lambda name: data)
    at = AppTest.from_function(_render_learn, args=(ctx,), default_timeout=60)
    at.session_state["learn_page_underflow"] = True  # a teacher asked for it
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert offered["learn_page_download_underflow"] == explorable_html(data).encode("utf-8")


def _render_learn(ctx):
    from rnnviz.ui.tabs import learn

    learn.render(ctx)

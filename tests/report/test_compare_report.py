"""``rnnviz compare`` and its self-contained HTML report: the numbers the report embeds are the
library's (analyze, lyapunov, decay_fit, train), the command line writes it and refuses a bad
cell in one line, and Debian's Chromium renders every figure from the file with the network off.

The browser test skips where /usr/bin/chromium or playwright is missing, unless
RNNVIZ_REQUIRE_BROWSER=1 (then that is a failure), as tests/ui/test_browser.py does.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from browser_helpers import CLEAR, plots_offline

from rnnviz import ConfigError, RunConfig, analyze, cell_names, lyapunov, train
from rnnviz.base.readings import decay_fit
from rnnviz.cli.main import main
from rnnviz.report import (
    comparison,
    comparison_json,
    comparison_of,
    report_figures,
    report_html,
    write_report,
)

#: One shape for every test here (I = 2: the adding task's), so each design compiles once.
BASE = RunConfig(hidden_size=4, input_size=2, seq_len=6, batch_size=4)
CELLS = ("gru", "mamba")  # a gated cell and a matrix-memory one
SHAPE_FLAGS = ["--hidden-size", "4", "--input-size", "2", "--seq-len", "6", "--batch-size", "4"]
TRAIN_STEPS = 20
NUMBERS = re.compile(r'<script type="application/json" id="rnnviz-numbers">(.*?)</script>', re.S)


def _numbers(page: str) -> dict:
    found = NUMBERS.findall(page)
    assert len(found) == 1
    return json.loads(found[0])


@pytest.fixture(scope="module")
def compared():
    return comparison(CELLS, BASE)


@pytest.fixture(scope="module")
def trained():
    return comparison(["gru"], BASE, train_steps=TRAIN_STEPS)


def test_the_report_holds_the_librarys_numbers(compared):
    out = _numbers(report_html(compared))
    assert [d["cell"] for d in out["designs"]] == list(CELLS)
    for d in out["designs"]:
        cfg = RunConfig.from_mapping(d["config"])
        assert cfg == BASE.replace(cell=d["cell"])
        a = analyze(cfg, repeats=1)
        ly = lyapunov(cfg, k=1, measure_decay=False)
        assert d["grad_norms"] == a.grad_norms.astype(float).tolist()  # bit for bit
        assert d["log10_grad_norms"] == a.log10_grad_norms.tolist()
        assert d["loss"] == a.loss
        assert d["lambda1"] == float(ly.exponents[0])
        assert d["decay_per_step"] == decay_fit(a.log10_grad_norms).slope
        assert d["decades_per_step"] == pytest.approx(d["decay_per_step"] / np.log(10), rel=1e-12)
        assert d["training"] is None
    assert out["packages"]["jax"] and out["packages"]["numpy"] and out["environment"]["cpu_count"] > 0
    assert set(out["designs"][0]["config"]) == set(dataclasses.asdict(BASE))  # every RunConfig field


def test_the_page_shows_the_numbers_and_every_config_field_escaped(compared):
    page = report_html(compared)
    for d in compared.designs:
        assert f"{d.lambda1:+.4f}" in page and f"{d.decay_per_step:+.4f}" in page
    for field in dataclasses.asdict(BASE):
        assert f"<td>{field}</td>" in page
    # nothing is fetched: no element names a source or a style sheet elsewhere
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=", page, re.I)
    assert page.count('class="plotly-graph-div"') == len(report_figures(compared))  # one div per figure
    hostile = dataclasses.replace(compared.designs[0], label='</script><b onload="x">&lt;')
    page = report_html(comparison_of([hostile]))
    assert '<b onload="x">' not in page and "</script><b" not in page
    assert _numbers(page)["designs"][0]["label"] == hostile.label  # read back exactly


def test_comparison_refuses_unknown_and_repeated_cells():
    with pytest.raises(ConfigError) as err:
        comparison(["gru", "nosuchcell"], BASE)
    assert "nosuchcell" in str(err.value) and all(c in str(err.value) for c in cell_names())
    with pytest.raises(ConfigError, match="given twice"):
        comparison(["gru", "gru"], BASE)
    with pytest.raises(ConfigError, match="at least one"):
        comparison([], BASE)


def test_training_adds_the_learning_curves(trained):
    d = trained.designs[0]
    assert d.training is not None and d.training.weight_tree is None  # curves only
    assert [f.key for f in report_figures(trained)] == ["gradients", "dynamics", "learning"]
    run = train(BASE.replace(cell="gru"), "adding", steps=TRAIN_STEPS, log_every=TRAIN_STEPS)
    out = _numbers(report_html(trained))["designs"][0]["training"]
    assert out["losses"] == run.losses.astype(float).tolist() and out["steps_run"] == TRAIN_STEPS
    assert out["baseline"] == pytest.approx(1 / 6, abs=1e-3) and out["task"] == "adding"


def test_the_cli_writes_the_report_and_exits_0(compared, tmp_path, capsys):
    path = tmp_path / "out.html"
    assert main(["compare", "--cells", ",".join(CELLS), *SHAPE_FLAGS, "--report", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"wrote the report to {path} ({path.stat().st_size} bytes)" in out
    rows = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert rows == list(CELLS)
    assert _numbers(path.read_text(encoding="utf-8"))["designs"] == comparison_json(compared)["designs"]


def test_out_names_the_report_as_explorable_names_its_page():
    from rnnviz.cli.main import build_parser

    parse = build_parser("compare").parse_args
    assert (
        parse(["compare", "--out", "a.html"]).report
        == parse(["compare", "--report", "a.html"]).report
        == "a.html"
    )


def test_the_cli_refuses_a_bad_cell_in_one_line_with_status_2(tmp_path, capsys):
    path = tmp_path / "never.html"
    assert main(["compare", "--cells", "lstm,nosuchcell", *SHAPE_FLAGS, "--report", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: cells='nosuchcell'")
    assert all(c in err for c in cell_names()) and not path.exists()
    assert main(["compare", "--cells", "gru", "--report", str(tmp_path / "no" / "x.html")]) == 2
    assert "does not" in capsys.readouterr().err


def _render(tab, ctx):
    tab.render(ctx)


def test_the_compare_tab_offers_the_same_report_built_from_its_runs(monkeypatch):
    import streamlit as st
    from apptest_helpers import fake_context
    from streamlit.testing.v1 import AppTest

    from rnnviz.ui.tabs import compare as tab

    a = analyze(BASE.replace(cell="gru"), repeats=1)
    pinned = analyze(BASE.replace(cell="gru", seed=1), repeats=1)  # the same shape: no compile
    buttons = {}
    real = st.download_button

    def spy(label, data, **kw):
        buttons[kw.get("key")] = (label, data, kw)
        return real(label, data, **kw)

    monkeypatch.setattr(st, "download_button", spy)
    at = AppTest.from_function(_render, args=(tab, fake_context(a, pins=(a, pinned))), default_timeout=120)
    at.run()
    assert not at.exception
    label, data, kw = buttons["html_compare"]
    assert label == "Download this comparison (HTML)" and kw["mime"] == "text/html" and callable(data)
    out = _numbers(data().decode("utf-8"))  # what a click builds, from the runs in hand
    assert [d["config"]["seed"] for d in out["designs"]] == [0, 1]
    assert out["designs"][1]["grad_norms"] == pinned.grad_norms.astype(float).tolist()
    assert all(d["lambda1"] is None for d in out["designs"])  # not computed in the page


PER_PLOT = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => ({
  id: p.id, svgs: p.querySelectorAll('svg.main-svg').length,
  traces: p.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length }))"""


@pytest.mark.browser
@pytest.mark.parametrize("which", ["compared", "trained"])
def test_chromium_offline_renders_every_figure_from_the_file(which, request, browser, tmp_path):
    c = request.getfixturevalue(which)
    path = write_report(c, tmp_path / f"{which}.html")
    figures = report_figures(c)
    plots, clear, aborted, errors = plots_offline(browser, path, len(figures), PER_PLOT)
    assert [p["id"] for p in plots] == [f"rnnviz-{f.key}" for f in figures]
    assert clear == CLEAR
    assert all(p["svgs"] >= 1 for p in plots)
    assert plots[0]["traces"] == len(c.designs)  # one gradient line per design
    assert not aborted, aborted
    assert not errors, errors

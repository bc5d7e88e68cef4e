"""Designs as their reference blocks side by side: ``rnnviz compare --cells gru,mamba --block
reference --layers 2 --params 10k --report`` writes one self-contained page whose numbers are
the library's (block_model's counts, analyze_block's gradients), whose table reads them (the
width, the count and its difference from the mean, the loss, the reach) and whose figures,
read back from the page's own plotly JSON, draw each design's records."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re

import numpy as np
import pytest

import rnnviz
from rnnviz.charts.embed import plotly_js
from rnnviz.cli.main import main
from rnnviz.report.models import BLOCK_INPUTS, reach, reach_text

CELLS = ("gru", "mamba")
LAYERS = 2
TARGET = 10_000
STEPS = 8
ARGV = ["compare", "--cells", ",".join(CELLS), "--block", "reference", "--layers", str(LAYERS)]
ARGV += ["--params", "10k", "--seq-len", str(STEPS)]
NUMBERS = re.compile(r'<script type="application/json" id="rnnviz-numbers">(.*?)</script>', re.S)
FETCHES = re.compile(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=", re.I)
PLOT = re.compile(r'Plotly\.newPlot\(\s*"(rnnviz-[\w-]+)",\s*')


def _numbers(page: str) -> dict:
    found = NUMBERS.findall(page)
    assert len(found) == 1
    return json.loads(found[0])


def _array(value) -> np.ndarray:
    """A trace's array as plotly.py writes it: a list, or ``{"dtype", "bdata"[, "shape"]}``."""
    if not isinstance(value, dict):
        return np.asarray(value, np.float64)
    flat = np.frombuffer(base64.b64decode(value["bdata"]), np.dtype(value["dtype"]))
    shape = [int(n) for n in str(value.get("shape", flat.size)).split(",")]
    return flat.reshape(shape).astype(np.float64)


def _figures(page: str) -> dict[str, tuple[list, dict]]:
    """Every figure on the page, by its div's id: ``(traces, layout)`` from its ``Plotly.newPlot``."""
    decoder = json.JSONDecoder()
    figures = {}
    for found in PLOT.finditer(page):
        traces, end = decoder.raw_decode(page, found.end())
        layout, _ = decoder.raw_decode(page, page.index("{", end))
        figures[found.group(1)] = (traces, layout)
    return figures


def _axes(layout: dict) -> tuple[str, str]:
    return layout["xaxis"]["title"]["text"], layout["yaxis"]["title"]["text"]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[str, str, str]:
    """The page the command line wrote, its path, and what it printed."""
    path = tmp_path_factory.mktemp("blocks") / "blocks.html"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main([*ARGV, "--report", str(path)]) == 0
    return path.read_text(encoding="utf-8"), str(path), printed.getvalue()


@pytest.fixture(scope="module")
def designs(written) -> list[tuple[dict, rnnviz.RunConfig, object]]:
    """Each design's record on the page, its config, and the library's analysis of that config."""
    out = []
    for m in _numbers(written[0])["models"]:
        cfg = rnnviz.RunConfig.from_mapping(m["config"])
        out.append((m, cfg, rnnviz.analyze_block(cfg)))
    return out


def test_the_cli_writes_the_page_at_matched_counts(written, designs):
    page, path, printed = written
    assert f"wrote the report to {path} ({len(page.encode())} bytes)" in printed
    assert [line.split()[0] for line in printed.splitlines()[1:3]] == list(CELLS)  # the table first
    assert [cfg.cell for _, cfg, _ in designs] == list(CELLS)
    for m, cfg, a in designs:
        assert (cfg.block, cfg.layers, cfg.seq_len) == ("reference", LAYERS, STEPS)
        assert m["n_params"] == rnnviz.block_model(cfg).n_params
        assert abs(m["n_params"] - TARGET) <= 0.05 * TARGET
        assert m["grad_norms"] == a.grad_norms.tolist()  # the same analysis, bit for bit
        assert m["connectivity"] == a.connectivity.tolist() and m["loss"] == a.loss
        assert m["token_ids"] is None and m["model_type"] == a.model_type
        assert m["reach"]["input"] == {"from": STEPS - 1, "positions_back": reach(a.grad_norms[0], STEPS - 1)}
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>rnnviz comparison of reference blocks: gru, mamba</title>" in page


def test_the_table_reads_the_librarys_counts_and_reaches(written, designs):
    page = written[0]
    counts = [rnnviz.block_model(cfg).n_params for _, cfg, _ in designs]
    mean = sum(counts) / len(counts)
    header = re.search(r"<h2>Numbers</h2>\s*<table><thead><tr>(.*?)</tr>", page).group(1)
    names = re.findall(r"<th>(.*?)</th>", header)
    assert names[:7] == ["design", "type", "layers", "width H", "parameters", "vs the mean", "steps T"]
    for (_, cfg, a), count in zip(designs, counts):
        row = re.search(rf"<tr><td>{cfg.cell}</td>(.*?)</tr>", page).group(1)
        cells = dict(zip(names[1:], re.findall(r"<td[^>]*>(.*?)</td>", row)))
        assert cells["type"] == a.model_type and cells["layers"] == str(LAYERS)
        assert cells["width H"] == str(cfg.hidden_size) and cells["parameters"] == f"{count:,}"
        assert cells["vs the mean"] == f"{count / mean - 1:+.1%}" and cells["steps T"] == str(STEPS)
        assert cells["loss"] == f"{a.loss:.6g}"
        expected = reach_text(reach(a.grad_norms[0], STEPS - 1), STEPS - 1, BLOCK_INPUTS)
        assert cells[names[-1]] == expected.replace(">", "&gt;")


def test_each_design_has_its_figures_drawn_from_its_records(written, designs):
    figures = _figures(written[0])
    kinds = ["layers", "layer-lines", "states", "connectivity"]
    assert list(figures) == [f"rnnviz-{kind}-{i}" for kind in kinds for i in (1, 2)]
    for i, (_, cfg, a) in enumerate(designs, start=1):
        logs = np.asarray(a.log10_grad_norms, np.float64)
        (heatmap,), layout = figures[f"rnnviz-layers-{i}"]
        assert heatmap["type"] == "heatmap" and layout["title"]["text"].startswith(f"{cfg.cell}: ")
        assert _axes(layout) == ("position t", "residual stream entering")
        np.testing.assert_array_equal(_array(heatmap["z"]), np.where(np.isfinite(logs), logs, np.nan))
        lines, layout = figures[f"rnnviz-layer-lines-{i}"]
        assert len(lines) == LAYERS + 1 and _axes(layout) == ("position t", "‖∂L/∂x_t‖ (log scale)")
        states, layout = figures[f"rnnviz-states-{i}"]
        assert [s["name"] for s in states] == [
            f"layer {layer + 1} · {leaf}" for layer, leaves in a.state_grad_norms.items() for leaf in leaves
        ]
        assert len(states) >= LAYERS and _axes(layout) == ("step t", "‖∂L/∂state_t‖ (log scale)")
        (bars,), layout = figures[f"rnnviz-connectivity-{i}"]
        assert bars["type"] == "bar" and _axes(layout) == ("token", "‖∂ℓ_p/∂x_t‖ (log scale)")
        np.testing.assert_array_equal(_array(bars["x"]), np.arange(STEPS))


def test_the_page_is_self_contained_and_names_every_config_field(written, designs):
    page = written[0]
    assert page.count(plotly_js()) == 1  # plotly.js inlined exactly once
    assert not FETCHES.search(page)  # no element names a source or a style sheet elsewhere
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?:", page.replace(plotly_js(), ""), re.I)
    configs = page.split("<h2>Configurations</h2>")[1]
    widths = [str(cfg.hidden_size) for _, cfg, _ in designs]
    assert f'<tr class="differs"><td>hidden_size</td><td>{widths[0]}</td><td>{widths[1]}</td></tr>' in configs
    assert "<tr><td>layers</td><td>2</td><td>2</td></tr>" in configs

"""Your own models side by side: ``rnnviz compare --model A --model B`` and its report. Two tiny
checkpoints written by transformers here (a 2-layer Mamba reading words, a 1-layer xLSTM
reading characters: the same text, tokenised differently); the report embeds analyze_model's
numbers bit for bit, draws them as the records say, inlines plotly.js once and fetches
nothing; the reach is the pure function's, checked against a loop; the command line refuses a
missing folder and an id outside a vocabulary in one line with status 2."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import numpy as np
import pytest
import torch
import transformers
from browser_helpers import CLEAR, plots_offline

import rnnviz
from rnnviz.charts.embed import plotly_js
from rnnviz.cli.main import main
from rnnviz.report import (
    ModelComparison,
    model_comparison,
    model_comparison_json,
    model_report_figures,
    model_report_html,
    reach,
    write_report,
)
from rnnviz.report.models import reach_text
from rnnviz.studies.models import tokenize

VOCAB = 64
TEXT = "the cat sat on the mat"
WORDS = ["the", "cat", "sat", "on", "mat", "[UNK]"]
NUMBERS = re.compile(r'<script type="application/json" id="rnnviz-numbers">(.*?)</script>', re.S)
FETCHES = re.compile(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=", re.I)


def _numbers(page: str) -> dict:
    found = NUMBERS.findall(page)
    assert len(found) == 1
    return json.loads(found[0])


def _tokenizer(folder, by_character: bool) -> None:
    """A word-level tokenizer over :data:`WORDS`, or one that reads each letter as a token."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    vocab = [chr(c) for c in range(ord("a"), ord("z") + 1)] if by_character else WORDS[:-1]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate([*vocab, "[UNK]"])}, unk_token="[UNK]"))
    split = [pre_tokenizers.Split(Regex("."), "isolated")] if by_character else []
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), *split])
    tok.save(str(folder / "tokenizer.json"))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """``(mamba, xlstm, bare, stack)``: the bare one is the Mamba without a tokenizer.json; the
    stack an nn.LSTM state dict (it reads vectors, not tokens)."""
    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    config = transformers.MambaConfig(vocab_size=VOCAB, hidden_size=16, state_size=4, num_hidden_layers=2)
    transformers.MambaForCausalLM(config).save_pretrained(root / "mamba")
    config = transformers.xLSTMConfig(
        vocab_size=VOCAB, hidden_size=32, num_blocks=1, num_heads=2, chunk_size=4
    )
    transformers.xLSTMForCausalLM(config).save_pretrained(root / "xlstm")
    _tokenizer(root / "mamba", by_character=False)
    _tokenizer(root / "xlstm", by_character=True)
    shutil.copytree(root / "mamba", root / "bare", ignore=shutil.ignore_patterns("tokenizer.json"))
    torch.save(torch.nn.LSTM(3, 4, batch_first=True).state_dict(), root / "lstm.pt")
    return root / "mamba", root / "xlstm", root / "bare", root / "lstm.pt"


@pytest.fixture(scope="module")
def compared(folders) -> ModelComparison:
    return model_comparison(folders[:2], TEXT)


@pytest.fixture(scope="module")
def page(compared) -> str:
    return model_report_html(compared)


def _loop_reach(v: np.ndarray, end: int, fraction: float) -> int | None:
    """The reach by its words: the smallest lag k from which every earlier position is below
    ``fraction`` of the maximum (or zero); None where no lag up to ``end`` is."""
    finite = [x for x in v[: end + 1] if np.isfinite(x)]
    top = max(finite, default=0.0)
    reached = [bool(np.isfinite(x) and x > 0 and x >= fraction * top) for x in v[: end + 1]]
    for k in range(end + 1):
        if not any(reached[end - j] for j in range(k, end + 1)):
            return k
    return None


def test_reach_counts_the_positions_back_to_where_the_gradient_stays_below():
    assert reach(np.array([1e-4, 0.02, 0.5, 1.0]), end=3) == 3  # position 1 is the last one read
    assert reach(np.array([1e-4, 0.009, 0.5, 1.0]), end=3) == 2
    assert reach(np.array([0.3, 0.001, 0.5, 1.0]), end=3) is None  # a dip is not the end
    assert reach(np.array([0.0, 0.0, 0.0]), end=2) == 0  # nothing reached at all
    assert reach(np.array([1e-3, 1.0, 5.0, 0.0]), end=1) == 1  # the maximum up to end only
    assert reach(np.array([0.2, 1.0]), end=1, fraction=0.5) == 1
    assert reach(np.array([np.nan, 0.5, 1.0]), end=2) == 2  # not finite: not reached
    with pytest.raises(ValueError, match="end"):
        reach(np.ones(3), end=3)
    rng = np.random.default_rng(0)
    for _ in range(300):
        v = 10.0 ** rng.uniform(-4, 0, size=rng.integers(1, 12))
        v[rng.random(v.size) < 0.1] = 0.0
        end = int(rng.integers(0, v.size))
        fraction = float(rng.choice([0.01, 0.1, 0.5]))
        assert reach(v, end, fraction) == _loop_reach(v, end, fraction)


def test_the_report_embeds_analyze_models_numbers(folders, compared, page):
    out = _numbers(page)
    assert out["schema"] == "rnnviz-model-comparison-1" and out["text"] == TEXT
    assert [m["label"] for m in out["models"]] == ["mamba", "xlstm"]
    for folder, m, row in zip(folders, out["models"], compared.rows):
        model = rnnviz.load_model(folder)
        ids, tokens = tokenize(model, TEXT)
        a = rnnviz.analyze_model(model, ids, tokens=tokens)
        assert m["grad_norms"] == a.grad_norms.tolist()  # bit for bit
        assert m["connectivity"] == a.connectivity.tolist() and m["loss"] == a.loss
        assert m["state_grad_norms"] == {
            str(layer): {leaf: v.tolist() for leaf, v in leaves.items()}
            for layer, leaves in a.state_grad_norms.items()
        }
        assert m["tokens"] == tokens and m["token_ids"] == ids.tolist()
        assert (m["model_type"], m["n_layers"], m["n_params"]) == (
            model.model_type,
            model.n_layers,
            model.n_params,
        )
        assert "compile_s" not in m and "run_s" not in m  # the numbers, not the day's timings
        steps = ids.shape[1]
        assert m["reach"]["input"] == {"from": steps - 2, "positions_back": reach(a.grad_norms[0], steps - 2)}
        assert m["reach"]["connectivity"] == {
            "from": a.position,
            "positions_back": reach(a.connectivity, a.position),
        }
        assert (row.input_reach, row.connectivity_reach) == (
            m["reach"]["input"]["positions_back"],
            m["reach"]["connectivity"]["positions_back"],
        )
    assert out["models"][0]["tokens"] == TEXT.split() and len(out["models"][1]["tokens"]) == 17


def test_the_page_says_the_models_tokenise_differently_and_shows_the_reaches(compared, page):
    assert not compared.same_tokens and _numbers(page)["same_tokens"] is False
    assert "The models tokenise the text differently" in page
    assert "the · cat · sat · on · the · mat" in page and "t · h · e · c · a · t" in page
    for r in compared.rows:
        cells = [reach_text(r.input_reach, r.loss_end), reach_text(r.connectivity_reach, r.analysis.position)]
        row = re.search(rf"<tr><td>{r.label}</td>(.*?)</tr>", page).group(1)
        assert re.findall(r"<td[^>]*>(.*?)</td>", row)[-3::2] == [c.replace(">", "&gt;") for c in cells]
    # the sizes table names every model's type (Mamba's sizes hold it as a field, xLSTM's do not)
    types = re.search(r"<tr[^>]*><td>model_type</td>(.*?)</tr>", page).group(1)
    shown = re.findall(r"<td[^>]*>(.*?)</td>", types)
    assert shown == [r.model_type for r in compared.rows] == ["mamba", "xlstm"]


def test_the_figures_draw_the_records(compared, page):
    figures = {f.key: f.figure for f in model_report_figures(compared)}
    kinds = ["layers", "layer-lines", "states", "connectivity"]
    assert list(figures) == [f"{kind}-{i}" for kind in kinds for i in (1, 2)]
    for i, r in enumerate(compared.rows, start=1):
        a = r.analysis
        logs = np.asarray(a.log10_grad_norms, np.float64)
        heatmap = figures[f"layers-{i}"].data[0]
        np.testing.assert_array_equal(
            np.asarray(heatmap.z, np.float64), np.where(np.isfinite(logs), logs, np.nan)
        )
        lines = figures[f"layer-lines-{i}"].data
        assert len(lines) == a.grad_norms.shape[0]
        np.testing.assert_array_equal(np.asarray(lines[0].y, np.float64), heatmap.z[0])
        states = figures[f"states-{i}"].data
        assert [s.name for s in states] == [
            f"layer {layer + 1} · {leaf}" + (" (exactly 0 at every step)" if np.isneginf(v).all() else "")
            for layer, leaves in a.log10_state_grad_norms.items()
            for leaf, v in leaves.items()
        ]
        bars = figures[f"connectivity-{i}"].data[0]
        np.testing.assert_array_equal(bars.x, np.arange(a.position + 1))
        assert figures[f"layers-{i}"].layout.title.text.startswith(f"{r.label}: ")
    assert page.count('class="plotly-graph-div"') == len(figures)
    assert all(f'id="rnnviz-{key}"' in page for key in figures)


def test_the_file_is_self_contained_and_escapes_what_it_shows(compared, tmp_path):
    path = write_report(compared, tmp_path / "models.html")
    assert [p.name for p in tmp_path.iterdir()] == ["models.html"]
    text = path.read_text(encoding="utf-8")
    assert text.count(plotly_js()) == 1  # plotly.js inlined exactly once
    assert not FETCHES.search(text)  # no element names a source or a style sheet elsewhere
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?:", text.replace(plotly_js(), ""), re.I)
    hostile = dataclasses.replace(compared.rows[0], label='</script><b onload="x">&lt;')
    text = model_report_html(dataclasses.replace(compared, rows=(hostile,)))
    assert '<b onload="x">' not in text and "</script><b" not in text
    assert _numbers(text)["models"][0]["label"] == hostile.label  # read back exactly


def test_the_cli_writes_the_report_and_prints_the_json(folders, compared, tmp_path, capsys):
    path = tmp_path / "out.html"
    argv = ["compare", "--model", str(folders[0]), "--model", str(folders[1]), "--text", TEXT]
    assert main([*argv, "--report", str(path), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)  # stdout is the JSON alone
    assert out["models"] == model_comparison_json(compared)["models"]
    assert f"wrote the report to {path} ({path.stat().st_size} bytes)" in captured.err
    assert _numbers(path.read_text(encoding="utf-8"))["models"] == out["models"]
    assert main([*argv[:5], "--tokens", "1,2,3,4,5"]) == 0  # the same ids for both
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["mamba", "xlstm"]  # no note: the same tokens


def test_the_cli_refuses_a_missing_model_and_a_foreign_token_in_one_line(folders, tmp_path, capsys):
    path = tmp_path / "never.html"
    missing = tmp_path / "no-such-model"
    cases = [
        (
            ["--model", str(folders[0]), "--model", str(missing), "--text", TEXT],
            [str(missing), "does not exist"],
        ),
        (["--model", str(folders[0]), "--model", str(folders[1]), "--tokens", "1,70,2"], ["[70]", "0 … 63"]),
        (
            ["--model", str(folders[0]), "--model", str(folders[2]), "--text", TEXT],
            ["bare", "tokenizer.json"],
        ),
        (["--model", str(folders[0]), "--model", str(folders[3]), "--tokens", "1,2"], ["lstm.pt", "vectors"]),
        (["--model", str(folders[0]), "--text", "mat"], ["at least 2 tokens", "mamba reads 1"]),
        (
            ["--model", str(folders[0]), "--text", TEXT, "--hidden-size", "8"],
            ["--hidden-size", "not with --model"],
        ),
    ]
    for flags, words in cases:
        assert main(["compare", *flags, "--report", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and err.startswith("error: ") and all(w in err for w in words), err
    assert not path.exists()


#: Each drawn figure's id and where its drawing lies on the page.
PLOTS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => {
  const svg = p.querySelector('svg.main-svg'); const box = svg ? svg.getBoundingClientRect() : null;
  return { id: p.id, left: box && box.left, right: box && box.right, top: box && box.top }; })"""


@pytest.mark.browser
def test_chromium_offline_draws_every_figure_side_by_side(compared, browser, tmp_path):
    path = write_report(compared, tmp_path / "models.html")
    figures = model_report_figures(compared)
    plots, clear, aborted, errors = plots_offline(
        browser, path, len(figures), PLOTS, viewport={"width": 1280, "height": 900}
    )
    assert [p["id"] for p in plots] == [f"rnnviz-{f.key}" for f in figures]
    for first, second in zip(plots[::2], plots[1::2]):  # the two models of one kind: one row
        assert first["top"] == second["top"] and first["right"] <= second["left"], (first, second)
    # a third of the page each: titles wrapped inside, legends under them, nothing spilt
    assert clear == CLEAR
    assert not aborted, aborted
    assert not errors, errors


def test_block_comparison_reads_the_inputs_it_is_given():
    """Each design reads its own array (the dashboard's: a data set's first B sequences); a
    count of arrays other than one per config is one message."""
    import rnnviz
    from rnnviz.report.models import block_comparison
    from rnnviz.studies.block_models import block_inputs
    from rnnviz.studies.models import analyze_model

    cfg = rnnviz.RunConfig(cell="gru", block="reference", layers=1, hidden_size=8, seq_len=6)
    drawn = block_inputs(cfg)
    x = np.random.default_rng(7).normal(size=drawn.shape).astype(np.float32)
    c = block_comparison([cfg, cfg.replace(cell="mamba")], inputs=[x, 2 * x])
    for row, read in zip(c.rows, (x, 2 * x)):
        want = analyze_model(rnnviz.block_model(row.config), read).grad_norms
        np.testing.assert_allclose(row.analysis.grad_norms, want, rtol=1e-6)
    default = block_comparison([cfg]).rows[0].analysis.grad_norms
    np.testing.assert_allclose(default, rnnviz.analyze_block(cfg).grad_norms, rtol=1e-6)
    assert not np.allclose(default, c.rows[0].analysis.grad_norms)
    # the page says in words what the heatmap leaves blank: the top row reaches the loss at T−1 alone
    notes = {f.key: f.note for f in model_report_figures(c)}
    zeros = "(after block 1 at 5 of 6 positions)."
    assert (
        notes["layers-1"].startswith("Blank cells are gradients of exactly 0") and zeros in notes["layers-1"]
    )
    assert notes["layer-lines-1"] is None
    assert f'<p class="note">{notes["layers-2"]}</p>' in model_report_html(c)
    with pytest.raises(rnnviz.ConfigError, match=r"inputs='2 entries' is not allowed: one per config \(1\)"):
        block_comparison([cfg], inputs=[x, x])


def test_block_comparison_reads_a_trained_runs_tensors_beside_a_fresh_draw():
    import rnnviz
    from rnnviz.report.models import block_comparison

    cfg = rnnviz.RunConfig(
        cell="gru", block="reference", layers=1, hidden_size=8, seq_len=6, input_size=2, batch_size=4
    )
    run = rnnviz.train(cfg, "adding", steps=4, log_every=2)
    c = block_comparison([cfg, cfg], tensors=[run.tensors(), None])
    trained, fresh = (row.analysis.grad_norms for row in c.rows)
    want = rnnviz.analyze_block(cfg, tensors=run.tensors()).grad_norms
    np.testing.assert_allclose(trained, want, rtol=1e-6)
    np.testing.assert_allclose(fresh, rnnviz.analyze_block(cfg).grad_norms, rtol=1e-6)
    assert c.rows[1].n_params - c.rows[0].n_params == 8 * 8 + 8 - (8 + 1)  # a readout to 1 output, not H

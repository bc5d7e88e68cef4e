"""``rnnviz analyze --design`` and ``rnnviz compare --design``: a design drawn fresh at about N
parameters, its JSON that of :func:`~rnnviz.studies.models.analyze_model` on the same fresh
model and inputs, matched designs side by side, and the flags that do not go with them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rnnviz.cli.main import main
from rnnviz.studies.models import analyze_model, fresh_model
from rnnviz.studies.sizing import design_config, param_count

TINY = ["--params", "30k", "--layers", "2", "--seq-len", "12"]


def test_analyze_design_json_is_the_librarys_analysis_of_the_same_model(capsys):
    assert main(["analyze", "--design", "mamba", *TINY, "--seed", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    config = design_config("mamba", params=30_000, layers=2)
    assert out["design"] == {"model_type": "mamba", "config": config, "params": 29_667, "target": 30_000}
    assert param_count("mamba", config) == 29_667
    model = fresh_model("mamba", config, seed=3)
    ids = np.random.default_rng(3).integers(0, 256, size=(1, 12))
    a = analyze_model(model, ids).to_json()
    assert out["source"] == a["source"] == "fresh mamba (seed 3)"
    assert out["loss"] == pytest.approx(a["loss"], rel=1e-6)
    np.testing.assert_allclose(out["grad_norms"], a["grad_norms"], rtol=1e-5)
    np.testing.assert_allclose(out["connectivity"], a["connectivity"], rtol=1e-5)
    assert out["state_grad_norms"].keys() == a["state_grad_norms"].keys()


def test_analyze_design_prints_its_sizes_first(capsys):
    assert main(["analyze", "--design", "torch_gru", *TINY]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "design torch_gru: hidden_size 54, 2 layers, 29,484 parameters (-1.7% from 30,000)"
    assert json.loads(lines[1].removeprefix("config: "))["input_size"] == 16
    assert lines[2] == "model: torch_gru (fresh torch_gru (seed 0)), 2 layers, T = 12"
    # the top of the stack reaches the last-step loss at its last step alone: its zeros are said to be exact
    assert lines[7].startswith("    after block 2: 0  0  ")
    assert "the magnitudes computed in float32; 0 is exactly 0: no path leads from there to the loss" in lines


def test_compare_designs_at_matched_sizes(capsys):
    assert main(["compare", "--design", "mamba,xlstm", *TINY, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    counts = [d["params"] for d in out["designs"].values()]
    assert list(out["designs"]) == ["mamba", "xlstm"] and counts == [29_667, 30_242]
    assert [r["n_params"] for r in out["models"]] == counts
    assert all(len(r["token_ids"][0]) == 12 for r in out["models"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["analyze", "--layers", "2"], "layers=2 is not allowed: a bare cell is one layer"),
        (["analyze", "--params", "30k"], "params=30000 is not allowed: only with --design TYPE"),
        (
            ["analyze", "--design", "mamba", "--params", "30k"],
            "layers=None is not allowed: given with --design",
        ),
        (
            ["analyze", "--design", "mamba", *TINY, "--cell", "gru"],
            "cell='gru' is not allowed: not with --design",
        ),
        (
            ["analyze", "--design", "mamba", *TINY, "--model", "x"],
            "design='mamba' is not allowed: not with --model",
        ),
        (["analyze", "--design", "xlsm", *TINY], "design='xlsm' is not allowed: one of mamba, falcon_mamba"),
        (  # a cell where a model type goes: its reference block named, flag by flag
            ["analyze", "--design", "lstm", *TINY],
            "--design takes model types (mamba, falcon_mamba, mamba2, recurrent_gemma, xlstm, qwen3_next, "
            "torch_lstm, torch_gru); a cell's design is its reference block: --cell lstm --block reference",
        ),
        (
            ["compare", "--design", "lstm,mamba", *TINY, "--block", "reference"],
            "a cell's design is its reference block: --cells lstm,mamba --block reference",
        ),
        (
            ["compare", "--design", "mamba,slstm", *TINY],
            "a cell's design is its reference block: --cells mamba,slstm --block reference",
        ),
        (
            ["compare", "--design", "mamba,xlstm", *TINY, "--block", "reference"],
            "design='mamba,xlstm' is not allowed: not with --block reference",
        ),
        (
            ["analyze", "--design", "mamba", "--layers", "4", "--params", "1k"],
            "the nearest are 741 (hidden_size 1)",
        ),
        (
            ["compare", "--design", "mamba,torch_lstm", *TINY],
            "(torch_lstm reads vectors: rnnviz analyze --design",
        ),
        (
            ["compare", "--design", "mamba,xlstm", *TINY, "--text", "hi"],
            "text='hi' is not allowed: not with --design",
        ),
        (
            ["compare", "--design", "mamba", "--params", "30k"],
            "layers=None is not allowed: given with --design",
        ),
    ],
)
def test_flags_that_do_not_go_with_a_design_are_named(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_bad_count_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit):
        main(["analyze", "--design", "mamba", "--layers", "2", "--params", "3x"])
    assert "argument --params: '3x' is not a count ≥ 1 (100k, 1.5M or an integer)" in capsys.readouterr().err


def test_analyze_a_reference_block_prints_the_librarys_analysis(capsys):
    """``rnnviz analyze --cell gru --block reference --layers 2 --json`` is analyze_block of the
    same config, on ``--data``'s first sequences too; the CSV of a bare cell's run is refused."""
    import rnnviz

    argv = ["analyze", "--cell", "gru", "--block", "reference", "--layers", "2", "--hidden-size", "8"]
    assert main([*argv, "--seq-len", "12", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    cfg = rnnviz.RunConfig(cell="gru", block="reference", layers=2, hidden_size=8, seq_len=12)
    np.testing.assert_allclose(got["grad_norms"], rnnviz.analyze_block(cfg).grad_norms, rtol=1e-6)
    assert main([*argv, "--data", "digits", "--order", "rows", "--batch-size", "4", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    digits = rnnviz.load_dataset("digits", order="rows")
    fitted = rnnviz.fit_to_data(cfg.replace(batch_size=4), digits)
    want = rnnviz.analyze_block(fitted, data=digits).grad_norms
    np.testing.assert_allclose(got["grad_norms"], want, rtol=1e-6)
    assert fitted.loss == "last" and np.shape(want) == (3, 8)
    assert main([*argv, "--csv", "x.csv"]) == 2
    assert "csv='x.csv' is not allowed: not with --block reference" in capsys.readouterr().err


def test_analyze_reads_a_trained_blocks_run_at_a_kept_step(tmp_path, capsys):
    """``rnnviz analyze --weights RUN --step S --json`` of a block's run is analyze_block of the
    run's config at its tensors of step S; asking for a bare cell with a block's run is refused."""
    import rnnviz

    cfg = rnnviz.RunConfig(
        cell="gru", block="reference", layers=2, hidden_size=8, seq_len=6, input_size=2, batch_size=4
    )
    run = rnnviz.train(cfg, "adding", steps=4, log_every=2)
    path = str(run.save(tmp_path / "gru.rnnviz"))
    assert main(["analyze", "--weights", path, "--step", "2", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = rnnviz.analyze_block(cfg, tensors=run.tensors(2))
    np.testing.assert_allclose(got["grad_norms"], want.grad_norms, rtol=1e-6)
    assert got["loss"] == pytest.approx(want.loss, rel=1e-6)
    assert main(["analyze", "--weights", path, "--block", "cell"]) == 2
    assert "block='cell' is not allowed: 'reference', the run's" in capsys.readouterr().err


def test_compare_reference_blocks_at_matched_counts(capsys):
    """``compare --cells gru,mamba --block reference --layers 2 --params 20k --json``: each
    block within 5 % of the count, its record the library's analysis of the same config."""
    import rnnviz

    argv = ["compare", "--cells", "gru,mamba", "--block", "reference", "--layers", "2", "--params", "20k"]
    assert main([*argv, "--seq-len", "16", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [g["config"]["cell"] for g in got] == ["gru", "mamba"]
    for g in got:
        assert abs(g["params"] - 20_000) <= 1_000
        cfg = rnnviz.RunConfig.from_mapping(g["config"])
        assert rnnviz.block_model(cfg).n_params == g["params"]
        np.testing.assert_allclose(
            g["analysis"]["grad_norms"], rnnviz.analyze_block(cfg).grad_norms, rtol=1e-6
        )
    assert main([*argv, "--text", "hi"]) == 2
    assert "text='hi' is not allowed: not with --block reference" in capsys.readouterr().err

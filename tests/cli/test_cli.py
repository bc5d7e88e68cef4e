import json

import numpy as np
import pandas as pd
import pytest

from rnnviz import RunConfig, analyze
from rnnviz.cli.main import build_parser, main
from rnnviz.config import FIELD_SPECS


def test_analyze_json_matches_the_library(capsys):
    assert (
        main(
            [
                "analyze",
                "--cell",
                "lstm",
                "--hidden-size",
                "6",
                "--seq-len",
                "7",
                "--batch-size",
                "none",
                "--json",
                "--repeats",
                "2",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {
        "config",
        "loss",
        "grad_norms",
        "component_grad_norms",
        "input_grad_norms",
        "carry_norms",
        "timing",
    }
    cfg = RunConfig(**out["config"])
    assert cfg == RunConfig(cell="lstm", hidden_size=6, seq_len=7, batch_size=None)
    a = analyze(cfg, repeats=1)
    np.testing.assert_allclose(out["grad_norms"], a.grad_norms, rtol=1e-6)
    assert set(out["component_grad_norms"]) == {"c", "h"} and len(out["input_grad_norms"]) == 7
    assert out["timing"]["repeats"] == 2


def test_analyze_csv_writes_the_per_timestep_table(tmp_path, capsys):
    path = tmp_path / "steps.csv"
    assert main(["analyze", "--seq-len", "9", "--csv", str(path)]) == 0
    df = pd.read_csv(path)
    assert list(df["t"]) == list(range(10))
    assert {"grad_norm", "grad_norm_h", "carry_norm", "input_grad_norm"} <= set(df.columns)
    assert np.isnan(df["input_grad_norm"][0]) and df["input_grad_norm"][1:].notna().all()
    assert "verdict:" in capsys.readouterr().out


def test_help_documents_every_field_with_its_range():
    text = build_parser()._subparsers._group_actions[0].choices["analyze"].format_help()
    flat = " ".join(text.split())  # argparse wraps help lines
    for name, spec in FIELD_SPECS.items():
        flag = "--" + name.replace("_", "-")
        assert flag in text
        if spec.choices is None:  # a number: its range, as the validator words it
            assert spec.allowed() in flat, name
    assert "[1, 100000]" in text and "float32, bfloat16, float16" in text


def test_json_turns_nonfinite_into_null(capsys):
    assert (
        main(
            [
                "analyze",
                "--activation",
                "identity",
                "--recurrent-gain",
                "3",
                "--seq-len",
                "60",
                "--dtype",
                "float16",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert None in out["carry_norms"] and out["nonfinite_carry_step"] is not None


@pytest.mark.parametrize(
    "argv", [["--help"], ["analyze", "--help"], ["sweep", "--help"], ["bench", "--help"]]
)
def test_help_exits_zero(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0


def test_each_subcommand_built_alone_is_the_one_in_the_whole_parser():
    from rnnviz.cli.main import COMMANDS

    def subparsers(parser):
        return parser._subparsers._group_actions[0].choices

    whole = subparsers(build_parser())
    assert list(whole) == [name for name, _ in COMMANDS]
    for name, _ in COMMANDS:
        alone = subparsers(build_parser(only=name))
        assert list(alone) == [name]
        assert alone[name].format_help() == whole[name].format_help(), name


def test_rnnviz_app_starts_the_server_without_importing_jax_or_pandas():
    # `rnnviz app` becomes Streamlit: what it imports first delays the server's health check
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from rnnviz.cli.main import main\n"
        "try:\n    main(['app', '--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "print(sorted(m for m in ('jax', 'flax', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_analyze_sweep_and_lyapunov_take_data(tmp_path, capsys):
    from rnnviz import fit_to_data, load_dataset

    digits = load_dataset("digits", order="rows")
    argv = ["--data", "digits", "--order", "rows", "--cell", "gru", "--hidden-size", "6"]
    assert main(["analyze", *argv, "--json", "--repeats", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    cfg = RunConfig(**out["config"])
    assert cfg == fit_to_data(RunConfig(cell="gru", hidden_size=6), digits) and out["data"] == "digits rows"
    np.testing.assert_allclose(out["grad_norms"], analyze(cfg, data=digits, repeats=1).grad_norms, rtol=1e-6)
    path = tmp_path / "sweep.csv"
    assert main(["sweep", *argv, "--over", "seed=0,1", "--csv", str(path)]) == 0
    df = pd.read_csv(path)
    assert set(df.seed) == {0, 1} and df.t.max() == 8
    assert main(["lyapunov", *argv, "--k", "2", "--json"]) == 0
    capsys.readouterr()
    # the text's window follows --seq-len; a flag that clashes with the data is named
    assert main(["analyze", "--data", "text", "--seq-len", "12", "--repeats", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["config"]["seq_len"] == 12
        and out["config"]["input_size"] == 97
        and out["config"]["loss"] == "all"
    )
    assert main(["analyze", "--data", "digits", "--seq-len", "10"]) == 2
    assert "seq_len=10 is not allowed: the data's 64 steps for digits" in capsys.readouterr().err
    assert main(["analyze", "--data", str(tmp_path / "missing.npz")]) == 2
    assert "missing.npz" in capsys.readouterr().err

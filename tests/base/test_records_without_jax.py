"""What the dashboard's server does without JAX: the records the workers answer with, made
here by the real library on tiny configs and pickled, unpickle in a fresh interpreter that
imports only their JAX-free homes, and that interpreter plans (configs, the cell and task
tables, the carry's size, the Jacobians' method, training settings, a run file's header) and
draws (frames, charts, the report and the teaching page) with them, and never imports JAX."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rnnviz import RunConfig, analyze, connectivity, fit_to_data, jacobians, load_dataset, lyapunov, train
from rnnviz.checkpoints.safetensors import encode
from rnnviz.engine.environment import environment
from rnnviz.report.numbers import comparison_of
from rnnviz.studies.jacobians import carry_dim
from rnnviz.studies.models import analyze_model, load_model
from rnnviz.studies.over_training import over_training
from rnnviz.tables.cells import cell_names

ROOT = Path(__file__).resolve().parents[2]

#: Every name the server needs, from the module it is imported from without JAX.
SERVER_IMPORTS = """
from rnnviz.base.analysis import Analysis
from rnnviz.base.connectivity import Connectivity
from rnnviz.base.dynamics import EXACT_MAX_DIM, Jacobians, Lyapunov, choose_method
from rnnviz.base.environment import Environment
from rnnviz.base.models import ModelAnalysis
from rnnviz.base.runfile import RunFileError, read_header
from rnnviz.base.theory import simple_cell_theory, theory_overlay
from rnnviz.base.timing import MIN_PRECISE_REPEATS, Timing
from rnnviz.base.train_settings import DATA_TASK, OPTIMIZERS, TrainSettings
from rnnviz.base.training import OverTraining, Training, training_verdict
from rnnviz.config import RunConfig, carry_size, static_config
from rnnviz.report.explorable import explorable_html
from rnnviz.report.html import report_html
from rnnviz.report.numbers import comparison_of
from rnnviz.tables.cells import cell_names, cell_spec
from rnnviz.tables.tasks import TASK_RULES
from rnnviz import charts, frames
from rnnviz.frames import connectivity as fc, dynamics as fd, gradients as fg, models as fm, training as ft
"""


def _lstm_state_dict(path: Path, inputs: int = 3, hidden: int = 4) -> Path:
    """A one-layer ``torch.nn.LSTM`` state dict, written with NumPy (torch's names and shapes)."""
    rng = np.random.default_rng(0)
    shapes = {"weight_ih_l0": (4 * hidden, inputs), "weight_hh_l0": (4 * hidden, hidden)}
    shapes |= {"bias_ih_l0": (4 * hidden,), "bias_hh_l0": (4 * hidden,)}
    path.write_bytes(encode({k: rng.uniform(-0.5, 0.5, s).astype(np.float32) for k, s in shapes.items()}))
    return path


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> Path:
    """The workers' answers, pickled: each made by the real library on a tiny config."""
    folder = tmp_path_factory.mktemp("answers")
    cfg = RunConfig(cell="simple", hidden_size=4, seq_len=7)  # not the doctests' shape: they count compiles
    digits = load_dataset("digits", order="rows")
    run = train(RunConfig(hidden_size=4, seq_len=8, input_size=1), task="recall", steps=4, log_every=2)
    run.save(folder / "run.rnnviz")
    env = environment()
    analyses = [analyze(cfg, repeats=1), analyze(cfg.replace(cell="lru"), repeats=1)]
    out = {
        "analyses": analyses,
        "jacobians": jacobians(cfg, k=2),
        "lyapunov": lyapunov(cfg, k=2),
        "connectivity": connectivity(fit_to_data(RunConfig(cell="gru", hidden_size=4), digits), digits, 0),
        "training": run,
        "over_training": over_training(run, k=1, max_points=2),
        "model_analysis": analyze_model(
            load_model(_lstm_state_dict(folder / "lstm.safetensors")), np.zeros((1, 5, 3), np.float32)
        ),
        "environment": env,
        "comparison": comparison_of(analyses, env=env),
        "carry_dims": {n: carry_dim(RunConfig(cell=n, hidden_size=8)) for n in cell_names()},
    }
    (folder / "answers.pkl").write_bytes(pickle.dumps(out))
    return folder


@pytest.mark.slow
def test_the_server_unpickles_plans_and_draws_without_jax(answers):
    code = SERVER_IMPORTS + textwrap.dedent(
        f"""
        import pickle, sys
        from pathlib import Path

        folder = Path({str(answers)!r})
        got = pickle.loads((folder / "answers.pkl").read_bytes())
        a, lru = got["analyses"]
        assert isinstance(a, Analysis) and isinstance(a.timing, Timing)
        assert isinstance(got["jacobians"], Jacobians) and isinstance(got["lyapunov"], Lyapunov)
        assert isinstance(got["connectivity"], Connectivity) and isinstance(got["training"], Training)
        assert isinstance(got["over_training"], OverTraining) and isinstance(got["environment"], Environment)
        assert isinstance(got["model_analysis"], ModelAnalysis)

        # plan: configs, the tables, the carry's size (the traced carry_dim's, for every cell)
        for name, dim in got["carry_dims"].items():
            assert carry_size(RunConfig(cell=name, hidden_size=8)) == dim, name
        assert choose_method(carry_size(a.config)) == "exact" and EXACT_MAX_DIM > 0
        assert static_config(a.config.replace(seed=3)) == static_config(a.config)
        assert cell_spec("lstm").display.gates and set(cell_names()) >= set(got["carry_dims"])
        settings = TrainSettings("recall", steps=4, log_every=2)
        assert RunConfig(input_size=TASK_RULES[settings.task].input_size).input_size == 1
        assert "adam" in OPTIMIZERS and DATA_TASK and MIN_PRECISE_REPEATS >= 1
        assert read_header(folder / "run.rnnviz")["task"] == "recall"
        try:
            read_header(folder / "answers.pkl")
        except RunFileError:
            pass
        assert training_verdict([got["training"]])

        # draw: frames, charts, the report
        assert simple_cell_theory(a) is not None and theory_overlay(lru) is not None
        assert not fg.gradient_long_frame(a).empty and fg.bound_frame(lru) is not None
        assert not fd.singular_values_frame(got["jacobians"]).empty
        assert not fc.connectivity_frame([("digit 0", got["connectivity"])]).empty
        assert not ft.training_frame([got["training"]]).empty
        assert not ft.over_training_frame(got["over_training"]).empty
        assert not fm.layer_frame(got["model_analysis"]).empty
        charts.gradient_figure(fg.gradient_long_frame(lru), fg.bound_frame(lru))
        page = report_html(comparison_of([a, lru], env=got["environment"]))
        assert page.startswith("<!DOCTYPE html>") or "<html" in page[:200]
        report_html(got["comparison"])

        jax = sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib", "flax", "optax"))
        assert not jax, jax
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]

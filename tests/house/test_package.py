"""rnnviz as a user gets it: the public API, the wheel's contents, the installed wheel in a
fresh venv (``rnnviz analyze``, ``rnnviz app``), the notebook, and over-budget links."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
from apptest_helpers import run_app, total_gradient

import rnnviz
from rnnviz.base.presets import config_from_params
from rnnviz.cli import launch
from rnnviz.config import BudgetError, RunConfig, fit_to_budget

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = [
    "Analysis",
    "ExplorableGrid",
    "explorable_grid",
    "Connectivity",
    "OverTraining",
    "RunFileError",
    "Weights",
    "connectivity",
    "load_run",
    "over_training",
    "layers_over_training",
    "LayersOverTraining",
    "CellSpec",
    "ConfigError",
    "FIELD_SPECS",
    "Jacobians",
    "Lyapunov",
    "RunConfig",
    "analyze",
    "cell_names",
    "compare_strategies",
    "jacobians",
    "lyapunov",
    "lyapunov_sweep",
    "register_cell",
    "run_on_devices",
    "scaling",
    "sweep",
    "train",
    "train_many",
    "Training",
    "TrainSettings",
    "keep_freed_buffers",
    "datasets",
    "load_dataset",
    "Dataset",
    "DataError",
    "fit_to_data",
    "load_model",
    "fresh_model",
    "Model",
    "analyze_model",
    "analyze_block",
    "block_model",
    "ModelAnalysis",
    "CheckpointError",
    "model_jacobians",
    "ModelJacobians",
]


def test_public_api_in_one_place():
    assert sorted(rnnviz.__all__) == sorted(PUBLIC + ["__version__"])
    for name in PUBLIC:
        assert getattr(rnnviz, name) is not None, name
    from rnnviz.studies.comparisons import compare_strategies
    from rnnviz.studies.sweep import sweep

    assert rnnviz.sweep is sweep and rnnviz.compare_strategies is compare_strategies
    with pytest.raises(AttributeError):
        rnnviz.not_a_name  # noqa: B018
    assert (ROOT / "rnnviz" / "py.typed").exists()


def test_charts_and_the_package_import_without_jax():
    # Lazy exports: drawing from saved frames must not pay for (or need) JAX.
    code = (
        "import sys, rnnviz, rnnviz.charts, rnnviz.base.formatting; assert 'jax' not in sys.modules, 'jax "
        "imported'; print(rnnviz.__version__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == rnnviz.__version__


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # A clean copy of the tree: setuptools' build/ folder in a checkout can hold stale modules.
    src = tmp_path_factory.mktemp("src") / "rnnviz"
    shutil.copytree(
        ROOT,
        src,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis"
        ),
    )
    # No isolation: the build backend (setuptools) comes with the test extra, no download.
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(src)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    (whl,) = out.glob("rnnviz-*.whl")
    return whl


def test_wheel_holds_every_module_and_the_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    source = {p.relative_to(ROOT).as_posix() for p in (ROOT / "rnnviz").rglob("*.py")}
    assert source and source <= names, sorted(source - names)
    data = {p.relative_to(ROOT).as_posix() for p in (ROOT / "rnnviz" / "data").rglob("*") if p.is_file()}
    assert {"rnnviz/data/runs/cpu-devices.jsonl", "rnnviz/data/README.md"} <= data <= names
    assert {"rnnviz/py.typed", "rnnviz/ui/config.toml", "rnnviz/ui/app.py", "rnnviz/ui/entry.py"} <= names
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert f"Version: {rnnviz.__version__}" in text and "Provides-Extra: notebook" in text
    entry = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "rnnviz = rnnviz.cli.main:main" in zipfile.ZipFile(wheel).read(entry).decode()


def test_app_command_passes_the_locked_down_settings():
    cmd = launch.streamlit_command(8600, ["--server.headless=true"])
    assert cmd[:5] == [sys.executable, "-m", "streamlit", "run", str(launch.ENTRY)]
    for flag in (
        "--server.address=127.0.0.1",
        "--server.enableXsrfProtection=true",
        "--browser.gatherUsageStats=false",
        "--server.port=8600",
    ):
        assert flag in cmd
    assert cmd[-1] == "--server.headless=true"  # the user's flags come last and win
    # the checkout's .streamlit/config.toml is the packaged one (one source of the settings)
    assert (ROOT / ".streamlit" / "config.toml").resolve() == launch.CONFIG


def _wait_healthy(server: subprocess.Popen, port: int, log: Path, timeout_s: float = 120) -> None:
    """Until the Streamlit server on ``port`` answers its health check; fail with its log
    if it exits or takes longer than ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
                assert r.read().decode() == "ok"
                return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                pytest.fail("rnnviz app did not become healthy:\n" + log.read_text())
            time.sleep(0.5)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.package
@pytest.mark.skipif(
    os.environ.get("RNNVIZ_CHECK_PACKAGE") != "1",
    reason="installs the wheel into a fresh venv (minutes); .ci/run sets RNNVIZ_CHECK_PACKAGE=1",
)
def test_installed_wheel_in_a_fresh_venv(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py, exe = venv / "bin" / "python", venv / "bin" / "rnnviz"
    # --no-compile: pip would byte-compile every dependency (jax, scipy, pandas, streamlit…)
    # up front, minutes on 2 busy cores; the imports below compile what they use
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-compile", str(wheel)], check=True, timeout=1800
    )
    away = tmp_path / "elsewhere"  # not the checkout: nothing of it on the path
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run(
        [str(py), "-c", "import rnnviz; print(rnnviz.__file__)"],
        cwd=away,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(venv) in where and str(ROOT) not in where
    out = subprocess.run(
        [str(exe), "analyze", "--seq-len", "20", "--json", "--repeats", "1"],
        cwd=away,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert len(json.loads(out.stdout)["log10_grad_norms"]) == 21
    walk = (
        "import importlib, pkgutil, rnnviz\n"
        "skip = {'rnnviz.__main__', 'rnnviz.ui.entry'}  # scripts: importing them runs them\n"
        "mods = [m.name for m in pkgutil.walk_packages(rnnviz.__path__, 'rnnviz.') if m.name not in skip]\n"
        "[importlib.import_module(m) for m in mods]\n"
        "from rnnviz.ui.app import SHIPPED_RUNS\n"
        "assert sorted(p.name for p in SHIPPED_RUNS.glob('*.jsonl')), SHIPPED_RUNS\n"
        "from importlib import resources\n"
        "assert resources.files('rnnviz.report').joinpath('explorable.js').is_file()  # the page's script\n"
        "print(len(mods))"
    )
    n = subprocess.run(
        [str(py), "-c", walk], cwd=away, env=env, capture_output=True, text=True, timeout=600, check=True
    ).stdout
    assert int(n) >= 20
    port = _free_port()
    log = (tmp_path / "app.log").open("w")
    server = subprocess.Popen(
        [str(exe), "app", "--port", str(port), "--server.headless=true"],
        cwd=away,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_healthy(server, port, tmp_path / "app.log")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            assert r.status == 200
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_notebook_runs_end_to_end_and_draws_its_figures():
    import nbclient
    import nbformat

    path = ROOT / "notebooks" / "tour.ipynb"
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")  # saved without outputs
    nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [
        json.loads(o.data["application/vnd.plotly.v1+json"])
        if isinstance(o.data["application/vnd.plotly.v1+json"], str)
        else o.data["application/vnd.plotly.v1+json"]
        for o in outputs
        if "application/vnd.plotly.v1+json" in o.get("data", {})
    ]
    titles = [f["layout"]["title"]["text"] for f in figures]
    assert len(figures) == 4, titles  # three designs, 2000 steps, strategy costs, phase diagram
    assert titles[0].startswith("‖∂L/∂carry_t‖ through time") and titles[-1].startswith("Phase diagram")
    text = "".join(o.get("text", "") for o in outputs)
    assert "float32 values that are 0:" in text and "×10⁻" in text


# ---- links that ask for too much ------------------------------------------------------------

ISSUE_LINK = {"cell": "lstm", "seq_len": "5000", "hidden_size": "2048", "batch_size": "1024"}


def test_over_budget_link_keeps_its_fields_and_says_what_shrank():
    cfg, warnings = config_from_params(ISSUE_LINK)
    assert len(warnings) == 1, warnings
    assert (cfg.cell, cfg.hidden_size, cfg.batch_size) == ("lstm", 2048, 1024)
    assert (
        1 <= cfg.seq_len < 5000
        and cfg.seq_len
        == fit_to_budget({"cell": "lstm", "seq_len": 5000, "hidden_size": 2048, "batch_size": 1024})[
            0
        ].seq_len
    )
    w = warnings[0]
    assert (
        "cell=lstm, seq_len=5000, hidden_size=2048, batch_size=1024" in w
        and f"seq_len 5000 → {cfg.seq_len}" in w
    )
    assert "GiB" in w and "every other field is as linked" in w and "Using the default" not in w
    with pytest.raises(BudgetError):
        RunConfig(cell="lstm", seq_len=cfg.seq_len + 1, hidden_size=2048, batch_size=1024)


def test_fit_to_budget_shrinks_the_batch_only_when_no_length_fits():
    cfg, changes = fit_to_budget(
        {
            "cell": "lstm",
            "seq_len": 10,
            "hidden_size": 2048,
            "batch_size": 1024,
            "strategy": "per_step",
            "input_size": 1024,
        }
    )
    assert set(changes) <= {"seq_len", "batch_size"} and cfg.cell == "lstm" and cfg.hidden_size == 2048
    assert fit_to_budget({"cell": "gru", "seq_len": 50})[1] == {}


def test_over_budget_link_in_the_app(monkeypatch):
    # A smaller budget keeps the fitted run cheap; the logic is the one a 4 GiB budget uses.
    monkeypatch.setattr("rnnviz.config.MEMORY_BUDGET_BYTES", 64 * 2**20)
    at = run_app({"cell": "lstm", "seq_len": "5000", "hidden_size": "256", "batch_size": "64"})
    assert not at.exception and not at.error
    warnings = [w.value for w in at.warning]
    assert len(warnings) == 1 and "seq_len 5000 →" in warnings[0], warnings
    assert (
        at.session_state["cfg_cell"] == "lstm"
        and at.session_state["cfg_hidden_size"] == 256
        and at.session_state["cfg_batch_size"] == 64
    )
    assert 1 < at.session_state["cfg_seq_len"] < 5000
    assert len(total_gradient(at)) == at.session_state["cfg_seq_len"] + 1


def test_terminating_rnnviz_app_stops_the_server(tmp_path):
    # `rnnviz app` becomes the Streamlit process: a SIGTERM to it must free the port (no
    # orphaned server left behind, as a subprocess launcher would leave).
    port = _free_port()
    log = (tmp_path / "app.log").open("w")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-m", "rnnviz", "app", "--port", str(port), "--server.headless=true"],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_healthy(server, port, tmp_path / "app.log")
    finally:
        server.terminate()
        server.wait(timeout=30)
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5)

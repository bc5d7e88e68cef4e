"""The house rules are enforced, not hoped for: the import contracts of pyproject.toml and
ruff hold on the repository, and each of them fails on a deliberately broken copy.

The broken copies are the real package copied into a temporary folder with one import
added, checked by the same ``lint-imports`` and the same contracts (``make lint`` runs them
on the repository itself).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    exe = BIN / name
    if not exe.exists():
        pytest.skip(f"{name} is not installed in this environment (pip install -e '.[test]')")
    return str(exe)


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [_tool("lint-imports"), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The package and its pyproject.toml, copied (no caches)."""
    dst = tmp_path_factory.mktemp("layers")
    shutil.copytree(ROOT / "rnnviz", dst / "rnnviz", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


def _with_import(copy: Path, module: str, line: str) -> Path:
    """A fresh copy of ``copy`` with ``line`` appended to ``module`` (a path under rnnviz/)."""
    dst = copy.parent / f"{copy.name}_{abs(hash((module, line)))}"
    shutil.copytree(copy, dst)
    target = dst / "rnnviz" / module
    target.write_text(target.read_text() + "\n" + line + "\n")
    return dst


def test_the_repository_keeps_every_contract():
    out = _lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "16 kept, 0 broken" in out.stdout


def test_the_copy_keeps_them_too(copy):
    # the baseline of the broken examples below: the copy alone passes
    out = _lint_imports(copy)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("module", "line", "contract", "names"),
    [
        # a lower layer importing a higher one (config is plain data; analysis is above it)
        ("config.py", "import rnnviz.analysis", "rnnviz layers", ("rnnviz.config", "rnnviz.analysis")),
        # the JAX maths importing a study
        (
            "engine/rollout.py",
            "import rnnviz.studies.sweep",
            "rnnviz layers",
            ("rnnviz.engine.rollout", "rnnviz.studies.sweep"),
        ),
        # the core drawing
        ("analysis.py", "import plotly.graph_objects", "streamlit or plotly", ("rnnviz.analysis", "plotly")),
        ("studies/sweep.py", "import streamlit", "streamlit or plotly", ("rnnviz.studies.sweep",)),
        # charts reaching for JAX
        ("charts/lines.py", "import jax.numpy", "charts never import JAX", ("rnnviz.charts", "jax")),
        # a record the dashboard's server unpickles, and a frame it draws, reaching for JAX
        ("base/analysis.py", "import jax.numpy", "the records and what draws them", ("rnnviz.base", "jax")),
        ("frames/dynamics.py", "import rnnviz.studies.jacobians", "the records and what draws", ("jax",)),
        # inside a folder: the numerics importing the rollout, a task importing training,
        # the shared argparse types importing the parser, fused importing the strategy table
        ("engine/norms.py", "import rnnviz.engine.rollout", "engine: preparation", ("rnnviz.engine.norms",)),
        (
            "studies/tasks/synthetic.py",
            "import rnnviz.studies.training",
            "studies:",
            ("rnnviz.studies.tasks.synthetic", "rnnviz.studies.training"),
        ),
        ("cli/argtypes.py", "import rnnviz.cli.main", "cli: the parser", ("rnnviz.cli.argtypes",)),
        (
            "engine/strategies/fused.py",
            "import rnnviz.engine.strategies.registry",
            "engine.strategies",
            ("rnnviz.engine.strategies.fused",),
        ),
        # a checkpoint reader reaching for JAX, and a file format importing the loader above it
        ("checkpoints/safetensors.py", "import jax", "checkpoints never import JAX", ("rnnviz.checkpoints",)),
        (
            "checkpoints/torchfile.py",
            "import rnnviz.checkpoints.load",
            "checkpoints: the loader",
            ("rnnviz.checkpoints.torchfile",),
        ),
        # the archives' judge reaching up for the server's settings (its caps are arguments)
        (
            "checkpoints/archive.py",
            "import rnnviz.serve.settings",
            "rnnviz layers",
            ("rnnviz.checkpoints.archive", "rnnviz.serve.settings"),
        ),
        # a block family importing the registry that lists it
        (
            "engine/blocks/torch_rnn.py",
            "import rnnviz.engine.blocks.registry",
            "engine.blocks",
            ("rnnviz.engine.blocks.torch_rnn",),
        ),
        # the runtime reaching for the page, and its worker pool importing the jobs above it
        ("serve/jobs.py", "import streamlit", "serve never imports streamlit", ("rnnviz.serve.jobs",)),
        (
            "serve/budget.py",
            "import rnnviz.ui.calls",
            "rnnviz layers",
            ("rnnviz.serve.budget", "rnnviz.ui.calls"),
        ),
        ("serve/worker.py", "import rnnviz.serve.jobs", "serve: the jobs", ("rnnviz.serve.worker",)),
        # a teaching page's data (a worker computes it) reaching for plotly
        (
            "report/explorable_data.py",
            "import plotly",
            "streamlit or plotly",
            ("rnnviz.report.explorable_data",),
        ),
        # a cycle: the cell table importing what reads it
        (
            "tables/strategies.py",
            "import rnnviz.engine.strategies.registry",
            "no import cycles",
            ("strategies",),
        ),
    ],
)
def test_a_broken_import_breaks_its_contract(copy, module, line, contract, names):
    broken = _with_import(copy, module, line)
    out = _lint_imports(broken)
    assert out.returncode != 0, out.stdout
    report = out.stdout.split("Broken contracts", 1)[-1]
    assert contract in report
    for name in names:
        assert name in report


def test_ruff_passes_on_the_repository():
    for args in (["check", "."], ["format", "--check", "."]):
        out = subprocess.run([_tool("ruff"), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_fails_on_a_broken_file(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bad = tmp_path / "bad.py"
    long_comment = "# " + "far too long " * 10  # past the line length of 110
    bad.write_text(f"import os\ndef f(x):\n    return  x+1 {long_comment}\n")
    check = subprocess.run(
        [_tool("ruff"), "check", "--output-format", "concise", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert check.returncode != 0
    assert "F401" in check.stdout and "E501" in check.stdout  # the unused import, the long line
    fmt = subprocess.run(
        [_tool("ruff"), "format", "--check", "bad.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert fmt.returncode != 0 and "bad.py" in fmt.stdout


def test_every_public_name_is_what_it_names_after_every_module_is_imported():
    # A submodule named like a public function (rnnviz/train.py beside rnnviz.train) would
    # shadow it once imported: `from rnnviz import train` gave the module. Import them all,
    # in a fresh interpreter, then ask for every public name.
    code = textwrap.dedent(
        """
        import importlib, inspect, pkgutil, types
        import rnnviz
        skip = {"rnnviz.__main__", "rnnviz.ui.entry"}
        for m in pkgutil.walk_packages(rnnviz.__path__, "rnnviz."):
            if m.name not in skip:
                importlib.import_module(m.name)
        for name in rnnviz.__all__:
            value = getattr(rnnviz, name)
            assert not isinstance(value, types.ModuleType), f"rnnviz.{name} is a module"
            if callable(value):
                assert value.__name__ == name, (name, value)
        print("ok", len(rnnviz.__all__))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("ok")


def _layer_folders() -> list[str]:
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["name"].startswith("rnnviz layers"))["layers"]
    return [layer.removeprefix("rnnviz.") for layer in layers]


def test_the_tree_and_the_layers_contract_name_the_same_rooms():
    # one folder per layer: what sits at the package top is exactly the contract's lines
    # (plus the package's own face and its shipped files), so tree and contract agree
    # (a folder left behind with only __pycache__ in it is no room)
    top = {
        p.name.removesuffix(".py")
        for p in (ROOT / "rnnviz").iterdir()
        if p.suffix == ".py" or (p.is_dir() and any(p.glob("*.py")))
    }
    face = {"__init__"}  # the public names; rnnviz/data/ holds shipped files, no modules
    assert top - face == set(_layer_folders())
    modules = sorted(p.name for p in (ROOT / "rnnviz").glob("*.py"))
    assert modules == ["__init__.py", "__main__.py", "analysis.py", "config.py"]


def test_the_architecture_page_draws_the_contracts_layers():
    page = ROOT / "docs" / "dev" / "architecture.md"
    if not page.exists():
        pytest.skip("docs/dev/architecture.md is not written yet")
    text = page.read_text()
    for layer in _layer_folders():
        assert f"rnnviz.{layer}" in text or f"{layer}/" in text or f"{layer}.py" in text, layer


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        # the import path the plugins use, and the example plugin's own, from before the move
        ("rnnviz.cells.registry", "rnnviz.tables.cells", "CellSpec"),
        ("rnnviz.cells", "rnnviz.engine.cells", "make_cell"),
        ("rnnviz.exponents", "rnnviz.studies.lyapunov", "lyapunov"),
        ("rnnviz.sources", "rnnviz.dataset", "load_dataset"),
        ("rnnviz.training.records", "rnnviz.base.training", "Training"),
        # the records' modules that moved to base/ so that the dashboard's server reads them without JAX
        ("rnnviz.studies.training.result", "rnnviz.base.training", "Training"),
        ("rnnviz.engine.cells.theory", "rnnviz.base.theory", "simple_cell_theory"),
    ],
)
def test_an_old_module_path_still_imports_with_a_deprecation_warning(old, new, name):
    # in a fresh interpreter: the old path is the new module object, and importing it warns
    # with the new path (once a name is imported, Python does not run the finder again)
    code = textwrap.dedent(
        f"""
        import importlib, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old = importlib.import_module("{old}")
        new = importlib.import_module("{new}")
        assert old is new, (old, new)
        assert getattr(old, "{name}") is getattr(new, "{name}")
        messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
        assert any("{old} moved to {new}" in m for m in messages), messages
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")

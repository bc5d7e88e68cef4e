"""The documentation is tested like code: every ```python block of ``docs/`` and ``README.md``
runs (one namespace per page, in order; ``>>>`` blocks are doctests), ``mkdocs build --strict``
passes, the README stays a short front page, every relative link lands on a file, every
``rnnviz.…`` name and ``rnnviz/…`` path the prose mentions exists, and the architecture page
names every layer of the layers contract."""

from __future__ import annotations

import doctest
import importlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.rglob("*.md")) + [README]
IDS = [str(p.relative_to(ROOT)) for p in PAGES]
#: pages that train networks: a compile of the training chunk each, about a minute here
TRAINING_PAGES = {"docs/guide/training.md", "docs/guide/trained.md"}
RUNNABLE = [
    pytest.param(p, id=i, marks=[pytest.mark.slow] if i in TRAINING_PAGES else []) for p, i in zip(PAGES, IDS)
]

README_MAX_LINES = 150
QUICK_START = (
    "make run    # creates .venv, installs, starts the dashboard on http://127.0.0.1:8501\n"
    "make test   # creates .venv, installs with the test extra (and chromium when root), runs pytest\n"
)

FENCE = re.compile(r"^ *(```|~~~).*?^ *\1 *$", re.M | re.S)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
DOTTED = re.compile(r"(?<![\w./-])rnnviz(?:\.[A-Za-z_]\w*)+")
REPO_PATH = re.compile(r"(?:rnnviz|tests|scripts|examples|notebooks|docs)/[\w./-]*")
#: dotted names that are not Python objects: the plugins' entry-point group
NOT_OBJECTS = {"rnnviz.cells"}


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (those run, or are shell and text)."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """Each page runs in a folder of its own (the files it writes land there, its data folder
    is empty) and leaves the cell and strategy tables as it found them."""
    from rnnviz.engine.strategies import registry
    from rnnviz.tables import cells, strategies

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RNNVIZ_DATA_DIR", str(tmp_path / "data"))
    # A page may register a cell or a strategy to show how; the tables are module-level
    # dicts, so later tests in this process would see it: put back what was there.
    tables = [cells._TABLE, strategies._TABLE, registry._TABLE]
    saved = [dict(t) for t in tables]
    yield tmp_path
    for table, before in zip(tables, saved):
        table.clear()
        table.update(before)


@pytest.mark.parametrize("page", RUNNABLE)
def test_every_python_block_runs(page, scratch):
    sybil = pytest.importorskip("sybil", reason="the docs' code blocks run with sybil (the test extra)")
    from sybil.parsers.markdown import PythonCodeBlockParser

    parser = PythonCodeBlockParser(doctest_optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    document = sybil.Document.parse(str(page), parser)
    for example in document:  # in page order, in one namespace: a page reads top to bottom
        example.evaluate()


def test_mkdocs_builds_strict(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.skip(f"mkdocs is not installed next to {sys.executable} (pip install -e '.[test]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [str(mkdocs), "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml")]
    done = subprocess.run(
        [*cmd, "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "site" / "api" / "analysis" / "index.html").is_file()
    assert "WARNING" not in done.stderr, done.stderr


def test_every_page_is_in_the_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if str(p.relative_to(DOCS)) not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"


def test_the_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    assert "make run" in text and "make test" in text
    assert f"## Quick start\n\n```bash\n{QUICK_START}```" in text, "the quick start changed"


def test_the_readme_lists_the_public_api_of_rnnviz_init():
    docstring = importlib.import_module("rnnviz").__doc__
    rows = [line.replace("``", "`") for line in docstring.splitlines() if line.startswith("| ``")]
    readme = [line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    assert rows and readme == rows


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_relative_link_points_at_a_file(page):
    broken = []
    for target in LINK.findall(INLINE_CODE.sub("", _prose(page))):
        if re.match(r"^[a-z][a-z+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor on the same page
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"


def _resolves(name: str) -> bool:
    """``rnnviz.a.b.c``: the longest prefix that is a module file of the checkout, then
    attributes. A bare module is only looked for (``rnnviz.__main__`` would start the CLI);
    old module paths, which still import through :mod:`rnnviz.base.moved`, do not count."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        where = ROOT.joinpath(*parts[:i])
        if where.with_suffix(".py").is_file() or (where / "__init__.py").is_file():
            obj = importlib.import_module(".".join(parts[:i])) if i < len(parts) else None
            for attr in parts[i:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
    return False


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_name_and_path_the_prose_mentions_exists(page):
    prose = _prose(page)
    names = sorted(set(DOTTED.findall(prose)) - NOT_OBJECTS)
    stale = [n for n in names if not _resolves(n)]
    paths = sorted({s for s in INLINE_CODE.findall(prose) if REPO_PATH.fullmatch(s)})
    stale += [p for p in paths if not (ROOT / p).exists()]
    assert not stale, f"{page.relative_to(ROOT)} names what does not exist (moved?): {stale}"


def test_the_architecture_page_names_every_layer():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    main = [c for c in contracts if c["type"] == "layers" and "rnnviz.config" in c.get("layers", ())]
    layers = main[0]["layers"]  # the one contract that orders the folders
    page = (DOCS / "dev" / "architecture.md").read_text(encoding="utf-8")
    names = [m.strip() for layer in layers for m in layer.split("|")]
    missing = [n for n in names if n not in page and f"{n.removeprefix('rnnviz.')}/" not in page]
    assert not missing, f"docs/dev/architecture.md does not name the layers {missing}"

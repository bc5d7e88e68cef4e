"""The docstrings' ``>>>`` examples run, module by module (the public API's examples are
tiny configurations: a few compiles, no measurable time)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rnnviz

SKIP = {"rnnviz.__main__", "rnnviz.ui.entry"}  # importing them starts the CLI / the app
MODULES = sorted(m.name for m in pkgutil.walk_packages(rnnviz.__path__, "rnnviz.") if m.name not in SKIP)
FINDER = doctest.DocTestFinder(exclude_empty=True)


def _examples(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    return [t for t in FINDER.find(module, name) if t.examples and t.name.startswith(name)]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in _examples(name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


@pytest.mark.parametrize(
    "qualname",
    [
        "rnnviz.analysis.analyze",
        "rnnviz.studies.sweep.sweep",
        "rnnviz.studies.training.loop.train",
        "rnnviz.studies.lyapunov.lyapunov",
        "rnnviz.studies.jacobians.jacobians",
        "rnnviz.tables.cells.register_cell",
        "rnnviz.config.RunConfig",
        "rnnviz.studies.comparisons.compare_strategies",
    ],
)
def test_the_public_api_has_a_runnable_example(qualname):
    module, _, attr = qualname.rpartition(".")
    tests = [t for t in _examples(module) if t.name == qualname]
    assert tests and tests[0].examples, f"{qualname} has no >>> example"

"""Module paths from before the house move (0.2 → 0.3), still importable with a
:class:`DeprecationWarning` that names the new path.

Plugins and notebooks written against the flat layout (``from rnnviz.cells.registry import
CellSpec``, ``import rnnviz.exponents``) keep working: :func:`install` puts a finder first
on :data:`sys.meta_path` that answers an old name with the module now holding it, so both
names are one module object (``rnnviz.cells.registry is rnnviz.tables.cells``). New code
imports the public names from :mod:`rnnviz` or the new paths.

Example:
    >>> import warnings
    >>> import rnnviz.tables.cells
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)  # it says where the module went
    ...     import rnnviz.cells.registry
    >>> rnnviz.cells.registry is rnnviz.tables.cells
    True
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings

#: old module path → the module that holds its contents now
MOVED: dict[str, str] = {
    "rnnviz.argtypes": "rnnviz.cli.argtypes",
    "rnnviz.cells": "rnnviz.engine.cells",
    "rnnviz.cells.builtin": "rnnviz.engine.cells.builtin",
    "rnnviz.cells.fused_forms": "rnnviz.engine.cells.fused_forms",
    "rnnviz.cells.init": "rnnviz.engine.cells.init",
    "rnnviz.cells.modern": "rnnviz.engine.cells.modern",
    "rnnviz.cells.registry": "rnnviz.tables.cells",
    "rnnviz.cells.theory": "rnnviz.base.theory",
    "rnnviz.charts.memory": "rnnviz.charts.connectivity",
    "rnnviz.cli_inputs": "rnnviz.cli.inputs",
    "rnnviz.cli_trained": "rnnviz.cli.trained",
    "rnnviz.comparisons": "rnnviz.studies.comparisons",
    "rnnviz.data_tasks": "rnnviz.studies.tasks.data",
    "rnnviz.diagnostics": "rnnviz.frames.verdicts",
    "rnnviz.engine.cells.theory": "rnnviz.base.theory",
    "rnnviz.exponents": "rnnviz.studies.lyapunov",
    "rnnviz.fits": "rnnviz.base.readings",
    "rnnviz.fused": "rnnviz.engine.strategies.fused",
    "rnnviz.gradients": "rnnviz.engine.gradients",
    "rnnviz.hlo": "rnnviz.base.hlo",
    "rnnviz.input_reach": "rnnviz.studies.connectivity",
    "rnnviz.inputs": "rnnviz.engine.inputs",
    "rnnviz.launch": "rnnviz.cli.launch",
    "rnnviz.linalg": "rnnviz.engine.linalg",
    "rnnviz.logpass": "rnnviz.engine.logpass",
    "rnnviz.norms": "rnnviz.engine.norms",
    "rnnviz.objective": "rnnviz.engine.losses",
    "rnnviz.parallel": "rnnviz.engine.strategies.parallel",
    "rnnviz.prepare": "rnnviz.engine.prepare",
    "rnnviz.presets": "rnnviz.base.presets",
    "rnnviz.records": "rnnviz.base.measurements",
    "rnnviz.rollout": "rnnviz.engine.rollout",
    "rnnviz.sources": "rnnviz.dataset",
    "rnnviz.sources.builtin": "rnnviz.dataset.builtin",
    "rnnviz.sources.describe": "rnnviz.dataset.describe",
    "rnnviz.sources.files": "rnnviz.dataset.files",
    "rnnviz.sources.fit": "rnnviz.dataset.fit",
    "rnnviz.sources.place": "rnnviz.dataset.place",
    "rnnviz.sources.record": "rnnviz.dataset.record",
    "rnnviz.step_jacobians": "rnnviz.studies.jacobians",
    "rnnviz.studies.training.result": "rnnviz.base.training",
    "rnnviz.studies.training.runfile": "rnnviz.base.runfile",
    "rnnviz.studies.training.settings": "rnnviz.base.train_settings",
    "rnnviz.strategies": "rnnviz.engine.strategies.registry",
    "rnnviz.sweeps": "rnnviz.studies.sweep",
    "rnnviz.tasks": "rnnviz.studies.tasks.synthetic",
    "rnnviz.text": "rnnviz.base.formatting",
    "rnnviz.timing": "rnnviz.engine.timing",
    "rnnviz.training": "rnnviz.studies.training",
    "rnnviz.training.loop": "rnnviz.studies.training.loop",
    "rnnviz.training.model": "rnnviz.studies.training.model",
    "rnnviz.training.records": "rnnviz.base.training",
    "rnnviz.training.runfile": "rnnviz.base.runfile",
    "rnnviz.training.saved": "rnnviz.studies.training.saved",
    "rnnviz.training_dynamics": "rnnviz.studies.over_training",
    "rnnviz.weights": "rnnviz.base.weights",
}


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module path with the new module (one object under two names)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}: import it from there (or the public names from rnnviz)",
            DeprecationWarning,
            stacklevel=_importer_level(),
        )
        return importlib.import_module(new)

    def exec_module(self, module: types.ModuleType) -> None:
        pass  # the new module ran when it was imported


def _importer_level() -> int:
    """The ``stacklevel`` of the first frame outside the import machinery (the importer's line)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and (
        frame.f_code.co_filename.startswith("<frozen") or "importlib" in frame.f_code.co_filename
    ):
        frame, level = frame.f_back, level + 1
    return level


def install() -> None:
    """Put the finder first on :data:`sys.meta_path`, once per process."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())

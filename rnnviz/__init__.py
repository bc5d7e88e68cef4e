"""rnnviz: see how gradients flow backwards through recurrent networks.

The public API, all importable from here::

    from rnnviz import RunConfig, analyze, sweep
    a = analyze(RunConfig(cell="lstm", seq_len=100))
    a.grad_norms            # [T+1] ‖∂L/∂carry_t‖ (float32)
    a.log10_grad_norms      # [T+1] its exact log₁₀

| name | what |
|---|---|
| ``RunConfig``, ``ConfigError``, ``FIELD_SPECS`` | the validated configuration |
| ``analyze``, ``Analysis`` | one run: per-step gradients, trajectory, timing |
| ``sweep`` | many values in one compiled call (tidy frame) |
| ``compare_strategies``, ``scaling``, ``run_on_devices`` | cost tables |
| ``register_cell``, ``CellSpec``, ``cell_names`` | the cell registry (plugins: entry points) |
| ``lyapunov``, ``Lyapunov``, ``lyapunov_sweep`` | Lyapunov exponents of the trajectory (QR method) |
| ``jacobians``, ``Jacobians`` | singular values of each step Jacobian |
| ``train``, ``train_many``, ``Training`` | trains cells or blocks on tasks or data, with gradient profiles |
| ``TrainSettings`` | a training call's settings in one validated record (task, steps, optimiser, …) |
| ``load_run``, ``RunFileError``, ``Weights`` | saved runs (``Training.save``), their weights (``params=``) |
| ``connectivity``, ``Connectivity`` | how strongly an output depends on each earlier input |
| ``over_training``, ``OverTraining`` | λ and the step-Jacobian spectrum at every kept step of a run |
| ``layers_over_training``, ``LayersOverTraining`` | λ₁ of each layer at every kept step of a block's run |
| ``keep_freed_buffers`` | keep XLA:CPU's per-call buffers in the heap (no page faults per call) |
| ``load_model``, ``Model``, ``CheckpointError`` | your own model: Hugging Face and PyTorch checkpoints |
| ``fresh_model`` | a model of one design drawn fresh from its sizes, as its reference draws it |
| ``analyze_model``, ``ModelAnalysis`` | the gradient through every layer and step of your model |
| ``analyze_block``, ``block_model`` | a design as its reference block, stacked (``block="reference"``) |
| ``model_jacobians``, ``ModelJacobians`` | the step-Jacobian spectra of your model's recurrent layers |
| ``explorable_grid``, ``ExplorableGrid`` | every point of a grid, for a teaching page |
| ``datasets``, ``load_dataset``, ``Dataset``, ``DataError``, ``fit_to_data`` | real sequences |

Names are loaded on first use (PEP 562), so ``import rnnviz`` and ``rnnviz.charts`` do
not import JAX until a computation is asked for; the records (``Analysis``, ``Training``, …)
come from :mod:`rnnviz.base` and never import it. The core never imports streamlit or
plotly (see ``rnnviz.charts`` for figures).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rnnviz.base import moved as _moved

__version__ = "0.2.0"

_moved.install()  # the module paths from before the house move still import, with a warning

_EXPORTS = {
    "Analysis": "rnnviz.base.analysis",
    "analyze": "rnnviz.analysis",
    "ConfigError": "rnnviz.config",
    "FIELD_SPECS": "rnnviz.config",
    "RunConfig": "rnnviz.config",
    "sweep": "rnnviz.studies.sweep",
    "compare_strategies": "rnnviz.studies.comparisons",
    "scaling": "rnnviz.studies.comparisons",
    "run_on_devices": "rnnviz.studies.comparisons",
    "register_cell": "rnnviz.tables.cells",
    "CellSpec": "rnnviz.tables.cells",
    "cell_names": "rnnviz.tables.cells",
    "lyapunov": "rnnviz.studies.lyapunov",
    "Lyapunov": "rnnviz.base.dynamics",
    "jacobians": "rnnviz.studies.jacobians",
    "Jacobians": "rnnviz.base.dynamics",
    "lyapunov_sweep": "rnnviz.studies.lyapunov",
    "train": "rnnviz.studies.training",
    "train_many": "rnnviz.studies.training",
    "TrainSettings": "rnnviz.base.train_settings",
    "Training": "rnnviz.base.training",
    "load_run": "rnnviz.studies.training",
    "RunFileError": "rnnviz.base.runfile",
    "Weights": "rnnviz.base.weights",
    "connectivity": "rnnviz.studies.connectivity",
    "Connectivity": "rnnviz.base.connectivity",
    "over_training": "rnnviz.studies.over_training",
    "OverTraining": "rnnviz.base.training",
    "layers_over_training": "rnnviz.studies.over_training",
    "LayersOverTraining": "rnnviz.base.training",
    "keep_freed_buffers": "rnnviz.engine.allocator",
    "datasets": "rnnviz.dataset",
    "load_dataset": "rnnviz.dataset",
    "Dataset": "rnnviz.dataset",
    "DataError": "rnnviz.dataset",
    "fit_to_data": "rnnviz.dataset",
    "load_model": "rnnviz.studies.models",
    "fresh_model": "rnnviz.studies.models",
    "Model": "rnnviz.studies.models",
    "analyze_model": "rnnviz.studies.models",
    "analyze_block": "rnnviz.studies.block_models",
    "block_model": "rnnviz.studies.block_models",
    "ModelAnalysis": "rnnviz.base.models",
    "CheckpointError": "rnnviz.checkpoints",
    "model_jacobians": "rnnviz.studies.model_jacobians",
    "ModelJacobians": "rnnviz.base.models",
    "explorable_grid": "rnnviz.studies.explorable",
    "ExplorableGrid": "rnnviz.studies.explorable",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from rnnviz.analysis import analyze
    from rnnviz.base.analysis import Analysis
    from rnnviz.base.connectivity import Connectivity
    from rnnviz.base.dynamics import Jacobians, Lyapunov
    from rnnviz.base.models import ModelAnalysis
    from rnnviz.base.runfile import RunFileError
    from rnnviz.base.train_settings import TrainSettings
    from rnnviz.base.training import LayersOverTraining, OverTraining, Training
    from rnnviz.base.weights import Weights
    from rnnviz.checkpoints import CheckpointError
    from rnnviz.config import FIELD_SPECS, ConfigError, RunConfig
    from rnnviz.dataset import DataError, Dataset, datasets, fit_to_data, load_dataset
    from rnnviz.engine.allocator import keep_freed_buffers
    from rnnviz.studies.block_models import analyze_block, block_model
    from rnnviz.studies.comparisons import compare_strategies, run_on_devices, scaling
    from rnnviz.studies.connectivity import connectivity
    from rnnviz.studies.explorable import ExplorableGrid, explorable_grid
    from rnnviz.studies.jacobians import jacobians
    from rnnviz.studies.lyapunov import lyapunov, lyapunov_sweep
    from rnnviz.studies.model_jacobians import ModelJacobians, model_jacobians
    from rnnviz.studies.models import Model, analyze_model, fresh_model, load_model
    from rnnviz.studies.over_training import layers_over_training, over_training
    from rnnviz.studies.sweep import sweep
    from rnnviz.studies.training import load_run, train, train_many
    from rnnviz.tables.cells import CellSpec, cell_names, register_cell


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rnnviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

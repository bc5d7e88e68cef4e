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
| ``train``, ``train_many``, ``Training`` | training on adding / copy / recall with gradient profiles |
| ``load_run``, ``RunFileError``, ``Weights`` | saved runs (``Training.save``), their weights (``params=``) |
| ``connectivity``, ``Connectivity`` | how strongly an output depends on each earlier input |
| ``over_training``, ``OverTraining`` | λ and the step-Jacobian spectrum at every kept step of a run |
| ``keep_freed_buffers`` | keep XLA:CPU's per-call buffers in the heap (no page faults per call) |
| ``datasets``, ``load_dataset``, ``Dataset``, ``DataError``, ``fit_to_data`` | real sequences |

Names are loaded on first use (PEP 562), so ``import rnnviz`` and ``rnnviz.charts`` do
not import JAX until a computation is asked for. The core never imports streamlit or
plotly (see ``rnnviz.charts`` for figures).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

_EXPORTS = {
    "Analysis": "rnnviz.analysis",
    "analyze": "rnnviz.analysis",
    "ConfigError": "rnnviz.config",
    "FIELD_SPECS": "rnnviz.config",
    "RunConfig": "rnnviz.config",
    "sweep": "rnnviz.sweeps",
    "compare_strategies": "rnnviz.comparisons",
    "scaling": "rnnviz.comparisons",
    "run_on_devices": "rnnviz.comparisons",
    "register_cell": "rnnviz.tables.cells",
    "CellSpec": "rnnviz.tables.cells",
    "cell_names": "rnnviz.tables.cells",
    "lyapunov": "rnnviz.exponents",
    "Lyapunov": "rnnviz.exponents",
    "jacobians": "rnnviz.step_jacobians",
    "Jacobians": "rnnviz.step_jacobians",
    "lyapunov_sweep": "rnnviz.exponents",
    "train": "rnnviz.training",
    "train_many": "rnnviz.training",
    "Training": "rnnviz.training",
    "load_run": "rnnviz.training",
    "RunFileError": "rnnviz.training",
    "Weights": "rnnviz.weights",
    "connectivity": "rnnviz.input_reach",
    "Connectivity": "rnnviz.input_reach",
    "over_training": "rnnviz.training_dynamics",
    "OverTraining": "rnnviz.training_dynamics",
    "keep_freed_buffers": "rnnviz.timing",
    "datasets": "rnnviz.sources",
    "load_dataset": "rnnviz.sources",
    "Dataset": "rnnviz.sources",
    "DataError": "rnnviz.sources",
    "fit_to_data": "rnnviz.sources",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from rnnviz.analysis import Analysis, analyze
    from rnnviz.comparisons import compare_strategies, run_on_devices, scaling
    from rnnviz.config import FIELD_SPECS, ConfigError, RunConfig
    from rnnviz.exponents import Lyapunov, lyapunov, lyapunov_sweep
    from rnnviz.input_reach import Connectivity, connectivity
    from rnnviz.sources import DataError, Dataset, datasets, fit_to_data, load_dataset
    from rnnviz.step_jacobians import Jacobians, jacobians
    from rnnviz.sweeps import sweep
    from rnnviz.tables.cells import CellSpec, cell_names, register_cell
    from rnnviz.timing import keep_freed_buffers
    from rnnviz.training import RunFileError, Training, load_run, train, train_many
    from rnnviz.training_dynamics import OverTraining, over_training
    from rnnviz.weights import Weights


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rnnviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

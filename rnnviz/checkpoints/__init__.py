"""Checkpoints from outside, judged by their headers before their bytes (NumPy, no JAX):
Hugging Face model folders and PyTorch state dicts → :class:`Checkpoint`.

| name | what |
|---|---|
| ``read_checkpoint`` | a folder or file → ``Checkpoint``, every header checked first |
| ``CheckpointError`` | what is wrong with which file, and what is allowed |
| ``FAMILIES`` | the model types read, each a ``Family`` |

A model folder in an archive is judged by its directory and extracted by
:mod:`rnnviz.checkpoints.archive`; :mod:`rnnviz.checkpoints.demo` writes the dashboard's demo.

Names load on first use (PEP 562), so a family module imports without the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "read_checkpoint": "rnnviz.checkpoints.load",
    "FAMILIES": "rnnviz.checkpoints.registry",
    "Checkpoint": "rnnviz.checkpoints.record",
    "CheckpointError": "rnnviz.checkpoints.record",
    "Family": "rnnviz.checkpoints.record",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rnnviz.checkpoints' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)

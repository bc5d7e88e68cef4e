"""Which module computes a model: its family's (:data:`~rnnviz.engine.blocks.registry.BLOCKS`),
or the wrapper its spec names (``spec.block``), e.g. a design read as a model of vectors."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from rnnviz.engine.blocks import vectors
from rnnviz.engine.blocks.registry import BLOCKS

#: Modules that wrap a family, by the name a spec's ``block`` gives: one line per wrapper.
WRAPPERS: dict[str, ModuleType] = {"vectors": vectors}


def module_of(model_type: str, spec: Any) -> ModuleType:
    """The module whose ``forward``, ``state_shapes`` and ``layer_step`` compute this model.

    >>> from rnnviz.checkpoints.families.torch_rnn import TorchRNNSpec
    >>> spec = TorchRNNSpec("torch_gru", num_layers=1, input_size=3, hidden_size=4)
    >>> wrapped = vectors.VectorSpec("torch_gru", spec, input_size=3, output_size=2)
    >>> module_of("torch_gru", spec).__name__, module_of("torch_gru", wrapped).__name__
    ('rnnviz.engine.blocks.torch_rnn', 'rnnviz.engine.blocks.vectors')
    """
    return WRAPPERS.get(getattr(spec, "block", None)) or BLOCKS[model_type]


def family_of(model_type: str, spec: Any) -> ModuleType:
    """The design's own family module, under any wrapper (what its layers' states are)."""
    return BLOCKS[getattr(spec, "design", model_type)]

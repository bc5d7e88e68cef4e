"""The records every checkpoint reader fills: :class:`CheckpointError`, :class:`Family` (what
one kind of model asks of its files) and :class:`Checkpoint` (what a reader hands on)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from rnnviz.config import ConfigError


class CheckpointError(ConfigError):
    """A checkpoint cannot be used; ``str(err)`` names the file and what is wrong.

    Attributes:
        field: ``"model"``.
        value: the file or folder.
        allowed: what is wrong and what is expected.
    """

    def __init__(self, source: str, problem: str):
        super().__init__("model", source, problem)

    def __str__(self) -> str:
        return f"{self.value}: {self.allowed}."

    def __reduce__(self):
        return type(self), (self.value, self.allowed)


class Family(NamedTuple):
    """One kind of model as its checkpoints describe it (JAX-free: read before any bytes).

    Attributes:
        model_types: the ``model_type`` values of ``config.json`` it reads (``("mamba",
            "falcon_mamba")``), or the name of a state-dict kind (``"torch_lstm"``).
        parse: ``(config, source) -> spec``: a frozen, hashable record of the sizes from the
            ``config.json`` mapping; raises :class:`CheckpointError` naming ``source``, the field
            and what is allowed.
        tensors: ``spec -> {name: shape}``: every tensor the model uses, named as in the
            file, tied ones included.
        tied: ``spec -> {name: source}``: tensors a file may leave out because they share
            another's values (``{"lm_head.weight": "backbone.embeddings.weight"}`` when the
            embeddings are tied).
        from_shapes: for a bare state dict without ``config.json``, ``(shapes, source) ->
            spec`` from its tensors' names and shapes alone; None for a family that needs
            a ``config.json``.
        init: ``(config, source) -> settings``: the fields of ``config.json`` that only say how
            the reference draws a fresh model (``initializer_range``, Mamba's ``time_step_*``),
            a frozen record at the reference's defaults; None where sizes alone decide it.
    """

    model_types: tuple[str, ...]
    parse: Callable[[Mapping[str, Any], str], Any]
    tensors: Callable[[Any], dict[str, tuple[int, ...]]]
    tied: Callable[[Any], dict[str, str]]
    from_shapes: Callable[[Mapping[str, tuple[int, ...]], str], Any] | None = None
    init: Callable[[Mapping[str, Any], str], Any] | None = None


class Checkpoint(NamedTuple):
    """A checkpoint read whole and checked: every tensor its family uses, with its shape.

    Attributes:
        model_type: the family's name for it (``"mamba"``, ``"torch_lstm"``, …).
        spec: the family's frozen record of sizes (:attr:`Family.parse`).
        tensors: ``{name: array}``, tied tensors filled in, in the requested dtype.
        source: the folder or file it was read from.
        tokenizer: a ``tokenizer.json`` beside the weights, or None.
    """

    model_type: str
    spec: Any
    tensors: dict[str, np.ndarray]
    source: str
    tokenizer: str | None = None

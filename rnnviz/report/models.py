"""The numbers of your own models side by side: each checkpoint analysed on the same text
(:func:`model_comparison`), or designs as their reference blocks on the same inputs
(:func:`block_comparison`), how far back its gradient reaches (:func:`reach`), and all of it as
plain JSON values (:func:`model_comparison_json`). No plotly here: :mod:`rnnviz.report.html`
draws them (:func:`~rnnviz.report.html.model_report_html`).

The records, :func:`reach` and the JSON are :mod:`rnnviz.report.numbers`' (no JAX), re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rnnviz.checkpoints import CheckpointError
from rnnviz.config import ConfigError, RunConfig
from rnnviz.engine.environment import environment
from rnnviz.report.numbers import (
    BLOCK_INPUTS,
    MODEL_SCHEMA,
    REACH_FRACTION,
    ModelComparison,
    ModelRow,
    created_now,
    machine_text,
    model_comparison_json,
    model_row_json,
    package_versions,
    reach,
    reach_text,
    unique_labels,
)
from rnnviz.studies.block_models import block_inputs, block_model
from rnnviz.studies.models import Model, analyze_model, load_model, tokenize


def _loaded(model: Model | str | Path, dtype: str) -> Model:
    return model if isinstance(model, Model) else load_model(model, dtype=dtype)


def model_inputs(model: Model, inputs: str | Any, label: str) -> tuple[np.ndarray, list[str] | None]:
    """``<int32>[B, T]`` token ids for ``model`` and each position's text: ``inputs`` through
    the model's ``tokenizer.json`` when it is text, else the ids themselves, checked.

    Args:
        model: a language model (:func:`~rnnviz.studies.models.load_model`).
        inputs: text, or token ids ``[T]`` or ``[B, T]``.
        label: the model's name in messages.

    Returns:
        ``(ids, tokens)``: the ids, and each position's text (None for ids given).

    Raises:
        ConfigError: the model reads vectors (a torch stack), has no ``tokenizer.json`` for
            text, or text of one token, or ids that are not integers, fewer than 2 per row or
            outside its vocabulary.
    """
    if not model.vocab_size:
        raise ConfigError(
            "model",
            model.source,
            f"a language model that reads tokens; {label} is a {model.model_type} "
            "stack that reads vectors (analyse it alone: rnnviz analyze --model)",
        )
    if isinstance(inputs, str):
        if model.tokenizer is None:
            raise CheckpointError(
                model.source, "has no tokenizer.json beside it to read text with; give token ids instead"
            )
        try:
            ids, tokens = tokenize(model, inputs)
        except ImportError as err:
            raise ConfigError("text", inputs, f"the tokenizers library ({err.name} is missing)") from None
        if ids.shape[1] < 2:  # one token has no next one: there is no loss to differentiate
            raise ConfigError("text", inputs, f"at least 2 tokens ({label} reads {ids.shape[1]})")
        return ids, tokens
    ids = np.atleast_2d(np.asarray(inputs))
    if ids.ndim != 2 or ids.dtype.kind not in "iu" or ids.shape[1] < 2:
        raise ConfigError("tokens", ids.tolist(), "integer token ids, at least 2 per sequence")
    outside = sorted({int(i) for i in ids.ravel() if not 0 <= i < model.vocab_size})
    if outside:
        raise ConfigError(
            "tokens",
            outside[:8],
            f"ids in 0 … {model.vocab_size - 1}, the vocabulary of {label} ({model.model_type}, "
            f"{model.vocab_size} tokens)",
        )
    return ids.astype(np.int32), None


def _device(model: Model) -> str:
    devices = next(iter(model.params.values())).devices()
    return ", ".join(sorted(f"{d.platform}:{d.id} {d.device_kind}" for d in devices))


def model_row(
    model: Model,
    inputs: np.ndarray,
    *,
    label: str,
    tokens: list[str] | None = None,
    config: RunConfig | None = None,
) -> ModelRow:
    """The :class:`ModelRow` of ``model`` on ``inputs``: one
    :func:`~rnnviz.studies.models.analyze_model`, the connectivity read at the last position
    with a loss.

    Args:
        model: a language model, or a model of vectors (a reference block).
        inputs: token ids ``<int>[B, T]``, or a model of vectors' ``<float>[B, T, I]`` (not
            kept in the row: ``config`` says how they were drawn).
        label: its name in headings and tables.
        tokens: each position's text, where a tokenizer gave it.
        config: the reference block's config, for a design drawn as one.
    """
    a = analyze_model(model, inputs, tokens=tokens)
    return ModelRow(
        label=label,
        model_type=model.model_type,
        source=model.source,
        n_layers=model.n_layers,
        n_params=model.n_params,
        vocab_size=model.vocab_size,
        spec=model.spec,
        token_ids=np.asarray(inputs, np.int32) if model.vocab_size else None,
        analysis=a,
        device=_device(model),
        config=config,
    )


def _compared(rows: Sequence[ModelRow], text: str | None) -> ModelComparison:
    """The rows, and this process's JAX, packages, host and time."""
    return ModelComparison(
        rows=tuple(rows),
        text=text,
        environment=environment(),
        packages=package_versions(),
        machine=machine_text(),
        created=created_now(),
    )


def model_comparison(
    models: Sequence[Model | str | Path],
    inputs: str | Any,
    *,
    dtype: str = "float32",
    progress: Callable[[str], None] | None = None,
) -> ModelComparison:
    """Your own models side by side, on the same text: each one's gradient through every layer
    and step, its state gradients, what its last prediction reads, and how far back each reaches.

    Every model is loaded, and its inputs made and checked, before the first analysis runs, so
    a wrong path or token is one error before any compiling.

    Args:
        models: checkpoints (:func:`~rnnviz.studies.models.load_model`'s paths) or loaded
            language models; the same one may appear twice.
        inputs: text, read by each model through its own ``tokenizer.json`` (so two models
            may see different tokens), or token ids ``[T]``/``[B, T]`` given to every model.
        dtype: the weights' dtype where a path is loaded (``"float32"`` or ``"bfloat16"``).
        progress: called with a line (``"mamba: the analysis"``) before each analysis.

    Returns:
        A :class:`ModelComparison`, rows in the order of ``models``.

    Raises:
        ConfigError: no models, a checkpoint that does not load (a
            :class:`~rnnviz.checkpoints.CheckpointError` naming the file), or inputs a model
            cannot read (:func:`model_inputs`).

    Example:
        >>> import tempfile, transformers
        >>> from rnnviz.report import model_comparison
        >>> folder = tempfile.mkdtemp()
        >>> config = transformers.MambaConfig(vocab_size=32, hidden_size=8, state_size=2, num_hidden_layers=1)
        >>> transformers.MambaForCausalLM(config).save_pretrained(folder)
        >>> c = model_comparison([folder, folder], [3, 1, 4, 1, 5, 9])
        >>> len(c.rows), c.rows[0].analysis.grad_norms.shape, c.same_tokens  # [L + 1, T]
        (2, (2, 6), True)
    """
    if isinstance(models, (str, Path)):  # one path, not its characters
        models = [models]
    if not models:
        raise ConfigError("model", (), "at least one model")
    loaded = [_loaded(m, dtype) for m in models]
    labels = unique_labels([Path(m.source).name or m.source for m in loaded])
    read = [model_inputs(m, inputs, label) for m, label in zip(loaded, labels)]
    say = progress or (lambda line: None)
    rows = []
    for m, label, (ids, tokens) in zip(loaded, labels, read):
        say(f"{label}: the analysis")
        rows.append(model_row(m, ids, tokens=tokens, label=label))
    return _compared(rows, inputs if isinstance(inputs, str) else None)


def block_comparison(
    configs: Sequence[RunConfig],
    *,
    inputs: Sequence[np.ndarray] | None = None,
    tensors: Sequence[Mapping[str, Any] | None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ModelComparison:
    """Designs as their reference blocks side by side: each config's
    :func:`~rnnviz.studies.block_models.block_model` on its
    :func:`~rnnviz.studies.block_models.block_inputs` (the bare cell's: the same x ``[B, T, I]``
    for configs that differ only in the cell and the width), read as
    :func:`model_comparison` reads checkpoints. Every row keeps its config; its label is the
    cell's (made distinct where one repeats).

    Args:
        configs: configs with ``block="reference"`` (e.g.
            :func:`~rnnviz.studies.block_models.sized_config` at matched counts).
        inputs: each config's ``<float32>[B, T, I]`` (e.g. ``block_inputs(cfg, data)``, the first
            B sequences of a data set); default: each config's drawn inputs.
        tensors: each config's trained tensors or None (:func:`~rnnviz.studies.block_models.block_model`);
            default: every block as its seed draws it.
        progress: called with a line (``"mamba: the analysis"``) before each analysis.

    Returns:
        A :class:`ModelComparison` whose :attr:`~ModelComparison.blocks` is True; each row's
        analysis is :func:`~rnnviz.studies.block_models.analyze_block` of its config.

    Raises:
        ConfigError: no configs, a config that is not a reference block's, or a width its
            design's template does not take.

    Example:
        >>> import rnnviz
        >>> from rnnviz.report.models import block_comparison
        >>> base = rnnviz.RunConfig(cell="gru", block="reference", layers=2, hidden_size=8, seq_len=6)
        >>> c = block_comparison([base, base.replace(cell="mamba")])
        >>> c.labels, c.blocks, c.rows[1].model_type, c.rows[1].analysis.grad_norms.shape
        (('gru', 'mamba'), True, 'mamba', (3, 6))
    """
    if not configs:
        raise ConfigError("cells", (), "at least one design")
    for name, given in (("inputs", inputs), ("tensors", tensors)):
        if given is not None and len(given) != len(configs):
            raise ConfigError(name, f"{len(given)} entries", f"one per config ({len(configs)})")
    trained = tensors if tensors is not None else [None] * len(configs)
    # a width a design cannot take, or tensors that do not fit: before any analysis
    models = [block_model(cfg, t) for cfg, t in zip(configs, trained)]
    say = progress or (lambda line: None)
    rows = []
    read = inputs if inputs is not None else [block_inputs(cfg) for cfg in configs]
    for cfg, model, x, label in zip(configs, models, read, unique_labels([cfg.cell for cfg in configs])):
        say(f"{label}: the analysis")
        rows.append(model_row(model, x, label=label, config=cfg))
    return _compared(rows, None)


__all__ = [
    "BLOCK_INPUTS",
    "MODEL_SCHEMA",
    "REACH_FRACTION",
    "ModelComparison",
    "ModelRow",
    "block_comparison",
    "model_comparison",
    "model_comparison_json",
    "model_inputs",
    "model_row",
    "model_row_json",
    "reach",
    "reach_text",
]

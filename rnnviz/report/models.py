r"""The numbers of your own models side by side: each checkpoint analysed on the same text
(:func:`model_comparison`), how far back its gradient reaches (:func:`reach`), and all of it as
plain JSON values (:func:`model_comparison_json`). No plotly here: :mod:`rnnviz.report.html`
draws them (:func:`~rnnviz.report.html.model_report_html`).

How far back a gradient reaches is read the same way for the whole loss's gradient
‖∂L/∂x_t^{(0)}‖ and for one prediction's connectivity ‖∂ℓ_p/∂x_t^{(0)}‖: the number of positions
back from the last one that has a loss (from p for the connectivity) at which the norm has
fallen below 1 % of its maximum and stays below to the start of the text (:func:`reach`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rnnviz.base.formatting import finite_json
from rnnviz.checkpoints import CheckpointError
from rnnviz.config import ConfigError
from rnnviz.engine.environment import Environment, environment
from rnnviz.report.compare import (
    created_now,
    environment_json,
    machine_text,
    package_versions,
    unique_labels,
)
from rnnviz.studies.models import Model, ModelAnalysis, analyze_model, load_model, tokenize

#: The JSON's ``schema`` (bumped when a field changes meaning).
MODEL_SCHEMA = "rnnviz-model-comparison-1"
#: The share of its maximum below which a gradient counts as no longer reaching (:func:`reach`).
REACH_FRACTION = 0.01
#: What the analysis's record holds that the report leaves out: the seconds depend on the day
#: and the machine, not on the model.
_NOT_NUMBERS = ("compile_s", "run_s")


def reach(norms: np.ndarray, end: int, fraction: float = REACH_FRACTION) -> int | None:
    r"""How many positions back from ``end`` a gradient has fallen below ``fraction`` of its
    maximum for good.

    With v_t the norms at the positions t = 0 … end and m their largest finite value, the
    reach is the lag k = end − t₀ + 1 of the first position before t₀, where t₀ is the
    earliest position the gradient still reaches:

    .. math::

        t_0 = \min\{t \le \mathrm{end} : v_t > 0,\ v_t \ge \mathrm{fraction}\cdot m\}

    so v_{end−j} < fraction·m for every lag j ≥ k. A dip below the line that recovers
    further back does not end the reach.

    Args:
        norms: ``[T]`` a gradient's norm per position (positions after ``end`` are ignored).
        end: the position the lags count back from (the last one with a loss, or p).
        fraction: the share of the maximum that still counts (default 1 %).

    Returns:
        k ≥ 1; 0 when no position is reached (every norm 0 or not finite); None when the
        gradient is still at least ``fraction`` of its maximum at position 0: it reaches the
        whole text and may reach further.

    Raises:
        ValueError: ``norms`` is not one series, or ``end`` lies outside it.

    Example:
        >>> import numpy as np
        >>> from rnnviz.report.models import reach
        >>> reach(np.array([1e-4, 0.02, 0.5, 1.0]), end=3)  # t₀ = 1: below from 3 back
        3
        >>> reach(np.array([0.3, 0.001, 0.5, 1.0]), end=3) is None  # a dip, then read again
        True
    """
    values = np.asarray(norms, np.float64)
    if values.ndim != 1 or not 0 <= end < values.size:
        raise ValueError(f"norms [T] and end in 0 … T − 1; got {list(values.shape)} and {end}")
    values = values[: end + 1]
    finite = values[np.isfinite(values)]
    if finite.size == 0 or finite.max() <= 0:
        return 0
    reached = np.flatnonzero(np.isfinite(values) & (values > 0) & (values >= fraction * finite.max()))
    first = int(reached[0])
    return None if first == 0 else end - first + 1


def reach_text(k: int | None, end: int) -> str:
    """A reach for a table: ``3``, or ``> 6 (all of the text)`` where it does not fall below
    within the text (``end`` the position it counts back from)."""
    return f"> {end} (all of the text)" if k is None else str(k)


@dataclass(frozen=True, eq=False)
class ModelRow:
    """One model's numbers: its facts, the tokens it read and its analysis.

    Attributes:
        label: its name in headings and tables (the folder's or file's name, made distinct).
        model_type: the family (``"mamba"``, ``"xlstm"``, …).
        source: the folder or file it was read from.
        n_layers: L, its blocks.
        n_params: its parameters, each tied tensor counted once.
        vocab_size: V, its vocabulary.
        spec: the family's frozen record of sizes (``config.json`` read).
        token_ids: ``<int32>[B, T]`` the tokens it read.
        analysis: :func:`~rnnviz.studies.models.analyze_model` of them.
        device: where the analysis ran (``cpu:0 cpu``).
    """

    label: str
    model_type: str
    source: str
    n_layers: int
    n_params: int
    vocab_size: int
    spec: Any
    token_ids: np.ndarray
    analysis: ModelAnalysis
    device: str

    @property
    def loss_end(self) -> int:
        """The last position with a loss, T − 2: the last token has no next one to predict."""
        return self.token_ids.shape[1] - 2

    @property
    def input_reach(self) -> int | None:
        """:func:`reach` of ‖∂L/∂x_t^{(0)}‖ (the whole loss, row 0) back from :attr:`loss_end`."""
        return reach(self.analysis.grad_norms[0], self.loss_end)

    @property
    def connectivity_reach(self) -> int | None:
        """:func:`reach` of ‖∂ℓ_p/∂x_t^{(0)}‖ (the prediction at p alone) back from p."""
        return reach(self.analysis.connectivity, self.analysis.position)


@dataclass(frozen=True, eq=False)
class ModelComparison:
    """Several models on the same text, and where they were computed.

    Attributes:
        rows: one :class:`ModelRow` per model, in the order given.
        text: the text every model read through its own ``tokenizer.json``, or None where
            the same token ids were given to all.
        environment: the versions and host facts of the JAX that computed.
        packages: ``(name, version or None)`` for :data:`~rnnviz.report.compare.PACKAGES`.
        machine: ``platform.platform()`` and the processor of this process's host.
        created: when the numbers were gathered (UTC, ISO 8601).
    """

    rows: tuple[ModelRow, ...]
    text: str | None
    environment: Environment
    packages: tuple[tuple[str, str | None], ...]
    machine: str
    created: str

    @property
    def labels(self) -> tuple[str, ...]:
        """The models' labels, in order."""
        return tuple(r.label for r in self.rows)

    @property
    def same_tokens(self) -> bool:
        """Whether every model read the same token ids (False where the text was tokenised
        differently: then position t is not the same piece of text in each)."""
        first = self.rows[0].token_ids
        return all(np.array_equal(r.token_ids, first) for r in self.rows[1:])


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
    model: Model, token_ids: np.ndarray, *, label: str, tokens: list[str] | None = None
) -> ModelRow:
    """The :class:`ModelRow` of ``model`` on ``token_ids`` ``[B, T]``: one
    :func:`~rnnviz.studies.models.analyze_model`, the connectivity read at the last position
    with a loss."""
    a = analyze_model(model, token_ids, tokens=tokens)
    return ModelRow(
        label=label,
        model_type=model.model_type,
        source=model.source,
        n_layers=model.n_layers,
        n_params=model.n_params,
        vocab_size=model.vocab_size,
        spec=model.spec,
        token_ids=np.asarray(token_ids, np.int32),
        analysis=a,
        device=_device(model),
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
    return ModelComparison(
        rows=tuple(rows),
        text=inputs if isinstance(inputs, str) else None,
        environment=environment(),
        packages=package_versions(),
        machine=machine_text(),
        created=created_now(),
    )


def _spec_json(spec: Any) -> dict[str, Any]:
    return dataclasses.asdict(spec) if dataclasses.is_dataclass(spec) else {}


def model_row_json(r: ModelRow) -> dict[str, Any]:
    """One :class:`ModelRow` as JSON values: its facts, the tokens, the analysis's every
    number (:meth:`~rnnviz.studies.models.ModelAnalysis.to_json` but the seconds) and the
    reaches."""
    analysis = {k: v for k, v in r.analysis.to_json().items() if k not in _NOT_NUMBERS}
    return finite_json(
        {
            **analysis,
            "label": r.label,
            "n_layers": r.n_layers,
            "n_params": r.n_params,
            "vocab_size": r.vocab_size,
            "spec": _spec_json(r.spec),
            "token_ids": r.token_ids.tolist(),
            "device": r.device,
            "reach": {
                "fraction": REACH_FRACTION,
                "input": {"from": r.loss_end, "positions_back": r.input_reach},
                "connectivity": {"from": r.analysis.position, "positions_back": r.connectivity_reach},
            },
        }
    )


def model_comparison_json(c: ModelComparison) -> dict[str, Any]:
    """The :class:`ModelComparison` as plain JSON values: what the report embeds (``<script
    type="application/json" id="rnnviz-numbers">``) and ``rnnviz compare --model … --json``
    prints. Floats read back exactly; NaN and ±Inf (a log₁₀ of a true zero) are null. A reach
    of null: the gradient reaches the whole text (:func:`reach`).

    Example:
        >>> import json, tempfile, transformers
        >>> from rnnviz.report import model_comparison, model_comparison_json
        >>> folder = tempfile.mkdtemp()
        >>> config = transformers.MambaConfig(vocab_size=32, hidden_size=8, state_size=2, num_hidden_layers=1)
        >>> transformers.MambaForCausalLM(config).save_pretrained(folder)
        >>> c = model_comparison([folder], [3, 1, 4, 1, 5, 9])
        >>> out = json.loads(json.dumps(model_comparison_json(c)))
        >>> first = out["models"].pop(0)
        >>> out["schema"], first["grad_norms"] == c.rows[0].analysis.grad_norms.tolist()
        ('rnnviz-model-comparison-1', True)
    """
    return {
        "schema": MODEL_SCHEMA,
        "created": c.created,
        "text": c.text,
        "same_tokens": c.same_tokens,
        "models": [model_row_json(r) for r in c.rows],
        "environment": environment_json(c.environment),
        "packages": dict(c.packages),
        "machine": c.machine,
    }


__all__ = [
    "MODEL_SCHEMA",
    "REACH_FRACTION",
    "ModelComparison",
    "ModelRow",
    "model_comparison",
    "model_comparison_json",
    "model_inputs",
    "model_row",
    "model_row_json",
    "reach",
    "reach_text",
]

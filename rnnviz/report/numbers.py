r"""The report's numbers, as records and plain JSON values (NumPy; no JAX, no plotly): a
comparison of cell designs (:class:`Comparison` of :class:`Design` records, gathered from
analyses in hand by :func:`comparison_of`, written by :func:`comparison_json`) and of your own
models (:class:`ModelComparison` of :class:`ModelRow` records, :func:`model_comparison_json`,
how far back a gradient reaches: :func:`reach`).

:mod:`rnnviz.report.compare` and :mod:`rnnviz.report.models` compute them;
:mod:`rnnviz.report.html` draws them. A process that only gathers and draws them (the
dashboard's server, from its workers' analyses) never imports JAX.

How far back a gradient reaches is read the same way for the whole loss's gradient
‖∂L/∂x_t^{(0)}‖ and for one prediction's connectivity ‖∂ℓ_p/∂x_t^{(0)}‖: the number of positions
back from the last one that has a loss (from p for the connectivity) at which the norm has
fallen below 1 % of its maximum and stays below to the start of the text (:func:`reach`).
"""

from __future__ import annotations

import dataclasses
import math
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

import numpy as np

from rnnviz import __version__
from rnnviz.base.analysis import Analysis
from rnnviz.base.environment import Environment
from rnnviz.base.formatting import finite_json
from rnnviz.base.models import ModelAnalysis
from rnnviz.base.readings import DecayFit, decay_fit
from rnnviz.base.training import Training
from rnnviz.config import ConfigError, RunConfig
from rnnviz.frames.gradients import config_label
from rnnviz.frames.verdicts import verdict

#: The JSON's ``schema`` (bumped when a field changes meaning).
SCHEMA = "rnnviz-comparison-1"
#: The packages whose versions a report names (``None`` where one is not installed).
PACKAGES = ("rnnviz", "jax", "jaxlib", "flax", "optax", "numpy", "pandas", "plotly")
#: Your own models' JSON ``schema`` (bumped when a field changes meaning).
MODEL_SCHEMA = "rnnviz-model-comparison-1"
#: The share of its maximum below which a gradient counts as no longer reaching (:func:`reach`).
REACH_FRACTION = 0.01
#: What a reference block reads, as :func:`reach_text` names a reach over all of it.
BLOCK_INPUTS = "the inputs"
#: What the analysis's record holds that the report leaves out: the seconds depend on the day
#: and the machine, not on the model.
_NOT_NUMBERS = ("compile_s", "run_s")


@dataclass(frozen=True, eq=False)
class Design:
    """One design's numbers. T = ``config.seq_len``; index t of a ``[T+1]`` series is the
    carry after x_t (0: the initial carry).

    Attributes:
        label: the design's name in legends and tables (the cell's name, or the run's
            config label in the dashboard).
        config: the configuration analysed (the base with this cell).
        loss: L, the configured loss (or the data set's task loss).
        grad_norms: ``[T+1]`` ‖∂L/∂carry_t‖ as float32 holds it (``Analysis.grad_norms``).
        log10_grad_norms: ``[T+1]`` its exact log₁₀ (float64; −inf only for a true zero).
        log10_source: ``"float32"`` or ``"log pass"`` (:attr:`Analysis.log10_source`).
        decay: the least-squares fit of ln‖∂L/∂carry_{T−k}‖ against the lag k
            (:func:`~rnnviz.base.readings.decay_fit`), or None when under 3 finite points.
        lambda1: λ₁, the leading Lyapunov exponent (natural log per step;
            :func:`rnnviz.lyapunov` with k = 1), or None when not computed.
        verdict: one line on what the gradient does (:func:`~rnnviz.frames.verdicts.verdict`).
        data: the data set's label when the inputs came from one, else None.
        device: where the analysis ran (``cpu:0 cpu``).
        training: the design trained on the task (weights dropped: the curves only), or None.
    """

    label: str
    config: RunConfig
    loss: float
    grad_norms: np.ndarray
    log10_grad_norms: np.ndarray
    log10_source: str
    decay: DecayFit | None
    lambda1: float | None
    verdict: str
    data: str | None
    device: str
    training: Training | None = None

    @property
    def decay_per_step(self) -> float | None:
        """The measured slope s of ln‖∂L/∂carry_{T−k}‖ per step back (e^s per step; λ₁'s
        unit, so a gradient that follows λ₁ has s ≈ λ₁), or None when it was not fittable."""
        return None if self.decay is None else self.decay.slope

    @property
    def decades_per_step(self) -> float | None:
        """The same slope in log₁₀ per step: s / ln 10."""
        return None if self.decay is None else self.decay.slope / math.log(10.0)


@dataclass(frozen=True, eq=False)
class Comparison:
    """Several designs at one shape, and where they were computed.

    Attributes:
        designs: one :class:`Design` each, in the order asked for.
        data: the data set's label, or None for the configured synthetic inputs.
        task: what the designs were trained on (a task's or the data set's name), or None.
        train_steps: training steps asked for, or None (not trained).
        environment: the versions and host facts of the JAX that computed
            (:func:`rnnviz.engine.environment.environment`).
        packages: ``(name, version or None)`` for :data:`PACKAGES`.
        machine: ``platform.platform()`` and the processor of this process's host.
        created: when the numbers were gathered (UTC, ISO 8601).
    """

    designs: tuple[Design, ...]
    data: str | None
    task: str | None
    train_steps: int | None
    environment: Environment
    packages: tuple[tuple[str, str | None], ...]
    machine: str
    created: str

    @property
    def labels(self) -> tuple[str, ...]:
        """The designs' labels, in order."""
        return tuple(d.label for d in self.designs)


def design_of(
    a: Analysis, *, lambda1: float | None = None, training: Training | None = None, label: str | None = None
) -> Design:
    """The :class:`Design` of one analysis (NumPy only: no computation is run).

    Args:
        a: the analysis.
        lambda1: its λ₁ when computed (``rnnviz.lyapunov(a.config, k=1).lambda1``).
        training: the design's training run; its kept weights are dropped.
        label: the name in legends (default: the cell's).

    Returns:
        A :class:`Design`.
    """
    if training is not None:
        training = dataclasses.replace(training, weight_steps=None, weight_tree=None)
    return Design(
        label=label or a.config.cell,
        config=a.config,
        loss=float(a.loss),
        grad_norms=np.asarray(a.grad_norms),
        log10_grad_norms=np.asarray(a.log10_grad_norms, np.float64),
        log10_source=a.log10_source,
        decay=decay_fit(a.log10_grad_norms),
        lambda1=None if lambda1 is None else float(lambda1),
        verdict=verdict(a).text,
        data=a.data,
        device=a.timing.device,
        training=training,
    )


def unique_labels(labels: Sequence[str]) -> list[str]:
    """Labels made distinct (a repeated one gets `` (2)``, `` (3)``, …): legends group by label."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def comparison_of(
    designs: Sequence[Design | Analysis],
    *,
    env: Environment,
    task: str | None = None,
    train_steps: int | None = None,
) -> Comparison:
    """A :class:`Comparison` of designs (or analyses) already computed: nothing runs but
    NumPy, so the dashboard builds its report from its pinned runs in the server process.

    Args:
        designs: :class:`Design` records, or analyses (each becomes :func:`design_of` with
            no λ₁ and the config label ``lstm H=32 T=50 g=1 …``).
        task: what they were trained on, if they were.
        train_steps: the training steps asked for, if trained.
        env: the computing JAX's facts (the dashboard's workers';
            :func:`rnnviz.report.compare.comparison_of` takes this process's by default).

    Returns:
        A :class:`Comparison`; labels made distinct where two are alike.

    Raises:
        ConfigError: no designs.

    Example:
        >>> from rnnviz import RunConfig, analyze
        >>> from rnnviz.engine.environment import environment
        >>> a = analyze(RunConfig(cell="gru", hidden_size=4, seq_len=5), repeats=1)
        >>> c = comparison_of([a, a], env=environment())
        >>> tuple(d.label.split()[0] for d in c.designs), c.designs[0].lambda1 is None
        (('gru', 'gru'), True)
    """
    if not designs:
        raise ConfigError("designs", (), "at least one analysed design")
    records = [d if isinstance(d, Design) else design_of(d, label=config_label(d)) for d in designs]
    labels = unique_labels([d.label for d in records])
    records = [d if d.label == lab else dataclasses.replace(d, label=lab) for d, lab in zip(records, labels)]
    data = next((d.data for d in records if d.data is not None), None)
    return Comparison(
        designs=tuple(records),
        data=data,
        task=task,
        train_steps=train_steps,
        environment=env,
        packages=package_versions(),
        machine=machine_text(),
        created=created_now(),
    )


def _version(package: str) -> str | None:
    if package == "rnnviz":
        return __version__
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def package_versions() -> tuple[tuple[str, str | None], ...]:
    """``(name, version or None)`` for each of :data:`PACKAGES` (None: not installed)."""
    return tuple((p, _version(p)) for p in PACKAGES)


def machine_text() -> str:
    """This host as a report names it: ``platform.platform()``, the machine and the processor."""
    processor = platform.processor()
    return f"{platform.platform()} ({platform.machine() or 'unknown'}{', ' + processor if processor else ''})"


def created_now() -> str:
    """The time now, as a report's ``created`` (UTC, ISO 8601, to the second)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def environment_json(env: Environment) -> dict[str, Any]:
    """The computing JAX's facts as JSON values (the strategies' reasons left out)."""
    return {
        **{k: v for k, v in env._asdict().items() if k != "hidden"},
        "gpus": list(env.gpus),
        "strategies": list(env.strategies),
    }


def _floats(x: np.ndarray) -> list[float]:
    return np.asarray(x, np.float64).tolist()


#: What the report keeps of a design's training run (:meth:`Training.to_json`): its curves and outcome.
_TRAINING_FIELDS = (
    "task", "steps", "steps_run", "learning_rate", "optimizer", "clip", "losses", "metric_name", "metric",
    "baseline", "final_loss", "solved_step", "nonfinite_step",
)  # fmt: skip


def _training_json(r: Training | None) -> dict[str, Any] | None:
    if r is None:
        return None
    whole = r.to_json()
    return {f: whole[f] for f in _TRAINING_FIELDS}


def design_json(d: Design) -> dict[str, Any]:
    """One :class:`Design` as JSON values (arrays as lists; NaN/Inf become null)."""
    return finite_json(
        {
            "label": d.label,
            "cell": d.config.cell,
            "config": d.config.to_dict(),
            "data": d.data,
            "device": d.device,
            "loss": d.loss,
            "grad_norms": _floats(d.grad_norms),
            "log10_grad_norms": _floats(d.log10_grad_norms),
            "log10_source": d.log10_source,
            "lambda1": d.lambda1,
            "decay_per_step": d.decay_per_step,
            "decades_per_step": d.decades_per_step,
            "decay_fit": None if d.decay is None else d.decay._asdict(),
            "verdict": d.verdict,
            "training": _training_json(d.training),
        }
    )


def comparison_json(c: Comparison) -> dict[str, Any]:
    """The :class:`Comparison` as plain JSON values: what a report embeds (``<script
    type="application/json" id="rnnviz-numbers">``) and ``json.loads`` reads back.

    Floats are written by ``repr`` (``json.dumps``), so they read back exactly; NaN and
    ±Inf (a log₁₀ of a true zero) are null.

    Example:
        >>> import json
        >>> from rnnviz import RunConfig, analyze
        >>> from rnnviz.report import comparison_json, comparison_of
        >>> a = analyze(RunConfig(cell="gru", hidden_size=4, seq_len=5), repeats=1)
        >>> out = json.loads(json.dumps(comparison_json(comparison_of([a]))))
        >>> first = out["designs"].pop(0)
        >>> out["schema"], first["grad_norms"] == a.grad_norms.tolist()
        ('rnnviz-comparison-1', True)
    """
    return {
        "schema": SCHEMA,
        "created": c.created,
        "data": c.data,
        "task": c.task,
        "train_steps": c.train_steps,
        "designs": [design_json(d) for d in c.designs],
        "environment": environment_json(c.environment),
        "packages": dict(c.packages),
        "machine": c.machine,
    }


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
        >>> from rnnviz.report.numbers import reach
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


def reach_text(k: int | None, end: int, whole: str = "the text") -> str:
    """A reach for a table: ``3``, or ``> 6 (all of the text)`` where it does not fall below
    within ``whole`` (``end`` the position it counts back from)."""
    return f"> {end} (all of {whole})" if k is None else str(k)


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
        token_ids: ``<int32>[B, T]`` the tokens it read; None for a model that reads vectors
            (a reference block reads its config's inputs,
            :func:`~rnnviz.studies.block_models.block_inputs`).
        analysis: :func:`~rnnviz.studies.models.analyze_model` of them.
        device: where the analysis ran (``cpu:0 cpu``).
        config: the :class:`~rnnviz.config.RunConfig` of a design drawn as its reference
            block (``block="reference"``), or None for a checkpoint or a fresh language model.
    """

    label: str
    model_type: str
    source: str
    n_layers: int
    n_params: int
    vocab_size: int
    spec: Any
    token_ids: np.ndarray | None
    analysis: ModelAnalysis
    device: str
    config: RunConfig | None = None

    @property
    def steps(self) -> int:
        """T, the positions it read."""
        return self.analysis.grad_norms.shape[1]

    @property
    def loss_end(self) -> int:
        """The last position with a loss: T − 2 for a language model (the last token has no
        next one to predict), T − 1 for a model of vectors (its loss reads the last step)."""
        return self.steps - (2 if self.vocab_size else 1)

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
    """Several models on the same inputs (a text, token ids, or for reference blocks their
    configs' vectors), and where they were computed.

    Attributes:
        rows: one :class:`ModelRow` per model, in the order given.
        text: the text every model read through its own ``tokenizer.json``, or None where
            the same token ids (or vectors) were given to all.
        environment: the versions and host facts of the JAX that computed.
        packages: ``(name, version or None)`` for :data:`PACKAGES`.
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
        differently: then position t is not the same piece of text in each; True for
        models of vectors, which read no tokens)."""
        ids = [r.token_ids for r in self.rows if r.token_ids is not None]
        return all(np.array_equal(i, ids[0]) for i in ids[1:])

    @property
    def blocks(self) -> bool:
        """Whether every row is a design drawn as its reference block (each has a config)."""
        return all(r.config is not None for r in self.rows)


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
            "token_ids": None if r.token_ids is None else r.token_ids.tolist(),
            "config": None if r.config is None else r.config.to_dict(),
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
    "BLOCK_INPUTS",
    "MODEL_SCHEMA",
    "PACKAGES",
    "REACH_FRACTION",
    "SCHEMA",
    "Comparison",
    "Design",
    "ModelComparison",
    "ModelRow",
    "comparison_json",
    "comparison_of",
    "created_now",
    "design_json",
    "design_of",
    "environment_json",
    "machine_text",
    "model_comparison_json",
    "model_row_json",
    "package_versions",
    "reach",
    "reach_text",
    "unique_labels",
]

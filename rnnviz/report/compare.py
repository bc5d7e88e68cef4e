"""The numbers of a comparison of cell designs: :func:`comparison` computes them (one
analysis, λ₁ and, when asked, a training run per design), :func:`comparison_of` gathers
them from analyses already in hand (the dashboard's pinned runs), :func:`comparison_json`
writes them as plain JSON values. No plotly here: :mod:`rnnviz.report.html` draws them.
"""

from __future__ import annotations

import dataclasses
import math
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import TYPE_CHECKING, Any

import numpy as np

from rnnviz import __version__
from rnnviz.analysis import Analysis, analyze
from rnnviz.base.formatting import finite_json
from rnnviz.base.readings import DecayFit, decay_fit
from rnnviz.config import ConfigError, check_number
from rnnviz.dataset import Dataset, check_data, fit_to_data, load_dataset
from rnnviz.engine.environment import Environment, environment
from rnnviz.frames.gradients import config_label
from rnnviz.frames.verdicts import verdict
from rnnviz.studies.lyapunov import check_options, lyapunov
from rnnviz.studies.tasks.synthetic import TASKS
from rnnviz.studies.training import DATA_TASK, MAX_STEPS, Training, TrainSettings, check_training, train
from rnnviz.tables.cells import cell_names, cell_spec

if TYPE_CHECKING:
    from rnnviz.config import RunConfig

#: The JSON's ``schema`` (bumped when a field changes meaning).
SCHEMA = "rnnviz-comparison-1"
#: The packages whose versions a report names (``None`` where one is not installed).
PACKAGES = ("rnnviz", "jax", "jaxlib", "flax", "optax", "numpy", "pandas", "plotly")
#: Steps per compiled training chunk (and between the run's gradient profiles), at most.
LOG_EVERY = 50


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


def check_cells(cells: Sequence[str] | str) -> tuple[str, ...]:
    """``cells`` (names, or one string of them separated by commas) as a tuple of registered,
    distinct cell names.

    Raises:
        ConfigError: none given, a name not registered (the message lists
            :func:`rnnviz.cell_names`) or a name given twice.
    """
    registered = cell_names()
    given = [c for c in cells.split(",") if c.strip()] if isinstance(cells, str) else cells
    names = tuple(str(c).strip() for c in given)
    if not names:
        raise ConfigError("cells", (), "at least one registered cell: " + ", ".join(registered))
    for name in names:
        if name not in registered:
            raise ConfigError("cells", name, "a registered cell: " + ", ".join(registered))
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError("cells", ",".join(names), f"each cell once ({', '.join(twice)} given twice)")
    return names


def design_config(base: RunConfig, cell: str) -> RunConfig:
    """``base`` with ``cell``: its activation kept where the cell takes it (else the cell's
    first), its forget bias kept where the cell has a forget gate (else 0).

    Raises:
        ConfigError: the cell cannot run ``base``'s strategy (the message names the cells that can).
    """
    spec = cell_spec(cell)
    activations = spec.display.activations
    activation = base.activation if base.activation in activations else activations[0]
    forget_bias = base.forget_bias if spec.params.forget_bias is not None else 0.0
    return base.replace(cell=cell, activation=activation, forget_bias=forget_bias)


def _dataset(data: str | Dataset | None, data_options: Mapping[str, Any] | None) -> Dataset | None:
    if data is None or isinstance(data, Dataset):
        if data_options:
            raise ConfigError("data_options", dict(data_options), "options only with a data set's name")
        return data
    return load_dataset(data, **dict(data_options or {}))


def _fitted(base: RunConfig, ds: Dataset | None, train_steps: int | None, task: str) -> RunConfig:
    """The base fitted to the data set (T, I, loss placement), or to the training task (I)."""
    if ds is not None:
        return fit_to_data(base, ds)
    if train_steps is None:
        return base
    if task not in TASKS:
        raise ConfigError("task", task, "one of " + ", ".join(sorted(TASKS)))
    return base.replace(input_size=TASKS[task].input_size)


def comparison(
    cells: Sequence[str] | str,
    base: RunConfig,
    *,
    data: str | Dataset | None = None,
    data_options: Mapping[str, Any] | None = None,
    train_steps: int | None = None,
    task: str = "adding",
    learning_rate: float = 1e-3,
    repeats: int = 1,
    progress: Callable[[str], None] | None = None,
) -> Comparison:
    r"""Compare cell designs at one shape: per design, the gradient through time, its decay
    per step and the leading Lyapunov exponent, and optionally how it learns.

    For each cell c, with ``cfg = base`` with ``cell=c`` (:func:`design_config`):

    * ``analyze(cfg)``: ‖∂L/∂carry_t‖ ``[T+1]`` and its exact log₁₀;
    * the decay s, a least-squares slope over the lags k between T/10 and 9T/10
      (:func:`~rnnviz.base.readings.decay_fit`):

      .. math::

          \ln \|\partial L/\partial \mathrm{carry}_{T-k}\| \approx a + s\,k

    * λ₁ by the QR method (``lyapunov(cfg, k=1)``), natural log per step: a gradient that
      flows back k steps changes by about e^{λ₁k}, so s ≈ λ₁ when the trajectory decides it;
    * with ``train_steps``: ``train(cfg, task)`` (Adam, clipping at 1) from the same seed.

    Args:
        cells: registered cell names (:func:`rnnviz.cell_names`), each once (or one string,
            ``"lstm,gru,mamba"``).
        base: the shape and everything else; its ``cell`` is replaced per design.
        data: a data set (a built-in's name such as ``"digits"`` or ``"text"``, a file, or a
            :class:`~rnnviz.dataset.Dataset`): every design runs on a batch of it drawn by
            the seed, with its task loss, and trains on it; ``base`` is fitted to it
            (:func:`rnnviz.fit_to_data`: its T, I and loss placement).
        data_options: the built-in's options with a name (``{"order": "rows"}``).
        train_steps: also train every design for this many steps (None: no training).
        task: without data, the synthetic task trained on (``adding``, ``copy``,
            ``recall``); it fixes ``input_size``, which replaces ``base``'s.
        learning_rate: Adam's step size for training.
        repeats: timed runs of each analysis (the report does not show times: 1).
        progress: called with a line (``"mamba: λ₁"``) before each computation.

    Returns:
        A :class:`Comparison`, designs in the order of ``cells``.

    Raises:
        ConfigError: an unknown or repeated cell (the message lists the registered ones), a
            config a cell cannot take, a data set that does not load or fit, a training
            argument out of range or over the budget.

    Example:
        >>> from rnnviz import RunConfig
        >>> from rnnviz.report import comparison
        >>> c = comparison(["gru", "mamba"], RunConfig(hidden_size=4, seq_len=5))
        >>> c.labels, c.designs[1].grad_norms.shape  # [T+1]
        (('gru', 'mamba'), (6,))
        >>> all(d.lambda1 is not None and d.decay_per_step is not None for d in c.designs)
        True
    """
    names = check_cells(cells)
    ds = _dataset(data, data_options)
    fitted = _fitted(base, ds, train_steps, task)
    configs = [design_config(fitted, c) for c in names]
    training = None
    if train_steps is not None:
        train_steps = check_number("train_steps", train_steps, 1, MAX_STEPS, integer=True)
        training = TrainSettings(
            DATA_TASK if ds is not None else task,
            steps=train_steps,
            learning_rate=learning_rate,
            log_every=min(LOG_EVERY, train_steps),
        )
    for cfg in configs:  # every design checked before the first compile
        check_options(cfg, 1, None, 1)  # λ₁'s budget
        if ds is not None:
            check_data(cfg, ds)
        if training is not None:
            check_training(cfg, training, data=ds)
    say = progress or (lambda line: None)
    designs = []
    for cfg in configs:
        say(f"{cfg.cell}: the analysis")
        a = analyze(cfg, data=ds, repeats=repeats)
        say(f"{cfg.cell}: λ₁")
        ly = lyapunov(cfg, k=1, data=ds, measure_decay=False)
        run = None
        if training is not None:
            say(f"{cfg.cell}: training, {train_steps} steps")
            run = train(cfg, settings=training, data=ds)
        designs.append(design_of(a, lambda1=ly.lambda1, training=run, label=cfg.cell))
    return comparison_of(
        designs,
        task=None if train_steps is None else (ds.label if ds is not None else task),
        train_steps=train_steps,
    )


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
    task: str | None = None,
    train_steps: int | None = None,
    env: Environment | None = None,
) -> Comparison:
    """A :class:`Comparison` of designs (or analyses) already computed: nothing runs but
    NumPy, so the dashboard builds its report from its pinned runs in the server process.

    Args:
        designs: :class:`Design` records, or analyses (each becomes :func:`design_of` with
            no λ₁ and the config label ``lstm H=32 T=50 g=1 …``).
        task: what they were trained on, if they were.
        train_steps: the training steps asked for, if trained.
        env: the computing JAX's facts (the dashboard's workers'); default this process's.

    Returns:
        A :class:`Comparison`; labels made distinct where two are alike.

    Raises:
        ConfigError: no designs.

    Example:
        >>> from rnnviz import RunConfig, analyze
        >>> from rnnviz.report import comparison_of
        >>> a = analyze(RunConfig(cell="gru", hidden_size=4, seq_len=5), repeats=1)
        >>> c = comparison_of([a, a])
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
        environment=env if env is not None else environment(),
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


__all__ = [
    "Comparison",
    "Design",
    "LOG_EVERY",
    "PACKAGES",
    "SCHEMA",
    "check_cells",
    "comparison",
    "comparison_json",
    "comparison_of",
    "created_now",
    "design_config",
    "design_json",
    "design_of",
    "environment_json",
    "machine_text",
    "package_versions",
    "unique_labels",
]

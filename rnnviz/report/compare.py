"""The numbers of a comparison of cell designs: :func:`comparison` computes them (one
analysis, λ₁ and, when asked, a training run per design), :func:`comparison_of` gathers
them from analyses already in hand (the dashboard's pinned runs), :func:`comparison_json`
writes them as plain JSON values. No plotly here: :mod:`rnnviz.report.html` draws them.

The records and their JSON are :mod:`rnnviz.report.numbers`' (no JAX), re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rnnviz.analysis import Analysis, analyze
from rnnviz.config import ConfigError, check_number
from rnnviz.dataset import Dataset, check_data, fit_to_data, load_dataset
from rnnviz.engine.environment import Environment, environment
from rnnviz.report import numbers
from rnnviz.report.numbers import (
    PACKAGES,
    SCHEMA,
    Comparison,
    Design,
    comparison_json,
    created_now,
    design_json,
    design_of,
    environment_json,
    machine_text,
    package_versions,
    unique_labels,
)
from rnnviz.studies.lyapunov import check_options, lyapunov
from rnnviz.studies.training import DATA_TASK, MAX_STEPS, TrainSettings, check_training, train
from rnnviz.tables.cells import cell_names, cell_spec
from rnnviz.tables.tasks import TASK_RULES

if TYPE_CHECKING:
    from rnnviz.config import RunConfig

#: Steps per compiled training chunk (and between the run's gradient profiles), at most.
LOG_EVERY = 50


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
    if task not in TASK_RULES:
        raise ConfigError("task", task, "one of " + ", ".join(sorted(TASK_RULES)))
    return base.replace(input_size=TASK_RULES[task].input_size)


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


def comparison_of(
    designs: Sequence[Design | Analysis],
    *,
    task: str | None = None,
    train_steps: int | None = None,
    env: Environment | None = None,
) -> Comparison:
    """A :class:`Comparison` of designs (or analyses) already computed: nothing runs but
    NumPy (:func:`rnnviz.report.numbers.comparison_of`, whose ``env`` is given; here it is this
    process's JAX by default).

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
    env = env if env is not None else environment()
    return numbers.comparison_of(designs, env=env, task=task, train_steps=train_steps)


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

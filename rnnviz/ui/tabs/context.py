"""What a tab is given: :class:`TabContext`, the one argument of every tab's ``render``.

app.py builds it once per rerun, after the analysis. The compute calls in it are small
records of callables that app.py binds to :mod:`rnnviz.ui.calls` (the worker processes and
the shared result cache); a test hands a tab fakes instead, and no worker process starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pandas as pd

    from rnnviz.analysis import Analysis
    from rnnviz.config import RunConfig
    from rnnviz.engine.environment import Environment
    from rnnviz.serve.budget import Cost
    from rnnviz.serve.jobs import ModelSummary, TrainProgress
    from rnnviz.studies.connectivity import Connectivity
    from rnnviz.studies.jacobians import Jacobians
    from rnnviz.studies.lyapunov import Lyapunov
    from rnnviz.studies.models import ModelAnalysis
    from rnnviz.studies.over_training import OverTraining
    from rnnviz.studies.training import Training


class CostCalls(NamedTuple):
    """The Strategies and Devices tabs' calls.

    Attributes:
        availability: ``(cfg) -> (offered, hidden)``: the strategies it can use; why not the others.
        compiled: ``(cfg) -> names``: the offered strategies whose analysis is compiled already.
        strategies: ``(cfg, repeats, only) -> DataFrame``: the analysis under each strategy of
          ``only`` (a tuple of names), timed: one row each.
        scaling: ``(cfg, lens) -> DataFrame``: every strategy at each sequence length in ``lens``.
        devices_live: ``(cfg, repeats, only) -> DataFrame``: the config on every device JAX sees
          × each strategy of ``only``.
        recorded: ``() -> (DataFrame, skipped)``: the recorded measurements, and the lines that did not read.
    """

    availability: Callable[[RunConfig], tuple[tuple[str, ...], dict[str, str]]]
    compiled: Callable[[RunConfig], tuple[str, ...]]
    strategies: Callable[[RunConfig, int, tuple[str, ...]], pd.DataFrame]
    scaling: Callable[[RunConfig, tuple[int, ...]], pd.DataFrame]
    devices_live: Callable[[RunConfig, int, tuple[str, ...]], pd.DataFrame]
    recorded: Callable[[], tuple[pd.DataFrame, list[tuple[str, str]]]]


class DynamicsCalls(NamedTuple):
    """The Phase diagram and Jacobians tabs' calls.

    Attributes:
        phase: ``(cfg, lo, hi, gains, seeds, part, parts) -> (sweep, boundary)``: the gain × lag
          grid, g from lo to hi (part ``part`` of ``parts``: every ``parts``-th gain).
        lyapunov_phase: ``(cfg, lo, hi, gains, seeds) -> (λ₁ frame, edge)``: λ₁ over the same gains.
        lyapunov: ``(cfg, k) -> Lyapunov``: the k leading exponents.
        jacobians: ``(cfg, k, example, steps, part, parts) -> Jacobians``: the top k singular
            values of the step Jacobians, at up to ``steps`` steps (part ``part`` of ``parts``:
            every ``parts``-th of them).
    """

    phase: Callable[[RunConfig, float, float, int, int, int, int], tuple[pd.DataFrame, float | None]]
    lyapunov_phase: Callable[[RunConfig, float, float, int, int], tuple[pd.DataFrame, float | None]]
    lyapunov: Callable[[RunConfig, int], Lyapunov]
    jacobians: Callable[[RunConfig, int, int, int, int, int], Jacobians]


class ConnectivityCalls(NamedTuple):
    """The Memory tab's calls.

    Attributes:
        connectivity: ``(cfg, run, index, step, measure) -> Connectivity`` (run None: these weights).
        comparable_runs: ``(cfg) -> {path: label}``: other trained runs on the session's data.
    """

    connectivity: Callable[[RunConfig, str | None, int, int | None, str | None], Connectivity]
    comparable_runs: Callable[[RunConfig], dict[str, str]]


class TrainingCalls(NamedTuple):
    """The Training tab's calls: one run lives in its worker from ``start`` until it is done.

    Attributes:
        key: ``(cfg, settings) -> str``: the run's key (its config, data and settings).
        start: ``(cfg, settings) -> key``: make (and compile) the run in its worker.
        advance: ``(key, seconds) -> TrainProgress``: train about that long, then say how far it got.
        stop: ``(key) -> None``: stop the run after its current chunk.
        keep: ``(key, progress) -> None``: a finished run's files admitted to the trained
            folder (raises ``FolderFull``) and its curves kept.
        finished: ``(key) -> list[Training] | None``: a finished run's curves (no weights),
            from memory or its files; None when it has not been trained (or its files are gone).
        over_training: ``(path, k) -> OverTraining``: λ₁ … λ_k at every kept step of a saved run.
    """

    key: Callable[[RunConfig, dict[str, Any]], str]
    start: Callable[[RunConfig, dict[str, Any]], str]
    advance: Callable[[str, float], TrainProgress]
    stop: Callable[[str], None]
    keep: Callable[[str, TrainProgress], None]
    finished: Callable[[str], list[Training] | None]
    over_training: Callable[[str, int], OverTraining]


class ModelCalls(NamedTuple):
    """The Your model tab's calls: the checkpoint at a path, loaded in a worker (once per
    version of its files).

    Attributes:
        summary: ``(path) -> ModelSummary``: what the model is (its kind and sizes); a
          checkpoint that cannot be used raises its ``CheckpointError``.
        tokens: ``(path, text) -> (ids, tokens)``: the text by the ``tokenizer.json`` beside it.
        gradients: ``(path, inputs_json, position) -> ModelAnalysis``: the gradient through
          every layer and step on those inputs (:func:`rnnviz.serve.jobs.model_inputs`), the
          connectivity read at ``position`` (None: the last prediction).
    """

    summary: Callable[[str], ModelSummary]
    tokens: Callable[[str, str], tuple[tuple[int, ...], tuple[str, ...]]]
    gradients: Callable[[str, str, int | None], ModelAnalysis]


class Compute(NamedTuple):
    """Every computation a tab may ask for, one small record per family.

    Attributes:
        analysis: ``(cfg) -> Analysis``: the full analysis of another config (the session's data and weights).
        cost: ``(analysis) -> Cost``: what one analysis of its shape costs here, the unit of
          every tab's budget (:class:`~rnnviz.serve.budget.Cost`).
        costs: the Strategies and Devices tabs' calls.
        dynamics: the Phase diagram and Jacobians tabs' calls.
        connectivity: the Memory tab's calls.
        training: the Training tab's calls.
        model: the Your model tab's calls.
        teaching_page: ``(name) -> str``: the teaching page ``name`` (``rnnviz.base.presets.PAGES``)
          as one self-contained HTML text, for the Learn tab's download.
    """

    analysis: Callable[[RunConfig], Analysis]
    cost: Callable[[Analysis], Cost]
    costs: CostCalls
    dynamics: DynamicsCalls
    connectivity: ConnectivityCalls
    training: TrainingCalls
    model: ModelCalls
    teaching_page: Callable[[str], str]


class Pins(NamedTuple):
    """The session's pinned runs.

    Attributes:
        analyses: every pinned run's analysis, in pinning order.
        overlays: those other than the current run (drawn over it: the current one is drawn anyway).
        add: pin the current run.
        remove: ``(i) -> None``: unpin the i-th.
        clear: unpin all.
    """

    analyses: tuple[Analysis, ...]
    overlays: tuple[Analysis, ...]
    add: Callable[[], None]
    remove: Callable[[int], None]
    clear: Callable[[], None]


class TabContext(NamedTuple):
    """What every tab's ``render`` is given.

    Attributes:
        config: the session's config (fitted to its data and weights).
        analysis: its analysis, as the header drew it.
        pins: the pinned runs.
        environment: what the workers' JAX offers (GPUs, strategies).
        data_source: the sidebar's data source, or None for synthetic inputs.
        compute: the calls into the workers.
    """

    config: RunConfig
    analysis: Analysis
    pins: Pins
    environment: Environment
    data_source: dict[str, Any] | None
    compute: Compute

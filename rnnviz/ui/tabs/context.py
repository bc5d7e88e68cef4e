"""What a tab is given: :class:`TabContext`, the one argument of every tab's ``requests``
and ``render``, built once per page run by app.py (in idle time and in tests, a copy with
another ``get``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from rnnviz.serve.requests import Request, describe, job_key, route

if TYPE_CHECKING:
    import pandas as pd

    from rnnviz.base.analysis import Analysis
    from rnnviz.base.environment import Environment
    from rnnviz.base.training import OverTraining, Training
    from rnnviz.config import RunConfig
    from rnnviz.serve.requests import TrainProgress


class TrainingCalls(NamedTuple):
    """The Training tab's calls: one run lives in its worker from ``start`` until it is done.

    Attributes:
        key: the run's key (its config, data and settings).
        start: make (and compile) the run in its worker; returns its key.
        advance: train about that many seconds, then say how far it got.
        stop: stop the run after its current chunk.
        keep: admit a finished run's files to the trained folder (raises ``FolderFull``) and
            keep its curves.
        finished: a finished run's curves, from memory or its files; None when not trained.
        over_training: λ₁ … λ_k at every kept step of a saved run.
    """

    key: Callable[[RunConfig, dict[str, Any]], str]
    start: Callable[[RunConfig, dict[str, Any]], str]
    advance: Callable[[str, float], TrainProgress]
    stop: Callable[[str], None]
    keep: Callable[[str, TrainProgress], None]
    finished: Callable[[str], list[Training] | None]
    over_training: Callable[[str, int], OverTraining]


class Pins(NamedTuple):
    """The session's pinned runs: every one's analysis in pinning order, those other than the
    current run (drawn over it), and pin the current run, unpin the i-th, unpin all."""

    analyses: tuple[Analysis, ...]
    overlays: tuple[Analysis, ...]
    add: Callable[[], None]
    remove: Callable[[int], None]
    clear: Callable[[], None]


class TabContext(NamedTuple):
    """What every tab's ``requests`` and ``render`` are given.

    Attributes:
        config: the session's config (fitted to its data and weights).
        analysis: its analysis, as the header drew it.
        environment: what the workers' JAX offers (GPUs, strategies).
        data_source: the sidebar's data source, or None for synthetic inputs.
        weights_source: the chosen trained weights (``{"path": …, "step": …}``), or None.
        state: the widget values by key (``st.session_state``; in idle time, a copy).
        get: a request's answer, computed in a worker and cached (in idle time: only what is
            there, else :class:`~rnnviz.serve.requests.Missing`).
        has: whether a request's answer is there (nothing is computed).
        recorded: the recorded measurements, and the lines that did not read.
        idle: whether this is idle time planning the tabs not opened (nothing is drawn).
    """

    config: RunConfig
    analysis: Analysis
    pins: Pins
    environment: Environment
    data_source: dict[str, Any] | None
    weights_source: dict[str, Any] | None
    state: Mapping[str, Any]
    get: Callable[[Request], Any]
    has: Callable[[Request], bool]
    training: TrainingCalls
    recorded: Callable[[], tuple[pd.DataFrame, list[tuple[str, str]]]]
    idle: bool = False

    def request(
        self,
        job: Callable[..., Any],
        *args: Any,
        what: str,
        cfg: RunConfig | None = None,
        timed: bool = False,
        cached: bool = True,
        weights: dict[str, Any] | None = None,
    ) -> Request:
        """A request for ``job(key, *args)``, the key being ``cfg`` (default: the session's) on
        the session's data and trained weights (or ``weights``): the one way a tab names a
        computation on a config. ``what`` says it in words (the config is added); ``timed``:
        its answer holds run times; ``cached`` False: asked each time."""
        cfg = self.config if cfg is None else cfg
        key = job_key(cfg, self.data_source, weights or self.weights_source)
        return Request(
            job, (key, *args), route(cfg, self.data_source), f"{what} ({describe(cfg)})", timed, cached
        )

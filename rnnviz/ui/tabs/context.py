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
    from rnnviz.base.models import ModelAnalysis
    from rnnviz.base.training import OverTraining, Training
    from rnnviz.config import RunConfig
    from rnnviz.serve.requests import ModelSummary, TrainProgress


class TrainingCalls(NamedTuple):
    """The Training tab's calls (:mod:`rnnviz.ui.calls`): a run, keyed by its config, data and
    settings, lives in its worker from ``start`` (made and compiled) until it is done; ``advance``
    trains about that many seconds; ``keep`` admits a finished run's files to the trained folder
    (raises ``FolderFull``); ``finished`` is its curves, None when not trained; ``over_training``
    is λ₁ … λ_k at every kept step of a saved run."""

    key: Callable[[RunConfig, dict[str, Any]], str]
    start: Callable[[RunConfig, dict[str, Any]], str]
    advance: Callable[[str, float], TrainProgress]
    stop: Callable[[str], None]
    keep: Callable[[str, TrainProgress], None]
    finished: Callable[[str], list[Training] | None]
    over_training: Callable[[str, int], OverTraining]


class Pins(NamedTuple):
    """The session's pinned runs of the page's kind (bare cells, or reference blocks): each
    one's job key and analysis (a block's: its summary and analysis) in pinning order, those
    other than the current run (drawn over it), and pin the current run, unpin the i-th, unpin
    all of this kind."""

    keys: tuple[str, ...]
    analyses: tuple[Any, ...]
    overlays: tuple[Any, ...]
    add: Callable[[], None]
    remove: Callable[[int], None]
    clear: Callable[[], None]


class BlockContext(NamedTuple):
    """What a tab's ``render_block`` is given on a reference block's page: the config, what its
    model is, its analysis, a request's answer (computed in a worker and cached), the Training
    tab's calls, the pinned blocks and the widget values.

    Attributes:
        key: the config's job key (:func:`~rnnviz.serve.requests.job_key`).
        data_source: the sidebar's data set (its first B training sequences are what the views
            read, and the Training tab may train on it), or None.
        weights_source: the sidebar's trained run at a kept step, whose tensors the key names
            (every view but the Phase diagram's fresh draws reads them), or None.
        state: the widget values by key (``st.session_state``; in idle time, a copy).
        has: whether a request's answer is there; idle: True in idle time (as in
            :class:`TabContext`).
    """

    config: RunConfig
    key: str
    summary: ModelSummary
    analysis: ModelAnalysis
    get: Callable[[Request], Any]
    training: TrainingCalls
    pins: Pins
    data_source: dict[str, Any] | None = None
    weights_source: dict[str, Any] | None = None
    state: Mapping[str, Any] = {}
    has: Callable[[Request], bool] = lambda request: False
    idle: bool = False

    def request(self, job: Callable[..., Any], *args: Any, what: str, timed: bool = False) -> Request:
        """A request for ``job(key, *args)`` of the page's block on the session's data, routed
        as its analysis: the one way a block view names a computation. ``what`` says it in
        words (the config is added); ``timed``: its answer holds run times."""
        where = route(self.config, self.data_source)
        return Request(job, (self.key, *args), where, f"{what} ({describe(self.config)})", timed)


class TabContext(NamedTuple):
    """What every tab's ``requests`` and ``render`` are given: the session's config (fitted to
    its data and weights), its analysis as the header drew it, the sidebar's data source and
    trained weights (None: synthetic inputs, the seed's weights), the recorded measurements.

    Attributes:
        state: the widget values by key (``st.session_state``; in idle time, a copy).
        get: a request's answer, computed in a worker and cached (in idle time: only what is
            there, else :class:`~rnnviz.serve.requests.Missing`).
        has: whether a request's answer is there (nothing is computed).
        idle: True in idle time, which plans the tabs not opened (nothing is drawn).
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

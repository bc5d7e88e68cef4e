"""What a tab is given: :class:`TabContext`, the one argument of every tab's ``requests``
and ``render``.

app.py builds it once per rerun, after the analysis. A tab names each computation as a
:class:`~rnnviz.serve.requests.Request` (:meth:`TabContext.request`) and asks ``ctx.get`` for
its answer: on the page that is the client (:func:`rnnviz.ui.calls.get`: a worker, through
the shared result cache); in idle time a look-up of what is there; in a test, fakes, and no
worker process starts.
"""

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
    """What every tab's ``requests`` and ``render`` are given.

    Attributes:
        config: the session's config (fitted to its data and weights).
        analysis: its analysis, as the header drew it.
        pins: the pinned runs.
        environment: what the workers' JAX offers (GPUs, strategies).
        data_source: the sidebar's data source, or None for synthetic inputs.
        weights_source: the chosen trained weights (``{"path": …, "step": …}``), or None.
        state: the session's widget values by key (``st.session_state``; in idle time, a
          copy taken at the end of the page's run).
        get: ``(request) -> answer``: the answer to a :class:`~rnnviz.serve.requests.Request`,
          computed in a worker and cached (in idle time: only what is there, else
          :class:`~rnnviz.serve.requests.Missing`).
        has: ``(request) -> bool``: whether its answer is there (nothing is computed).
        training: the Training tab's calls (its run lives in a worker between them).
        recorded: ``() -> (DataFrame, skipped)``: the recorded measurements, and the lines
          that did not read.
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
        """A request for ``job(key, *args)``, the key being ``cfg`` (default: the session's)
        on the session's data and its trained weights (or ``weights``): the one way a tab
        names a computation on a config.

        Args:
          job: a job of :mod:`rnnviz.serve.jobs` whose first argument is a job key.
          *args: its other arguments.
          what: the computation in words (the config is added).
          cfg: the config (default: the session's).
          timed: its answer holds run times.
          cached: its answer is kept (False: asked each time).
          weights: other trained weights than the session's.
        """
        cfg = self.config if cfg is None else cfg
        key = job_key(cfg, self.data_source, weights or self.weights_source)
        return Request(
            job, (key, *args), route(cfg, self.data_source), f"{what} ({describe(cfg)})", timed, cached
        )

"""The dashboard's client of its worker processes (``docs/dev/serving.md``): :func:`get`
answers any :class:`~rnnviz.serve.requests.Request` through the result cache all sessions
share; idle time prepares the tabs not open and the shapes a visitor may switch to."""

from __future__ import annotations

import json
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import streamlit as st

from rnnviz.base.presets import PRESETS
from rnnviz.config import ConfigError, RunConfig, static_config
from rnnviz.serve import trained_runs
from rnnviz.serve.idle import Preparer
from rnnviz.serve.requests import Request, TrainProgress, config_of, describe, job_key, jobs, route
from rnnviz.serve.settings import NEIGHBOURS_QUIET_S, settings
from rnnviz.serve.worker import InlinePool, ResultCache, WorkerPool, make_pool
from rnnviz.tables.cells import cell_names

if TYPE_CHECKING:
    from rnnviz.base.environment import Environment


@st.cache_resource(show_spinner=False)
def pool() -> WorkerPool | InlinePool:
    """The worker processes (``RNNVIZ_WORKERS``), shared by every session."""
    made = make_pool(setup="rnnviz.serve.jobs:setup", idle_setup="rnnviz.serve.jobs:setup_idle")
    made.start()  # every worker sets up (and compiles the default analysis) from the start
    return made


@st.cache_resource(show_spinner=False)
def results() -> ResultCache:
    """Finished results by request key, shared by every session, held to ``result_cache_mb``."""
    return ResultCache(max_bytes=settings().result_cache_mb * 2**20)


def get(request: Request, quiet: bool = False) -> Any:
    """The answer to ``request``: kept, or computed in a worker; while it runs a line says so
    (and lets Streamlit stop this run when the user changes something), unless ``quiet``
    (then it is neither said nor kept)."""
    note = None if quiet else st.empty()
    limit = pool().time_limit_s

    def waiting(elapsed: float, running: bool) -> None:
        if elapsed >= 1.0:
            busy = None if running else pool().doing(request.route)
            doing = "computing" if running else f"waiting for its worker, busy with {busy or 'another job'}"
            note.caption(f"⏳ {request.what}: {doing}… {elapsed:.0f} s (stopped at {limit:g} s)")

    def call() -> Any:
        return pool().call(
            request.job,
            *request.args,
            route=request.route,
            what=request.what,
            on_wait=None if quiet else waiting,
            spill=request.spill,
        )

    if quiet:
        return call()
    try:
        return results().get(request.key, call, on_wait=waiting) if request.cached else call()
    finally:
        note.empty()


def has(request: Request) -> bool:
    """Whether the answer to ``request`` is kept (nothing is computed)."""
    return request.cached and results().peek(request.key)


@st.cache_resource(show_spinner=False)
def preparer() -> Preparer:
    """Idle time for what the tabs not opened will ask for, kept in :func:`results`."""
    return Preparer(pool(), results(), "preparing the other tabs", own=True)


@st.cache_resource(show_spinner=False)
def neighbour_preparer() -> Preparer:
    """Idle time, once visitors have done nothing for :data:`NEIGHBOURS_QUIET_S` and in turns
    with :func:`preparer`, for :func:`prepare_neighbours`."""
    return Preparer(
        pool(),
        None,
        "compiling a shape a visitor may switch to",
        turns_with=preparer(),
        max_wanted=2 * (len(cell_names()) * settings().workers + len(preset_shapes())),
        quiet_s=NEIGHBOURS_QUIET_S,
    )


def prepare_tabs(ctx: Any, tabs: tuple, declared: str = "requests") -> None:
    """Have idle time compute what ``tabs`` (those not open) declare (``declared``: the name of
    their function of a context, ``block_requests`` on a block's page), in their order, at the
    page's context and the session's widget values as they are now."""
    if isinstance(pool(), InlinePool):
        return
    cache = results()  # here, in the page's run: the plan runs in the preparer's thread
    state = dict(st.session_state)

    def kept(request: Request) -> bool:
        return request.cached and cache.peek(request.key)

    def plan(look_up) -> list[Request]:  # look_up: a kept answer, or Missing
        idle = ctx._replace(state=state, get=look_up, has=kept, idle=True)
        return [r for tab in tabs for r in getattr(tab, declared)(idle)]

    preparer().want(route(ctx.config, ctx.data_source), plan)


def neighbours(cfg: RunConfig) -> tuple[RunConfig, ...]:
    """The configs one switch of the cell selector away from ``cfg`` (those over a budget left out)."""
    out = []
    for name in cell_names():
        if name != cfg.cell:
            with suppress(ConfigError):
                out.append(cfg.with_cell(name))
    return tuple(out)


def preset_shapes(cfg: RunConfig | None = None) -> tuple[RunConfig, ...]:
    """The first teaching preset of each shape, in their order, without ``cfg``'s shape."""
    first: dict = {}
    for preset in PRESETS.values():
        first.setdefault(static_config(preset.config()), preset.config())
    return tuple(c for shape, c in first.items() if cfg is None or shape != static_config(cfg))


def neighbour_wishes(
    cfg: RunConfig, routes_to_each, key_of, presets: bool = True
) -> list[tuple[str, str, bool]]:
    """``(route, key, run)`` of every shape :func:`prepare_neighbours` prepares, first served
    first: every other cell at ``cfg``'s shape, compiled in every worker
    (``routes_to_each(route)``, its own first); then, with ``presets``, the teaching presets'
    other shapes, run once in their route's worker. ``key_of(cfg)`` is the job's key."""
    wishes = []
    for other in neighbours(static_config(cfg)):
        key = key_of(other)
        wishes += [(to, key, False) for to in routes_to_each(session_route(other))]
    if presets:
        taken = {to for to, _, _ in wishes}  # a preset at another cell's shape: compiled already
        wishes += [
            (session_route(p), key_of(p), True) for p in preset_shapes(cfg) if session_route(p) not in taken
        ]
    return wishes


def prepare_neighbours(cfg: RunConfig) -> None:
    """Have idle time compile :func:`neighbour_wishes` of this page (:func:`rnnviz.serve.jobs.compile_shape`),
    on the session's data set (the presets only without one), never its trained weights."""
    if isinstance(pool(), InlinePool):
        return
    # the presets load synthetic inputs' lessons; a session on a data set keeps its data
    presets = st.session_state.get("data_source") is None
    wishes = neighbour_wishes(
        cfg, pool().routes_to_each, lambda other: session_key(other, trained=False), presets=presets
    )
    for to, key, run in reversed(wishes):  # the newest plan is served first: the list's order
        request = Request(jobs.compile_shape, (key, run), to, "compiling a shape a visitor may switch to")
        neighbour_preparer().want(to, lambda look_up, request=request: [request])


def session_key(cfg: RunConfig, *, trained: bool = True) -> str:
    """A job's key on the session's data and (unless not ``trained``) its trained weights."""
    state = st.session_state
    return job_key(cfg, state.get("data_source"), state.get("weights_source") if trained else None)


def session_route(cfg: RunConfig) -> str:
    """The route of ``cfg`` on the session's data (:func:`rnnviz.serve.requests.route`)."""
    return route(cfg, st.session_state.get("data_source"))


#: ``RunConfig.block`` → the job analysing a key and the one saying whether it is compiled.
ANALYSIS_JOBS = {
    "cell": (jobs.analysis, jobs.is_compiled),
    "reference": (jobs.block_analysis, jobs.block_is_compiled),
}


def analysis_request(key: str) -> Request:
    """The analysis of a job's key, on its data and weights (:func:`rnnviz.serve.jobs.analysis`;
    a reference block's, :func:`rnnviz.serve.jobs.block_analysis`)."""
    cfg = config_of(key)
    what = f"the analysis of {describe(cfg)}"
    return Request(ANALYSIS_JOBS[cfg.block][0], (key,), route(cfg, json.loads(key).get("data")), what, True)


def compiled_request(request: Request) -> Request:
    """Whether the analysis ``request`` asks for is compiled in its worker (never cached)."""
    job = ANALYSIS_JOBS[config_of(request.args[0]).block][1]
    return Request(job, request.args, request.route, "a cache look-up", cached=False)


def block_width(cfg: RunConfig, params: int) -> tuple[int, int]:
    """The width H at which ``cfg``'s reference block comes nearest ``params`` parameters, and
    its count (:func:`rnnviz.serve.jobs.block_width`; its :class:`ConfigError` where none comes
    within 5 %), kept for every session: asked by the fields the count depends on alone."""
    args = (cfg.cell, cfg.layers, cfg.input_size, params)
    what = f"choosing the {cfg.cell} block's width for {params:,} parameters"
    return get(Request(jobs.block_width, args, "sizing", what))


def this_machine() -> Environment:
    """The workers' :class:`~rnnviz.base.environment.Environment` (GPUs, strategies), once."""
    return get(Request(jobs.environment, (), "environment", "looking at this machine's devices"))


def check_run(path: str) -> object:
    """The :class:`~rnnviz.serve.requests.RunSummary` of the saved run at ``path``; a bad file
    raises its :class:`~rnnviz.studies.training.RunFileError`."""
    return get(Request(jobs.run_summary, (path,), "runs", "reading the run file"))


# ---- training: a run lives in its worker between calls, never cached -------------------


def train_key(cfg: RunConfig, settings: dict) -> str:
    """A training run's key: its config and data (never the session's trained weights) and settings."""
    return json.dumps({"config": json.loads(session_key(cfg, trained=False)), **settings}, sort_keys=True)


def _run_call(key: str, job, *args: Any, what: str) -> Any:
    return get(Request(job, (key, *args), key, what, cached=False, spill=False), quiet=True)


def train_start(cfg: RunConfig, settings: dict) -> str:
    """Make (and compile) a training run in its worker; its key."""
    key = train_key(cfg, settings)
    _run_call(
        key, jobs.train_start, session_key(cfg, trained=False), settings, what="compiling the training run"
    )
    return key


def train_advance(key: str, budget_s: float) -> TrainProgress:
    """Train the run about ``budget_s`` seconds more (whole chunks); how far it got."""
    return _run_call(key, jobs.train_advance, budget_s, what="training")


def keep_trained(key: str, progress: TrainProgress) -> None:
    """Admit a finished training call's run files to the trained folder's caps, and keep its
    curves where :func:`trained` finds them.

    Raises:
      FolderFull: the folder's caps, with every run in it open in some session (the curves
        are kept all the same).
    """
    try:
        if progress.paths:
            trained_runs.admit_runs([Path(p) for p in progress.paths])
    finally:  # under the files that stayed (a refused one is removed): what trained() looks for
        kept = tuple(str(p) for p in trained_runs.kept_paths(key))
        results().put(("trained_curves", key, kept), progress.records)


def trained(key: str) -> list | None:
    """A finished training call's runs (curves, no weights), kept or reopened by a worker; None
    when it has not been trained or its files are gone."""
    paths = tuple(str(p) for p in trained_runs.kept_paths(key))
    if not paths and not results().peek(("trained_curves", key, paths)):  # (kept unwritten: a full disk)
        return None
    return get(Request(jobs.trained_curves, (key, paths), key, "reopening the trained runs")) or None


def train_stop(key: str) -> None:
    """Stop the run after its current chunk."""
    _run_call(key, jobs.train_stop, what="stopping the training run")


def over_training(path: str, k: int):
    """λ₁ … λ_k and the step-Jacobian spectrum at every kept step of the saved run at ``path``."""
    return get(Request(jobs.over_training_job, (path, k), path, f"λ over training ({Path(path).name})"))

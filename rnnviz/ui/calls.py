"""The dashboard's calls into its worker processes (:mod:`rnnviz.serve.worker`): one pool and one
result cache shared by every session, the key every job carries (config, data source,
trained weights), and one function per computation a tab asks for (app.py binds them into
the tabs' :class:`~rnnviz.ui.tabs.context.Compute`).

No JAX maths here: each function names a job in :mod:`rnnviz.serve.jobs` and waits for it,
with a line on the page while it runs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import streamlit as st

from rnnviz.analysis import Analysis
from rnnviz.base.presets import PAGES, PRESETS
from rnnviz.config import ConfigError, RunConfig
from rnnviz.engine.environment import Environment, environment
from rnnviz.engine.prepare import static_config
from rnnviz.serve import budget, jobs, trained_runs
from rnnviz.serve.idle import Preparer
from rnnviz.serve.settings import settings
from rnnviz.serve.worker import ComputationTimeout, InlinePool, ResultCache, WorkerDied, WorkerPool, make_pool
from rnnviz.studies.jacobians import Jacobians, carry_dim
from rnnviz.studies.lyapunov import Lyapunov
from rnnviz.tables.cells import cell_names


@st.cache_resource(show_spinner=False)
def pool() -> WorkerPool | InlinePool:
    """The worker processes, shared by every session: no JAX computation runs in this process,
    so a stuck one can be killed without taking a session with it (``RNNVIZ_WORKERS``)."""
    made = make_pool(setup="rnnviz.serve.jobs:setup")
    made.start()  # every worker sets up (and compiles the default analysis) from the start
    return made


@st.cache_resource(show_spinner=False)
def results() -> ResultCache:
    """Finished results by (computation, arguments), shared by every session, held to the
    server's ``result_cache_mb`` (``RNNVIZ_RESULT_CACHE_MB``) of their pickled size."""
    return ResultCache(max_bytes=settings().result_cache_mb * 2**20)


def keep_ahead(cache: ResultCache, shape: str, step: jobs.AheadStep) -> None:
    """What an idle-time step answered, kept where the tabs look: the shape's quiet timing
    (what :func:`cost` asks for: any worker may then answer a tab), the strategies compiled
    at it, and each answer computed ahead under its call's own key (:func:`compute`)."""
    if step.quiet_s is not None:
        cache.put(("quiet_run_s", shape), step.quiet_s)
    if step.strategies:
        cache.put(("compiled_strategies", shape), step.strategies)
    for key, answer in step.results:
        cache.put(key, answer)


@st.cache_resource(show_spinner=False)
def preparer() -> Preparer:
    """The workers' idle time, shared by every session: timing each page's shape quietly,
    then compiling and computing what the tabs not opened yet will ask for
    (:func:`rnnviz.serve.jobs.prepare_ahead`)."""
    cache = results()  # here, in a script run: the answers come in a thread of the pool's
    return Preparer(
        pool(),
        jobs.prepare_ahead,
        "preparing the other tabs",
        more=lambda s: s.more,
        keep=lambda shape, step: keep_ahead(cache, shape, step),
    )


#: Seconds without a page run or a visitor's job before idle time compiles the other cells:
#: a compile takes 1–2.6 s, and one under way when a visitor's call needs its worker (the
#: other busy with a heavy view) is waited for; a visitor reading this long may go on.
NEIGHBOURS_QUIET_S = 8.0


@st.cache_resource(show_spinner=False)
def neighbour_preparer() -> Preparer:
    """The workers' idle time once the visitors have done nothing for
    :data:`NEIGHBOURS_QUIET_S` (:meth:`~rnnviz.serve.worker.WorkerPool.quiet_for_s`), taking
    turns with :func:`preparer` (a job each): the shapes a visitor may switch to next,
    compiled in every worker (:func:`prepare_neighbours`). One wish per shape and worker,
    enough for two pages' cells."""
    return Preparer(
        pool(),
        jobs.compile_shape,
        "compiling a shape a visitor may switch to",
        turns_with=preparer(),
        max_wanted=2 * (len(cell_names()) * settings().workers + len(preset_shapes())),
        quiet_s=NEIGHBOURS_QUIET_S,
    )


def neighbours(cfg: RunConfig) -> tuple[RunConfig, ...]:
    """The configs one switch of the cell selector away from ``cfg``
    (:meth:`~rnnviz.config.RunConfig.with_cell`), in the selector's order; those over a
    budget at this shape are left out (the page would refuse them before compiling)."""
    out = []
    for name in cell_names():
        if name == cfg.cell:
            continue
        try:
            out.append(cfg.with_cell(name))
        except ConfigError:
            continue
    return tuple(out)


def preset_shapes(cfg: RunConfig | None = None) -> tuple[RunConfig, ...]:
    """The teaching presets' configs (:data:`~rnnviz.base.presets.PRESETS`), one per shape
    (its static config) in the presets' order, without ``cfg``'s shape: what a class is most
    likely to open next, known before anyone asks. The first preset of each shape stands
    for the others, whose values the same executables serve."""
    seen = set() if cfg is None else {static_config(cfg)}
    out = []
    for preset in PRESETS.values():
        shape = static_config(preset.config())
        if shape not in seen:
            seen.add(shape)
            out.append(preset.config())
    return tuple(out)


def neighbour_wishes(
    cfg: RunConfig, routes_to_each, key_of, presets: bool = True
) -> list[tuple[str, str, bool]]:
    """``(route, key, run)`` of every shape :func:`prepare_neighbours` has prepared
    (:func:`rnnviz.serve.jobs.compile_shape`), first served first: every other cell at ``cfg``'s
    shape (:func:`neighbours`) in every worker, the one its route goes to first
    (``routes_to_each(route)``), compiled; then the teaching presets' other shapes
    (:func:`preset_shapes`), each in the worker its route goes to (the others read its
    executables from the compilation cache when a call spills), run once so that their log
    pass is compiled where they need it (those at one of the cells' shapes left out); none
    unless ``presets``. ``key_of(cfg)`` is the job's key (:func:`job_key` on a page).

    >>> cfg = RunConfig(cell="lstm")
    >>> wishes = neighbour_wishes(cfg, lambda r: [r, r + "+"], lambda c: c.cell)
    >>> [key for _, key, _ in wishes[:4]], len(wishes) == 2 * len(neighbours(cfg)) + len(preset_shapes(cfg))
    (['simple', 'simple', 'gru', 'gru'], True)
    >>> {run for _, _, run in wishes[: 2 * len(neighbours(cfg))]}, {run for _, _, run in wishes[-3:]}
    ({False}, {True})
    """
    wishes = []
    for other in neighbours(static_config(cfg)):
        key = key_of(other)
        # every worker, its own first: a page's call goes to another when its own is busy
        # (spill), and the others read the executable from the compilation cache
        wishes += [(to, key, False) for to in routes_to_each(route(other))]
    if presets:
        taken = {to for to, _, _ in wishes}  # a preset at another cell's shape: compiled already
        wishes += [(route(p), key_of(p), True) for p in preset_shapes(cfg) if route(p) not in taken]
    return wishes


def prepare_neighbours(cfg: RunConfig) -> None:
    """Have the workers' idle time, in turns with this page's tabs (:func:`prepare_tabs`),
    compile the analysis of every other cell at this page's shape, in every worker (the
    route's own first, the others then read it from the compilation cache): switching
    cells, the dashboard's most common change of shape, then finds its executables in
    whichever worker takes the call, instead of compiling them before the first chart; then
    the teaching presets' shapes (:func:`neighbour_wishes`). On the session's data set, never
    its trained weights (executables do not depend on them); the presets only without a data
    set. Nothing without worker processes."""
    if isinstance(pool(), InlinePool):
        return
    # the presets load synthetic inputs' lessons; a session on a data set keeps its data
    presets = st.session_state.get("data_source") is None
    wishes = neighbour_wishes(
        cfg, pool().routes_to_each, lambda other: job_key(other, trained=False), presets=presets
    )
    for to, key, run in reversed(wishes):  # the newest wish is served first: the list's order
        neighbour_preparer().want(to, key, run)


def prepare_tabs(cfg: RunConfig, a: Analysis) -> None:
    """Have the workers' idle time prepare this config's other tabs
    (:func:`rnnviz.serve.jobs.prepare_ahead`): the shape's quiet timing (the budgets' unit,
    :func:`cost`), then tab by tab what each will compute within its budget, as the session
    has set it: each strategy's analysis compiled and timed (the Strategies and Devices
    tabs' rows), the Phase diagram's sweeps, the Jacobians tab's two passes at the session's
    k and example. A tab over its budget waits for the user's "Run anyway", and a worker's
    idle time is better left idle then. The worker plans them
    (:func:`~rnnviz.serve.budget.ahead`), with its quiet timing. Nothing without worker
    processes."""
    if isinstance(pool(), InlinePool):
        return
    state = st.session_state
    asks = jobs.TabAsks(
        k=min(state.get("jac_k", 8), carry_dim(cfg), 64),  # as the tab's controls clamp it
        example=min(state.get("jac_example", 0), (cfg.batch_size or 1) - 1),
        lo=float(state.get("phase_lo", 0.5)),
        hi=float(state.get("phase_hi", 1.5)),
        gains=int(state.get("phase_n", budget.PHASE_GAINS)),
        seeds=int(state.get("phase_seeds", budget.PHASE_SEEDS)),
    )
    log_pass = a.log10_source != "float32"
    key = json.dumps([job_key(cfg), asks])  # a wish per values and settings; one per shape at a time
    preparer().want(route(cfg), job_key(cfg), budget.Cost.of(a), log_pass, asks, key=key)


def cost(a: Analysis) -> budget.Cost:
    """What one analysis of ``a``'s shape costs here, the unit of every tab's budget: its
    compile, and the faster of the page's run and the worker's quiet timing of the shape
    (:func:`rnnviz.serve.jobs.quiet_run_s`; kept here when idle time took it, else timed now,
    once per shape)."""
    page = budget.Cost.of(a)
    shape = route(a.config)
    try:
        quiet = compute(f"timing {describe(a.config)}", shape, jobs.quiet_run_s, shape)
    except (ConfigError, ComputationTimeout, WorkerDied):  # the page's own timing is an upper bound
        return page
    return page._replace(run_s=min(page.run_s, quiet))


def job_key(cfg: RunConfig, weights: dict | None = None, *, trained: bool = True) -> str:
    """A job's key: the config, and the session's data source and trained weights when it
    has them (so every tab and pin carries the data and weights it was computed on);
    ``weights`` names other weights than the session's; ``trained=False`` leaves them out
    (training always starts from the seed's initialisation)."""
    values = cfg.to_dict()
    source = st.session_state.get("data_source")
    if source is not None:
        values["data"] = source
    weights = weights or st.session_state.get("weights_source")
    if weights is not None and trained:
        values["weights"] = weights
    return json.dumps(values, sort_keys=True)


def route(cfg: RunConfig) -> str:
    """Calls for one shape go to one worker, whose compiled executables then serve every value
    (trained weights are values too)."""
    values = json.loads(job_key(static_config(cfg)))
    values.pop("weights", None)
    return json.dumps(values, sort_keys=True)


def describe(cfg: RunConfig) -> str:
    """A config in a few words, for the waiting line: ``"simple T=50 H=32 B=4 float32"``
    (``B=unbatched`` without a batch)."""
    return f"{cfg.cell} T={cfg.seq_len} H={cfg.hidden_size} B={cfg.batch_size or 'unbatched'} {cfg.dtype}"


def compute(what: str, route: str, fn, *args):
    """``fn(*args)`` in the route's worker, through the result cache; while it runs, a line says
    so (and gives Streamlit the chance to stop this run when the user changes something)."""
    note = st.empty()
    limit = pool().time_limit_s

    def waiting(elapsed: float, running: bool) -> None:
        if elapsed >= 1.0:
            busy = None if running else pool().doing(route)
            doing = "computing" if running else f"waiting for its worker, busy with {busy or 'another job'}"
            note.caption(f"⏳ {what}: {doing}… {elapsed:.0f} s (stopped at {limit:g} s)")

    # a pure job: when its worker is busy with another session's, any free worker may take it
    call = lambda: pool().call(fn, *args, route=route, what=what, on_wait=waiting, spill=True)  # noqa: E731
    try:
        return results().get((fn.__name__,) + args, call, on_wait=waiting)
    finally:
        note.empty()


def this_machine() -> Environment:
    """The workers' :class:`~rnnviz.engine.environment.Environment` (GPUs, strategies), once."""
    return compute("looking at this machine's devices", "environment", environment)


def analysis(cfg_json: str) -> Analysis:
    """The :class:`~rnnviz.analysis.Analysis` of a job's key, on its data and weights
    (:func:`rnnviz.serve.jobs.analysis`)."""
    cfg = jobs.config_of(cfg_json)
    return compute(f"the analysis of {describe(cfg)}", route(cfg), jobs.analysis, cfg_json)


def strategies(cfg_json: str, repeats: int, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Every strategy's (or those in ``only``) cost and agreement on a job's key, at most
    ``repeats`` timed runs each: one row per strategy (:func:`rnnviz.serve.jobs.strategies_table`)."""
    cfg = jobs.config_of(cfg_json)
    which = "every strategy" if only is None else ", ".join(only)
    return compute(
        f"{which} on {describe(cfg)} (at most {repeats} runs each)",
        route(cfg),
        jobs.strategies_table,
        cfg_json,
        repeats,
        only,
    )


def availability(cfg: RunConfig) -> tuple[tuple[str, ...], dict[str, str]]:
    """``(available, {strategy: why not})`` for ``cfg``'s cell, as its worker's JAX sees it
    (:func:`rnnviz.serve.jobs.strategy_availability`)."""
    return compute("which strategies apply", route(cfg), jobs.strategy_availability, job_key(cfg))


def compiled_strategies(cfg: RunConfig) -> tuple[str, ...]:
    """The strategies whose analysis of ``cfg`` is compiled (:func:`rnnviz.serve.jobs.compiled_strategies`):
    those the worker asked has, with those idle time compiled at the shape
    (:func:`preparer`): asked each time, never cached (idle time adds to it). With the
    route's worker busy, a free one answers; the tab's runs then go there too, and read
    what idle time compiled from the compilation cache (quicker than compiling it)."""
    asked = pool().call(
        jobs.compiled_strategies, job_key(cfg), route=route(cfg), what="a cache look-up", spill=True
    )
    cache, kept = results(), ("compiled_strategies", route(cfg))
    ahead = cache.get(kept, tuple) if cache.peek(kept) else ()
    return tuple(s for s in availability(cfg)[0] if s in asked or s in ahead)


def scaling(cfg_json: str, lens: tuple[int, ...]) -> pd.DataFrame:
    """Time and memory of every available strategy at each sequence length of ``lens``, on
    synthetic inputs: rows ``strategy, seq_len, compile_s, run_s, peak_bytes``
    (:func:`rnnviz.serve.jobs.scaling_table`)."""
    cfg = jobs.config_of(cfg_json)
    return compute(
        f"every strategy at T ∈ {list(lens)} ({cfg.cell})", route(cfg), jobs.scaling_table, cfg_json, lens
    )


def devices_live(cfg_json: str, repeats: int, only: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The analysis of a job's key on every device the worker sees, under every available
    strategy (or those in ``only``), at most ``repeats`` timed runs each
    (:func:`rnnviz.serve.jobs.devices_live`)."""
    cfg = jobs.config_of(cfg_json)
    which = "" if only is None else f" ({', '.join(only)})"
    return compute(
        f"live runs on every device of {describe(cfg)}{which}",
        route(cfg),
        jobs.devices_live,
        cfg_json,
        repeats,
        only,
    )


def phase(
    cfg_json: str, lo: float, hi: float, n: int, seeds: int, part: int = 0, parts: int = 1
) -> tuple[pd.DataFrame, float | None]:
    """The phase diagram: gradient norms over ``n`` gains × ``seeds`` seeds, or part ``part``
    of ``parts`` of them (:func:`rnnviz.serve.jobs.phase`).

    Args:
      cfg_json: a job's key (:func:`job_key`).
      lo: the smallest recurrent gain.
      hi: the largest recurrent gain.
      n: how many gains, evenly spaced from ``lo`` to ``hi`` (at least 2).
      seeds: how many seeds, from the config's seed on.

    Returns:
      ``(frame, critical gain)``: the sweep's tidy frame, and the simple cell's closed-form
      critical gain (None for other cells and for trained weights).
    """
    cfg = jobs.config_of(cfg_json)
    which = "" if parts == 1 else f", part {part + 1} of {parts}"
    return compute(
        f"the phase diagram ({n} gains × {seeds} seeds{which}, {describe(cfg)})",
        route(cfg),
        jobs.phase,
        cfg_json,
        lo,
        hi,
        n,
        seeds,
        part,
        parts,
    )


def lyapunov_phase(
    cfg_json: str, lo: float, hi: float, n: int, seeds: int
) -> tuple[pd.DataFrame, float | None]:
    """λ₁ over ``n`` gains × ``seeds`` seeds (:func:`rnnviz.serve.jobs.lyapunov_phase_table`).

    Args:
      cfg_json: a job's key (:func:`job_key`).
      lo: the smallest recurrent gain.
      hi: the largest recurrent gain.
      n: how many gains, evenly spaced from ``lo`` to ``hi`` (at least 2).
      seeds: how many seeds, from the config's seed on.

    Returns:
      ``(frame, edge)``: per gain ``lyapunov`` (the mean λ₁) and ``lo``/``hi`` (its range over
      seeds), and the gain where the mean crosses 0 (None when it does not in the range).
    """
    cfg = jobs.config_of(cfg_json)
    return compute(
        f"λ₁ over {n} gains × {seeds} seeds ({describe(cfg)})",
        route(cfg),
        jobs.lyapunov_phase_table,
        cfg_json,
        lo,
        hi,
        n,
        seeds,
    )


def lyapunov(cfg_json: str, k: int) -> Lyapunov:
    """The ``k`` leading Lyapunov exponents of a job's key, without the decay fit
    (:func:`rnnviz.serve.jobs.lyapunov`)."""
    cfg = jobs.config_of(cfg_json)
    return compute(f"{k} Lyapunov exponents of {describe(cfg)}", route(cfg), jobs.lyapunov, cfg_json, k)


def jacobians(cfg_json: str, k: int, example: int, steps: int, part: int = 0, parts: int = 1) -> Jacobians:
    """The top ``k`` singular values of each step Jacobian J_t = ∂carry_t/∂carry_{t−1} of the
    batch's example ``example``, at up to ``steps`` steps; the ``part``-th of ``parts``
    interleaved parts of them (:func:`rnnviz.serve.jobs.jacobians`)."""
    cfg = jobs.config_of(cfg_json)
    which = f", part {part + 1} of {parts}" if parts > 1 else ""
    return compute(
        f"the step Jacobians' top {k} singular values ({describe(cfg)}{which})",
        route(cfg),
        jobs.jacobians,
        cfg_json,
        k,
        example,
        steps,
        part,
        parts,
    )


def connectivity(cfg: RunConfig, run: str | None, index: int, step: int | None, measure: str | None):
    """The connectivity at the session's weights (``run`` None) or at the last kept step of a
    saved run (its cell and sizes)."""
    weights = None
    if run is not None:
        run_cfg = trained_runs.run_config(run)
        if run_cfg is None:
            raise ConfigError("run", Path(run).name, "a readable saved run")
        # the run's own network: its cell and sizes, and the gain and forget bias it was trained at
        own = (*trained_runs.FOLLOWS_RUN, "recurrent_gain", "forget_bias")
        cfg = cfg.replace(**{f: getattr(run_cfg, f) for f in own})
        steps = trained_runs.saved_runs().get(run, {}).get("kept_steps") or [0]
        weights = {"path": run, "step": steps[-1], "_version": Path(run).stat().st_mtime_ns}
    key = job_key(cfg, weights)
    return compute(
        f"the connectivity of sequence {index} ({cfg.cell})",
        route(cfg),
        jobs.connectivity_job,
        key,
        index,
        step,
        measure,
    )


def comparable_runs(cfg: RunConfig) -> dict[str, str]:
    """Saved runs trained on the session's data (same source and input size), other than
    the one whose weights are chosen: the Memory tab's side-by-side choices."""
    source = st.session_state.get("data_source") or {}
    chosen = (st.session_state.get("weights_source") or {}).get("path")
    out = {}
    for path, header in trained_runs.saved_runs().items():
        trained_on = header.get("data_source") or {}
        if path == chosen or trained_on.get("name") != source.get("name"):
            continue
        if header["config"].get("input_size") == cfg.input_size:
            out[path] = trained_runs.run_label(header)
    return out


def train_key(cfg: RunConfig, settings: dict) -> str:
    """A training run's key: the config and data it trains on (never the session's trained
    weights: training starts from the seed's initialisation) and its settings."""
    return json.dumps({"config": json.loads(job_key(cfg, trained=False)), **settings}, sort_keys=True)


def train_start(cfg: RunConfig, settings: dict) -> str:
    """Make (and compile) a training run in its worker; its key."""
    key = train_key(cfg, settings)
    pool().call(
        jobs.train_start,
        key,
        job_key(cfg, trained=False),
        settings,
        route=key,
        what="compiling the training run",
    )
    return key


def train_advance(key: str, budget_s: float) -> jobs.TrainProgress:
    """Train the run about ``budget_s`` seconds more (whole chunks); how far it got."""
    return pool().call(jobs.train_advance, key, budget_s, route=key, what="training")


def keep_trained(key: str, progress: jobs.TrainProgress) -> None:
    """A finished training call: its run files (written by its worker) admitted to the trained
    folder's caps, and its curves kept in the result cache, where :func:`trained` finds them.

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
    """A finished training call's runs (curves, no weights), or None when it has not been
    trained or its files are gone. They are kept in the result cache, held to its bytes, and
    reopened from their run files by a worker once dropped from it (or after a restart)."""
    paths = tuple(str(p) for p in trained_runs.kept_paths(key))
    if not paths and not results().peek(("trained_curves", key, paths)):  # (kept unwritten: a full disk)
        return None
    return compute("reopening the trained runs", key, jobs.trained_curves, key, paths) or None


def train_stop(key: str) -> None:
    """Stop the run after its current chunk."""
    pool().call(jobs.train_stop, key, route=key, what="stopping the training run")


def over_training(path: str, k: int):
    """λ₁ … λ_k and the step-Jacobian spectrum at every kept step of the saved run at ``path``,
    in that run's worker: an :class:`~rnnviz.studies.over_training.OverTraining`
    (:func:`rnnviz.serve.jobs.over_training_job`)."""
    return compute(f"λ over training ({Path(path).name})", path, jobs.over_training_job, path, k)


def teaching_page(name: str) -> str:
    """The teaching page ``name`` as HTML text (:func:`rnnviz.serve.jobs.teaching_page`), computed
    in a worker once and kept in the result cache for every session."""
    points = math.prod(len(v) for v in PAGES[name].over.values())
    return compute(
        f"the page for your class ({points} configurations)", "teaching pages", jobs.teaching_page, name
    )


def _model_route(path: str) -> str:
    """Calls for one checkpoint go to one worker, which then holds it loaded."""
    return f"model {path}"


def model_summary(path: str) -> jobs.ModelSummary:
    """What the checkpoint at ``path`` is, loaded in a worker (:func:`rnnviz.serve.jobs.model_summary`);
    one that cannot be used raises its :class:`~rnnviz.checkpoints.CheckpointError`."""
    stamp = jobs.model_stamp(path)
    return compute(f"loading {Path(path).name}", _model_route(path), jobs.model_summary, path, stamp)


def model_tokens(path: str, text: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``text`` as the checkpoint's token ids and their text (:func:`rnnviz.serve.jobs.model_tokens`)."""
    stamp = jobs.model_stamp(path)
    return compute(
        f"tokenising the text for {Path(path).name}", _model_route(path), jobs.model_tokens, path, stamp, text
    )


def model_analysis(path: str, inputs_json: str, position: int | None):
    """The gradient through every layer and step of the checkpoint at ``path`` on the inputs
    ``inputs_json`` asks for (:func:`rnnviz.serve.jobs.model_analysis`)."""
    stamp = jobs.model_stamp(path)
    return compute(
        f"the gradient through every layer of {Path(path).name}",
        _model_route(path),
        jobs.model_analysis,
        path,
        stamp,
        inputs_json,
        position,
    )


def check_run(path: str) -> object:
    """The :class:`~rnnviz.serve.jobs.RunSummary` of the saved run at ``path``; a bad file raises
    its :class:`~rnnviz.studies.training.RunFileError` (:func:`rnnviz.serve.jobs.run_summary`)."""
    return compute("reading the run file", "runs", jobs.run_summary, path)

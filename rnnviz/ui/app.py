"""The dashboard's page: ``rnnviz app`` (or ``streamlit run app.py``) runs :func:`main` on
every rerun: the sidebar → a RunConfig → its analysis and header → the open tab, every
computation through the client :mod:`rnnviz.ui.calls`."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from rnnviz.base.analysis import Analysis
from rnnviz.base.measurements import load_dir
from rnnviz.config import ConfigError, RunConfig
from rnnviz.dataset import runs_dir
from rnnviz.dataset.fit import fitted_config
from rnnviz.frames.costs import records_frame
from rnnviz.serve import folders, heap
from rnnviz.serve.requests import Request, config_of, describe, jobs, model_words
from rnnviz.serve.settings import SettingsError, settings
from rnnviz.serve.trained_runs import FOLLOWS_RUN, run_config
from rnnviz.serve.worker import ComputationTimeout, WorkerDied
from rnnviz.ui import calls, page, tabs
from rnnviz.ui.sidebar import configuration, data, weights
from rnnviz.ui.tabs.context import BlockContext, Pins, TabContext, TrainingCalls

SHIPPED_RUNS = Path(__file__).resolve().parent.parent / "data" / "runs"
log = logging.getLogger("rnnviz.app")


def with_weights(cfg: RunConfig, source: dict | None) -> RunConfig:
    """``cfg`` with the cell, sizes and dtype of the chosen trained run (its weights fit only
    those); a run that cannot be used is one sidebar message, and the weights stay initial."""
    st.session_state["weights_source"] = None
    if source is None:
        return cfg
    run_cfg = run_config(source["path"])
    if run_cfg is None:
        st.sidebar.error(f"{Path(source['path']).name} cannot be read; the weights stay initial.")
        return cfg
    if st.session_state.get("data_source") is not None and run_cfg.input_size != cfg.input_size:
        st.sidebar.error(
            f"The run reads {run_cfg.input_size} input features and these data have {cfg.input_size}: "
            "choose the data it was trained on (or synthetic inputs). The weights stay initial."
        )
        return cfg
    out = cfg.replace(**{f: getattr(run_cfg, f) for f in FOLLOWS_RUN})  # may raise: nothing set yet
    st.session_state["weights_source"] = source
    what = f"{model_words(run_cfg)}, H={run_cfg.hidden_size}"
    notes = [f"the cell, its sizes and dtype follow the trained run ({what})"]
    if cfg.recurrent_gain != run_cfg.recurrent_gain:
        notes.append(
            f"the gain {cfg.recurrent_gain:g} scales its trained recurrence by "
            f"{cfg.recurrent_gain / run_cfg.recurrent_gain:.3g} (as trained at {run_cfg.recurrent_gain:g})"
        )
    st.sidebar.caption("; ".join(notes) + ".")
    return out


def with_data(cfg: RunConfig, source: dict | None) -> RunConfig:
    """``cfg`` fitted to the data source (its T, I and loss placement), loaded in a worker and
    previewed; a source that cannot be used is one sidebar message, and the inputs stay synthetic."""
    st.session_state["data_source"] = None
    if source is None:
        return cfg
    name = Path(source["name"]).name  # a built-in's name, or the uploaded file's
    request = Request(jobs.data_preview, (json.dumps(source, sort_keys=True),), "data", f"loading {name}")
    try:
        preview = calls.get(request)
    except ConfigError as err:  # DataError: the file and what is wrong
        st.sidebar.error(f"{err} The inputs stay synthetic.")
        return cfg
    except (ComputationTimeout, WorkerDied) as err:  # its worker, not the data: nothing judged
        st.sidebar.error(
            f"{name} was not loaded: {err}; it is loaded again on the page's next run. "
            "The inputs stay synthetic."
        )
        return cfg
    data.draw_preview(preview)
    fitted = fitted_config(cfg, preview.seq_len, preview.input_size, preview.kind)
    st.session_state["data_source"] = source
    if (fitted.seq_len, fitted.input_size) != (cfg.seq_len, cfg.input_size):
        st.sidebar.caption(f"T = {fitted.seq_len} and I = {fitted.input_size} follow the data.")
    return fitted


def runs_folders() -> tuple[str, ...]:
    """The only folders recorded runs are read from (never one a URL or a widget names): the
    shipped runs, the data folder's ``runs/`` when it exists, then ``RNNVIZ_RUNS_DIR`` when set."""
    user, local = os.environ.get("RNNVIZ_RUNS_DIR"), runs_dir().resolve()
    found = [str(SHIPPED_RUNS)] + ([str(local)] if local.is_dir() else [])
    return tuple(found + ([user] if user and Path(user).resolve() != local else []))


@st.cache_data(show_spinner=False, ttl=60)
def _recorded(folders: tuple[str, ...]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The recorded runs (``*.jsonl`` directly in ``folders``) and the lines skipped."""
    loaded = [load_dir(folder) for folder in folders]
    return records_frame([r for x in loaded for r in x.records]), [s for x in loaded for s in x.skipped]


def analysis_for(cfg: RunConfig) -> tuple[Analysis, bool]:
    """The analysis of ``cfg`` on the session's data and weights, and whether this page run
    compiled it: while it compiles, a collapsed status box says so, then goes (the header's
    compile figure then says "just now", hiding nothing)."""
    request = calls.analysis_request(calls.session_key(cfg))
    compiled = calls.compiled_request(request)
    if calls.has(request) or calls.get(compiled, quiet=True):
        return calls.get(request), False
    box = st.empty()
    with box.status(
        f"Compiling {describe(cfg)}…",
        expanded=False,
    ):
        a = calls.get(request)
    box.empty()
    return a, True


def pins_for(cfg: RunConfig) -> Pins:
    """The session's pins of ``cfg``'s kind (bare cells, or reference blocks: their keys, in
    session state, in one list) with their analyses, and the buttons' callbacks."""
    pins = st.session_state.setdefault("pins", [])
    mine = tuple(k for k in pins if config_of(k).block == cfg.block)
    analyses = tuple(calls.get(calls.analysis_request(k)) for k in mine)
    current = calls.session_key(cfg)

    def add() -> None:
        if current not in pins:
            pins.append(current)

    def remove(i: int) -> None:
        if 0 <= i < len(mine):
            pins.remove(mine[i])

    def clear() -> None:
        pins[:] = [k for k in pins if k not in mine]

    return Pins(
        keys=mine,
        analyses=analyses,
        overlays=tuple(a for a, k in zip(analyses, mine) if k != current),  # the current run is drawn anyway
        add=add,
        remove=remove,
        clear=clear,
    )


def main() -> None:
    """One run of the page: the sidebar, the config, its analysis and header, then the open tab."""
    st.set_page_config(page_title="rnnviz — gradients through time", page_icon="∇", layout="wide")
    try:
        settings()  # validated before anything uses them: one message, not a traceback per use
    except SettingsError as err:
        st.error(f"The server cannot start its computations: {err}. Whoever runs it can fix the setting.")
        return
    fresh = not st.session_state.get("_initialised")  # before this run marks the session initialised
    calls.pool().visit()  # first: idle-time work waits while this page runs
    try:
        _page()
    finally:  # every way out, an error's message included, leaves a page for the browser to draw
        calls.pool().drawn(fresh=fresh)


def _page() -> None:
    page.title()
    heap.start()  # once per process: few malloc arenas, trimmed (a server left running stays its size)
    heap.freeze_imports()  # once per process: Streamlit's collection after each run skips the imports
    _mark_in_use()
    configuration.init_from_url()
    weights.apply_pending()  # an uploaded run sets the sidebar before it is drawn
    try:
        env = calls.this_machine()
    except (ComputationTimeout, WorkerDied) as err:
        st.error(f"The computing process could not start: {err}. Reload the page to try again.")
        return
    devices = ("auto", "cpu", "gpu") if env.gpus else ("auto", "cpu")
    values, size = configuration.sidebar(env.strategies, devices, env.gpu_reason)
    source = data.source_sidebar(values.get("seq_len"))
    _mark_in_use(source)
    chosen_weights = weights.weights_sidebar(calls.check_run)
    configuration.limits_caption()
    for warning in st.session_state.get("_url_warnings", []):  # URL parameters that could not be used
        st.warning(warning)
    cfg = None
    try:
        cfg = configuration.sized(RunConfig.from_mapping(values), size, calls.block_width)
        cfg = with_weights(with_data(cfg, source), chosen_weights)
        configuration.sync_url(cfg, size)
        _mark_in_use(source)
        a, compiled_now = analysis_for(cfg)
    except ConfigError as err:
        st.error(f"This combination cannot run: {err}")
        return
    except (ComputationTimeout, WorkerDied) as err:
        st.error(stopped_message(err))
        return
    except Exception as err:  # a browser must never see a traceback
        log.exception("analysis failed for %s", cfg or values)
        st.error(f"The analysis failed ({type(err).__name__}: {err}). Try a smaller size or another dtype.")
        return
    PAGES[cfg.block](cfg, a, compiled_now, env)


#: The Training tab's calls, on a bare cell's page and a block's alike.
TRAINING = TrainingCalls(
    key=calls.train_key,
    start=calls.train_start,
    advance=calls.train_advance,
    stop=calls.train_stop,
    keep=calls.keep_trained,
    finished=calls.trained,
    over_training=calls.over_training,
)


def _cell_page(cfg: RunConfig, a: Analysis, compiled_now: bool, env) -> None:
    """A bare cell's header and tabs, then what the closed tabs and the neighbouring cells
    declare, prepared in the workers' idle time."""
    page.header(a, compiled_now)
    ctx = TabContext(
        config=cfg,
        analysis=a,
        pins=pins_for(cfg),
        environment=env,
        data_source=st.session_state.get("data_source"),
        weights_source=st.session_state.get("weights_source"),
        state=st.session_state,
        get=calls.get,
        has=calls.has,
        training=TRAINING,
        recorded=lambda: _recorded(runs_folders()),
    )
    panels = st.tabs([t.TITLE for t in tabs.TABS], key="tab", on_change="rerun", bind="query-params")
    for tab, panel in zip(tabs.TABS, panels):
        if panel.open:  # lazy: only the open tab computes
            with panel:
                _guarded(tab.TITLE, lambda tab=tab: tab.render(ctx), cfg)
    closed = tuple(t for t, panel in zip(tabs.TABS, panels) if not panel.open)
    calls.prepare_tabs(ctx, closed)  # what the other tabs declare, in the workers' idle time
    calls.prepare_neighbours(cfg)  # then the other cells at this shape


def _block_page(cfg: RunConfig, answer: tuple, compiled_now: bool, env) -> None:
    """A reference block's page: what the model is, then the open tab's view across its layers
    (``render_block``), and what the other tabs declare (``block_requests``) in idle time."""
    summary, a = answer
    data, weights = st.session_state.get("data_source"), st.session_state.get("weights_source")
    page.block_header(cfg, summary, data, weights)
    key = calls.session_key(cfg)
    pins = pins_for(cfg)
    ctx = BlockContext(cfg, key, summary, a, calls.get, TRAINING, pins, data, weights, st.session_state)
    panels = st.tabs([t.TITLE for t in tabs.TABS], key="tab", on_change="rerun", bind="query-params")
    for tab, panel in zip(tabs.TABS, panels):
        if panel.open:
            with panel:
                _guarded(tab.TITLE, lambda tab=tab: tab.render_block(ctx), cfg)
    closed = tuple(t for t, panel in zip(tabs.TABS, panels) if not panel.open)
    calls.prepare_tabs(ctx, closed, "block_requests")  # what the other tabs declare, in idle time


#: ``RunConfig.block`` → the page drawn from its analysis: one line per kind of block.
PAGES = {"cell": _cell_page, "reference": _block_page}


def _mark_in_use(source: dict | None = None) -> None:
    """Tell the folders' caps which files this session uses, so that no eviction takes them:
    its data, weights and pins', and ``source``, the data it is about to load (loading a
    large upload takes a while, and another session's upload must not evict it meanwhile)."""
    ctx = get_script_run_ctx()
    if ctx is not None:
        folders.IN_USE.judge_by(_session_active)
        paths = folders.session_paths(st.session_state) | folders.session_paths({"data_source": source})
        folders.IN_USE.mark(ctx.session_id, paths)


def _session_active(session: str) -> bool:
    try:
        return Runtime.instance().is_active_session(session)
    except Exception:  # no runtime (AppTest, a script): every session that marked counts as live
        return True


def _guarded(name: str, render: Callable[[], None], cfg: RunConfig) -> None:
    """Run one tab; its errors become plain messages in that tab, never a traceback."""
    try:
        render()
    except ConfigError as err:
        st.error(f"The {name} view cannot run this configuration: {err}")
    except (ComputationTimeout, WorkerDied) as err:
        st.error(stopped_message(err, name))
    except Exception as err:
        log.exception("%s view failed for %s", name, cfg)
        st.error(f"The {name} view failed ({type(err).__name__}: {err}).")


def stopped_message(err: Exception, view: str | None = None) -> str:
    """What the user reads when a computation was stopped or its process died: what it was,
    how long it ran, what to shrink, and that nothing of theirs is lost."""
    where = f"The {view} view: " if view else ""
    if isinstance(err, ComputationTimeout):
        head = (
            f"{where}{err.what} did not finish within {err.limit_s:g} s (stopped after "
            f"{err.elapsed_s:.0f} s); its worker process was replaced."
        )
    else:
        head = f"{where}{err}; a new worker process takes over."
    return (
        f"{head} Shrink the sequence length T, the hidden size H or the batch B (or, in the Phase "
        "diagram, the gains and seeds) and try again. Your pins, trained runs and URL are kept; other "
        "tabs and sessions are not affected."
    )

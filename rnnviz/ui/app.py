"""rnnviz dashboard, packaged: ``rnnviz app`` (or ``streamlit run app.py`` in a checkout)
runs :func:`main` on every rerun.

Sections: parameters (the sidebar's sections, :mod:`rnnviz.ui.sidebar` → RunConfig: the
data and the trained weights too), calculation (in worker processes, cached: the client
:mod:`rnnviz.ui.calls`, whose ``get`` answers the requests the tabs declare), rendering
(the header, :mod:`rnnviz.ui.page`, then every tab of :data:`rnnviz.ui.tabs.TABS`). No JAX
maths here.

Recorded runs: the ones shipped in the package (``rnnviz/data/runs``), the data folder's
(``data/runs``, where ``bench --record`` writes) and, when the operator names one, a
folder of their own (``RNNVIZ_RUNS_DIR``, or ``rnnviz app --runs-dir``) — never a folder
from a URL or a widget.
"""

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
from rnnviz.serve.requests import Request, jobs
from rnnviz.serve.settings import SettingsError, settings
from rnnviz.serve.trained_runs import FOLLOWS_RUN, run_config
from rnnviz.serve.worker import ComputationTimeout, WorkerDied
from rnnviz.ui import calls, page, tabs
from rnnviz.ui.sidebar import configuration, data, weights
from rnnviz.ui.tabs.context import Pins, TabContext, TrainingCalls

SHIPPED_RUNS = Path(__file__).resolve().parent.parent / "data" / "runs"
log = logging.getLogger("rnnviz.app")


def with_weights(cfg: RunConfig, source: dict | None) -> RunConfig:
    """``cfg`` with the cell, sizes and dtype of the chosen trained run (its weights fit only
    those); a run whose inputs do not fit the chosen data is one sidebar message, and the
    weights stay initial."""
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
    fixed = {f: getattr(run_cfg, f) for f in FOLLOWS_RUN}
    out = cfg.replace(**fixed)
    st.session_state["weights_source"] = source
    notes = [
        f"the cell, its sizes and dtype follow the trained run ({run_cfg.cell}, H={run_cfg.hidden_size})"
    ]
    if cfg.recurrent_gain != run_cfg.recurrent_gain:
        notes.append(
            f"the gain {cfg.recurrent_gain:g} scales its trained recurrence by "
            f"{cfg.recurrent_gain / run_cfg.recurrent_gain:.3g} (as trained at {run_cfg.recurrent_gain:g})"
        )
    st.sidebar.caption("; ".join(notes) + ".")
    return out


def runs_folders() -> tuple[str, ...]:
    """The shipped runs, the data folder's ``runs/`` (``bench --record`` writes there) when
    it exists, then the operator's folder (``RNNVIZ_RUNS_DIR``) when set."""
    user = os.environ.get("RNNVIZ_RUNS_DIR")
    local = runs_dir()
    return (
        (str(SHIPPED_RUNS),)
        + ((str(local.resolve()),) if local.is_dir() else ())
        + ((user,) if user and Path(user).resolve() != local.resolve() else ())
    )


@st.cache_data(show_spinner=False, ttl=60)
def _recorded(folders: tuple[str, ...]) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """Recorded runs: only ``*.jsonl`` directly in the fixed runs folders are ever read."""
    records, skipped = [], []
    for folder in folders:
        loaded = load_dir(folder)
        records += loaded.records
        skipped += loaded.skipped
    return records_frame(records), skipped


def analysis_for(cfg: RunConfig) -> tuple[Analysis, bool]:
    """The analysis of ``cfg`` on the session's data and weights (:func:`rnnviz.ui.calls.analysis_request`),
    and whether this page run compiled it.

    When it is neither cached nor compiled in its worker, a collapsed status box says it is
    compiling while it does; then the box is gone (the chart keeps its place on a projector)
    and the header's compile figure says "just now" (:func:`rnnviz.ui.page.header`): a notice
    in the line that is always there, where it hides nothing.
    """
    request = calls.analysis_request(calls.session_key(cfg))
    compiled = Request(jobs.is_compiled, request.args, request.route, "a cache look-up", cached=False)
    if calls.has(request) or calls.get(compiled, quiet=True):
        return calls.get(request), False
    box = st.empty()
    with box.status(
        f"Compiling the {cfg.cell} cell for T={cfg.seq_len}, H={cfg.hidden_size}, "
        f"B={cfg.batch_size or 'unbatched'}, {cfg.dtype}…",
        expanded=False,
    ):
        a = calls.get(request)
    box.empty()
    return a, True


def with_data(cfg: RunConfig, source: dict | None) -> RunConfig:
    """``cfg`` fitted to the data source (its T, I and loss placement), after loading it in a
    worker and drawing its preview; a source that cannot be used is one message in the
    sidebar and the inputs stay synthetic: nothing half-loaded is used."""
    st.session_state["data_source"] = None
    if source is None:
        return cfg
    source_json = json.dumps(source, sort_keys=True)
    name = Path(source["name"]).name  # a built-in's name, or the uploaded file's
    try:
        preview = calls.get(Request(jobs.data_preview, (source_json,), "data", f"loading {name}"))
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


# ---- pins: per session, stored as config JSON -------------------------------------------


def _pins() -> list[str]:
    return st.session_state.setdefault("pins", [])


def _pin(cfg_json: str) -> None:
    if cfg_json not in _pins():
        _pins().append(cfg_json)


def _unpin(i: int) -> None:
    if 0 <= i < len(_pins()):
        _pins().pop(i)


def _clear() -> None:
    _pins().clear()


# ---- rendering ----------------------------------------------------------------------------


def training_calls() -> TrainingCalls:
    """The Training tab's calls, bound to the worker that holds its run (:mod:`rnnviz.ui.calls`)."""
    return TrainingCalls(
        key=calls.train_key,
        start=calls.train_start,
        advance=calls.train_advance,
        stop=calls.train_stop,
        keep=calls.keep_trained,
        finished=calls.trained,
        over_training=calls.over_training,
    )


def pins_for(cfg: RunConfig) -> Pins:
    """The session's pins as analyses, and the buttons' callbacks."""
    keys = list(_pins())
    analyses = tuple(calls.get(calls.analysis_request(k)) for k in keys)
    current = calls.session_key(cfg)
    return Pins(
        analyses=analyses,
        overlays=tuple(a for a, k in zip(analyses, keys) if k != current),  # the current run is drawn anyway
        add=lambda: _pin(current),
        remove=_unpin,
        clear=_clear,
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
    """The page, once the settings are valid: the sidebar, the config, its analysis and
    header, then the open tab (errors become messages on it)."""
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
    values = configuration.sidebar(env.strategies, devices, env.gpu_reason)
    source = data.source_sidebar(values.get("seq_len"))
    _mark_in_use(source)
    chosen_weights = weights.weights_sidebar(calls.check_run)
    configuration.limits_caption()

    page.url_warnings(st.session_state.get("_url_warnings", []))
    try:
        cfg = configuration.config_from_widgets(values)
        cfg = with_data(cfg, source)
        cfg = with_weights(cfg, chosen_weights)
    except ConfigError as err:
        st.error(f"This combination cannot run: {err}")
        return
    except (ComputationTimeout, WorkerDied) as err:
        st.error(stopped_message(err))
        return
    configuration.sync_url(cfg)
    _mark_in_use(source)
    try:
        a, compiled_now = analysis_for(cfg)
    except ConfigError as err:
        st.error(f"This combination cannot run: {err}")
        return
    except (ComputationTimeout, WorkerDied) as err:
        st.error(stopped_message(err))
        return
    except Exception as err:  # a browser must never see a traceback
        log.exception("analysis failed for %s", cfg)
        st.error(f"The analysis failed ({type(err).__name__}: {err}). Try a smaller size or another dtype.")
        return
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
        training=training_calls(),
        recorded=lambda: _recorded(runs_folders()),
    )
    shown = tabs.TABS
    panels = st.tabs([t.TITLE for t in shown], key="tab", on_change="rerun", bind="query-params")
    for tab, panel in zip(shown, panels):
        if panel.open:  # lazy: only the open tab computes
            with panel:
                _guarded(tab.TITLE, lambda tab=tab: tab.render(ctx), cfg)
    closed = tuple(t for t, panel in zip(shown, panels) if not panel.open)
    calls.prepare_tabs(ctx, closed)  # what the other tabs declare, in the workers' idle time
    calls.prepare_neighbours(cfg)  # then the other cells at this shape


def _mark_in_use(source: dict | None = None) -> None:
    """Tell the folders' caps which files this session uses (its data, weights and pins', and
    ``source``, the data it is about to load: loading a large upload takes a while, and
    another session's upload must not evict it meanwhile), so that no eviction takes them."""
    ctx = get_script_run_ctx()
    if ctx is not None:
        folders.IN_USE.judge_by(_session_active)
        paths = folders.session_paths(st.session_state) | folders.session_paths({"data_source": source})
        folders.IN_USE.mark(ctx.session_id, paths)


def _session_active(session: str) -> bool:
    """Whether Streamlit's runtime still has the session ``session`` (with no runtime, in
    AppTest or a script, every session that marked counts as live)."""
    try:
        return Runtime.instance().is_active_session(session)
    except Exception:
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
            f"{where}{err.what} did not finish within {err.limit_s:g} s (stopped after {err.elapsed_s:.0f} "
            "s); "
            "its worker process was replaced."
        )
    else:
        head = f"{where}{err}; a new worker process takes over."
    return (
        f"{head} Shrink the sequence length T, the hidden size H or the batch B (or, in the Phase diagram, "
        "the gains and "
        "seeds) and try again. Your pins, trained runs and URL are kept; other tabs and sessions are not "
        "affected."
    )

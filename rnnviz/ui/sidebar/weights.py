"""The sidebar's *Weights* section: the seed's initial weights, or a trained run
(:mod:`rnnviz.serve.trained_runs`) at one of its kept steps, which every tab then analyses."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from rnnviz.config import ConfigError, RunConfig
from rnnviz.serve.folders import FolderFull
from rnnviz.serve.trained_runs import FOLLOWS_RUN, header, keep_run, run_label, runs_folder, saved_runs
from rnnviz.serve.worker import ComputationTimeout, WorkerDied
from rnnviz.ui.sidebar.configuration import BY_WIDTH, KEY, SIZE_KEY, offer

INITIAL = "initial"


def follow_run(path: str | None) -> None:
    """The sidebar takes the run's config and data (before its widgets are drawn)."""
    found = header(path) if path not in (None, INITIAL) else None
    if found is None:
        return
    try:
        cfg = RunConfig.from_mapping({k: v for k, v in found["config"].items() if v is not None})
    except ConfigError:
        return
    for name in (*FOLLOWS_RUN, "recurrent_gain", "forget_bias", "seq_len"):
        st.session_state[KEY(name)] = getattr(cfg, name)
    st.session_state[SIZE_KEY] = BY_WIDTH  # the run's width, not one a count would pick
    source = found.get("data_source")
    if source is not None and source["name"] in ("digits", "text"):
        st.session_state["data_choice"] = source["name"]
        for option in ("order", "corpus"):
            if option in source["options"]:
                st.session_state[f"data_{option}"] = source["options"][option]


def use_run(path: str) -> None:
    """Choose a run in the Weights section and set the sidebar to it (before it is drawn)."""
    st.session_state["weights_choice"] = path
    follow_run(path)


def apply_pending() -> None:
    """Before the sidebar is drawn: choose a run an upload left pending."""
    path = st.session_state.pop("_weights_pending", None)
    if path is not None:
        use_run(path)


def _upload(sb, check: Callable[[str], Any]) -> None:
    """An uploaded run file, kept by the hash of its bytes once a worker has read it whole."""
    f = sb.file_uploader("Open a saved run (.rnnviz)", type=["rnnviz"], key="weights_upload")
    if f is None:
        return
    data = f.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:16]
    refused = st.session_state.setdefault("_weights_refused", {})
    if digest in refused:  # the uploader still holds a file already refused: say so, check nothing
        sb.error(refused[digest])
        return
    folder = runs_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"upload-{digest}.rnnviz"
    if st.session_state.get("_weights_uploaded") == str(path):
        return
    # A name of its own: two sessions uploading the same bytes must not share (and delete) one file.
    tmp = folder / f".{path.name}.{secrets.token_hex(4)}.part"
    tmp.write_bytes(data)
    try:
        check(str(tmp))
    except ConfigError as err:  # RunFileError: the file and what is wrong
        tmp.unlink(missing_ok=True)
        refused[digest] = str(err).replace(tmp.name, f.name)
        sb.error(refused[digest])
        return
    except (ComputationTimeout, WorkerDied) as err:  # the check's worker, not the file: not remembered
        tmp.unlink(missing_ok=True)
        sb.error(f"{f.name} was not checked: {err}; it is checked again on the page's next run.")
        return
    tmp.replace(path)
    try:
        keep_run(path)
    except FolderFull as err:
        sb.error(f"{f.name} is not kept: {err}.")
        return
    st.session_state["_weights_uploaded"] = str(path)
    st.session_state["_weights_pending"] = str(path)  # the sidebar is drawn already: next run
    st.rerun()


def weights_sidebar(check: Callable[[str], Any]) -> dict[str, Any] | None:
    """Draw the Weights section; return its source (``{"path", "step", "_version"}``) or None
    for the seed's initial weights. ``check(path)`` reads a run file whole (in a worker)."""
    sb = st.sidebar
    sb.subheader("Weights")
    runs = saved_runs()
    with sb.expander("Open a saved run", expanded=False):
        _upload(st, check)
    options = [INITIAL, *runs]
    offer("weights_choice", options, INITIAL)
    choice = sb.selectbox(
        "Weights",
        options,
        key="weights_choice",
        format_func=lambda p: "initial (from the seed)" if p == INITIAL else run_label(runs[p]),
        on_change=lambda: follow_run(st.session_state.get("weights_choice")),
        help="a trained run (the Training tab keeps every run it trains, for as long as this machine "
        "keeps its temporary folder): every tab then analyses its weights at the chosen step",
    )
    if choice == INITIAL:
        return None
    steps = runs[choice]["kept_steps"]
    step_key = f"weights_step_{hashlib.sha256(choice.encode()).hexdigest()[:8]}"
    offer(step_key, steps, steps[-1])
    step = sb.select_slider("at training step", steps, key=step_key, help="the steps whose weights were kept")
    sb.download_button(
        "Download this run (.rnnviz)",
        Path(choice).read_bytes,  # read when clicked, not on every rerun (a run is MBs)
        file_name=f"{runs[choice].get('label', 'run').replace(' ', '_')}.rnnviz",
        key="weights_download",
    )
    return {"path": choice, "step": int(step), "_version": Path(choice).stat().st_mtime_ns}

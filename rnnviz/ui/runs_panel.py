"""The sidebar's *Weights* choice: the seed's initial weights, or a trained run at one of its
kept steps, which every tab then analyses.

Finished training runs are written as ``.rnnviz`` files (:meth:`rnnviz.Training.save`) to
a folder under the system's temporary folder, so they outlive page reloads and sessions
for as long as the machine keeps it; an uploaded run file is written there too, once, by
the hash of its bytes (after a worker has read it whole: a changed, cut or foreign file is
one message and is not kept). The sidebar lists the runs from their headers alone; the
worker processes load the weights (:func:`rnnviz.ui.jobs.saved_run`). Choosing a run sets
the sidebar to its cell, sizes, dtype, gain and data.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamlit as st

from rnnviz.config import ConfigError, RunConfig
from rnnviz.studies.training import Training
from rnnviz.studies.training.runfile import RunFileError, read_header
from rnnviz.ui import state

INITIAL = "initial"
#: The fields a trained run fixes (its weights only fit these); the rest stay the sidebar's.
FOLLOWS_RUN = ("cell", "activation", "hidden_size", "input_size", "dtype", "carry_init", "recurrent_init")


def runs_folder() -> Path:
    """Where the dashboard keeps trained runs (``RNNVIZ_TRAINED_DIR`` names another)."""
    return Path(os.environ.get("RNNVIZ_TRAINED_DIR") or Path(tempfile.gettempdir()) / "rnnviz-trained")


def save_runs(records: list[Training], key: str) -> list[Path]:
    """Write each run of one training call once (named by its settings and seed)."""
    folder = runs_folder()
    folder.mkdir(parents=True, exist_ok=True)
    stem = hashlib.sha256(key.encode()).hexdigest()[:12]
    paths = []
    for r in records:
        path = folder / f"{stem}-seed{r.config.seed}.rnnviz"
        if not path.exists():
            r.save(path)
        paths.append(path)
    return paths


def _header(path: str) -> dict[str, Any] | None:
    try:
        return read_header(path)
    except RunFileError:
        return None


def saved_runs() -> dict[str, dict[str, Any]]:
    """``{path: header}`` of the runs in the folder, newest first (unreadable files left out)."""
    folder = runs_folder()
    if not folder.is_dir():
        return {}
    files = sorted(folder.glob("*.rnnviz"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
    headers = {str(p): _header(str(p)) for p in files}
    return {p: h for p, h in headers.items() if h is not None and h.get("kept_steps")}


def run_label(header: dict[str, Any]) -> str:
    cfg = header["config"]
    return (
        f"{header.get('label', cfg['cell'])} · H={cfg['hidden_size']} seed {cfg['seed']} · "
        f"{header['kept_steps'][-1]} steps · loss {header.get('final_loss', float('nan')):.3g}"
    )


def follow_run(path: str | None) -> None:
    """The sidebar takes the run's config and data (before its widgets are drawn)."""
    header = _header(path) if path not in (None, INITIAL) else None
    if header is None:
        return
    try:
        cfg = RunConfig.from_mapping({k: v for k, v in header["config"].items() if v is not None})
    except ConfigError:
        return
    values = {f: getattr(cfg, f) for f in (*FOLLOWS_RUN, "recurrent_gain", "forget_bias", "seq_len")}
    for name, value in values.items():
        st.session_state[state.KEY(name)] = value
    source = header.get("data_source")
    if source is not None and source["name"] in ("digits", "text"):
        st.session_state["data_choice"] = source["name"]
        options = source["options"]
        if "order" in options:
            st.session_state["data_order"] = options["order"]
        if "corpus" in options:
            st.session_state["data_corpus"] = options["corpus"]


def use_run(path: str) -> None:
    """Choose a run in the Weights choice and set the sidebar to it (a callback, or before
    the sidebar is drawn)."""
    st.session_state["weights_choice"] = path
    follow_run(path)


def apply_pending() -> None:
    """Before the sidebar is drawn: choose a run an upload left pending."""
    path = st.session_state.pop("_weights_pending", None)
    if path is not None:
        use_run(path)


def run_config(path: str) -> RunConfig | None:
    """A saved run's config from its header (None when it cannot be read)."""
    header = _header(path)
    if header is None:
        return None
    try:
        return RunConfig.from_mapping({k: v for k, v in header["config"].items() if v is not None})
    except ConfigError:
        return None


def _upload(sb, check: Callable[[str], Any]) -> None:
    """An uploaded run file: checked whole in a worker, kept only if it reads."""
    f = sb.file_uploader("Open a saved run (.rnnviz)", type=["rnnviz"], key="weights_upload")
    if f is None:
        return
    data = f.getvalue()
    folder = runs_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"upload-{hashlib.sha256(data).hexdigest()[:16]}.rnnviz"
    if st.session_state.get("_weights_uploaded") == str(path):
        return
    tmp = folder / f".{path.name}.part"
    tmp.write_bytes(data)
    try:
        check(str(tmp))
    except ConfigError as err:  # RunFileError: the file and what is wrong
        tmp.unlink(missing_ok=True)
        sb.error(str(err).replace(tmp.name, f.name))
        return
    tmp.replace(path)
    st.session_state["_weights_uploaded"] = str(path)
    st.session_state["_weights_pending"] = str(path)  # the sidebar is drawn already: next run
    st.rerun()


def weights_sidebar(check: Callable[[str], Any]) -> dict[str, Any] | None:
    """Draw the Weights choice; return its source (``{"path", "step", "_version"}``) or None
    for the seed's initial weights. ``check(path)`` reads a run file whole (in a worker)."""
    sb = st.sidebar
    sb.subheader("Weights")
    runs = saved_runs()
    with sb.expander("Open a saved run", expanded=False):
        _upload(st, check)
    options = [INITIAL, *runs]
    if st.session_state.get("weights_choice") not in options:
        st.session_state["weights_choice"] = INITIAL
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
    if st.session_state.get(step_key) not in steps:
        st.session_state[step_key] = steps[-1]
    step = sb.select_slider("at training step", steps, key=step_key, help="the steps whose weights were kept")
    sb.download_button(
        "Download this run (.rnnviz)",
        Path(choice).read_bytes,  # read when clicked, not on every rerun (a run is MBs)
        file_name=f"{runs[choice].get('label', 'run').replace(' ', '_')}.rnnviz",
        key="weights_download",
    )
    return {"path": choice, "step": int(step), "_version": Path(choice).stat().st_mtime_ns}


__all__ = [
    "FOLLOWS_RUN",
    "INITIAL",
    "apply_pending",
    "follow_run",
    "run_config",
    "runs_folder",
    "save_runs",
    "saved_runs",
    "use_run",
    "weights_sidebar",
]

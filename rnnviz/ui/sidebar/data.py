"""The sidebar's *Data* section: synthetic inputs, a built-in data set, a file in the data
folder or an upload, chosen as a *source* (``{"name": "digits", "order": "rows"}``) that the
workers load (the server never parses a data file); and the preview of one of its sequences."""

from __future__ import annotations

import hashlib
import re
import secrets
from pathlib import Path
from typing import Any

import streamlit as st

from rnnviz.charts import preview_figure
from rnnviz.dataset import data_dir, data_files
from rnnviz.dataset.describe import Preview
from rnnviz.dataset.files import EXTENSIONS
from rnnviz.serve.folders import FolderFull, admit, touch
from rnnviz.serve.settings import settings
from rnnviz.ui.sidebar.configuration import offer

SYNTHETIC = "synthetic"
UPLOAD = "upload a file…"
ORDERS = ("pixels", "rows", "permuted")
CORPORA = ("prose", "code")
URL_PARAM = "data"
#: A text's one-hot windows in the dashboard stay under this many bytes (fewer windows at large T).
TEXT_BYTES = 32 * 2**20
LABELS = {
    SYNTHETIC: "synthetic (the Inputs setting)",
    "digits": "digits (8×8 handwritten, as sequences)",
    "text": "text (characters, predict the next)",
    UPLOAD: UPLOAD,
}


def choices() -> list[str]:
    """The Data section's choices, in order."""
    return [SYNTHETIC, "digits", "text", *data_files(), UPLOAD]


def _init_from_url() -> None:
    """On a session's first run the choice starts from ``?data=`` (an unknown one is ignored)."""
    if st.session_state.get("_data_initialised"):
        return
    st.session_state["_data_initialised"] = True
    name, _, option = st.query_params.get(URL_PARAM, "").partition(":")
    if name not in choices() or name == UPLOAD:
        return
    st.session_state["data_choice"] = name
    if name == "digits" and option in ORDERS:
        st.session_state["data_order"] = option
    if name == "text" and option in CORPORA:
        st.session_state["data_corpus"] = option


def upload_limit_bytes() -> int:
    """The largest upload Streamlit accepts, in bytes (``server.maxUploadSize`` is in MiB)."""
    return int(st.get_option("server.maxUploadSize")) * 2**20


def save_upload(name: str, data: bytes) -> Path:
    """Write an upload once, by the hash of its bytes, keeping its (sanitised) name, and hold
    the uploads folder to its caps.

    Raises:
      FolderFull: the upload is over the folder's cap, or open sessions use all of it.
    """
    limits = settings()
    uploads = Path(limits.uploads_dir)
    folder = uploads / hashlib.sha256(data).hexdigest()[:16]
    path = folder / (re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name).lstrip(".") or "upload")
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        # a name of its own: two sessions uploading the same bytes must not share one half-written file
        tmp = folder / f".{path.name}.{secrets.token_hex(4)}.part"
        tmp.write_bytes(data)
        tmp.replace(path)  # never a half-written file under the real name
        admit(uploads, path, limits.uploads_mb * 2**20, limits.uploads_files, "the upload folder")
    touch(path)
    return path


def source_sidebar(seq_len: Any) -> dict[str, Any] | None:
    """Draw the Data section; return its source, or None for synthetic inputs. Built-ins and the
    data folder's files are in the URL (``?data=digits:rows``); an upload is not."""
    _init_from_url()
    sb = st.sidebar
    sb.subheader("Data")
    options = choices()
    offer("data_choice", options, SYNTHETIC)
    choice = sb.selectbox(
        "Inputs from",
        options,
        key="data_choice",
        format_func=lambda c: LABELS.get(c, f"{c} (data/)"),
        help="synthetic: drawn from the Inputs setting. A data set: B of its training sequences drawn by "
        "the seed, its task loss through a readout drawn by the seed; T and I follow the data. Files "
        f"dropped in {data_dir()}/ are listed here.",
    )
    source: dict[str, Any] | None = None
    token: str | None = None
    if choice == "digits":
        order = sb.radio("Pixel order", ORDERS, key="data_order", horizontal=True)
        source, token = {"name": "digits", "order": order}, f"digits:{order}"
    elif choice == "text":
        corpus = sb.radio("Corpus", CORPORA, key="data_corpus", horizontal=True)
        t = max(2, int(seq_len or 2))
        windows = max(8, min(1024, TEXT_BYTES // (t * 97 * 4)))
        source = {"name": "text", "corpus": corpus, "seq_len": t, "max_sequences": windows}
        token = f"text:{corpus}"
    elif choice == UPLOAD:
        source = _upload(sb)
    elif choice != SYNTHETIC:
        path = (data_dir() / choice).resolve()
        # "_version": a file replaced under the same name is a new source (results are cached by source)
        version = path.stat().st_mtime_ns if path.exists() else 0
        source, token = {"name": str(path), "_version": version}, choice
    if token is None:
        if URL_PARAM in st.query_params:
            del st.query_params[URL_PARAM]
    elif st.query_params.get(URL_PARAM) != token:
        st.query_params[URL_PARAM] = token
    return source


def _upload(sb) -> dict[str, Any] | None:
    limit = upload_limit_bytes()
    f = sb.file_uploader(
        "A data file",
        type=[e.lstrip(".") for e in EXTENSIONS],
        key="data_upload",
        help=f"{', '.join(EXTENSIONS)} up to {limit // 2**20} MB: inputs [N, T, I] with labels or targets "
        "(see data/README.md)",
    )
    if f is None:
        sb.caption("No file yet: the inputs stay synthetic.")
        return None
    if f.size > limit:  # Streamlit refuses these itself; a second line of defence
        sb.error(f"{f.name}: {f.size / 2**20:.0f} MB is over the {limit // 2**20} MB upload limit.")
        return None
    try:
        return {"name": str(save_upload(f.name, f.getvalue()))}
    except FolderFull as err:
        sb.error(f"{f.name} is not kept: {err}.")
        return None


def draw_preview(p: Preview) -> None:
    """The data set in words and one sequence drawn, in the sidebar."""
    sb = st.sidebar
    sb.caption(p.description.replace("\n", "  \n"))
    if p.text is not None:
        sb.markdown(f"**{p.title}**")
        sb.code(p.text, language=None, wrap_lines=True)
    else:
        sb.plotly_chart(preview_figure(p), key="data_preview", config={"displayModeBar": False})

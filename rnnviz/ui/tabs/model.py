"""The Your model tab: a team's own checkpoint (a Hugging Face folder of Mamba, Mamba-2,
FalconMamba, RecurrentGemma, Qwen3-Next or xLSTM, or a PyTorch ``nn.LSTM``/``nn.GRU`` state dict) from the
data folder, an upload or the built-in demo, and the gradient through every layer and step of
it on the user's text (:func:`rnnviz.studies.models.analyze_model`). The server only lists,
judges and writes files (:mod:`rnnviz.serve.model_files`); the workers load the model and
compute. Every refusal, of a file, its inputs or their size, is one message in the tab.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import streamlit as st

from rnnviz.checkpoints import CheckpointError
from rnnviz.config import ConfigError
from rnnviz.dataset import data_dir
from rnnviz.serve import budget, model_files
from rnnviz.serve.folders import FolderFull, stamp
from rnnviz.serve.requests import Request, jobs
from rnnviz.ui.sidebar.data import save_upload, upload_limit_bytes
from rnnviz.ui.tabs.common import model_charts, prose
from rnnviz.ui.tabs.context import TabContext

if TYPE_CHECKING:
    from rnnviz.serve.requests import ModelSummary

TITLE = "Your model"
DEMO = "demo"
UPLOAD = "upload"
#: What the text box holds until the user writes their own.
DEFAULT_TEXT = "The cat sat on the mat, and the dog lay down beside the cat."
#: The longest text read (its tokens are then held to the server's model work limit).
MAX_TEXT_CHARS = 4000
#: Token ids drawn from the seed when the ids box is empty.
DRAWN_IDS = 32
#: A stack's sequence length T: the slider's range and where it starts.
MIN_STEPS, MAX_STEPS, DEFAULT_STEPS = 2, 2000, 100


class Asked(NamedTuple):
    """What the model will read: the job's inputs (:func:`rnnviz.serve.jobs.model_inputs`), B and
    T, and P, the positions whose prediction has a loss (T − 1 for a language model)."""

    inputs_json: str
    batch: int
    steps: int
    positions: int


def _request(job: Any, path: str, *args: Any, what: str) -> Request:
    """``job(path, stamp, *args)``, once per version of the checkpoint's files, in the one
    worker that then holds it loaded."""
    return Request(job, (path, stamp(path), *args), f"model {path}", f"{what} {Path(path).name}")


def _summary(path: str) -> Request:
    """What the checkpoint is; one that cannot be used raises its :class:`CheckpointError`."""
    return _request(jobs.model_summary, path, what="loading")


def _analysis(path: str, asked: Asked, position: int | None) -> Request:
    return _request(
        jobs.model_analysis, path, asked.inputs_json, position, what="the gradient through every layer of"
    )


def requests(ctx: TabContext) -> list[Request]:
    """The chosen checkpoint's summary and, at the widgets' values (their defaults until the
    tab is opened: the demo), its gradients."""
    path = ctx.state.get("model_source") or _default_path(ctx.state.get("model_choice"))
    if path is None:
        return []
    summary = ctx.get(_summary(path))
    values = {k: ctx.state[k] for k in ("model_steps", "model_text", "model_ids") if k in ctx.state}
    asked = _asked(ctx, summary, path, **values)
    if asked.steps < 2 or budget.model_refusal(summary.n_params, asked.batch, asked.steps) is not None:
        return [_summary(path)]
    return [
        _summary(path),
        _analysis(path, asked, _read_position(ctx.state.get("model_position"), asked.positions)),
    ]


def render(ctx: TabContext) -> None:
    """The model chosen, its inputs and the prediction read, then its gradients drawn."""
    c_model, c_inputs, c_position = st.columns([2, 3, 1])
    try:
        with c_model:
            path = _chosen_model()
        st.session_state["model_source"] = None if path is None else str(path)  # not evicted while open
        if path is None:
            st.markdown(prose(__name__, "intro"))
            return
        summary = ctx.get(_summary(str(path)))
        with c_inputs:
            asked = _inputs(ctx, summary, str(path))
        if asked is None:
            return
        with c_position:
            position = _position(asked.positions)
        refusal = budget.model_refusal(summary.n_params, asked.batch, asked.steps)
        if refusal is not None:
            st.info(refusal)
            return
        a = ctx.get(_analysis(str(path), asked, position))
    except (ConfigError, FolderFull) as err:  # CheckpointError: the file, what is wrong, what is allowed
        st.error(str(err))
        return
    model_charts(a, summary)
    st.markdown(prose(__name__, "intro"))


def _choice(chosen: str | None) -> tuple[list[str], str]:
    """The model choices (the data folder's models, the demo, an upload) and the one in effect."""
    options = [*model_files.data_models(), DEMO, UPLOAD]
    return options, chosen if chosen in options else options[0]


def _default_path(chosen: str | None) -> str | None:
    """The checkpoint a session that has not opened the tab would see: a data folder's model or
    the demo (written once, by the hash of its bytes, as the tab writes it); None for an upload."""
    choice = _choice(chosen)[1]
    if choice == UPLOAD:
        return None
    return str(
        save_upload(model_files.DEMO_NAME, model_files.demo_bytes())
        if choice == DEMO
        else data_dir() / choice
    )


def _chosen_model() -> Path | None:
    """The model chosen: one in the data folder, the demo, or an upload (None: no file yet)."""
    options, choice = _choice(st.session_state.get("model_choice"))
    if st.session_state.get("model_choice") != choice:
        st.session_state["model_choice"] = choice
    labels = {DEMO: "a tiny demo LSTM (made here)", UPLOAD: "upload a folder archive or state dict…"}
    choice = st.selectbox(
        "Model",
        options,
        key="model_choice",
        format_func=lambda choice: labels.get(choice, f"{choice} (data/)"),
        help=prose(__name__, "choice", folder=data_dir()),
    )
    if choice == DEMO:
        return save_upload(model_files.DEMO_NAME, model_files.demo_bytes())
    return _upload() if choice == UPLOAD else data_dir() / choice


def _upload() -> Path | None:
    """An uploaded archive, extracted once judged (:func:`rnnviz.serve.model_files.keep_archive`),
    or a state dict file, kept in the upload folder."""
    limit = upload_limit_bytes()
    types = [s.lstrip(".") for s in (*model_files.ARCHIVE_SUFFIXES, ".gz", *model_files.STATE_DICT_SUFFIXES)]
    f = st.file_uploader(
        "A model",
        type=sorted(set(types)),
        key="model_upload",
        help=f"a folder archive (.zip, .tar, .tar.gz) of a Hugging Face model, or an nn.LSTM/nn.GRU state "
        f"dict (.pt, .pth, .bin, .safetensors), up to {limit // 2**20} MB",
    )
    if f is None:
        st.caption("No file yet.")
        return None
    if f.size > limit:  # Streamlit refuses these itself; a second line of defence
        raise CheckpointError(f.name, f"{f.size / 2**20:.0f} MB; allowed: at most {limit // 2**20} MB")
    try:
        if model_files.is_archive(f.name):
            return model_files.keep_archive(f.name, f.getvalue())
        if f.name.lower().endswith(model_files.STATE_DICT_SUFFIXES):
            return save_upload(f.name, f.getvalue())
    except FolderFull as err:
        raise FolderFull(f"{f.name} is not kept: {err}.") from None
    allowed = ", ".join((*model_files.ARCHIVE_SUFFIXES, *model_files.STATE_DICT_SUFFIXES))
    raise CheckpointError(f.name, f"is neither a folder archive nor a state dict; allowed: {allowed}")


def _asked(
    ctx: TabContext,
    summary: ModelSummary,
    path: str,
    model_steps: int = DEFAULT_STEPS,
    model_text: str = DEFAULT_TEXT,
    model_ids: str = "",
) -> Asked:
    """What the model reads at the inputs' widget values (named by their keys): a stack's random
    inputs of T steps, the text's tokens (with a tokenizer) or the typed ids (too few when
    ``steps`` < 2)."""
    if not summary.vocab_size:
        batch, seed = ctx.config.batch_size or 1, ctx.config.seed
        return Asked(
            json.dumps({"normal": [batch, model_steps], "seed": seed}), batch, model_steps, model_steps
        )
    if summary.tokenizer:
        ids, tokens = ctx.get(_request(jobs.model_tokens, path, model_text, what="tokenising for"))
    else:
        ids = _ids(model_ids, summary.vocab_size, ctx.config.seed)
        tokens = tuple(str(i) for i in ids)
    return Asked(json.dumps({"ids": list(ids), "tokens": list(tokens)}), 1, len(ids), len(ids) - 1)


def _inputs(ctx: TabContext, summary: ModelSummary, path: str) -> Asked | None:
    """The inputs' widgets for this kind of model, and what the model reads at their values."""
    if not summary.vocab_size:
        steps = st.slider("Steps T", MIN_STEPS, MAX_STEPS, DEFAULT_STEPS, key="model_steps")
        batch, seed = ctx.config.batch_size or 1, ctx.config.seed
        st.caption(
            f"Inputs [B={batch}, T, I={summary.input_size}] ~ N(0, 1), drawn by the sidebar's seed {seed}."
        )
        return _asked(ctx, summary, path, model_steps=steps)
    if summary.tokenizer:
        asked = _asked(
            ctx,
            summary,
            path,
            model_text=st.text_input("Text", DEFAULT_TEXT, max_chars=MAX_TEXT_CHARS, key="model_text"),
        )
    else:
        asked = _asked(
            ctx, summary, path, model_ids=st.text_input("Token ids, comma-separated", key="model_ids")
        )
        st.caption(f"No tokenizer.json beside the model: ids from 0 to {summary.vocab_size - 1}.")
    if asked.steps < 2:
        st.info(
            f"These inputs give {asked.steps} token: the loss predicts each next one, so it needs 2 or more."
        )
        return None
    return asked


def _ids(text: str, vocab_size: int, seed: int) -> tuple[int, ...]:
    """Token ids from comma-separated text; :data:`DRAWN_IDS` drawn by the seed when empty.

    Raises:
      ConfigError: a part that is not a whole number in 0 … vocab_size − 1.
    """
    if not text.strip():
        return tuple(int(i) for i in np.random.default_rng(seed).integers(0, vocab_size, DRAWN_IDS))
    allowed = f"comma-separated whole numbers from 0 to {vocab_size - 1}"
    try:
        ids = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ConfigError("token ids", text, allowed) from None
    if not all(0 <= i < vocab_size for i in ids):
        raise ConfigError("token ids", text, allowed)
    return ids


def _position(positions: int) -> int | None:
    """The prediction p whose reading of each token is drawn (None: the last, P − 1)."""
    p = st.number_input(
        "Prediction p",
        min_value=0,
        value=None,
        step=1,
        key="model_position",
        placeholder="the last",
        help="the position whose own next-token loss the connectivity reads (empty: the last)",
    )
    if p is not None and p >= positions:
        st.caption(f"The last is p = {positions - 1}: drawn instead.")
    return _read_position(p, positions)


def _read_position(p: int | None, positions: int) -> int | None:
    """The prediction read: p, or None (the last) when empty or past the last."""
    return None if p is None or p >= positions else int(p)


#: On a reference block's page the same tab: it reads a checkpoint, the widgets and the sidebar's
#: seed and batch, not the page's model.
render_block, block_requests = render, requests

"""The Your model tab: it draws what its compute calls return (the heatmap's cells are the
record's log₁₀ norms), the whole page analyses a model dropped in the data folder exactly as
the library does, an uploaded archive is judged by its directory before a byte is extracted
(hostile ones refused with one message, nothing written; the archives themselves are tested in
tests/checkpoints/test_archive.py, the upload folder in tests/serve/test_model_files.py), and a
model too large for the dashboard is refused before any work."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np
import pytest
from apptest_helpers import decode, fake_context, figure_by_title, run_app
from hostile_archives import HOSTILE, demo_folder_zip
from streamlit.testing.v1 import AppTest

import rnnviz
from rnnviz import RunConfig
from rnnviz.checkpoints import CheckpointError
from rnnviz.frames.models import row_names
from rnnviz.serve import budget, folders, model_files
from rnnviz.serve.requests import Missing, ModelSummary
from rnnviz.studies.models import ModelAnalysis
from rnnviz.ui.tabs import model as tab

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

HEATMAP = "‖∂L/∂x_t‖ through every layer"


@pytest.fixture
def folders_here(tmp_path, monkeypatch):
    """An empty data folder and upload folder of the test's own."""
    data, uploads = tmp_path / "data", tmp_path / "uploads"
    data.mkdir()
    monkeypatch.setenv("RNNVIZ_DATA_DIR", str(data))
    monkeypatch.setenv("RNNVIZ_UPLOADS_DIR", str(uploads))
    return data, uploads


def _clean(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _render(module, ctx):
    module.render(ctx)


def _tab(ctx) -> AppTest:
    return AppTest.from_function(_render, args=(tab, ctx), default_timeout=120)


def _gaps(logs: np.ndarray) -> np.ndarray:
    """log₁₀ values as the charts draw them: a true zero (−inf) is a gap."""
    return np.where(np.isfinite(logs), logs, np.nan)


def _heatmap_z(at) -> np.ndarray:
    return decode(figure_by_title(at, HEATMAP)["data"][0]["z"])


def _demo_summary(path: str, stamp: tuple = ()) -> ModelSummary:
    return ModelSummary("torch_lstm", path, 2, 3584, 0, 4, False)


def _lm_record(steps: int = 6, position: int = 4) -> ModelAnalysis:
    """A language model's record, made up: 2 blocks, one recurrent state each, a true zero."""
    norms = np.geomspace(1e-6, 1.0, 3 * steps).reshape(3, steps)
    norms[2, -1] = 0.0  # the last position predicts nothing
    with np.errstate(divide="ignore"):
        logs = np.log10(norms)
    with np.errstate(divide="ignore"):
        connectivity = np.concatenate([np.geomspace(1e-3, 1, position + 1), np.zeros(steps - position - 1)])
        return ModelAnalysis(
            model_type="mamba",
            source="tiny-mamba",
            loss=3.5,
            grad_norms=norms,
            log10_grad_norms=logs,
            state_grad_norms={0: {"h": norms[0]}, 1: {"h": norms[1]}},
            log10_state_grad_norms={0: {"h": logs[0]}, 1: {"h": logs[1]}},
            position=position,
            connectivity=connectivity,
            log10_connectivity=np.log10(connectivity),
            log10_source="float32",
            tokens=["the", "cat", "sat", "on", "the", "mat"][:steps],
            compile_s=0.25,
            run_s=0.004,
        )


# ---- the tab from a fake context -----------------------------------------------------------


def test_the_tab_draws_the_record_its_call_returns_on_the_demo(folders_here):
    cfg = RunConfig(seq_len=9, hidden_size=4, batch_size=3, seed=5)
    asked, records = [], []

    def gradients(path, stamp, inputs_json, position):
        asked.append((path, json.loads(inputs_json), position))
        x = np.random.default_rng(5).normal(size=(3, 100, 4)).astype(np.float32)
        records.append(rnnviz.analyze_model(rnnviz.load_model(path), x))
        return records[-1]

    ctx = fake_context(
        types.SimpleNamespace(config=cfg), model_summary=_demo_summary, model_analysis=gradients
    )
    at = _tab(ctx).run()
    _clean(at)
    # no model in the data folder: the demo first, written to the upload folder
    assert at.selectbox(key="model_choice").value == tab.DEMO
    path, inputs, position = asked[0]
    assert Path(path).name == model_files.DEMO_NAME and Path(path).is_relative_to(folders_here[1])
    assert inputs == {"normal": [3, 100], "seed": 5} and position is None  # the sidebar's B and seed
    a = records[0]
    z = _heatmap_z(at)
    assert z.shape == (3, 100)
    np.testing.assert_allclose(z, _gaps(a.log10_grad_norms))
    assert figure_by_title(at, HEATMAP)["data"][0]["y"] == row_names(3)
    lines = figure_by_title(at, "‖∂L/∂x_t‖ per layer")["data"]
    assert [t["name"] for t in lines] == row_names(3)
    np.testing.assert_allclose(decode(lines[2]["y"]), _gaps(a.log10_grad_norms[2]), rtol=1e-12)
    states = figure_by_title(at, "‖∂L/∂state_t‖")["data"]
    assert [t["name"] for t in states] == ["layer 1 · c", "layer 1 · h", "layer 2 · c", "layer 2 · h"]
    np.testing.assert_allclose(decode(states[3]["y"]), _gaps(a.log10_state_grad_norms[1]["h"]), rtol=1e-12)
    bars = figure_by_title(at, "How much the last prediction reads each token")["data"][0]
    np.testing.assert_allclose(decode(bars["y"]) + bars["base"], a.log10_connectivity, rtol=1e-9)
    line = next(m.value for m in at.markdown if m.value.startswith("**torch_lstm**"))
    assert "2 layers · 3,584 parameters" in line and f"loss **{a.loss:.4g}**" in line
    assert {b.key for b in at.get("download_button")} >= {"model_csv", "model_json"}
    assert at.session_state["model_source"] == path  # marked in use: the upload is not evicted


def test_idle_time_declares_the_demos_gradients_and_the_opened_tab_asks_for_nothing_else(folders_here):
    """A session that has not opened the tab: idle time plans the demo's summary, then (with
    the summary answered) its gradients at the widgets' defaults; opened, the tab's calls are
    exactly those requests."""
    cfg = RunConfig(seq_len=9, hidden_size=4, batch_size=3, seed=5)
    answers = {"model_summary": _demo_summary, "model_analysis": lambda *args: _lm_record()}

    def look_up(request):  # idle time's look-up: only what idle time has computed
        if request.job.__name__ not in done:
            raise Missing(request)
        return answers[request.job.__name__](*request.args)

    base = fake_context(types.SimpleNamespace(config=cfg))
    done: set[str] = set()
    idle = base._replace(get=look_up, state={}, idle=True)
    with pytest.raises(Missing) as missing:  # the summary first: the inputs depend on it
        tab.requests(idle)
    assert missing.value.request.job.__name__ == "model_summary"
    done.add("model_summary")
    declared = tab.requests(idle)
    assert [r.job.__name__ for r in declared] == ["model_summary", "model_analysis"]
    assert Path(declared[1].args[0]).name == model_files.DEMO_NAME  # the demo, written once by its hash
    assert json.loads(declared[1].args[2]) == {"normal": [3, tab.DEFAULT_STEPS], "seed": 5}

    asked = []

    def answer(request):
        asked.append(request.key)
        return answers[request.job.__name__](*request.args)

    at = _tab(base._replace(get=answer)).run()
    _clean(at)
    assert set(asked) == {r.key for r in declared}  # the tab drew from what idle time computed
    assert tab.requests(base._replace(get=answer, state=dict(at.session_state))) == declared


def test_text_is_tokenised_in_a_worker_and_the_tokens_label_the_axes(folders_here):
    record = _lm_record(position=2)  # not the last (T − 2 = 4)
    seen = []

    def tokens(path, stamp, text):
        seen.append(text)
        return (0, 1, 2, 3, 0, 4), tuple(record.tokens)

    def gradients(path, stamp, inputs_json, position):
        seen.append((json.loads(inputs_json), position))
        return record

    summary = lambda path, stamp: ModelSummary("mamba", path, 2, 28_480, 64, 16, True)  # noqa: E731
    ctx = fake_context(
        types.SimpleNamespace(config=RunConfig()),
        model_summary=summary,
        model_tokens=tokens,
        model_analysis=gradients,
    )
    at = _tab(ctx).run()
    _clean(at)
    assert seen == [tab.DEFAULT_TEXT, ({"ids": [0, 1, 2, 3, 0, 4], "tokens": record.tokens}, None)]
    heat = figure_by_title(at, HEATMAP)
    assert heat["layout"]["xaxis"]["ticktext"] == [f"{t}: {w}" for t, w in enumerate(record.tokens)]
    assert np.isnan(decode(heat["data"][0]["z"])[2, -1])  # a true zero is a gap
    at.number_input(key="model_position").set_value(2).run()
    _clean(at)
    assert seen[-1][1] == 2
    figure_by_title(at, "How much the prediction at p = 2 reads each token")  # the record's p
    at.number_input(key="model_position").set_value(40).run()  # past the end: the last, said
    assert seen[-1][1] is None and any("The last is p = 4" in c.value for c in at.caption)


def test_token_ids_without_a_tokenizer_are_checked_against_the_vocabulary(folders_here):
    asked = []

    def gradients(path, stamp, inputs_json, position):
        asked.append(json.loads(inputs_json))
        return _lm_record()

    summary = lambda path, stamp: ModelSummary("mamba", path, 2, 28_480, 64, 16, False)  # noqa: E731
    ctx = fake_context(
        types.SimpleNamespace(config=RunConfig(seed=3)), model_summary=summary, model_analysis=gradients
    )
    at = _tab(ctx).run()
    _clean(at)
    drawn = np.random.default_rng(3).integers(0, 64, tab.DRAWN_IDS).tolist()
    assert asked[-1]["ids"] == drawn  # an empty box: ids drawn by the seed
    at.text_input(key="model_ids").input("5, 7,9").run()
    _clean(at)
    assert asked[-1] == {"ids": [5, 7, 9], "tokens": ["5", "7", "9"]}
    for bad in ("5, x", "5, 64", "-1, 2"):
        at.text_input(key="model_ids").input(bad).run()
        assert not at.exception
        assert [e.value for e in at.error] == [
            f"token ids={bad!r} is not allowed: comma-separated whole numbers from 0 to 63."
        ]
    at.text_input(key="model_ids").input("5").run()
    assert any("give 1 token" in i.value for i in at.info) and len(asked) == 2  # nothing computed


def test_a_checkpoint_that_cannot_be_used_is_one_message(folders_here):
    def summary(path, stamp):
        raise CheckpointError(path, "tensor 'weight_hh_l0' [64, 16] is missing")

    ctx = fake_context(types.SimpleNamespace(config=RunConfig()), model_summary=summary)
    at = _tab(ctx).run()
    assert not at.exception
    demo = folders_here[1] / _demo_entry() / model_files.DEMO_NAME
    assert [e.value for e in at.error] == [f"{demo}: tensor 'weight_hh_l0' [64, 16] is missing."]


def _demo_entry() -> str:
    import hashlib

    return hashlib.sha256(model_files.demo_bytes()).hexdigest()[:16]


def test_a_model_too_large_for_the_dashboard_is_refused_before_any_work(folders_here, monkeypatch):
    monkeypatch.setenv("RNNVIZ_MODEL_WORK_M", "1")  # 10⁶ parameter-tokens: 3584 × 4 × 100 is over
    ctx = fake_context(types.SimpleNamespace(config=RunConfig(batch_size=4)), model_summary=_demo_summary)
    at = _tab(ctx).run()  # no gradients call given: one would fail the test
    _clean(at)
    assert [i.value for i in at.info] == [budget.model_refusal(3584, 4, 100, limit_m=1)]
    assert "at most T = 69 at B = 4 here" in at.info[0].value and not at.get("plotly_chart")


def test_the_refusal_names_the_work_the_limit_and_the_longest_t_that_fits():
    assert budget.model_refusal(1000, 2, 500, limit_m=1) is None  # 10⁶: at the limit
    message = budget.model_refusal(1000, 2, 501, limit_m=1)
    assert message.startswith("1,000 parameters × 2 × 501 tokens is 1 M parameter-tokens")
    assert "limit of 1 M (RNNVIZ_MODEL_WORK_M): at most T = 500 at B = 2 here." in message
    assert "too large for it at any T" in budget.model_refusal(10**6, 1, 2, limit_m=1)


# ---- the whole page, on a model in the data folder ----------------------------------------


def test_the_page_analyses_a_torch_stack_dropped_in_the_data_folder(folders_here):
    import torch

    data, _ = folders_here
    torch.manual_seed(0)
    (data / "stacks").mkdir()
    torch.save(torch.nn.LSTM(3, 8, 2, batch_first=True).state_dict(), data / "stacks" / "lstm.pt")
    at = run_app({"tab": "Your model"})
    _clean(at)
    assert at.selectbox(key="model_choice").options[0] == "stacks/lstm.pt (data/)"
    at.slider(key="model_steps").set_value(20).run()
    _clean(at)
    z = _heatmap_z(at)
    assert z.shape == (3, 20)  # [L + 1, T]
    b = RunConfig().batch_size or 1  # the sidebar's B and seed draw the inputs
    x = np.random.default_rng(RunConfig().seed).normal(size=(b, 20, 3)).astype(np.float32)
    a = rnnviz.analyze_model(rnnviz.load_model(data / "stacks" / "lstm.pt"), x)
    np.testing.assert_allclose(z, _gaps(a.log10_grad_norms), rtol=1e-5)
    states = figure_by_title(at, "‖∂L/∂state_t‖")["data"]
    assert [len(decode(t["y"])) for t in states] == [20] * 4


def test_the_page_reads_text_through_a_hugging_face_folders_tokenizer(folders_here):
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    data, _ = folders_here
    torch.manual_seed(0)
    config = transformers.MambaConfig(vocab_size=8, hidden_size=8, state_size=4, num_hidden_layers=2)
    transformers.MambaForCausalLM(config).save_pretrained(data / "tiny-mamba")
    words = ["the", "cat", "sat", "on", "mat", "[UNK]"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(data / "tiny-mamba" / "tokenizer.json"))
    at = run_app({"tab": "Your model"})
    at.text_input(key="model_text").input("the cat sat on the mat").run()
    _clean(at)
    heat = figure_by_title(at, HEATMAP)
    assert heat["layout"]["xaxis"]["ticktext"] == ["0: the", "1: cat", "2: sat", "3: on", "4: the", "5: mat"]
    a = rnnviz.analyze_model(rnnviz.load_model(data / "tiny-mamba"), [[0, 1, 2, 3, 0, 4]])
    np.testing.assert_allclose(
        decode(heat["data"][0]["z"]),
        np.where(np.isfinite(a.log10_grad_norms), a.log10_grad_norms, np.nan),
        rtol=1e-5,
    )


# ---- an upload on the tab (the archives themselves: tests/checkpoints/test_archive.py) -------


def test_an_upload_on_the_tab_is_judged_and_its_refusal_is_one_message(folders_here, tmp_path):
    record = rnnviz.analyze_model(rnnviz.load_model(_demo_path(tmp_path)), np.ones((1, 5, 4), np.float32))
    seen = []

    def gradients(path, stamp, inputs_json, position):
        seen.append(path)
        return record

    ctx = fake_context(
        types.SimpleNamespace(config=RunConfig()), model_summary=_demo_summary, model_analysis=gradients
    )
    at = _tab(ctx).run()
    at.selectbox(key="model_choice").select(tab.UPLOAD).run()
    _clean(at)
    assert "No file yet." in [c.value for c in at.caption] and not at.get("plotly_chart")
    name, data, message = HOSTILE["zip slip"]
    at.file_uploader(key="model_upload").set_value((name, data, "application/zip")).run()
    assert not at.exception and len(at.error) == 1 and message in at.error[0].value
    assert not folders_here[1].exists() or all(p.name == _demo_entry() for p in folders_here[1].iterdir())
    at.file_uploader(key="model_upload").set_value(("tiny.zip", demo_folder_zip(), "application/zip")).run()
    _clean(at)
    assert seen[-1].endswith("tiny/tiny/demo.safetensors")
    figure_by_title(at, HEATMAP)


def _demo_path(folder: Path) -> Path:
    path = folder / "demo.safetensors"
    path.write_bytes(model_files.demo_bytes())
    return path


def test_the_session_marks_its_model_in_use():
    assert "/up/abc/m.pt" in folders.session_paths({"model_source": "/up/abc/m.pt"})

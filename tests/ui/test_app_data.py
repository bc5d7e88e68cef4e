"""The dashboard on real data (AppTest): each source from the sidebar and the URL, its
preview, the numbers against the library, every tab on data, an uploaded file, a dropped
file, and a bad file as one message with the inputs left synthetic."""

from __future__ import annotations

import io

import numpy as np
import pytest
from apptest_helpers import decode, figure_by_title, run_app, total_gradient

from rnnviz import RunConfig, analyze, fit_to_data, load_dataset
from rnnviz.ui.sidebar.data import UPLOAD


def _clean(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _captions(at) -> str:
    return "\n".join(c.value for c in at.caption) + "\n".join(c.value for c in at.sidebar.caption)


def test_digits_from_the_url_draw_the_digit_and_the_gradients_of_its_batch():
    at = run_app({"data": "digits:rows", "cell": "gru", "hidden_size": "8"})
    _clean(at)
    preview = figure_by_title(at, "digits rows — sequence 0")
    z = decode(preview["data"][0]["z"])
    digits = load_dataset("digits", order="rows")
    np.testing.assert_allclose(z[::-1].reshape(-1), digits.inputs[0].reshape(-1))  # the image, row 0 on top
    assert "Inputs: 4 sequence(s) of **digits rows**" in _captions(at)
    # the numbers are the library's on the same batch
    want = analyze(fit_to_data(RunConfig(cell="gru", hidden_size=8), digits), data=digits, repeats=1)
    np.testing.assert_allclose(total_gradient(at), want.log10_grad_norms, atol=1e-5)
    assert at.query_params["data"] == "digits:rows" and at.query_params["seq_len"] == "8"


def test_each_source_is_picked_from_the_sidebar():
    at = run_app({"hidden_size": "8", "seq_len": "30"})
    _clean(at)
    at.sidebar.selectbox(key="data_choice").select("digits").run()
    _clean(at)
    assert len(total_gradient(at)) == 65  # pixel by pixel: T = 64
    at.sidebar.radio(key="data_order").set_value("permuted").run()
    _clean(at)
    figure_by_title(at, "digits permuted — sequence 0")
    at.sidebar.selectbox(key="data_choice").select("text").run()
    _clean(at)
    assert len(total_gradient(at)) == 31  # the text's window follows T
    assert len(at.sidebar.code[0].value) == 30 and "text prose T=30" in _captions(at)
    at.sidebar.radio(key="data_corpus").set_value("code").run()
    _clean(at)
    assert "text code T=30" in _captions(at)
    at.sidebar.selectbox(key="data_choice").select("synthetic").run()
    _clean(at)
    assert "data" not in at.query_params and "Inputs:" not in _captions(at)


@pytest.mark.parametrize(
    ("tab", "title"),
    [
        ("Carry", "Carry norm over time"),
        ("Strategies", "Cost of each strategy"),
        ("Phase diagram", "Phase diagram"),
        ("Jacobians", ""),
        ("Devices", "This configuration, live"),
        ("Compare", ""),
    ],
)
def test_every_tab_runs_on_data(tab, title):
    at = run_app({"tab": tab, "data": "digits:rows", "hidden_size": "8"})
    _clean(at)
    if title:
        figure_by_title(at, title)
    if tab == "Strategies":  # its scaling over T cannot use the data's fixed T: it says so
        assert "Measured on synthetic inputs of the same B, I and H: digits rows fixes T = 8" in _captions(at)


def test_the_training_tab_trains_on_the_chosen_data():
    at = run_app({"tab": "Training", "data": "digits:rows", "cell": "gru", "hidden_size": "16"})
    _clean(at)
    for name, value in dict(steps=60, batch=32, log_every=30, lr=0.01).items():
        at.number_input(key=f"train_{name}").set_value(value)
    at.selectbox(key="train_task").select("the chosen data").run()
    at.button(key="train_start").click().run()
    _clean(at)
    verdict = [m.value for m in at.markdown if "Held-out accuracy" in m.value]
    assert verdict, [m.value for m in at.markdown]
    assert float(verdict[0].rsplit(":", 1)[1].strip(" .")) > 0.3  # 10 classes: chance is 0.1


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_an_uploaded_file_is_analysed_and_a_bad_one_is_one_message():
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(12, 9, 3)).astype(np.float32)
    at = run_app({"hidden_size": "8"})
    at.sidebar.selectbox(key="data_choice").select(UPLOAD).run()
    _clean(at)
    assert "No file yet" in _captions(at)
    at.sidebar.file_uploader(key="data_upload").set_value(
        ("mine.npz", _npz(inputs=inputs, labels=np.arange(12) % 3), "application/octet-stream")
    ).run()
    _clean(at)
    assert len(total_gradient(at)) == 10 and "mine.npz" in _captions(at)
    figure_by_title(at, "mine.npz — sequence 0")
    at.sidebar.file_uploader(key="data_upload").set_value(
        ("bad.npz", b"not a zip", "application/octet-stream")
    )
    at.run()
    assert not at.exception
    assert any("bad.npz" in e.value and "synthetic" in e.value for e in at.sidebar.error)
    assert "Inputs:" not in _captions(at)  # nothing half-loaded is used


def test_a_data_file_whose_loading_worker_died_is_loaded_again_on_the_next_run(monkeypatch):
    """A worker killed while it reads an uploaded data file is not the file's fault: the
    sidebar names the file and says so (no exception, the inputs stay synthetic), and the
    next run loads it."""
    from rnnviz.serve import jobs
    from rnnviz.serve.worker import WorkerDied

    inputs = np.random.default_rng(1).normal(size=(6, 5, 2)).astype(np.float32)
    loads = jobs.data_preview

    def dies(source_json):
        raise WorkerDied("the worker computing loading mine.npz ended before answering")

    monkeypatch.setattr(jobs, "data_preview", dies)
    at = run_app({"hidden_size": "8"})
    at.sidebar.selectbox(key="data_choice").select(UPLOAD).run()
    at.sidebar.file_uploader(key="data_upload").set_value(
        ("mine.npz", _npz(inputs=inputs), "application/octet-stream")
    ).run()
    assert not at.exception
    assert [e.value for e in at.sidebar.error] == [
        "mine.npz was not loaded: the worker computing loading mine.npz ended before answering; it is "
        "loaded again on the page's next run. The inputs stay synthetic."
    ]
    assert "Inputs:" not in _captions(at)  # nothing half-loaded is used
    monkeypatch.setattr(jobs, "data_preview", loads)
    at.run()
    _clean(at)
    assert len(total_gradient(at)) == 6 and "mine.npz" in _captions(at)  # T + 1 steps


def test_a_file_dropped_in_the_data_folder_is_offered(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNVIZ_DATA_DIR", str(tmp_path))
    series = np.sin(np.linspace(0, 6, 40)).astype(np.float32).reshape(1, 40, 1).repeat(5, 0)
    (tmp_path / "waves.npz").write_bytes(_npz(inputs=series, targets=series))
    at = run_app({"data": "waves.npz", "hidden_size": "8"})
    _clean(at)
    assert "waves.npz (data/)" in at.sidebar.selectbox(key="data_choice").options
    fig = figure_by_title(at, "waves.npz — sequence 0")
    np.testing.assert_allclose(decode(fig["data"][0]["y"]), series[0, :, 0], rtol=1e-6)
    assert len(total_gradient(at)) == 41


def test_a_dropped_file_replaced_under_the_same_name_is_read_again(tmp_path, monkeypatch):
    import os

    monkeypatch.setenv("RNNVIZ_DATA_DIR", str(tmp_path))
    path = tmp_path / "steps.npz"
    path.write_bytes(_npz(inputs=np.zeros((3, 6, 1), np.float32)))
    at = run_app({"data": "steps.npz", "hidden_size": "8"})
    _clean(at)
    assert len(total_gradient(at)) == 7
    path.write_bytes(_npz(inputs=np.zeros((3, 9, 1), np.float32)))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    at.run()
    _clean(at)
    assert len(total_gradient(at)) == 10

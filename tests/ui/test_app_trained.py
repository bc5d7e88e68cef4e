"""The dashboard at trained weights (AppTest): a saved run chosen in the sidebar sets the cell
and data and is honoured by every tab, the numbers equal the library's at those weights,
the Memory tab shades the input, the Training tab keeps what it trains (across sessions),
opens it in every tab and draws λ over training, and a run file is uploaded or refused."""

from __future__ import annotations

import numpy as np
import pytest
from apptest_helpers import decode, figure_by_title, run_app, total_gradient

from rnnviz import RunConfig, analyze, connectivity, fit_to_data, load_dataset, load_run, train
from rnnviz.serve.trained_runs import saved_runs
from rnnviz.ui import calls
from rnnviz.ui.tabs import TABS


@pytest.fixture
def trained_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNVIZ_TRAINED_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", order="rows")


@pytest.fixture(scope="module")
def digits_run(digits):
    cfg = fit_to_data(RunConfig(cell="gru", hidden_size=8, batch_size=16), digits)
    return train(cfg, digits, steps=40, learning_rate=1e-2, log_every=20)


def _clean(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _captions(at) -> str:
    return "\n".join(c.value for c in at.caption) + "\n".join(c.value for c in at.sidebar.caption)


def _open(digits_run, trained_dir, query=None):
    path = str(digits_run.save(trained_dir / "digits.rnnviz"))
    at = run_app(query or {})
    _clean(at)
    choice = at.sidebar.selectbox(key="weights_choice")
    assert any(o.startswith("gru on digits rows · H=8 seed 0 · 40 steps") for o in choice.options)
    choice.set_value(path).run()
    _clean(at)
    return at, path


def test_a_saved_run_sets_the_sidebar_and_its_weights_are_analysed(digits_run, digits, trained_dir):
    at, path = _open(digits_run, trained_dir)
    # the sidebar followed the run: its cell, size and data
    assert at.sidebar.selectbox(key="cfg_cell").value == "gru"
    assert at.sidebar.selectbox(key="data_choice").value == "digits"
    assert "Weights: **gru on digits rows, step 40** (trained)" in _captions(at)
    assert "task loss through the trained readout" in _captions(at)
    # the drawn profile is the library's at those weights, through the trained readout
    want = analyze(
        fit_to_data(RunConfig(cell="gru", hidden_size=8), digits), data=digits, params=digits_run.weights()
    )
    np.testing.assert_allclose(total_gradient(at), want.log10_grad_norms, atol=1e-5)
    # an earlier kept step is another network
    at.sidebar.select_slider[0].set_value(0).run()
    _clean(at)
    want0 = analyze(
        fit_to_data(RunConfig(cell="gru", hidden_size=8), digits), data=digits, params=digits_run.weights(0)
    )
    np.testing.assert_allclose(total_gradient(at), want0.log10_grad_norms, atol=1e-5)


#: The figure a tab draws at the trained weights, where one shows it.
FIGURES = {
    "Carry": "Mean gate activation over time",
    "Memory": "‖∂ log p(target) / ∂x_t‖",
}
#: Gradients: the test above; Training trains from the seed and Learn draws no run.
ELSEWHERE = ("Gradients", "Training", "Learn")


@pytest.mark.parametrize("tab", [t.TITLE for t in TABS if t.TITLE not in ELSEWHERE])
def test_every_tab_runs_at_the_trained_weights(digits_run, trained_dir, tab):
    at, _ = _open(digits_run, trained_dir)
    at.query_params["tab"] = tab
    at.run()
    _clean(at)
    if tab in FIGURES:
        figure_by_title(at, FIGURES[tab])


def test_the_memory_tab_draws_the_connectivity_on_the_digit_and_matches_the_library(
    digits_run, digits, trained_dir
):
    at, _ = _open(digits_run, trained_dir, {"tab": "Memory"})
    at.number_input(key="memory_index").set_value(5).run()
    _clean(at)
    c = connectivity(
        fit_to_data(RunConfig(cell="gru", hidden_size=8), digits), digits, 5, params=digits_run.weights()
    )
    fig = figure_by_title(at, "‖∂ log p(target) / ∂x_t‖ of sequence 5")
    np.testing.assert_allclose(decode(fig["data"][0]["y"]), c.log10[: c.step], atol=1e-6)
    figure_by_title(at, "sequence 5")  # the digit and its shaded pixels
    assert any("reaches back" in m.value for m in at.markdown)


def test_the_memory_tab_shades_text_and_compares_cells_side_by_side(trained_dir):
    text = load_dataset("text", seq_len=16, max_sequences=96)
    paths = []
    for cell, forget_bias in (("lstm", 1.0), ("simple", 0.0)):  # each at its own forget bias
        cfg = fit_to_data(RunConfig(cell=cell, hidden_size=8, batch_size=8, forget_bias=forget_bias), text)
        paths.append(str(train(cfg, text, steps=10, log_every=10).save(trained_dir / f"{cell}.rnnviz")))
    block = fit_to_data(RunConfig(cell="gru", block="reference", hidden_size=8, batch_size=8), text)
    train(block, text, steps=2, log_every=1).save(trained_dir / "block.rnnviz")
    at = run_app({"tab": "Memory", "seq_len": "16"})
    at.sidebar.selectbox(key="weights_choice").set_value(paths[0]).run()
    _clean(at)
    assert at.sidebar.selectbox(key="data_choice").value == "text"
    weights = at.sidebar.selectbox(key="weights_choice").options
    assert any(o.startswith("gru block ×1 on text") for o in weights)  # it opens as its own page
    compared = at.multiselect(key="memory_compare").options
    assert len(compared) == 1 and compared[0].startswith("simple on text")  # no block beside a bare cell
    at.multiselect(key="memory_compare").set_value([paths[1]]).run()
    _clean(at)
    shaded = [m.value for m in at.markdown if "rnnviz-char" in m.value]
    assert len(shaded) == 2  # the LSTM and the tanh RNN on the same sequence
    assert shaded[0].count("rnnviz-char") == 16
    fig = figure_by_title(at, "‖∂ log p(target) / ∂x_t‖")
    names = [t["name"] for t in fig["data"]]
    assert names[0] == "lstm on text prose T=16, step 10" and names[1].startswith(
        "simple on text prose T=16 · H=8"
    )
    # the compared run is its own network (its cell and forget bias), at its last kept step
    simple = load_run(paths[1])
    want = connectivity(fit_to_data(simple.config, text), text, 0, params=simple.weights())
    np.testing.assert_allclose(decode(fig["data"][1]["y"]), want.log10[: want.step], atol=1e-6)


def test_without_data_the_memory_tab_asks_for_a_data_set():
    at = run_app({"tab": "Memory"})
    _clean(at)
    assert any("choose digits, text or a file" in i.value for i in at.info)


def test_the_training_tab_keeps_its_runs_opens_them_and_draws_lambda_over_training(trained_dir):
    calls.results().clear()  # the server's cache is per process: another test's runs may be in it
    at = run_app({"tab": "Training", "cell": "gru", "hidden_size": "8", "seq_len": "20"})
    for name, value in dict(steps=40, batch=16, log_every=20).items():
        at.number_input(key=f"train_{name}").set_value(value)
    at.run()
    at.button(key="train_start").click().run()
    _clean(at)
    runs = saved_runs()
    assert len(runs) == 1
    (path,) = runs
    at.button(key="train_use_0").click().run()
    _clean(at)
    assert at.sidebar.selectbox(key="weights_choice").value == path
    assert "Weights: **gru on adding T=20, step 40**" in _captions(at)
    at.toggle(key="train_dynamics").set_value(True).run()
    _clean(at)
    fig = figure_by_title(at, "Lyapunov exponents over training")
    assert [t["name"] for t in fig["data"]][:1] == ["λ1"] and len(decode(fig["data"][0]["x"])) == 3
    # a new session (a reload) lists the run
    again = run_app()
    assert any(
        o.startswith("gru on adding T=20") for o in again.sidebar.selectbox(key="weights_choice").options
    )
    # the server holds the curves, not the weights (those stay in the file, for the workers)
    (kept,) = [v for k, v in calls.results().items() if k[0] == "trained_curves"]
    assert [r.weight_tree for r in kept] == [None] and kept[0].losses.shape == (40,)
    assert load_run(path).weight_tree is not None
    # dropped from the server's memory (its cap, or a restart), the run is reopened from its file
    calls.results().clear()
    back = run_app({"tab": "Training", "cell": "gru", "hidden_size": "8", "seq_len": "20"})
    for name, value in dict(steps=40, batch=16, log_every=20).items():
        back.number_input(key=f"train_{name}").set_value(value)
    back.run()
    _clean(back)
    assert not [i.value for i in back.info if "Press Train" in i.value]
    assert back.button(key="train_pin") and back.button(key="train_use_0")
    np.testing.assert_array_equal(
        [v for k, v in calls.results().items() if k[0] == "trained_curves"][0][0].losses, kept[0].losses
    )


def test_a_run_file_is_uploaded_and_a_changed_one_is_refused(digits_run, trained_dir, tmp_path):
    data = digits_run.save(tmp_path / "mine.rnnviz").read_bytes()
    at = run_app()
    at.sidebar.file_uploader(key="weights_upload").set_value(
        ("mine.rnnviz", data, "application/octet-stream")
    ).run()
    _clean(at)
    assert "Weights: **gru on digits rows, step 40**" in _captions(at)
    bad = data[:500] + bytes([data[500] ^ 1]) + data[501:]
    at = run_app()
    at.sidebar.file_uploader(key="weights_upload").set_value(
        ("bad.rnnviz", bad, "application/octet-stream")
    ).run()
    assert not at.exception
    errors = [e.value for e in at.sidebar.error]
    assert any(e.startswith("bad.rnnviz: its checksum does not match") for e in errors), errors
    assert at.sidebar.selectbox(key="weights_choice").value == "initial"


def test_a_run_file_whose_checking_worker_died_is_checked_again_on_the_next_run(
    digits_run, trained_dir, tmp_path, monkeypatch
):
    """A worker killed while it reads an uploaded run file is not the file's fault: the
    sidebar says so (no exception, nothing remembered as refused) and the next run checks the
    file again and opens it."""
    from rnnviz.serve.worker import WorkerDied

    data = digits_run.save(tmp_path / "mine.rnnviz").read_bytes()
    checked = calls.check_run

    def dies(path):
        raise WorkerDied("the worker computing reading the run file ended before answering")

    monkeypatch.setattr(calls, "check_run", dies)
    at = run_app()
    at.sidebar.file_uploader(key="weights_upload").set_value(
        ("mine.rnnviz", data, "application/octet-stream")
    ).run()
    assert not at.exception
    assert [e.value for e in at.sidebar.error] == [
        "mine.rnnviz was not checked: the worker computing reading the run file ended before answering; "
        "it is checked again on the page's next run."
    ]
    assert not list(trained_dir.glob("*.part"))  # nothing half-written is left
    monkeypatch.setattr(calls, "check_run", checked)
    at.run()
    _clean(at)
    assert "Weights: **gru on digits rows, step 40**" in _captions(at)

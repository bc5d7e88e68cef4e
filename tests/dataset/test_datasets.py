"""Real data: the built-in sets' shapes and splits, every file format on tiny files written
here, and every bad file refused with one message naming the file and the problem."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from rnnviz.config import ConfigError
from rnnviz.dataset import DataError, datasets, load_dataset
from rnnviz.dataset import files as files_module


def test_the_builtins_are_listed():
    assert datasets() == ("digits", "text")


@pytest.mark.parametrize(("order", "shape"), [("pixels", (64, 1)), ("rows", (8, 8)), ("permuted", (64, 1))])
def test_digits_as_sequences(order, shape):
    ds = load_dataset("digits", order=order)
    assert ds.inputs.shape == (1797, *shape) and ds.inputs.dtype == np.float32
    assert ds.kind == "classification" and ds.n_classes == 10
    assert set(np.unique(ds.labels)) == set(range(10))
    assert 0.0 <= ds.inputs.min() and ds.inputs.max() <= 1.0 and ds.mask.all()
    # a fixed split: disjoint, covering, 20 % held out, the same on every load
    assert np.intersect1d(ds.train, ds.test).size == 0
    assert np.union1d(ds.train, ds.test).size == 1797 and ds.test.size == 359
    assert np.array_equal(load_dataset("digits", order=order).test, ds.test)


def test_digits_orders_hold_the_same_pixels():
    pixels = load_dataset("digits", order="pixels").inputs[..., 0]
    rows = load_dataset("digits", order="rows").inputs.reshape(1797, 64)
    permuted = load_dataset("digits", order="permuted", permutation_seed=3).inputs[..., 0]
    assert np.array_equal(pixels, rows)
    # a permutation of the 64 positions, the same for every image, and not the identity
    perm = np.random.default_rng(3).permutation(64)
    assert np.array_equal(permuted, pixels[:, perm]) and not np.array_equal(perm, np.arange(64))
    other = load_dataset("digits", order="permuted", permutation_seed=4).inputs[..., 0]
    assert not np.array_equal(permuted, other)


@pytest.mark.parametrize("corpus", ["prose", "code"])
def test_text_is_one_hot_next_character(corpus):
    ds = load_dataset("text", corpus=corpus, seq_len=40, max_sequences=50)
    assert ds.kind == "next-step" and ds.inputs.shape == (50, 40, len(ds.vocab)) and len(ds.vocab) <= 97
    tokens = ds.inputs.argmax(-1)
    assert np.array_equal(ds.inputs.sum(-1), np.ones((50, 40)))  # exactly one hot
    assert np.array_equal(tokens[:, 1:], ds.targets[:, :-1])  # the target is the next input
    assert np.array_equal(tokens[1:, 0], ds.targets[:-1, -1])  # windows follow each other
    assert ds.n_classes == len(ds.vocab) and ds.test.size == 5
    decoded = "".join(ds.vocab[i] for i in tokens[0])
    assert len(decoded) == 40 and decoded.strip()


def test_text_is_cached_and_read_only():
    a = load_dataset("text", seq_len=30, max_sequences=20)
    assert load_dataset("text", seq_len=30, max_sequences=20) is a
    with pytest.raises(ValueError):
        a.inputs[0, 0, 0] = 5.0


@pytest.mark.parametrize(
    ("name", "options", "words"),
    [
        ("digits", {"order": "columns"}, "order='columns' is not allowed: one of pixels, rows, permuted"),
        ("digits", {"colour": True}, "unknown option"),
        ("text", {"corpus": "poetry"}, "one of prose, code"),
        ("text", {"seq_len": 1}, "an integer in [2, 10000]"),
        ("mnist", {}, "neither a built-in data set (digits, text) nor a file"),
    ],
)
def test_bad_builtin_options_name_what_is_allowed(name, options, words):
    with pytest.raises(DataError) as err:
        load_dataset(name, **options)
    assert words in str(err.value) and str(err.value).startswith(name)


# ---- files --------------------------------------------------------------------------------------


def test_npz_with_labels(tmp_path):
    x = np.random.default_rng(0).normal(size=(10, 6, 3)).astype(np.float32)
    np.savez(tmp_path / "a.npz", inputs=x, labels=np.arange(10) % 4)
    ds = load_dataset(tmp_path / "a.npz")
    assert ds.name == "a.npz" and ds.kind == "classification" and ds.n_classes == 4
    assert np.array_equal(ds.inputs, x) and ds.mask.all() and ds.train.size == 8


def test_npz_targets_decide_the_kind(tmp_path):
    x = np.ones((4, 5, 2))
    np.savez(tmp_path / "tok.npz", inputs=x, targets=np.arange(20).reshape(4, 5) % 7)
    np.savez(tmp_path / "reg.npz", inputs=x, targets=np.zeros((4, 5, 3)))
    tok, reg = load_dataset(tmp_path / "tok.npz"), load_dataset(tmp_path / "reg.npz")
    assert (tok.kind, tok.n_classes, tok.targets.dtype) == ("next-step", 7, np.int64)
    assert (reg.kind, reg.targets.shape) == ("regression", (4, 5, 3))
    np.save(tmp_path / "plain.npy", x)
    assert load_dataset(tmp_path / "plain.npy").kind == "unlabelled"


def test_npz_lengths_pad_with_a_mask(tmp_path):
    x = np.ones((3, 4, 1))
    x[0, 2:] = np.nan  # padding may hold anything: only real steps are checked
    np.savez(tmp_path / "r.npz", inputs=x, lengths=np.array([2, 4, 1]))
    ds = load_dataset(tmp_path / "r.npz")
    assert ds.ragged and list(ds.lengths) == [2, 4, 1]
    assert np.array_equal(ds.mask[0], [True, True, False, False]) and ds.inputs[0, 2:].sum() == 0


def test_csv_long_form_ragged_with_labels(tmp_path):
    rows = [("a", t, float(t), 2.0 * t, 1) for t in range(3)] + [("b", t, -1.0, 0.5, 0) for t in range(5)]
    pd.DataFrame(rows, columns=["sequence", "t", "x", "y", "label"]).sample(frac=1, random_state=0).to_csv(
        tmp_path / "long.csv", index=False
    )
    ds = load_dataset(tmp_path / "long.csv")
    assert ds.inputs.shape == (2, 5, 2) and list(ds.lengths) == [3, 5]
    assert np.array_equal(ds.inputs[0, :3, 1], [0.0, 2.0, 4.0])  # rows put back in order
    assert list(ds.labels) == [1, 0] and ds.kind == "classification"


def test_parquet_long_form_with_targets(tmp_path):
    pytest.importorskip("pyarrow")
    frame = pd.DataFrame(
        {"sequence": [7, 7, 9], "t": [0, 1, 0], "x": [1.0, 2.0, 3.0], "target": [0.1, 0.2, 0.3]}
    )
    frame.to_parquet(tmp_path / "p.parquet")
    ds = load_dataset(tmp_path / "p.parquet")
    assert ds.kind == "regression" and ds.targets.shape == (2, 2, 1)
    assert np.allclose(ds.targets[:, :, 0], [[0.1, 0.2], [0.3, 0.0]]) and list(ds.lengths) == [2, 1]


def _write(tmp_path, kind: str):
    """One bad file per case; returns its path."""
    p = tmp_path / f"bad_{kind}"
    if kind == "rank":
        p = p.with_suffix(".npy")
        np.save(p, np.ones((2, 3, 4, 5)))
    elif kind == "nan":
        p = p.with_suffix(".npz")
        x = np.ones((3, 4, 2))
        x[1, 2, 0] = np.inf
        np.savez(p, inputs=x)
    elif kind == "text column":
        p = p.with_suffix(".csv")
        pd.DataFrame({"sequence": [0, 0], "t": [0, 1], "x": ["up", "down"]}).to_csv(p, index=False)
    elif kind == "no id":
        p = p.with_suffix(".csv")
        pd.DataFrame({"step": [0, 1], "x": [1.0, 2.0]}).to_csv(p, index=False)
    elif kind == "duplicate step":
        p = p.with_suffix(".csv")
        pd.DataFrame({"sequence": [0, 0], "t": [1, 1], "x": [1.0, 2.0]}).to_csv(p, index=False)
    elif kind == "skipped step":
        p = p.with_suffix(".csv")
        pd.DataFrame({"sequence": [0, 0], "t": [0, 2], "x": [1.0, 2.0]}).to_csv(p, index=False)
    elif kind == "two labels":
        p = p.with_suffix(".csv")
        pd.DataFrame({"sequence": [0, 0], "t": [0, 1], "x": [1.0, 2.0], "label": [1, 2]}).to_csv(
            p, index=False
        )
    elif kind == "truncated":
        p = p.with_suffix(".npz")
        np.savez(p, inputs=np.ones((50, 40, 3)))
        p.write_bytes(p.read_bytes()[:300])
    elif kind == "labels shape":
        p = p.with_suffix(".npz")
        np.savez(p, inputs=np.ones((4, 3, 1)), labels=np.arange(3))
    elif kind == "negative labels":
        p = p.with_suffix(".npz")
        np.savez(p, inputs=np.ones((2, 3, 1)), labels=np.array([0, -1]))
    elif kind == "both":
        p = p.with_suffix(".npz")
        np.savez(p, inputs=np.ones((2, 3, 1)), labels=np.arange(2), targets=np.ones((2, 3, 1)))
    elif kind == "no inputs":
        p = p.with_suffix(".npz")
        np.savez(p, x=np.ones((2, 3, 1)))
    elif kind == "extension":
        p = p.with_suffix(".json")
        p.write_text("{}")
    elif kind == "complex":
        p = p.with_suffix(".npy")
        np.save(p, np.ones((2, 3, 1), np.complex64))
    return p


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("rank", "'inputs' has shape (2, 3, 4, 5); allowed: [N, T, I]"),
        ("nan", "'inputs' is NaN or infinite at sequence 1, step 2"),
        ("text column", "column 'x' is not numeric (e.g. 'up')"),
        ("no id", "long form needs the columns 'sequence' and 't'"),
        ("duplicate step", "sequence 0 has step 1 twice"),
        ("skipped step", "sequence 0 skips a step"),
        ("two labels", "sequence 0 has more than one 'label'"),
        ("truncated", "not a readable .npz archive"),
        ("labels shape", "'labels' must be [4]: one class per sequence"),
        ("negative labels", "'labels' must be whole numbers ≥ 0"),
        ("both", "give 'labels' (one class per sequence) or 'targets' (per step), not both"),
        ("no inputs", "no 'inputs' array (it holds: x)"),
        ("extension", "neither a built-in data set"),
        ("complex", "'inputs' holds complex64 values; allowed: real numbers"),
    ],
)
def test_a_bad_file_gets_one_message_naming_it(tmp_path, kind, words):
    path = _write(tmp_path, kind)
    with pytest.raises(DataError) as err:
        load_dataset(path)
    message = str(err.value)
    assert message.startswith(path.name) and words in message, message
    assert "\n" not in message and "Traceback" not in message


def test_missing_file_and_memory_limit(tmp_path, monkeypatch):
    with pytest.raises(DataError, match=r"^gone\.npz: no such file"):
        load_dataset(tmp_path / "gone.npz")
    np.save(tmp_path / "big.npy", np.zeros((4, 8, 2), np.float32))
    monkeypatch.setattr(files_module, "MAX_DATA_BYTES", 100)
    over = r"^big\.npy: 256 bytes as float32, over the 100 bytes limit \(its header"
    with pytest.raises(DataError, match=over):
        load_dataset(tmp_path / "big.npy")


def test_a_file_takes_no_options(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 2, 1)))
    with pytest.raises(DataError, match="a file takes no options"):
        load_dataset(tmp_path / "x.npy", order="rows")


def test_data_errors_are_config_errors_and_cross_processes():
    err = DataError("x.csv", "column 'x' is not numeric")
    assert isinstance(err, ConfigError) and str(err) == "x.csv: column 'x' is not numeric."
    again = pickle.loads(pickle.dumps(err))
    assert type(again) is DataError and str(again) == str(err)


# ---- described and drawn (rnnviz data) -----------------------------------------------------------


def test_a_permuted_digit_is_drawn_as_the_same_image():
    from rnnviz.dataset.describe import preview

    plain = preview(load_dataset("digits", order="pixels"), 7)
    assert preview(load_dataset("digits", order="permuted", permutation_seed=11), 7) == plain
    assert preview(load_dataset("digits", order="rows"), 7) == plain
    lines = plain.splitlines()
    assert lines[0] == "sequence 7 (label 7):" and len(lines) == 9 and all(len(r) == 16 for r in lines[1:])


def test_a_text_window_is_drawn_as_its_characters():
    from rnnviz.dataset.builtin import corpus_text
    from rnnviz.dataset.describe import preview

    ds = load_dataset("text", seq_len=30, max_sequences=10)
    assert preview(ds, 2) == "sequence 2: " + repr(corpus_text("prose")[60:90])


def test_cli_data_describes_draws_and_refuses(tmp_path, capsys):
    import json

    from rnnviz.cli.main import main

    assert main(["data", "digits", "--order", "rows", "--index", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("digits: 1797 sequences × 8 steps × 8 features; classify into 10 classes")
    assert "sequence 3 (label 3):" in out and "licence: CC BY 4.0" in out
    assert main(["data", "text", "--seq-len", "20", "--max-sequences", "5", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["kind"], facts["sequences"], facts["seq_len"], facts["test"]) == ("next-step", 5, 20, 1)
    bad = _write(tmp_path, "nan")
    assert main(["data", str(bad)]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"error: {bad.name}: 'inputs' is NaN or infinite at sequence 1, step 2."
    )
    assert main(["data", "digits", "--index", "1797"]) == 2
    assert "an integer in [0, 1796]" in capsys.readouterr().err


def test_files_dropped_in_the_data_folder_are_listed_and_loaded_by_name(tmp_path, monkeypatch):
    from rnnviz.dataset import data_dir, runs_dir

    monkeypatch.setenv("RNNVIZ_DATA_DIR", str(tmp_path))
    assert datasets() == ("digits", "text") and data_dir() == tmp_path
    np.savez(tmp_path / "mine.npz", inputs=np.ones((3, 4, 2), np.float32), labels=np.array([0, 1, 0]))
    (tmp_path / "notes.txt").write_text("not data")
    assert datasets() == ("digits", "text", "mine.npz")
    ds = load_dataset("mine.npz")
    assert ds.inputs.shape == (3, 4, 2) and ds.kind == "classification"
    assert runs_dir() == tmp_path / "runs"
    with pytest.raises(DataError, match="other.npz"):
        load_dataset("other.npz")

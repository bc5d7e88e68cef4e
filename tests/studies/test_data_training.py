"""Training on real data: batches come from the train split, each kind's loss against a NumPy
computation of the same formula, padding ignored, the test split held out, and a small
budget learns the digits well above chance."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz import ConfigError, DataError, RunConfig, load_dataset, train
from rnnviz.studies.tasks.data import data_task
from rnnviz.studies.training import training_verdict


@pytest.fixture(scope="module")
def rows():
    return load_dataset("digits", order="rows")


def test_batches_are_rows_of_the_train_split(rows):
    task = data_task(rows)
    b = task.batch(jax.random.key(3), 16, 8, 0)
    labels, last = (np.asarray(a) for a in b.targets)
    x = np.asarray(b.inputs)
    train_x = rows.inputs[rows.train].reshape(len(rows.train), -1)
    for xi, yi in zip(x.reshape(16, -1), labels):
        hits = np.flatnonzero((train_x == xi).all(axis=1))
        assert hits.size and yi in rows.labels[rows.train][hits]
    assert (last == 7).all()  # every digit sequence is 8 rows long
    held = task.held_out_batch(jax.random.key(0), 0, 8, 0)
    assert np.array_equal(np.asarray(held.inputs), rows.inputs[rows.test])  # all 359 held out


def test_classification_loss_is_cross_entropy_at_the_last_step(rows):
    task = data_task(rows)
    rng = np.random.default_rng(0)
    pred = rng.normal(size=(5, 8, 10)).astype(np.float32)
    labels, last = np.array([1, 4, 0, 9, 3]), np.array([7, 7, 2, 7, 5])
    logits = pred[np.arange(5), last]
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = -logp[np.arange(5), labels].mean()
    got = task.loss_fn(8)(jnp.asarray(pred), (jnp.asarray(labels), jnp.asarray(last)))
    assert float(got) == pytest.approx(expected, rel=1e-5)
    acc = task.metric_fn()(jnp.asarray(pred), (jnp.asarray(labels), jnp.asarray(last)))
    assert float(acc) == pytest.approx((logits.argmax(-1) == labels).mean())
    assert task.baseline(8) == pytest.approx(math.log(10)) and task.metric_name == "accuracy"


def test_next_character_loss_and_bits_per_character():
    text = load_dataset("text", seq_len=12, max_sequences=30)
    task = data_task(text)
    rng = np.random.default_rng(1)
    v = len(text.vocab)
    pred = rng.normal(size=(3, 12, v)).astype(np.float32)
    tokens = text.targets[:3]
    mask = np.ones((3, 12), bool)
    mask[2, 5:] = False
    logp = pred - np.log(np.exp(pred).sum(-1, keepdims=True))
    picked = np.take_along_axis(logp, tokens[..., None], -1)[..., 0]
    nats = -(picked * mask).sum() / mask.sum()
    targets = (jnp.asarray(tokens), jnp.asarray(mask))
    assert float(task.loss_fn(12)(jnp.asarray(pred), targets)) == pytest.approx(nats, rel=1e-5)
    assert float(task.metric_fn()(jnp.asarray(pred), targets)) == pytest.approx(nats / math.log(2), rel=1e-5)
    counts = np.bincount(text.targets[text.train].ravel(), minlength=v)
    p = counts[counts > 0] / counts.sum()
    assert task.baseline(12) == pytest.approx(-(p * np.log(p)).sum())  # the unigram entropy


def test_regression_ignores_padded_steps(tmp_path):
    x = np.random.default_rng(2).normal(size=(6, 5, 2))
    y = np.random.default_rng(3).normal(size=(6, 5, 1))
    np.savez(tmp_path / "r.npz", inputs=x, targets=y, lengths=np.array([5, 3, 5, 2, 4, 5]))
    task = data_task(load_dataset(tmp_path / "r.npz"))
    mask = np.arange(5)[None] < np.array([5, 3])[:, None]
    pred = np.zeros((2, 5, 1), np.float32)
    loss = task.loss_fn(5)(jnp.asarray(pred), (jnp.asarray(y[:2], jnp.float32), jnp.asarray(mask)))
    assert float(loss) == pytest.approx((y[:2, :, 0] ** 2)[mask].mean(), rel=1e-5)
    pred[1, 3:] = 1e3  # anything at padded steps
    again = task.loss_fn(5)(jnp.asarray(pred), (jnp.asarray(y[:2], jnp.float32), jnp.asarray(mask)))
    assert float(again) == pytest.approx(float(loss), rel=1e-6)


def test_digits_learned_well_above_chance_in_a_small_budget(rows):
    cfg = RunConfig(cell="gru", hidden_size=32, input_size=8, seq_len=8, batch_size=32)
    r = train(cfg, rows, steps=300, learning_rate=3e-3, log_every=50)
    assert r.metric_name == "accuracy" and r.held_out_metric.shape == r.profile_steps.shape == (6,)
    assert list(r.held_out_steps) == [50, 100, 150, 200, 250, 300]  # after each chunk
    assert 0.6 < r.held_out_metric[-1]  # chance is 0.1
    assert r.losses[-20:].mean() < 0.5 * r.baseline
    assert "Held-out accuracy after step 300" in training_verdict([r])


def test_a_data_set_fixes_the_shape_and_needs_targets(rows, tmp_path):
    with pytest.raises(ConfigError, match="has 8 steps; use seq_len=8"):
        train(RunConfig(input_size=8, seq_len=9, batch_size=8), rows, steps=10, log_every=10)
    with pytest.raises(ConfigError, match="8 input features; use input_size=8"):
        train(RunConfig(input_size=2, seq_len=8, batch_size=8), rows, steps=10, log_every=10)
    np.save(tmp_path / "u.npy", np.ones((4, 3, 1)))
    with pytest.raises(DataError, match="nothing to train on"):
        train(
            RunConfig(input_size=1, seq_len=3, batch_size=2),
            load_dataset(tmp_path / "u.npy"),
            steps=5,
            log_every=5,
        )


def test_the_same_data_is_one_task_and_one_compile(rows):
    assert data_task(rows) is data_task(load_dataset("digits", order="rows"))
    assert data_task(rows).name != data_task(load_dataset("digits", order="pixels")).name


def test_cli_trains_on_data(capsys):
    from rnnviz.cli.main import main

    args = ["train", "--data", "digits", "--order", "rows", "--cell", "gru", "--hidden-size", "16"]
    assert main([*args, "--steps", "40", "--log-every", "20", "--batch-size", "16", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["config"]["seq_len"] == 8 and record["config"]["input_size"] == 8
    assert len(record["held_out_metric"]) == 2 and record["metric_name"] == "accuracy"
    assert record["held_out_steps"] == [20, 40]
    assert main(["train", "--data", "digits", "--task", "copy"]) == 2
    assert "give --task or --data, not both" in capsys.readouterr().err


def test_steps_to_ninety_percent_of_the_final_metric():
    from rnnviz.bench.learning import steps_to_fraction

    steps = np.array([100, 200, 300])
    assert steps_to_fraction(steps, np.array([0.1, 0.85, 0.9])) == 200  # 0.85 ≥ 0.9 · 0.9
    assert steps_to_fraction(steps, np.array([0.5, 0.6, np.nan])) is None
    assert steps_to_fraction(steps[:0], np.array([])) is None

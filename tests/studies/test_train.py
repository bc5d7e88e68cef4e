"""Training: task generators and baselines, the compiled chunked loop, vmapped runs,
clipping, non-finite stops, the probe profile, the CLI and the Training tab."""

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rnnviz import ConfigError, RunConfig, analyze
from rnnviz.config import BudgetError
from rnnviz.studies.tasks.synthetic import TASKS, adding_batch, copy_batch, recall_batch
from rnnviz.studies.training import Trainer, TrainSettings, solved_step, task_loss, train, train_many

ROOT = Path(__file__).resolve().parents[2]
KEY = jax.random.key(0)
TINY = RunConfig(hidden_size=8, input_size=1, seq_len=6, batch_size=16)  # recall, lag 0


def test_adding_batches_mark_one_step_in_each_half_and_sum_them():
    b = adding_batch(KEY, 500, 40)
    x, y = np.asarray(b.inputs), np.asarray(b.targets)
    assert x.shape == (500, 40, 2) and y.shape == (500,)
    assert (
        (x[:, :, 1].sum(1) == 2).all()
        and (x[:, :20, 1].sum(1) == 1).all()
        and (x[:, 20:, 1].sum(1) == 1).all()
    )
    np.testing.assert_allclose(y, (x[:, :, 0] * x[:, :, 1]).sum(1), rtol=1e-6)
    assert 0 <= x[:, :, 0].min() and x[:, :, 0].max() < 1


def test_copy_and_recall_batches():
    seq_len = 35  # T = 15 blanks-and-delimiter lag
    b = copy_batch(KEY, 50, seq_len)
    tokens = np.asarray(b.inputs).argmax(-1)
    assert b.inputs.shape == (50, seq_len, 10) and (np.asarray(b.inputs).sum(-1) == 1).all()
    np.testing.assert_array_equal(tokens[:, :10], np.asarray(b.targets))
    assert (
        (tokens[:, :10] < 8).all()
        and (tokens[:, 10:24] == 8).all()
        and (tokens[:, 24] == 9).all()
        and (tokens[:, 25:] == 8).all()
    )
    r = recall_batch(KEY, 20, 12, lag=3)
    np.testing.assert_array_equal(np.asarray(r.targets), np.asarray(r.inputs)[:, 12 - 1 - 3, 0])


def test_baselines_equal_their_formulas_and_the_trivial_predictor():
    adding, copy, recall = TASKS["adding"], TASKS["copy"], TASKS["recall"]
    assert adding.baseline(100) == pytest.approx(1 / 6) and recall.baseline(7) == 1.0
    assert copy.baseline(120) == pytest.approx(10 * math.log(8) / 120)
    n = 40_000  # sampling error of the MSE ≈ 0.0006 (adding) and 0.007 (recall)
    b = adding_batch(KEY, n, 30)
    assert float(adding.loss_fn(30)(jnp.ones((n, 1)), b.targets)) == pytest.approx(1 / 6, abs=0.003)
    b = recall_batch(KEY, n, 5)
    assert float(recall.loss_fn(5)(jnp.zeros((n, 1)), b.targets)) == pytest.approx(1.0, abs=0.03)
    b = copy_batch(KEY, 64, 40)
    assert float(copy.loss_fn(40)(jnp.zeros((64, 10, 8)), b.targets)) == pytest.approx(
        copy.baseline(40), rel=1e-6
    )
    assert float(copy.metric_fn()(jax.nn.one_hot(b.targets, 8), b.targets)) == 1.0


def test_loss_decreases_and_the_profile_starts_on_analyzes_weights():
    cfg = TINY.replace(carry_init="normal")
    r = train(cfg, "recall", steps=200, learning_rate=1e-2, log_every=100)
    assert r.losses.shape == (200,) and list(r.profile_steps) == [0, 100] and r.profiles.shape == (2, 7)
    assert r.final_loss() < 0.1 * r.baseline and r.solved_step is not None and r.nonfinite_step is None
    assert r.timing.steps_per_s > 0 and r.metric_name == "MSE"
    # Log step 0: the same zero-perturbation gradient, by hand, on analyze's weights.
    from rnnviz.engine.prepare import Values, seed_key
    from rnnviz.studies.training.model import PROBE_BATCH, PROBE_SALT, TrainSpec, fixed_carry0, init_state

    state = init_state(cfg, TrainSpec("recall", 0, "adam", 100), seed_key(0), Values.of(cfg))
    a = analyze(cfg, repeats=1, log_pass=False)
    for got, want in zip(jax.tree.leaves(state.params["cell"]), jax.tree.leaves(a.params)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    probe = TASKS["recall"].batch(jax.random.fold_in(jax.random.key(0), PROBE_SALT), PROBE_BATCH, 6)
    carry0 = fixed_carry0(cfg, seed_key(0), Values.of(cfg), PROBE_BATCH)
    eps = jax.tree.map(lambda c: jnp.zeros((7,) + c.shape), carry0)
    g = jax.grad(
        lambda e: task_loss(cfg, TASKS["recall"], state.params, carry0, probe.inputs, probe.targets, e)[0]
    )(eps)
    want = np.log10(np.sqrt((np.asarray(g, np.float64) ** 2).sum(axis=(1, 2))))
    np.testing.assert_allclose(r.profiles[0], want, atol=1e-5)


def test_vmapped_runs_equal_individual_runs_and_curves_repeat_across_processes():
    runs = train_many(TINY, {"seed": [1, 0], "learning_rate": [3e-3]}, task="recall", steps=20, log_every=10)
    assert [(r.config.seed, r.learning_rate) for r in runs] == [
        (1, pytest.approx(3e-3)),
        (0, pytest.approx(3e-3)),
    ]
    one = train(
        TINY.replace(seed=1), "recall", steps=20, learning_rate=3e-3, log_every=10
    )  # one run: compiled without vmap
    np.testing.assert_allclose(runs[0].losses, one.losses, rtol=1e-5)
    np.testing.assert_allclose(runs[0].profiles, one.profiles, atol=1e-5)
    assert not np.allclose(runs[1].losses, one.losses)
    script = textwrap.dedent("""
        from rnnviz import RunConfig
        from rnnviz.studies.training import train
        cfg = RunConfig(hidden_size=8, input_size=1, seq_len=6, batch_size=16, seed=1)
        r = train(cfg, "recall", steps=20, learning_rate=3e-3, log_every=10)
        print(r.losses.tobytes().hex())
    """)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=300,
    )
    assert out.stdout.strip() == one.losses.tobytes().hex(), out.stderr[-2000:]


def test_a_call_that_changes_only_the_steps_or_rate_starts_from_the_kept_draw(monkeypatch):
    """The init runs once for two calls that share seeds and values; the kept state survives the
    chunk's donation (the second call equals a call that drew afresh); other seeds or values,
    or a state over the byte bound, draw again."""
    from rnnviz.studies.training import loop

    monkeypatch.setattr(loop, "init_states", loop._InitStates(loop.INIT_CACHE_BYTES))
    over = {"seed": [3, 4]}
    first = train_many(TINY, over, task="recall", steps=20, learning_rate=1e-3, log_every=10)
    drawn = loop.init_states.hits
    again = train_many(TINY, over, task="recall", steps=20, learning_rate=1e-3, log_every=10)
    faster = train_many(TINY, over, task="recall", steps=10, learning_rate=3e-3, log_every=10)
    assert loop.init_states.hits == drawn + 2
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.losses, b.losses)
        for x, y in zip(jax.tree.leaves(a.weight_tree), jax.tree.leaves(b.weight_tree)):
            np.testing.assert_array_equal(x, y)
    # the same draw, another rate: its first weights are the first call's
    for a, b in zip(first, faster):
        for x, y in zip(jax.tree.leaves(a.weight_tree), jax.tree.leaves(b.weight_tree)):
            np.testing.assert_array_equal(x[0], y[0])
        assert not np.array_equal(a.losses[:10], b.losses)
    loop.init_states.clear()
    fresh = train_many(TINY, over, task="recall", steps=20, learning_rate=1e-3, log_every=10)
    assert loop.init_states.hits == drawn + 2
    for a, b in zip(first, fresh):
        np.testing.assert_array_equal(a.losses, b.losses)
    train_many(TINY.replace(recurrent_gain=0.5), over, task="recall", steps=10, log_every=10)
    train_many(TINY, {"seed": [3, 5]}, task="recall", steps=10, log_every=10)
    assert loop.init_states.hits == drawn + 2
    monkeypatch.setattr(loop, "init_states", loop._InitStates(16))  # no state fits in 16 bytes
    train_many(TINY, over, task="recall", steps=10, log_every=10)
    train_many(TINY, over, task="recall", steps=10, log_every=10)
    assert loop.init_states.hits == 0 and not loop.init_states._items


def test_clipping_counts_match_a_direct_computation():
    cfg = RunConfig(
        cell="simple",
        activation="identity",
        recurrent_gain=1.3,
        hidden_size=8,
        input_size=2,
        seq_len=30,
        batch_size=8,
    )
    r = train(cfg, "adding", steps=40, learning_rate=1e-3, clip=0.5, log_every=20)
    assert r.clip_count == int((r.grad_norm > 0.5).sum()) and 0 < r.clip_count
    # Step 0's gradient norm, by hand from the same params and the same batch.
    from rnnviz.engine.prepare import Values, seed_key
    from rnnviz.studies.training.model import TRAIN_SALT, TrainSpec, fixed_carry0, init_state

    state = init_state(cfg, TrainSpec("adding", 0, "adam", 20), seed_key(0), Values.of(cfg))
    data = adding_batch(jax.random.fold_in(jax.random.fold_in(jax.random.key(0), TRAIN_SALT), 0), 8, 30)
    carry0 = fixed_carry0(cfg, seed_key(0), Values.of(cfg), 8)
    grads = jax.grad(lambda p: task_loss(cfg, TASKS["adding"], p, carry0, data.inputs, data.targets)[0])(
        state.params
    )
    assert r.grad_norm[0] == pytest.approx(float(optax.tree.norm(grads)), rel=1e-5)
    assert r.clipped[0] == (r.grad_norm[0] > 0.5)


def test_exploding_run_without_clipping_stops_at_the_nonfinite_step():
    cfg = RunConfig(
        cell="simple",
        activation="identity",
        recurrent_gain=3.0,
        hidden_size=8,
        input_size=2,
        seq_len=60,
        batch_size=8,
    )
    r = train(cfg, "adding", steps=200, learning_rate=0.5, optimizer="sgd", clip=None, log_every=50)
    assert r.nonfinite_step is not None and r.steps_run == r.nonfinite_step + 1 < 200
    assert not np.isfinite(r.losses[-1]) or not np.isfinite(r.grad_norm[-1])
    assert np.isfinite(r.losses[:-1]).all() and r.solved_step is None and r.clip_count == 0


def test_solved_step_uses_a_trailing_mean():
    losses = np.r_[np.full(100, 1.0), np.full(100, 0.01)]
    assert solved_step(losses, 1.0) == 100 + 45  # the 50-step mean drops below 0.1 after 45 good steps
    assert solved_step(np.full(10, 0.5), 1.0) is None


def test_bad_training_arguments_are_config_errors_naming_the_field():
    cases = [
        (TINY, dict(task="sorting"), "task"),
        (TINY, dict(task="adding"), "input_size"),
        (TINY, dict(task="recall", lag=6), "lag"),
        (TINY.replace(input_size=2), dict(task="adding", lag=2), "lag"),
        (TINY, dict(task="recall", steps=0), "steps"),
        (TINY, dict(task="recall", learning_rate=0.0), "learning_rate"),
        (TINY, dict(task="recall", optimizer="rmsprop"), "optimizer"),
        (TINY, dict(task="recall", clip=-1.0), "clip"),
        (TINY, dict(task="recall", log_every=0), "log_every"),
        (TINY.replace(batch_size=None), dict(task="recall"), "batch_size"),
        (TINY.replace(input_size=10, seq_len=15), dict(task="copy"), "seq_len"),
    ]
    for cfg, kwargs, field in cases:
        with pytest.raises(ConfigError, match=f"^{field}="):
            train(cfg, **kwargs)
    with pytest.raises(ConfigError, match="^over="):
        train_many(TINY, {"hidden_size": [4, 8]}, task="recall")
    big = RunConfig(cell="lstm", hidden_size=256, input_size=2, seq_len=400, batch_size=128)
    with pytest.raises(BudgetError, match=r"^steps=100000 .*the most steps that fit is \d+"):
        train(big, "adding", steps=100_000)


def test_cli_train_json_and_bad_flags(capsys):
    from rnnviz.cli.main import main

    assert (
        main(
            [
                "train",
                "--task",
                "recall",
                "--input-size",
                "1",
                "--hidden-size",
                "8",
                "--seq-len",
                "6",
                "--batch-size",
                "16",
                "--steps",
                "40",
                "--log-every",
                "20",
                "--learning-rate",
                "0.01",
                "--json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert (
        len(out["losses"]) == 40
        and out["baseline"] == 1.0
        and len(out["profiles"]) == 2
        and "40/40 steps" in captured.err
    )
    assert main(["train", "--task", "adding", "--input-size", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: input_size=3")
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--steps", "many"])
    assert exit_.value.code == 2


def test_trainer_resumes_chunk_by_chunk_and_stops():
    trainer = Trainer(TINY, settings=TrainSettings("recall", steps=60, log_every=20))
    assert trainer.advance() == 20 and not trainer.done
    first = trainer.records()[0]
    trainer.stop()
    assert trainer.done and trainer.advance() == 20
    (rec,) = trainer.records()
    assert rec.stopped and rec.steps_run == 20 and np.array_equal(rec.losses, first.losses)


@pytest.mark.parametrize("block", [None, "reference"])
def test_a_trainer_saved_and_resumed_in_another_trainer_trains_as_one_that_ran_through(tmp_path, block):
    """Two chunks, saved, then a fresh trainer of the same runs resumes and runs the rest: every
    logged value and the kept and final weights equal a trainer that was never stopped."""
    cfg = TINY.replace(cell="gru", block="reference", layers=2) if block else TINY
    settings = TrainSettings("recall", steps=80, log_every=20)
    make = lambda: Trainer(cfg, {"seed": [0, 1]}, settings=settings)  # noqa: E731
    through = make()
    while not through.done:
        through.advance()
    first, path = make(), tmp_path / "runs.npz"
    assert not first.resume(path)  # nothing saved yet
    first.advance(), first.advance()
    first.save(path)
    second = make()
    assert second.resume(path) and second.steps_done == 40
    while not second.done:
        second.advance()
    for want, got in zip(through.records(), second.records(), strict=True):
        logged = ("losses", "metric", "grad_norm", "clipped", "profiles", "recurrent_grad", "weight_steps")
        for name in logged:
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
        jax.tree.map(np.testing.assert_array_equal, got.weight_tree, want.weight_tree)
    other = Trainer(cfg, {"seed": [0, 2]}, settings=settings)
    with pytest.raises(ConfigError, match="saved by the same runs"):
        other.resume(path)


def _set_training(at, **values):
    for name, value in values.items():
        widget = {"task": at.selectbox, "optimizer": at.selectbox}.get(name, at.number_input)
        widget(key=f"train_{name}").set_value(value)
    return at.run()


def test_training_tab_trains_shows_charts_and_verdict_and_does_not_retrain():
    from apptest_helpers import decode, figure_by_title, run_app

    at = run_app({"tab": "Training", "seq_len": "10", "hidden_size": "8"})
    assert not at.exception and any("Press Train" in i.value for i in at.info)
    at = _set_training(at, task="recall", steps=200, batch=16, lr=0.01, log_every=50)
    at.button(key="train_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any(m.value.startswith("**Training:** Learned the recall problem at T=10") for m in at.markdown)
    # the pass that finished the run offers Train again (it had been drawn disabled before the slice)
    assert not at.button(key="train_start").disabled
    loss = figure_by_title(at, "Loss (recall")
    assert len(decode(loss["data"][0]["y"])) == 200 and any(
        s["y0"] == 1.0 for s in loss["layout"]["shapes"]
    )  # the baseline
    heat = figure_by_title(at, "log₁₀ ‖∂L/∂carry_t‖ on a fixed probe batch")
    assert np.asarray(decode(heat["data"][0]["z"])).shape == (4, 11)  # 4 profiles × (T + 1)
    figure_by_title(at, "Global gradient norm")
    at.button(key="train_pin").click().run()
    at.number_input(key="train_steps").set_value(100).run()  # another setting: not trained yet
    assert any("Press Train" in i.value for i in at.info)
    at.number_input(key="train_steps").set_value(200).run()  # back: kept, not retrained
    assert any(m.value.startswith("**Training:** Learned") for m in at.markdown) and not at.exception


def test_stop_button_stops_a_run_in_progress():
    from apptest_helpers import decode, figure_by_title, run_app

    from rnnviz.serve import jobs
    from rnnviz.ui.calls import pool as _pool
    from rnnviz.ui.calls import session_key as _key
    from rnnviz.ui.calls import train_key as _train_key
    from rnnviz.ui.tabs.training import TRAIN_DEFAULTS
    from rnnviz.ui.tabs.training import training_config as _training_config

    at = run_app({"tab": "Training", "seq_len": "10", "hidden_size": "8"})
    at = _set_training(at, task="recall", steps=500, batch=16, log_every=20)
    settings = dict(
        task="recall",
        steps=500,
        log_every=20,
        batch=16,
        optimizer="adam",
        learning_rate=TRAIN_DEFAULTS["lr"],
        clip=TRAIN_DEFAULTS["clip"],
        seeds=1,
        lag=0,
    )
    cfg = _training_config(RunConfig(seq_len=10, hidden_size=8), settings)
    key = _train_key(cfg, settings)
    # A run in progress in its worker, one chunk done (as if Train had been pressed a moment ago).
    _pool().call(jobs.train_start, key, _key(cfg, trained=False), settings, route=key, what="test")
    assert _pool().call(jobs.train_advance, key, 0.0, route=key, what="test").steps_done == 20
    at.session_state["trainer"] = key
    at.button(key="train_stop").click().run()
    assert not at.exception and any("Stopped at step 20" in i.value for i in at.info)
    assert at.session_state["trainer"] is None
    assert len(decode(figure_by_title(at, "Loss (recall")["data"][0]["y"])) == 20
    with pytest.raises(LookupError, match="press Train"):  # finished runs leave the worker
        _pool().call(jobs.train_advance, key, 0.0, route=key, what="test")


def test_training_records_are_schema_one_of_kind_train_and_stay_out_of_the_devices_view(tmp_path):
    from rnnviz.base.measurements import append_records, load_dir, validate
    from rnnviz.bench.learning import train_record
    from rnnviz.frames.costs import records_frame

    r = train(TINY, "recall", steps=20, log_every=10)
    rec = train_record(r, "chunked")
    assert validate(rec) is None and rec["steps_run"] == 20 and rec["kind"] == "train"
    assert validate({**rec, "mode": "fast"}) == "unknown mode 'fast'" and validate(
        {**rec, "kind": "other"}
    ).startswith("unknown kind")
    append_records(tmp_path / "train.jsonl", [rec])
    loaded = load_dir(tmp_path)
    assert len(loaded.records) == 1 and not loaded.skipped
    assert records_frame(loaded.records).empty  # the Devices view shows bench records only


def test_the_training_tab_halves_its_batch_to_fit_the_memory_budget():
    # Mamba's state [H, 16] at the sidebar's H=128, T=1000 fits the analysis's batch but not the
    # Training tab's default 64: the tab trains the largest halving that fits, and says so.
    from rnnviz.config import BudgetError
    from rnnviz.ui.tabs.training import training_config

    cfg = RunConfig(cell="mamba", hidden_size=128, seq_len=1000)
    settings = dict(task="adding", batch=64)
    with pytest.raises(BudgetError):
        cfg.replace(batch_size=64, input_size=2)
    fitted = training_config(cfg, settings)
    assert fitted.batch_size in (32, 16, 8, 4, 2, 1) and fitted.input_size == 2
    with pytest.raises(BudgetError):
        cfg.replace(batch_size=2 * fitted.batch_size, input_size=2)  # the largest halving that fits
    small = training_config(RunConfig(cell="lstm", hidden_size=8, seq_len=20), settings)
    assert small.batch_size == 64  # within the budget: the batch asked

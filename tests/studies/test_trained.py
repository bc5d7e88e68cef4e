"""Trained networks: runs keep their weights at every log step, a saved run reopens bit for
bit (and a changed, cut or foreign file is refused), every view runs at trained weights
and equals the training's own record there, connectivity equals an independent
``jax.grad``, and λ₁ over training equals the QR method written here."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz import (
    ConfigError,
    RunConfig,
    RunFileError,
    analyze,
    connectivity,
    fit_to_data,
    jacobians,
    load_dataset,
    load_run,
    lyapunov,
    sweep,
    train,
)
from rnnviz.base import runfile
from rnnviz.engine.cells import make_cell
from rnnviz.engine.prepare import seed_key
from rnnviz.studies.jacobians import initial_directions
from rnnviz.studies.over_training import over_training, probe_inputs
from rnnviz.studies.sweep import sweep_executable, sweep_reusing
from rnnviz.studies.training.model import PROBE_BATCH


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", order="rows")  # T = 8, I = 8, 10 classes


@pytest.fixture(scope="module")
def text():
    return load_dataset("text", seq_len=16, max_sequences=96)


@pytest.fixture(scope="module")
def digits_run(digits):
    cfg = fit_to_data(RunConfig(cell="lstm", hidden_size=8, batch_size=16, forget_bias=1.0), digits)
    return train(cfg, digits, steps=60, learning_rate=1e-2, log_every=20)


@pytest.fixture(scope="module")
def adding_run():
    cfg = RunConfig(cell="gru", hidden_size=6, input_size=2, seq_len=12, batch_size=8, carry_init="learned")
    return train(cfg, "adding", steps=30, learning_rate=1e-2, log_every=10)


@pytest.fixture(scope="module")
def saved(adding_run, tmp_path_factory):
    return adding_run.save(tmp_path_factory.mktemp("runs") / "adding.rnnviz")


def _leaves_equal(a, b) -> bool:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(
        np.asarray(x).dtype == np.asarray(y).dtype and np.array_equal(x, y) for x, y in zip(la, lb)
    )


def test_weights_are_kept_at_every_profile_step_and_the_last(adding_run, digits_run):
    assert list(adding_run.weight_steps) == [0, 10, 20, 30]
    assert list(digits_run.weight_steps) == [0, 20, 40, 60]
    w0 = adding_run.weights(0)
    assert w0.step == 0 and w0.label == "gru on adding T=12, step 0"
    assert w0.carry is not None and w0.readout["kernel"].shape == (6, 1)
    # step 0 is the initialisation analyze builds from the same seed
    cfg = adding_run.config
    a0, init = analyze(cfg, params=w0, repeats=1), analyze(cfg, repeats=1)
    assert a0.weights == w0.label and init.weights is None
    assert np.array_equal(a0.log10_grad_norms, init.log10_grad_norms)
    assert not _leaves_equal(adding_run.weights().cell, w0.cell)  # training moved them
    with pytest.raises(ConfigError, match="kept: 0, 10, 20, 30"):
        adding_run.weights(15)


def test_long_runs_keep_every_kth_step_within_the_memory_cap(adding_run, monkeypatch):
    from rnnviz.studies.training import loop

    per_copy = sum(np.asarray(leaf[0]).nbytes for leaf in jax.tree.leaves(adding_run.weight_tree))
    monkeypatch.setattr(loop, "MAX_KEPT_BYTES", 2 * per_copy)  # 3 chunks: every 2nd start is kept
    capped = train(adding_run.config, "adding", steps=30, learning_rate=1e-2, log_every=10)
    assert list(capped.weight_steps) == [0, 20, 30]
    for step in (0, 20, 30):  # the same weights as the uncapped run's, bit for bit
        assert _leaves_equal(capped.weights(step).cell, adding_run.weights(step).cell)
    assert np.array_equal(capped.profiles, adding_run.profiles)


def test_a_diverged_run_keeps_the_weights_it_froze_at():
    cfg = RunConfig(
        cell="simple", activation="identity", recurrent_gain=3.0, hidden_size=8, input_size=2, seq_len=60,
        batch_size=8,
    )  # fmt: skip
    r = train(cfg, "adding", steps=200, learning_rate=0.5, optimizer="sgd", clip=None, log_every=50)
    assert r.nonfinite_step is not None
    assert r.weight_steps[-1] == r.nonfinite_step and (r.weight_steps[:-1] < r.nonfinite_step).all()
    assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(r.weight_tree))


def test_a_saved_run_reopens_bit_for_bit(adding_run, saved):
    again = load_run(saved)
    for f in dataclasses.fields(adding_run):
        a, b = getattr(adding_run, f.name), getattr(again, f.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), f.name
        elif f.name == "weight_tree":
            assert _leaves_equal(a, b)
        else:
            assert a == b, f.name
    header, _ = runfile.read(saved)
    assert header["format"] == runfile.FORMAT and header["versions"]["jax"] == jax.__version__
    assert header["config"]["carry_init"] == "learned" and header["task"] == "adding"
    # the reopened weights give the same analysis
    w, w2 = adding_run.weights(), again.weights()
    cfg = adding_run.config
    assert np.array_equal(
        analyze(cfg, params=w, repeats=1).log10_grad_norms,
        analyze(cfg, params=w2, repeats=1).log10_grad_norms,
    )


def test_a_changed_cut_or_foreign_file_is_refused(saved, tmp_path):
    data = saved.read_bytes()
    cases = {
        "changed": (data[:300] + bytes([data[300] ^ 1]) + data[301:], "checksum does not match"),
        "cut": (data[: len(data) // 2], "truncated"),
        "foreign": (b"PK\x03\x04 a zip file", "not an rnnviz run file"),
        "longer": (data + b"\0", "bytes after the end"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / f"{name}.rnnviz"
        path.write_bytes(content)
        with pytest.raises(RunFileError, match=message) as err:
            load_run(path)
        assert str(err.value).startswith(f"{name}.rnnviz: ")
    header, arrays = runfile.decode(data, "x")
    other = tmp_path / "other.rnnviz"
    other.write_bytes(
        runfile.encode({**header, "format": 99}, arrays).replace(b'"format": 1', b'"format": 99')
    )
    with pytest.raises(RunFileError, match="format 99 .*reads format 1 only"):
        load_run(other)
    # a sealed file whose weights do not fit its own config
    bad = tmp_path / "mismatched.rnnviz"
    runfile.write(bad, {**header, "config": {**header["config"], "hidden_size": 7}}, arrays)
    with pytest.raises(RunFileError, match="weights do not fit its config"):
        load_run(bad)
    bad.write_bytes(runfile.encode({**header, "config": {**header["config"], "cell": "nope"}}, arrays))
    with pytest.raises(RunFileError, match="config is not valid"):
        load_run(bad)


def test_weights_that_do_not_fit_the_config_are_refused(adding_run):
    w = adding_run.weights()
    cfg = adding_run.config
    with pytest.raises(ConfigError, match=r"params=.*needs float32\[7"):
        analyze(cfg.replace(hidden_size=7), params=w)
    with pytest.raises(ConfigError, match="carry_init"):
        analyze(cfg.replace(carry_init="zeros"), params=w)
    with pytest.raises(ConfigError, match="is not a param of lstm|need"):
        analyze(cfg.replace(cell="lstm"), params=w)


def test_analysis_at_kept_weights_equals_the_runs_own_probe_profiles(digits_run, digits):
    # A data task's probe is its first 32 training sequences; analysing exactly those (B = N
    # draws all of them) at the kept weights, through the trained readout, is the profile.
    probe = dataclasses.replace(digits, train=digits.train[:PROBE_BATCH])
    cfg = digits_run.config.replace(batch_size=PROBE_BATCH)
    for i, step in enumerate(digits_run.profile_steps):
        a = analyze(cfg, data=probe, params=digits_run.weights(int(step)), repeats=1)
        np.testing.assert_allclose(a.log10_grad_norms, digits_run.profiles[i], atol=2e-5)
    first, last = digits_run.profiles[0], digits_run.profiles[-1]
    assert not np.allclose(first, last, atol=1e-2)  # the profile moved with training


def test_every_view_runs_at_trained_weights(digits_run, digits):
    cfg, w = digits_run.config, digits_run.weights()
    a = analyze(cfg, data=digits, params=w, repeats=1)
    # the trained readout is read: the loss is far below the untrained ln 10
    assert a.loss < 0.8 * np.log(10) and a.data == "digits rows" and a.readout == "trained"
    assert analyze(cfg, data=digits, repeats=1).readout == "seed"
    # the analysis compiled: the Phase diagram's path goes through it, point by point
    held = sweep_executable.cache_info().misses
    reused = sweep_reusing(cfg, {"recurrent_gain": [1.0, 0.5]}, data=digits, params=w)
    assert sweep_executable.cache_info().misses == held
    df = sweep(cfg, {"recurrent_gain": [1.0, 0.5]}, data=digits, params=w)
    assert reused[["recurrent_gain", "t", "component"]].equals(df[["recurrent_gain", "t", "component"]])
    np.testing.assert_allclose(reused.log10_grad_norm, df.log10_grad_norm, atol=1e-4)
    total = df[df["component"] == "total"]
    np.testing.assert_allclose(
        total[total.recurrent_gain == 1.0]["log10_grad_norm"], a.log10_grad_norms, atol=1e-4
    )
    # the swept gain scales the trained recurrence: 0.5 equals kernels × 0.5 by hand
    half = dataclasses.replace(w, cell=_scaled_recurrence(w.cell, 0.5))
    np.testing.assert_allclose(
        total[total.recurrent_gain == 0.5]["log10_grad_norm"],
        analyze(cfg, data=digits, params=half, repeats=1).log10_grad_norms,
        atol=1e-4,
    )
    j = jacobians(cfg, k=2, data=digits, params=w)
    jac = _step_jacobian_exact(cfg, w, digits, a)
    np.testing.assert_allclose(j.singular_values[0], np.linalg.svd(jac, compute_uv=False)[:2], rtol=1e-4)
    ly, ly0 = lyapunov(cfg, k=2, data=digits, params=w), lyapunov(cfg, k=2, data=digits)
    assert np.isfinite(ly.exponents).all() and not np.allclose(ly.exponents, ly0.exponents)


def _scaled_recurrence(cell, gain):
    return {
        k: (
            {**v, "kernel": (v["kernel"] * np.float32(gain)).astype(v["kernel"].dtype)}
            if k.startswith("h")
            else v
        )
        for k, v in cell.items()
    }


def _step_jacobian_exact(cfg, w, ds, a):
    """J_1 = ∂carry_1/∂carry_0 of example 0 by jax.jacobian of the flattened step."""
    cell = make_cell(cfg)
    c0 = tuple(jnp.asarray(a.carries[k][0, 0]) for k in cfg.carry_components)
    x1 = jnp.asarray(a.inputs[0, 0])

    def step(v):
        c = (v[:8], v[8:])
        new, _ = cell.apply({"params": w.cell}, c, x1)
        return jnp.concatenate(new)

    return np.asarray(jax.jacobian(step)(jnp.concatenate(c0)), np.float64)


def _independent_log_prob(cfg, w, xs, step, target):
    cell = make_cell(cfg)
    carry = cell.initialize_carry(jax.random.key(0), xs.shape[1:])
    ys = []
    for t in range(xs.shape[0]):
        carry, y = cell.apply({"params": w.cell}, carry, xs[t])
        ys.append(y)
    logits = ys[step - 1] @ w.readout["kernel"] + w.readout["bias"]
    return jax.nn.log_softmax(logits)[target], ys


@pytest.mark.parametrize("cell", ["lstm", "simple", "mlstm"])  # mlstm: a matrix memory, trained
def test_connectivity_equals_an_independent_grad(text, cell):
    fb = 1.0 if cell == "lstm" else 0.0
    cfg = fit_to_data(RunConfig(cell=cell, hidden_size=8, batch_size=16, forget_bias=fb), text)
    run = train(cfg, text, steps=20, learning_rate=1e-2, log_every=10)
    assert np.isfinite(run.losses).all() and run.losses[-5:].mean() < run.losses[:5].mean()
    w = run.weights()
    c = connectivity(cfg, text, 5, params=w, step=11)
    assert c.measure == "target" and c.step == 11 and c.target == int(text.targets[5, 10])
    xs = jnp.asarray(text.inputs[5])
    g = jax.jit(
        jax.grad(lambda x: _independent_log_prob(cfg.replace(batch_size=None), w, x, 11, c.target)[0])
    )(xs)
    ref = np.linalg.norm(np.asarray(g, np.float64), axis=-1)
    np.testing.assert_allclose(c.log10[:11], np.log10(ref[:11]), atol=1e-4)
    assert np.isneginf(c.log10[11:]).all()  # inputs after τ cannot matter
    lp = _independent_log_prob(cfg.replace(batch_size=None), w, xs, 11, c.target)[0]
    assert abs(c.log_prob - float(lp)) < 1e-5
    assert c.text == "".join(text.vocab[i] for i in text.inputs[5].argmax(-1))
    # the output measure: the Frobenius norm of ∂y_τ/∂x_t, against jax.jacobian
    o = connectivity(cfg, text, 5, params=w, step=11, measure="output")
    jac = jax.jit(
        jax.jacobian(lambda x: _independent_log_prob(cfg.replace(batch_size=None), w, x, 11, 0)[1][10])
    )(xs)
    fro = np.sqrt((np.asarray(jac, np.float64) ** 2).sum(axis=(0, 2)))  # [T]
    np.testing.assert_allclose(o.log10[:11], np.log10(fro[:11]), atol=1e-4)


def test_connectivity_is_exact_where_float32_underflows(digits):
    cfg = fit_to_data(RunConfig(cell="simple", hidden_size=8, recurrent_gain=0.05, input_scale=1.0), digits)
    pixels = load_dataset("digits", order="pixels")  # T = 64: 0.05^60 is far below float32
    cfg = fit_to_data(cfg, pixels)
    c = connectivity(cfg, pixels, 0)
    xs = jnp.asarray(pixels.inputs[0])
    cell = make_cell(c.config)

    def y_last(x):
        carry = cell.initialize_carry(jax.random.key(0), x.shape[1:])
        for t in range(x.shape[0]):
            carry, y = cell.apply({"params": c.params}, carry, x[t])
        return y

    fro = np.sqrt((np.asarray(jax.jacobian(y_last)(xs), np.float64) ** 2).sum(axis=(0, 2)))
    assert (fro[:20] == 0).all() and np.isfinite(c.log10[:20]).all() and c.log10[0] < -40
    ok = fro > 1e-30
    np.testing.assert_allclose(c.log10[ok], np.log10(fro[ok]), atol=1e-3)
    assert c.reach(0.01) < 10  # a contracting tanh RNN forgets within a few pixels


def test_bad_connectivity_arguments_are_config_errors(text, adding_run):
    cfg = fit_to_data(RunConfig(hidden_size=8), text)
    with pytest.raises(ConfigError, match="index"):
        connectivity(cfg, text, 10**6)
    with pytest.raises(ConfigError, match="'output'"):
        connectivity(cfg, text, 0, measure="target")  # no trained readout
    with pytest.raises(ConfigError, match="measure"):
        connectivity(cfg, text, 0, measure="nope")
    with pytest.raises(ConfigError, match="step"):
        connectivity(cfg, text, 0, step=0)


def _qr_exponents(cfg, w, xs, k, warmup):
    """The QR method in a Python loop over jax.jacobian of each step (float64 QR)."""
    cell = make_cell(cfg)
    n = cfg.hidden_size
    step = jax.jit(lambda v, x: cell.apply({"params": w.cell}, v, x)[0])
    jac_of = jax.jit(jax.jacobian(lambda v, x: cell.apply({"params": w.cell}, v, x)[0]))
    out = []
    for b in range(xs.shape[0]):
        h = jnp.asarray(w.carry)
        q = np.asarray(initial_directions(seed_key(cfg.seed), n, k), np.float64)  # the same start
        total = np.zeros(k)
        for t in range(xs.shape[1]):
            q, r = np.linalg.qr(np.asarray(jac_of(h, xs[b, t]), np.float64) @ q)
            if t >= warmup:
                total += np.log(np.abs(np.diag(r)))
            h = step(h, xs[b, t])
        out.append(np.sort(total / (xs.shape[1] - warmup))[::-1])
    return np.mean(out, axis=0)


def test_lyapunov_exponents_over_training_equal_the_qr_method_by_hand(adding_run):
    ot = over_training(adding_run, k=2)
    assert list(ot.steps) == [0, 10, 20, 30] and ot.exponents.shape == (4, 2)
    assert ot.singular_values.shape == (4, 12, 2) and list(ot.jacobian_steps) == list(range(1, 13))
    assert np.isfinite(ot.loss).all() and ot.probe == PROBE_BATCH
    xs = probe_inputs(adding_run)
    cfg = adding_run.config.replace(batch_size=None)
    for i in (0, 3):
        w = adding_run.weights(int(ot.steps[i]))
        np.testing.assert_allclose(ot.exponents[i], _qr_exponents(cfg, w, xs, 2, warmup=1), atol=2e-4)
    # the spectrum of J_t along the first probe example, against jax.jacobian's SVD
    w = adding_run.weights(30)
    cell = make_cell(cfg)
    h = jnp.asarray(w.carry)
    for t in range(3):
        jac = jax.jacobian(lambda v, t=t: cell.apply({"params": w.cell}, v, xs[0, t])[0])(h)
        np.testing.assert_allclose(ot.singular_values[3, t], np.linalg.svd(np.asarray(jac))[1][:2], rtol=1e-4)
        h = cell.apply({"params": w.cell}, h, xs[0, t])[0]


def test_cli_saves_a_run_and_every_command_reopens_it(tmp_path, capsys):
    from rnnviz.cli.main import main

    path = tmp_path / "text.rnnviz"
    common = ["--cell", "gru", "--hidden-size", "8", "--batch-size", "8"]
    assert main(["train", "--data", "text", "--seq-len", "16", "--max-sequences", "96", *common,
                 "--steps", "20", "--log-every", "10", "--save", str(path)]) == 0  # fmt: skip
    run = load_run(path)
    assert list(run.weight_steps) == [0, 10, 20] and run.data_source[0] == "text"
    capsys.readouterr()
    assert main(["analyze", "--weights", str(path), "--step", "10", "--repeats", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    text = load_dataset("text", seq_len=16, max_sequences=96)
    cfg = fit_to_data(run.config, text)
    a = analyze(cfg, data=text, params=run.weights(10), repeats=1)
    assert out["weights"] == "gru on text prose T=16, step 10" and out["data"] == "text prose T=16"
    np.testing.assert_allclose(out["log10_grad_norms"], a.log10_grad_norms, atol=1e-6)
    assert main(["connectivity", "--weights", str(path), "--index", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    c = connectivity(cfg, text, 3, params=run.weights())
    assert out["measure"] == "target" and out["text"] == c.text
    np.testing.assert_allclose([np.nan if v is None else v for v in out["log10"]], c.log10, atol=1e-6)
    assert main(["connectivity", "--weights", str(path), "--index", "3"]) == 0
    assert "reaches back" in capsys.readouterr().out
    assert main(["connectivity", "--weights", str(path), "--index", "2", "--count", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["indices"] == [2, 3, 4] and out["reach"]["0.01"][1] == c.reach(0.01)
    assert main(["lyapunov", "--weights", str(path), "--over-training", "--k", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ot = over_training(run, k=1)
    assert out["steps"] == [0, 10, 20]
    np.testing.assert_allclose(np.asarray(out["exponents"]), ot.exponents, rtol=1e-6)
    assert main(["analyze", "--weights", str(path), "--hidden-size", "9"]) == 2
    assert "needs float32[9]" in capsys.readouterr().err
    (tmp_path / "cut.rnnviz").write_bytes(path.read_bytes()[:100])
    assert main(["connectivity", "--weights", str(tmp_path / "cut.rnnviz")]) == 2
    assert "cut.rnnviz: truncated" in capsys.readouterr().err


# ---- run files saved before the house move (0.2.0, flat layout) still open ------------------

PRE_MOVE = Path(__file__).with_name("data")


@pytest.mark.parametrize(
    "name", ["mlstm-digits-unbiased", "mamba-digits-unbiased", "gated_deltanet-digits-unbiased"]
)
def test_a_run_saved_before_the_input_biases_opens_as_the_same_network(name):
    # written at 063120f, before q, k, v (Mamba: in_proj) had biases; pre-bias.json records what
    # that code read back: every leaf's shape and sum, the analysis at the weights
    recorded = json.loads((PRE_MOVE / "pre-bias.json").read_text())[name]
    run = load_run(PRE_MOVE / f"{name}.rnnviz")
    weights = run.weights()
    got = {
        jax.tree_util.keystr(p): np.asarray(v)
        for p, v in jax.tree_util.tree_flatten_with_path(weights.tree())[0]
    }
    added = {path for path in got.keys() - recorded["leaves"].keys()}
    assert added and all(path.endswith("['bias']") for path in added), added
    for path in added:
        np.testing.assert_array_equal(got[path], 0.0)
    for path, (shape, total) in recorded["leaves"].items():
        assert list(got[path].shape) == shape and float(got[path].astype(np.float64).sum()) == total, path
    a = analyze(run.config, params=weights, data=load_dataset("digits", order="rows"), repeats=1)
    assert float(a.loss) == pytest.approx(recorded["loss_at_trained_weights"], rel=1e-6)
    assert float(a.log10_grad_norms[0]) == pytest.approx(recorded["log10_grad_norm_0"], abs=1e-5)


@pytest.mark.parametrize("name", ["lstm-adding-v0.2", "gru-digits-v0.2"])
def test_a_run_file_saved_before_the_move_opens_with_the_same_weights_and_numbers(name):
    # written by 0.2.0's rnnviz.training.saved (tests/studies/data/pre-move.json records what
    # that code read back from them: every leaf's shape and sum, the analysis at the weights)
    recorded = json.loads((PRE_MOVE / "pre-move.json").read_text())[name]
    run = load_run(PRE_MOVE / f"{name}.rnnviz")
    # what the file recorded, and the fields added since (block, layers) at their defaults
    assert run.config == RunConfig.from_mapping(recorded["config"])
    assert {k: v for k, v in run.config.to_dict().items() if k in recorded["config"]} == recorded["config"]
    weights = run.weights()
    assert weights.label == recorded["label"]
    leaves = jax.tree_util.tree_flatten_with_path(weights.tree())[0]
    got = {
        jax.tree_util.keystr(p): [list(np.shape(v)), float(np.asarray(v, np.float64).sum())]
        for p, v in leaves
    }
    assert got.keys() == recorded["leaves"].keys()
    for path, (shape, total) in recorded["leaves"].items():
        assert got[path][0] == shape, path
        assert got[path][1] == pytest.approx(total, rel=0, abs=1e-12), path  # bit for bit
    data = load_dataset("digits", order="rows") if "digits" in name else None
    a = analyze(run.config, params=weights, data=data, repeats=1)
    assert float(a.loss) == pytest.approx(recorded["loss_at_trained_weights"], rel=1e-6)
    assert float(a.log10_grad_norms[0]) == pytest.approx(recorded["log10_grad_norm_0"], abs=1e-5)

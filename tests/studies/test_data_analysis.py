"""Every view on real data: the analysis of a data set's batch equals a plain ``jax.grad``
of the same loss written here, the seed draws batches without recompiling, padding never
carries gradient, and sweeps, strategies, Lyapunov exponents and Jacobians run on the same
batch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz import (
    ConfigError,
    RunConfig,
    analyze,
    compare_strategies,
    fit_to_data,
    jacobians,
    load_dataset,
    lyapunov,
    sweep,
)
from rnnviz.analysis import executables, is_compiled
from rnnviz.engine.cells import make_cell
from rnnviz.engine.losses import data_arrays
from rnnviz.engine.prepare import prepared_batch


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits", order="rows")  # T = 8, I = 8, 10 classes


@pytest.fixture(scope="module")
def text():
    return load_dataset("text", seq_len=12, max_sequences=64)


@pytest.fixture(scope="module")
def ragged(tmp_path_factory):
    """Regression targets on sequences of lengths 3…6 padded to T = 6."""
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("data") / "ragged.npz"
    lengths = np.array([6, 3, 5, 4, 6, 3, 4, 5, 6, 3])
    np.savez(
        path,
        inputs=rng.normal(size=(10, 6, 2)).astype(np.float32),
        targets=rng.normal(size=(10, 6, 2)).astype(np.float32),
        lengths=lengths,
    )
    return load_dataset(path)


@pytest.fixture(scope="module")
def ragged_classes(tmp_path_factory):
    """Three classes on sequences of lengths 2…7 padded to T = 7."""
    rng = np.random.default_rng(1)
    path = tmp_path_factory.mktemp("data") / "classes.npz"
    np.savez(
        path,
        inputs=rng.normal(size=(12, 7, 3)).astype(np.float32),
        labels=np.arange(12) % 3,
        lengths=np.array([7, 2, 5, 3, 7, 6, 4, 2, 7, 5, 3, 6]),
    )
    return load_dataset(path)


@pytest.fixture(scope="module")
def unlabelled(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "plain.npy"
    np.save(path, np.random.default_rng(2).normal(size=(9, 5, 2)).astype(np.float32))
    return load_dataset(path)


def _loop_loss(cfg, params, carry0, xs, obj, ds):
    """The data's loss written out step by step: a Python loop over ``cell.apply``, the
    readout and the loss by hand (no rnnviz loss code)."""
    cell = make_cell(cfg)
    carry, ys = carry0, []
    for t in range(cfg.seq_len):
        carry, y = cell.apply({"params": params}, carry, xs[:, t])
        ys.append(y.astype(jnp.float32))
    y = jnp.stack(ys, axis=1)  # [B, T, O]
    real = obj.mask.astype(jnp.float32)
    if ds.kind == "unlabelled":  # cfg.loss = "last": ½ Σ_b ‖y at the last real step‖²
        last = real.sum(1).astype(jnp.int32) - 1
        return 0.5 * jnp.sum(y[jnp.arange(y.shape[0]), last] ** 2)
    logits = jnp.einsum("bto,of->btf", y, obj.w) + obj.b[None, None, :]
    if ds.kind == "classification":
        last = real.sum(1).astype(jnp.int32) - 1
        at_last = logits[jnp.arange(y.shape[0]), last]
        return -jnp.mean(jax.nn.log_softmax(at_last)[jnp.arange(y.shape[0]), obj.labels])
    if ds.kind == "next-step":
        logp = jax.nn.log_softmax(logits)
        picked = jnp.take_along_axis(logp, obj.targets[..., None], axis=-1)[..., 0]
        return -jnp.sum(picked * real) / jnp.sum(real)
    err = ((logits - obj.targets) ** 2).mean(-1)
    return jnp.sum(err * real) / jnp.sum(real)


@pytest.mark.parametrize(
    ("source", "cell"),
    [
        ("digits", "lstm"),
        ("text", "gru"),
        ("ragged", "simple"),
        ("digits", "lru"),
        ("ragged_classes", "lstm"),
        ("unlabelled", "gru"),
        ("digits", "mamba"),  # the traced pass (rnnviz.engine.strategies.traced) with a task loss
    ],
)
def test_analysis_on_data_equals_plain_grad_of_the_same_batch(source, cell, request):
    ds = request.getfixturevalue(source)
    cfg = fit_to_data(RunConfig(cell=cell, hidden_size=6, batch_size=4, seed=2), ds)
    a = analyze(cfg, data=ds, repeats=1)
    params, carry0, xs, obj = jax.device_get(tuple(prepared_batch(cfg, data=ds)))
    np.testing.assert_array_equal(a.inputs, xs)
    loss, grads = jax.value_and_grad(_loop_loss, argnums=(1, 3))(cfg, params, carry0, xs, obj, ds)
    g_params, g_xs = grads
    np.testing.assert_allclose(a.loss, loss, rtol=1e-5)
    for got, want in zip(jax.tree.leaves(a.param_grads), jax.tree.leaves(g_params)):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-6)
    # ‖∂L/∂x_t‖ against autograd w.r.t. the inputs
    want_x = np.sqrt((np.asarray(g_xs, np.float64) ** 2).sum(axis=(0, 2)))
    np.testing.assert_allclose(a.input_grad_norms, want_x, rtol=2e-4, atol=1e-9)
    assert a.data == ds.label


def test_the_batch_comes_from_the_training_split(digits):
    cfg = fit_to_data(RunConfig(batch_size=8, seed=5), digits)
    xs = np.asarray(prepared_batch(cfg, data=digits).xs)
    train = digits.inputs[digits.train].reshape(len(digits.train), -1)
    rows = {r.tobytes(): i for i, r in enumerate(train)}
    assert all(x.reshape(-1).tobytes() in rows for x in xs)  # each one a training sequence
    assert len({x.tobytes() for x in xs}) == 8  # drawn without replacement


def test_a_new_seed_draws_another_batch_without_compiling(digits):
    cfg = fit_to_data(RunConfig(cell="gru", hidden_size=5, batch_size=3), digits)
    first = analyze(cfg, data=digits, repeats=1)
    assert is_compiled(cfg.replace(seed=9), data=digits)
    misses = executables.cache_info().misses
    other = analyze(cfg.replace(seed=9), data=digits, repeats=1)
    again = analyze(cfg, data=digits, repeats=1)
    assert executables.cache_info().misses == misses and other.timing.cache_hit
    assert not np.array_equal(first.inputs, other.inputs)
    np.testing.assert_array_equal(first.inputs, again.inputs)  # the seed decides the batch
    np.testing.assert_array_equal(first.grad_norms, again.grad_norms)


def test_padding_carries_no_gradient(ragged):
    cfg = fit_to_data(RunConfig(cell="simple", hidden_size=4, batch_size=4, seed=1), ragged)
    a = analyze(cfg, data=ragged, repeats=1)
    _, _, _, obj = prepared_batch(cfg, data=ragged)
    lengths = np.asarray(obj.mask).sum(1)
    assert lengths.min() < cfg.seq_len  # the batch holds a padded sequence
    # ∂L/∂carry_t of example b is exactly 0 after its last real step, nonzero before
    for b, n in enumerate(lengths):
        assert np.all(a.example_grad_norms[n + 1 :, b] == 0)
        assert np.all(a.example_grad_norms[1 : n + 1, b] > 0)
        assert np.isneginf(a.log10_example_grad_norms[n + 1 :, b]).all()


def test_sweep_on_data_equals_each_analysis(text):
    cfg = fit_to_data(RunConfig(cell="lstm", hidden_size=6, batch_size=2), text)
    df = sweep(cfg, {"seed": [0, 3], "recurrent_gain": [0.5]}, data=text)
    for seed in (0, 3):
        a = analyze(cfg.replace(seed=seed, recurrent_gain=0.5), data=text, repeats=1, log_pass=True)
        rows = df[(df.seed == seed) & (df.component == "total")].sort_values("t")
        np.testing.assert_allclose(rows.log10_grad_norm, a.log10_grad_norms, atol=1e-4)


def test_a_grid_on_data_through_the_compiled_analysis_equals_the_sweep(text):
    """The Phase diagram's path (:func:`rnnviz.studies.sweep.sweep_reusing`) on data: each
    point's batch drawn by its seed, as the sweep draws it."""
    from rnnviz.studies.sweep import sweep_executable, sweep_reusing

    cfg = fit_to_data(RunConfig(cell="gru", hidden_size=5, batch_size=2), text)
    over = {"seed": [0, 3], "recurrent_gain": [0.5, 1.2]}
    analyze(cfg, data=text, repeats=1)
    held = sweep_executable.cache_info().misses
    reused = sweep_reusing(cfg, over, data=text)
    assert sweep_executable.cache_info().misses == held  # through the analysis
    df = sweep(cfg, over, data=text)
    keys = ["seed", "recurrent_gain", "t", "component"]
    assert reused[keys].equals(df[keys])
    np.testing.assert_allclose(reused.log10_grad_norm, df.log10_grad_norm, atol=1e-4)


def test_strategies_agree_on_data(digits):
    cfg = fit_to_data(RunConfig(cell="gru", hidden_size=6, batch_size=2), digits)
    df = compare_strategies(cfg, repeats=1, strategies=["accumulate", "per_step", "fused"], data=digits)
    assert list(df.strategy) == ["accumulate", "per_step", "fused"]
    assert (df.rel_diff < 1e-5).all()


def test_jacobians_and_lyapunov_follow_the_data(digits):
    cfg = fit_to_data(RunConfig(cell="simple", hidden_size=6, batch_size=2, seed=4), digits)
    j = jacobians(cfg, k=6, data=digits)
    a = analyze(cfg, data=digits, repeats=1)
    params = jax.device_get(prepared_batch(cfg, data=digits).params)
    cell = make_cell(cfg)
    for t in (1, 5):
        h, x = a.carries["h"][t - 1][0], a.inputs[0, t - 1]
        jac = jax.jacobian(lambda c: cell.apply({"params": params}, c, x)[0])(h)
        np.testing.assert_allclose(j.singular_values[t - 1], np.linalg.svd(jac, compute_uv=False), rtol=1e-4)
    on_data = lyapunov(cfg, k=2, data=digits, measure_decay=False)
    synthetic = lyapunov(cfg, k=2, measure_decay=False)
    assert on_data.exponents.shape == (2,) and not np.allclose(on_data.exponents, synthetic.exponents)


def test_a_config_that_does_not_fit_the_data_is_refused(digits, text):
    base = fit_to_data(RunConfig(), digits)
    with pytest.raises(ConfigError, match=r"seq_len.*the data's 8 steps for digits.*fit_to_data"):
        analyze(base.replace(seq_len=9), data=digits)
    with pytest.raises(ConfigError, match=r"input_size.*8 features"):
        sweep(base.replace(input_size=3), {"seed": [0]}, data=digits)
    with pytest.raises(ConfigError, match=r"loss.*'all', where a next-step loss"):
        analyze(fit_to_data(RunConfig(), text).replace(loss="last"), data=text)


def test_the_training_split_is_cached_once(digits):
    assert data_arrays(digits) is data_arrays(digits)
    assert data_arrays(digits).inputs.shape == (len(digits.train), 8, 8)

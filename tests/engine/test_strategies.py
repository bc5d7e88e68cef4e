"""Accumulator, per-step tangents and split transpose: same gradient, different cost."""

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CELLS

from rnnviz import RunConfig, analyze
from rnnviz.base.measurements import SCHEMA, append_records, load_records, validate
from rnnviz.config import BudgetError, ConfigError
from rnnviz.engine.cells import PARAM_GROUPS, cell_spec, make_cell, param_group
from rnnviz.engine.gradients import full_carry0, loss_from_outputs, time_major
from rnnviz.engine.prepare import prepared_inputs
from rnnviz.engine.rollout import rollout
from rnnviz.engine.strategies.fused import fused_rollout, outer_norms
from rnnviz.engine.strategies.registry import lift_params
from rnnviz.studies.comparisons import available_strategies, compare_strategies, measure, scaling


def _flat(tree):
    return np.concatenate([np.ravel(x).astype(np.float64) for x in jax.tree.leaves(tree)])


def test_split_transpose_is_available_in_the_installed_jax():
    # The README says so; if a future JAX drops it, this flags the README as stale.
    assert "split_transpose" in available_strategies()


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("batch", [None, 3])
def test_every_strategy_gives_the_same_param_grads(cell, batch):
    cfg = RunConfig(
        cell=cell,
        hidden_size=8,
        input_size=4,
        seq_len=12,
        batch_size=batch,
        loss="all",
        forget_bias=1.0 if cell == "lstm" else 0.0,
    )
    # The strategies that only re-arrange the params (per-step copies, the split transpose)
    # do the same whatever the cell and batch: they run batched, for a cell of each carry
    # kind (one leaf, two leaves, complex), and per_step wherever it checks fused's
    # contribution norms. The ones with their own carry handling (fused, checkpoint,
    # parallel) run for every cell, batched and unbatched.
    fusable = cell_spec(cell).forms.fused is not None
    rearranging = batch is not None and cell in ("simple", "lstm", "lru")
    wanted = [
        s
        for s in available_strategies(cfg)
        if s not in ("per_step", "split_transpose") or rearranging or (s == "per_step" and fusable)
    ]
    runs = {
        s: analyze(cfg.replace(strategy=s), repeats=1, log_pass=False) for s in wanted
    }  # parallel for linear cells
    ref = _flat(runs["accumulate"].param_grads)
    assert np.linalg.norm(ref) > 0
    acc = runs["accumulate"]
    for s, a in runs.items():
        got = _flat(a.param_grads)
        assert np.linalg.norm(got - ref) <= 1e-5 * np.linalg.norm(ref), s
        np.testing.assert_allclose(a.grad_norms, acc.grad_norms, rtol=1e-5, err_msg=s)
        np.testing.assert_allclose(a.input_grad_norms, acc.input_grad_norms, rtol=1e-5, err_msg=s)
        np.testing.assert_allclose(_flat(a.carries), _flat(acc.carries), rtol=1e-5, atol=1e-6, err_msg=s)
    assert acc.param_grad_by_step is None
    assert "checkpoint" in runs and ("fused" in runs) == fusable
    if "per_step" in runs:
        assert runs["per_step"].param_grad_by_step.shape == (12, len(PARAM_GROUPS))
    if {"fused", "per_step"} <= set(
        runs
    ):  # the Gram identity gives the norms of per_step's explicit tangents
        np.testing.assert_allclose(
            runs["fused"].param_grad_by_step, runs["per_step"].param_grad_by_step, rtol=1e-4, atol=1e-7
        )


@pytest.mark.parametrize("cell", ["gru"])  # its n gate is the non-additive reverse path
def test_fused_and_checkpoint_agree_in_bfloat16(cell):
    # bfloat16 keeps 8 mantissa bits (ε ≈ 7.8e-3), and the strategies sum T steps in
    # different orders (fused: one float32-accumulated GEMM), so 2 % of ‖∂L/∂W‖.
    cfg = RunConfig(
        cell=cell, hidden_size=8, input_size=4, seq_len=12, batch_size=3, loss="all", dtype="bfloat16"
    )
    acc = analyze(cfg, repeats=1)
    for s in ("fused", "checkpoint"):
        a = analyze(cfg.replace(strategy=s), repeats=1)
        ref, got = _flat(acc.param_grads), _flat(a.param_grads)
        assert np.linalg.norm(got - ref) <= 2e-2 * np.linalg.norm(ref), s
        np.testing.assert_allclose(a.grad_norms, acc.grad_norms, rtol=1e-2, err_msg=s)


def test_fused_scan_custom_vjp_passes_check_grads():
    from jax.test_util import check_grads

    cfg = RunConfig(cell="gru", hidden_size=3, input_size=2, seq_len=4, batch_size=2, strategy="fused")
    params, carry0, xs = prepared_inputs(cfg)

    def f(p, c0, x):
        return fused_rollout(cfg, p, c0, time_major(cfg, x))

    check_grads(f, (params, carry0, xs), order=1, modes=("rev",), atol=2e-2, rtol=2e-2, eps=1e-2)


def test_gram_outer_norms_match_explicit_products_and_do_not_underflow():
    k1, k2 = jax.random.split(jax.random.key(0))
    a = jax.random.normal(k1, (5, 4, 6))
    d = jax.random.normal(k2, (5, 4, 7)) * 1e-25  # squares of 1e-25 underflow float32
    want = np.linalg.norm(np.einsum("tbm,tbn->tmn", np.float64(a), np.float64(d)), axis=(1, 2))
    np.testing.assert_allclose(outer_norms(a, d), want, rtol=1e-5)
    np.testing.assert_allclose(
        outer_norms(a[:, 0], d[:, 0]),
        np.linalg.norm(a[:, 0], axis=1) * np.linalg.norm(np.float64(d[:, 0]), axis=1),
        rtol=1e-5,
    )


@pytest.mark.parametrize("batched", [False, True])
def test_block_outer_norms_are_the_norms_of_the_diagonal_blocks(batched):
    """With k blocks (the sLSTM's heads), the norm of the block-diagonal part of Aᵀ D, where D's
    columns are G gates of k heads each: the gradient of block-diagonal kernels only."""
    t, b, heads, d_head, gates = 5, 3, 2, 3, 4
    rng = np.random.default_rng(0)
    a = rng.standard_normal((t, b, heads * d_head))
    d = rng.standard_normal((t, b, gates * heads * d_head)) * 1e-25
    full = np.einsum("tbm,tbn->tmn", a, d).reshape(t, heads, d_head, gates, heads, d_head)
    blocks = np.stack([full[:, g, :, :, g, :] for g in range(heads)], axis=1)
    want = np.linalg.norm(blocks.reshape(t, -1), axis=1)
    if not batched:
        a, d = a[:, 0], d[:, 0]
        full = np.einsum("tm,tn->tmn", a, d).reshape(t, heads, d_head, gates, heads, d_head)
        want = np.linalg.norm(
            np.stack([full[:, g, :, :, g, :] for g in range(heads)], 1).reshape(t, -1), axis=1
        )
    got = outer_norms(jnp.asarray(a, jnp.float32), jnp.asarray(d, jnp.float32), heads)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_checkpoint_admits_a_length_the_others_refuse():
    # H=128: checkpoint needs ≈ 2.8 GiB (XLA's peak, scaled from the perf suite's T = 100 000
    # record: ≈ 2.7 GiB), the accumulator's T steps of residuals ≈ 7 GiB
    values = dict(cell="lstm", hidden_size=128, input_size=8, batch_size=32, seq_len=20_000)
    assert RunConfig(**values, strategy="checkpoint").seq_len == 20_000
    with pytest.raises(BudgetError) as err:
        RunConfig(**values)
    assert "strategy='checkpoint'" in str(err.value) and "largest seq_len that fits" in str(err.value)


def test_a_cell_without_a_fused_form_cannot_ask_for_fused():
    with pytest.raises(ConfigError) as err:
        RunConfig(cell="indrnn", activation="relu", strategy="fused")
    assert err.value.field == "strategy" and "no fused form" in str(err.value) and "lstm" in str(err.value)
    assert "fused" not in available_strategies(RunConfig(cell="lru"))


@pytest.mark.parametrize("cell", ["simple", "lstm"])
def test_per_step_tangents_sum_to_the_accumulated_gradient(cell):
    cfg = RunConfig(cell=cell, hidden_size=5, input_size=3, seq_len=9, batch_size=2, strategy="per_step")
    params, carry0, xs = prepared_inputs(cfg)
    c = make_cell(cfg)

    def loss(p, per_step):
        carries = rollout(c, p, full_carry0(cfg, carry0), time_major(cfg, xs), per_step_params=per_step)
        h = carries[1] if cfg.cell == "lstm" else carries
        return loss_from_outputs(cfg, h[1:])

    tangents = jax.jit(jax.grad(functools.partial(loss, per_step=True)))(lift_params(params, "per_step", 9))
    accumulated = jax.jit(jax.grad(functools.partial(loss, per_step=False)))(params)
    summed = jax.tree.map(lambda g: g.sum(axis=0), tangents)
    # Summing T = 9 float32 tangents rounds by up to about T·ε·max|g| (3e-7 here): a summed
    # entry near 2e-3 differed by 1.3e-7 when XLA:CPU's back end stopped fusing multiply-adds (-O0)
    atol = 9 * np.finfo(np.float32).eps * np.abs(_flat(accumulated)).max()
    np.testing.assert_allclose(_flat(summed), _flat(accumulated), rtol=1e-5, atol=atol)
    # The engine's [T, G] contribution norms are the norms of exactly these tangents.
    a = analyze(cfg, repeats=1)
    want = np.zeros((9, len(PARAM_GROUPS)))
    for path, leaf in jax.tree_util.tree_flatten_with_path(tangents)[0]:
        g = PARAM_GROUPS.index(param_group(tuple(k.key for k in path), cell_spec(cfg.cell).params.recurrent))
        want[:, g] += np.sum(np.asarray(leaf).reshape(9, -1) ** 2, axis=1)
    np.testing.assert_allclose(a.param_grad_by_step, np.sqrt(want), rtol=1e-5)


def test_last_loss_contributions_of_an_identity_rnn_follow_the_gain():
    # Linear RNN, loss last: step t's contribution to ∂L/∂W_h is (Wᵀ)^{T-t} h_T ⊗ h_{t-1}.
    a = analyze(
        RunConfig(activation="identity", recurrent_gain=0.5, seq_len=20, strategy="per_step"), repeats=1
    )
    rec = a.param_grad_by_step[:, PARAM_GROUPS.index("input")]  # ‖(Wᵀ)^{T-t}h_T‖·‖x_t‖-ish
    assert rec[-1] > 1e3 * rec[5]  # early steps contribute orders of magnitude less


def test_compare_strategies_frame():
    df = compare_strategies(RunConfig(cell="gru", seq_len=15, hidden_size=8), repeats=2)
    assert list(df["strategy"]) == list(
        available_strategies(RunConfig(cell="gru"))
    ) and "parallel" not in list(df["strategy"])
    assert set(df.columns) >= {"compile_s", "run_s", "peak_bytes", "max_abs_diff", "rel_diff"}
    assert df.loc[df.strategy == "accumulate", "rel_diff"].item() == 0.0
    assert (df["rel_diff"] < 1e-5).all() and (df["run_s"] > 0).all()
    per, acc = (df.loc[df.strategy == s, "peak_bytes"].item() for s in ("per_step", "accumulate"))
    assert per > acc


def test_scaling_shows_per_step_memory_growing_with_t_times_p():
    df = scaling(
        RunConfig(cell="lstm", hidden_size=16, batch_size=2),
        [20, 80],
        strategies=["accumulate", "per_step"],
        repeats=1,
    )
    mem = df.pivot(index="seq_len", columns="strategy", values="peak_bytes")
    p = 4 * (16 * 16 + 8 * 16) + 4 * 16
    # Going from T=20 to T=80 adds at least 60 more copies of the params (4 bytes each).
    assert mem.loc[80, "per_step"] - mem.loc[20, "per_step"] >= 60 * p * 4
    assert mem.loc[80, "per_step"] - mem.loc[20, "per_step"] > 4 * (
        mem.loc[80, "accumulate"] - mem.loc[20, "accumulate"]
    )


def test_measure_records_round_trip_through_the_schema(tmp_path):
    cfg = RunConfig(cell="simple", seq_len=10, hidden_size=4)
    recs = [
        measure(cfg, measure="grad", strategy="plain_grad", repeats=2),
        measure(cfg, measure="analyze", repeats=2),
    ]
    for r in recs:
        assert validate(r) is None and r["schema"] == SCHEMA
        spread = [
            r["run_min_s"],
            r["run_s"],
            r["run_max_s"],
        ]  # min, median, max: an ordering, not a time limit
        assert spread == sorted(spread) and r["flops"] > 0
    path = tmp_path / "runs" / "r.jsonl"
    assert append_records(path, recs) == 2
    back = load_records([path])
    assert back.skipped == [] and back.records == json.loads(json.dumps(recs))
    assert RunConfig(**back.records[1]["config"]) == cfg


def test_loading_skips_bad_lines_with_reasons(tmp_path):
    good = measure(RunConfig(seq_len=3, hidden_size=2), measure="grad", strategy="plain_grad", repeats=1)
    lines = [
        json.dumps(good),
        json.dumps({**good, "schema": 2}),
        json.dumps({**good, "run_s": "fast"}),
        json.dumps({k: v for k, v in good.items() if k != "device_name"}),
        '{"schema": 1, "truncated',
        "[1, 2, 3]",
        "x" * 1_000_001,
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    got = load_records([path, tmp_path / "missing.jsonl"])
    assert len(got.records) == 1
    reasons = [r for _, r in got.skipped]
    assert reasons == [
        "unknown schema 2",
        "field 'run_s' has type str",
        "missing field 'device_name'",
        "not valid JSON",
        "not a JSON object",
        "line too long",
        "unreadable: No such file or directory",
    ]
    with pytest.raises(ValueError, match="invalid record"):
        append_records(tmp_path / "x.jsonl", [{**good, "strategy": "magic"}])


def test_a_fused_form_without_a_hand_written_reverse_uses_the_pointwise_vjp():
    # A plugin may give only `pointwise`: the reverse pass then recomputes its VJP from the
    # saved z^h. Same gradients as the hand-written reverse and as the accumulator.
    import dataclasses

    from rnnviz.tables.cells import register_cell, unregister_cell

    spec = cell_spec("gru")
    generic = dataclasses.replace(
        spec,
        display=dataclasses.replace(spec.display, group="plugin"),
        forms=dataclasses.replace(
            spec.forms, fused=dataclasses.replace(spec.forms.fused, step=None, backward=None)
        ),
    )
    register_cell("gru_generic_fused", generic)
    try:
        cfg = RunConfig(
            cell="gru_generic_fused", hidden_size=6, input_size=3, seq_len=10, batch_size=2, loss="all"
        )
        acc, fused = analyze(cfg, repeats=1), analyze(cfg.replace(strategy="fused"), repeats=1)
        hand = analyze(cfg.replace(cell="gru", strategy="fused"), repeats=1)
        np.testing.assert_allclose(_flat(fused.param_grads), _flat(acc.param_grads), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(_flat(fused.param_grads), _flat(hand.param_grads), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(fused.grad_norms, acc.grad_norms, rtol=1e-5)
    finally:
        unregister_cell("gru_generic_fused")


@pytest.mark.parametrize("t_len", [1, 7, 16, 50])
def test_blocked_scan_equals_the_associative_scan_and_a_loop(t_len):
    from rnnviz.engine.strategies.parallel import _compose, blocked_scan

    k1, k2 = jax.random.split(jax.random.key(t_len))
    rotation = jnp.complex64(np.exp(1j * 0.3))
    a = (
        jax.random.uniform(k1, (t_len, 3, 4), minval=0.5, maxval=1.0).astype(jnp.complex64) * rotation
    )  # complex, as the LRU's
    b = jax.random.normal(k2, (t_len, 3, 4)).astype(jnp.complex64)
    want, h = [], jnp.zeros((3, 4), jnp.complex64)
    for t in range(t_len):
        h = a[t] * h + b[t]
        want.append(h)
    np.testing.assert_allclose(blocked_scan(a, b), np.stack(want), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        jax.lax.associative_scan(_compose, (a, b))[1], np.stack(want), rtol=1e-5, atol=1e-6
    )

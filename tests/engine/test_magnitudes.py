"""Exact gradient magnitudes: robust norms, the log-magnitude reverse pass, and what the
charts, verdicts, exports and sweeps say about gradients far below float32's range."""

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz import RunConfig, analyze, charts
from rnnviz.analysis import needs_log_pass
from rnnviz.engine.norms import Scaled, combine, log10, log10_combine, robust_norm
from rnnviz.frames.dynamics import phase_frames
from rnnviz.frames.gradients import bound_frame, gradient_long_frame, timestep_frame
from rnnviz.frames.verdicts import verdict
from rnnviz.studies.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("size", [1e-30, 1e-24, 1e24, 1e30])
def test_robust_norm_equals_float64_norm_where_squares_leave_float32(size):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 300)) * size).astype(np.float32)
    want = np.linalg.norm(x.astype(np.float64), axis=1)
    naive = np.asarray(jnp.sqrt(jnp.sum(jnp.square(jnp.asarray(x)), axis=1)))
    assert not np.allclose(naive, want, rtol=1e-3, atol=0)  # the squares underflow or overflow
    np.testing.assert_allclose(np.asarray(robust_norm(jnp.asarray(x), 1), np.float64), want, rtol=1e-5)
    np.testing.assert_allclose(robust_norm(x, 1), want, rtol=1e-12)


def test_robust_norm_zero_inf_nan():
    x = jnp.asarray([[0.0, 0.0], [np.inf, 1.0], [-np.inf, 1.0], [np.nan, 1.0]], jnp.float32)
    got = np.asarray(robust_norm(x, 1))
    assert got[0] == 0 and got[1] == np.inf and got[2] == np.inf and np.isnan(got[3])


def test_scaled_values_combine_beyond_float32():
    # 3·2^-700 and 4·2^-700 (float32 holds neither): the norm is 5·2^-700.
    s = Scaled(jnp.asarray([0.75, 1.0], jnp.float32), jnp.asarray([-698, -698], jnp.int32))
    got = log10(combine(s, 0))
    assert got == pytest.approx(math.log10(5) - 700 * math.log10(2), abs=1e-6)
    assert log10_combine(np.array([-np.inf, -np.inf]), 0) == -np.inf
    assert log10_combine(np.array([-400.0, -np.inf]), 0) == pytest.approx(-400.0)


def _linear(gain, t_len, batch):
    return RunConfig(
        activation="identity", recurrent_gain=gain, hidden_size=16, batch_size=batch, seq_len=t_len
    )


@pytest.mark.parametrize("batch", [3, None])
@pytest.mark.parametrize("gain,t_len", [(0.5, 100), (0.9, 5000)])
def test_closed_form_log_magnitudes_far_below_float32(gain, t_len, batch):
    # W_h = g·Q, Q orthogonal, identity activation, loss last: ‖∂L/∂h_t‖ = g^{T−t}·‖h_T‖.
    a = analyze(_linear(gain, t_len, batch), repeats=1)
    lags = t_len - np.arange(t_len + 1)
    want = a.log10_grad_norms[-1] + lags * np.log10(gain)
    np.testing.assert_allclose(a.log10_grad_norms, want, atol=1e-4, rtol=0)
    np.testing.assert_allclose(a.log10_component_grad_norms["h"], want, atol=1e-4, rtol=0)
    assert a.log10_source == "log pass"
    assert np.isfinite(a.log10_grad_norms).all()
    if t_len == 5000:
        assert (
            a.grad_norms[0] == 0.0
        )  # float32 itself cannot hold ∂L/∂h_0 (≈10⁻²²⁸); its magnitude is still exact
    else:  # 6.6e-30: float32 holds it, and the robust norm no longer squares it to 0
        assert a.grad_norms[0] == pytest.approx(10 ** a.log10_grad_norms[0], rel=1e-4)
    if batch:  # per example: the same decay, each from its own end value
        ex = a.log10_example_grad_norms
        np.testing.assert_allclose(ex, ex[-1] + lags[:, None] * np.log10(gain), atol=1e-4, rtol=0)


def test_float32_norms_are_kept_where_they_are_exact_and_agree_with_the_log_pass():
    cfg = RunConfig(cell="gru", seq_len=60, batch_size=4, loss="all")
    a = analyze(cfg, repeats=1)
    assert a.log10_source == "float32" and a.timing.log_pass_s == 0.0  # no extra pass when not needed
    b = analyze(cfg, repeats=1, log_pass=True)
    assert b.log10_source == "log pass" and b.timing.log_pass_s > 0
    np.testing.assert_allclose(b.log10_grad_norms, a.log10_grad_norms, atol=2e-6)
    np.testing.assert_allclose(b.log10_example_grad_norms, a.log10_example_grad_norms, atol=2e-6)
    np.testing.assert_allclose(a.log10_grad_norms, np.log10(a.grad_norms.astype(np.float64)), atol=1e-6)


def test_needs_log_pass_only_at_the_edges_of_the_range():
    ok = np.full((1, 5), 1e-3)
    assert not needs_log_pass("float32", ok, ok.T)
    assert needs_log_pass("float32", np.array([[0.0, 1.0, 1.0]]), np.ones((3, 1)))  # a zero before T
    assert not needs_log_pass("float32", np.array([[1.0, 1.0, 0.0]]), np.ones((3, 1)))  # zero at T: exact
    assert needs_log_pass("float32", np.array([[1e-33, 1.0]]), np.ones((2, 1)))
    assert needs_log_pass("float32", np.array([[np.inf, 1.0]]), np.ones((2, 1)))
    assert needs_log_pass("float16", ok, ok.T)  # too narrow a range to trust


def test_lstm_dc_at_T_is_a_true_zero_not_a_tiny_number():
    for log_pass in (None, True):
        a = analyze(RunConfig(cell="lstm", seq_len=30, batch_size=2), repeats=1, log_pass=log_pass)
        assert a.log10_component_grad_norms["c"][-1] == -np.inf
        assert np.isfinite(a.log10_component_grad_norms["c"][:-1]).all()
        assert np.isfinite(a.log10_grad_norms).all()


_REFERENCE = textwrap.dedent("""
    import json, sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np
    from rnnviz import RunConfig
    from rnnviz.engine.cells import make_cell, output_of
    from rnnviz.engine.gradients import full_carry0, loss_from_outputs, time_major
    from rnnviz.engine.norms import robust_norm
    from rnnviz.engine.rollout import rollout

    cfg = RunConfig(**json.loads(sys.argv[1]))
    saved = np.load(sys.argv[2], allow_pickle=True)
    f64 = lambda t: jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), t)
    params, xs = f64(saved["params"].item()), f64(saved["xs"])
    carry0 = f64(tuple(saved["carry0"]) if cfg.cell == "lstm" else saved["carry0"])
    cell = make_cell(cfg).clone(dtype=jnp.float64, param_dtype=jnp.float64)
    xs_tm = time_major(cfg, xs)
    c0 = full_carry0(cfg, carry0)
    eps = jax.tree.map(lambda c: jnp.zeros((cfg.seq_len + 1,) + c.shape, jnp.float64), c0)
    def loss(e):
        ys = output_of(cfg, rollout(cell, params, c0, xs_tm, e))[1:]
        return loss_from_outputs(cfg, ys.astype(jnp.float64))
    g = jax.jit(jax.grad(loss))(eps)
    leaves = jax.tree.leaves(g)
    comps = np.stack([robust_norm(np.asarray(leaf), tuple(range(1, leaf.ndim))) for leaf in leaves])
    total = robust_norm(comps, 0)
    with np.errstate(divide="ignore"):
        print(json.dumps(np.log10(total).tolist()))
""")


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_lstm_and_gru_at_T1000_match_a_float64_reference(cell, tmp_path):
    cfg = RunConfig(cell=cell, hidden_size=32, input_size=8, seq_len=1000, batch_size=2, recurrent_gain=0.5)
    a = analyze(cfg, repeats=1)
    from rnnviz.engine.prepare import prepared_inputs

    params, carry0, xs = prepared_inputs(cfg)
    to_np = lambda t: __import__("jax").tree.map(np.asarray, t)  # noqa: E731
    np.savez(
        tmp_path / "in.npz",
        params=np.array(to_np(params), dtype=object),
        carry0=np.array(to_np(carry0), dtype=object) if cell != "lstm" else np.stack(to_np(carry0)),
        xs=np.asarray(xs),
    )
    out = subprocess.run(
        [sys.executable, "-c", _REFERENCE, json.dumps(cfg.to_dict()), str(tmp_path / "in.npz")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=True,
    )
    want = np.asarray(json.loads(out.stdout), np.float64)
    assert np.isfinite(want).all() and want.min() > -300  # float64 holds the whole range here …
    assert (a.grad_norms == 0).sum() > 100  # … float32 does not: the case the log pass exists for
    np.testing.assert_allclose(a.log10_grad_norms, want, atol=1e-3, rtol=0)


def test_verdict_wording_for_each_case():
    deep = analyze(_linear(0.9, 5000, None), repeats=1)
    v = verdict(deep)
    assert v.kind == "vanishing" and v.log10_ratio == pytest.approx(5000 * math.log10(0.9), abs=1e-3)
    assert "shrinks by a factor 10⁻²²⁹ over 5000 steps back" in v.text
    assert "underflow to 0" in v.text and "exactly 0" not in v.text

    fine = verdict(analyze(RunConfig(seq_len=20), repeats=1))
    assert "float32" not in fine.text and "underflow" not in fine.text

    boom = verdict(analyze(RunConfig(activation="identity", recurrent_gain=1.5, seq_len=110), repeats=1))
    assert boom.kind == "exploding" and "grows by a factor 10¹⁹" in boom.text and "overflow" in boom.text
    # within two decades the factor itself (W_h = g·Q, identity: exactly g^T), never 10⁰ or 10⁻¹
    cases = (
        (0.999, "shrinks by a factor 0.9 "),
        (1.002, "grows by a factor 1.2 "),
        (0.99, "by a factor 0.33 "),
    )
    for gain, factor in (*cases, (0.98, "by a factor 0.11 "), (1.0, None)):
        near = verdict(analyze(RunConfig(activation="identity", recurrent_gain=gain, seq_len=110), repeats=1))
        assert near.kind == "stable" and near.log10_ratio == pytest.approx(110 * math.log10(gain), abs=1e-4)
        want = factor or "gradient keeps its size over 110 steps back"
        assert want in near.text, near.text

    cut = analyze(
        RunConfig(activation="identity", recurrent_gain=0.0, seq_len=10), repeats=1
    )  # W_h = 0: no path back
    assert np.isneginf(cut.log10_grad_norms[:-1]).all() and verdict(cut).kind == "vanishing"
    assert "exactly 0 at t=0" in verdict(cut).text and "no path back" in verdict(cut).text

    dead = analyze(RunConfig(activation="relu", input_scale=0.0, carry_init="zeros", seq_len=10), repeats=1)
    assert verdict(dead).text.startswith("the loss does not depend on the final carry")


def test_chart_axis_spans_the_real_range_with_power_ticks():
    a = analyze(_linear(0.9, 5000, None), repeats=1)
    fig = charts.gradient_figure(gradient_long_frame(a), bound_frame(a))
    y = np.asarray(fig.data[0].y, np.float64)
    assert np.isfinite(y).all() and y.min() == pytest.approx(a.log10_grad_norms[0])
    ticks = list(fig.layout.yaxis.ticktext)
    assert min(fig.layout.yaxis.tickvals) <= y.min() and any("⁻²" in t for t in ticks)
    mantissa, exponent = fig.data[0].customdata[0]  # the hover reads the magnitude, 1.62×10⁻²²⁸
    assert (
        exponent == -228
        and mantissa == pytest.approx(10 ** (y[0] + 228))
        and charts.POW10_HOVER in fig.data[0].hovertemplate
    )
    np.testing.assert_allclose(
        np.asarray(fig.data[-1].y, np.float64), y, atol=1e-3
    )  # the Pascanu bound is tight here


def test_exports_carry_log10_next_to_float32_values():
    a = analyze(_linear(0.5, 100, 3), repeats=1)
    df = timestep_frame(a)
    assert {"grad_norm", "log10_grad_norm", "log10_grad_norm_h"} <= set(df.columns)
    assert df["grad_norm"].iloc[0] == pytest.approx(7.6e-30, rel=0.1) and df["log10_grad_norm"].iloc[
        0
    ] == pytest.approx(a.log10_grad_norms[0])
    js = a.to_json()
    assert js["log10_source"] == "log pass" and js["log10_grad_norms"][0] == pytest.approx(
        a.log10_grad_norms[0]
    )
    lstm = analyze(RunConfig(cell="lstm", seq_len=5), repeats=1).to_json()
    assert lstm["log10_component_grad_norms"]["c"][-1] is None  # JSON has no −∞: a true zero is null


def test_phase_diagram_values_below_float32():
    t_len = 200
    gains = [0.3, 0.4, 0.5]
    df = sweep(RunConfig(activation="identity", hidden_size=8, seq_len=t_len), {"recurrent_gain": gains})
    matrix, _ = phase_frames(df)
    assert np.isfinite(matrix.to_numpy()).all()
    for g in gains:  # closed form: log₁₀ ratio = lag·log₁₀ g, to −104 at g = 0.3
        np.testing.assert_allclose(matrix[g].to_numpy(), matrix.index.to_numpy() * np.log10(g), atol=1e-3)
    assert matrix.to_numpy().min() < -100

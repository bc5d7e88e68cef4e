"""The engine against independent references: a Python loop, finite differences,
a split sequence, and closed forms."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CELLS, MATRIX_CARRIES

from rnnviz import ConfigError, RunConfig, analyze
from rnnviz.analysis import executables
from rnnviz.config import estimate_flops
from rnnviz.engine.cells import final_output, make_cell, outputs
from rnnviz.engine.gradients import loss_from_outputs, step_gradients, time_major
from rnnviz.engine.prepare import prepared_inputs, static_config
from rnnviz.engine.rollout import reference_loop, rollout


def _setup(cfg):
    params, carry0, xs = prepared_inputs(cfg)
    return make_cell(cfg), params, carry0, xs


def _grads(cfg, c, params, carry0, xs):
    """step_gradients jitted at the call site, as the engine does."""
    return jax.jit(functools.partial(step_gradients, cfg, c))(params, carry0, xs)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("batch", [None, 3])
def test_scan_equals_python_loop(cell, batch):
    cfg = RunConfig(cell=cell, hidden_size=5, input_size=3, seq_len=6, batch_size=batch, carry_init="normal")
    c, params, carry0, xs = _setup(cfg)
    got = jax.jit(functools.partial(rollout, c))(params, carry0, time_major(cfg, xs))
    want = reference_loop(c, params, carry0, time_major(cfg, xs))
    for g, w, first in zip(jax.tree.leaves(got), jax.tree.leaves(want), jax.tree.leaves(carry0)):
        # [T+1, (B,) H], or a matrix memory's [T+1, (B,) heads, d, d] (Mamba's [T+1, (B,) H, N])
        assert g.shape == (7,) + first.shape
        assert (first.shape[0] == 3) if batch else (first.ndim < 2 or cell in MATRIX_CARRIES)
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _perturbed_loss(cfg, c, params, carry0, xs):
    """L as a function of a perturbation eps of the carries: no autodiff involved."""

    @jax.jit
    def loss(eps):
        carries = rollout(c, params, carry0, time_major(cfg, xs), eps)
        return loss_from_outputs(cfg, outputs(cfg, params, carries, time_major(cfg, xs)))

    return loss


#: Central-difference steps other than 1e-2: the xLSTM cells' stabiliser m_t = max(·, ·) and the
#: mLSTM's denominator max(|nᵀq|, e^{−m}) have kinks within 1e-2 of this trajectory (at t = 2 a
#: 1e-2 step gives 0.078 for the mLSTM where 1e-3 and 3e-4 give 7.482, the analytic value).
FD_STEP = {"mlstm": 1e-3, "slstm": 1e-3}


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("loss", ["last", "all"])
def test_per_step_carry_gradients_match_finite_differences(cell, loss):
    cfg = RunConfig(
        cell=cell,
        hidden_size=4,
        input_size=2,
        seq_len=5,
        batch_size=2,
        loss=loss,
        carry_init="normal",
        carry_scale=0.5,
    )
    c, params, carry0, xs = _setup(cfg)
    sg = _grads(cfg, c, params, carry0, xs)
    loss = _perturbed_loss(cfg, c, params, carry0, xs)
    zeros = jax.tree.map(lambda a: jnp.zeros((cfg.seq_len + 1,) + a.shape, a.dtype), carry0)
    rng = np.random.default_rng(0)
    h = FD_STEP.get(cell, 1e-2)
    for t in range(cfg.seq_len + 1):
        direction = jax.tree.map(lambda a: jnp.asarray(rng.standard_normal(a.shape), jnp.float32), carry0)
        analytic = sum(
            float(jnp.vdot(g[t], d))
            for g, d in zip(jax.tree.leaves(sg.carry_grads), jax.tree.leaves(direction))
        )
        plus = jax.tree.map(lambda z, d: z.at[t].set(h * d), zeros, direction)
        minus = jax.tree.map(lambda z, d: z.at[t].set(-h * d), zeros, direction)
        fd = (float(loss(plus)) - float(loss(minus))) / (2 * h)
        assert analytic == pytest.approx(fd, rel=2e-3, abs=1e-4), (t, analytic, fd)


@pytest.mark.parametrize("cell", CELLS)
def test_per_step_gradient_equals_gradient_of_the_split_sequence(cell):
    cfg = RunConfig(cell=cell, hidden_size=5, input_size=3, seq_len=8, batch_size=2, loss="all")
    c, params, carry0, xs = _setup(cfg)
    sg = _grads(cfg, c, params, carry0, xs)
    xs_tm = time_major(cfg, xs)
    head = jax.jit(functools.partial(rollout, c))(params, carry0, xs_tm)
    for t in (0, 3, 8):
        carry_t = jax.tree.map(lambda a: a[t], head)
        prefix = (
            outputs(cfg, params, head, xs_tm)[: t - 1] if t > 0 else None
        )  # outputs before step t: constants here

        def tail_loss(ct):
            # y_t is read off carry_t (t ≥ 1: its h, or the readout), so it enters the loss directly too.
            rest = rollout(c, params, ct, xs_tm[t:])
            ys = outputs(cfg, params, rest, xs_tm[t:])
            if t > 0:
                own = final_output(cfg, params, ct, xs_tm[t - 1])[None]
                ys = jnp.concatenate([prefix, own, ys], axis=0)
            return loss_from_outputs(cfg, ys)

        want = jax.jit(jax.grad(tail_loss))(carry_t)
        for g, w in zip(jax.tree.leaves(sg.carry_grads), jax.tree.leaves(want)):
            np.testing.assert_allclose(g[t], w, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("gain", [0.5, 0.9, 1.0, 1.1])
def test_closed_form_identity_rnn_ratio_is_the_gain(gain):
    # h_t = W h_{t-1} + U x_t + b with W = g·Q: ∂L/∂h_t = (Wᵀ)^{T-t} h_T, norm g^{T-t}·‖h_T‖.
    cfg = RunConfig(activation="identity", recurrent_gain=gain, seq_len=30, hidden_size=16, batch_size=3)
    a = analyze(cfg, repeats=1)
    g = a.grad_norms.astype(np.float64)
    np.testing.assert_allclose(g[:-1] / g[1:], gain, rtol=1e-4)
    h_last = a.carries["h"][-1]
    assert g[-1] == pytest.approx(np.linalg.norm(h_last), rel=1e-6)


def test_lstm_last_loss_has_zero_cell_gradient_at_T():
    a = analyze(RunConfig(cell="lstm", seq_len=10, hidden_size=8), repeats=1)
    assert a.component_grad_norms["c"][-1] == 0.0
    assert a.component_grad_norms["h"][-1] > 0.0
    assert a.component_grad_norms["c"][-2] > 0.0
    np.testing.assert_allclose(
        a.grad_norms**2, a.component_grad_norms["c"] ** 2 + a.component_grad_norms["h"] ** 2, rtol=1e-5
    )


@pytest.mark.parametrize("cell", CELLS)
def test_batched_and_unbatched_agree_per_example(cell):
    cfg_b = RunConfig(
        cell=cell, hidden_size=5, input_size=3, seq_len=6, batch_size=3, carry_init="uniform", loss="all"
    )
    cfg_u = cfg_b.replace(batch_size=None)
    c, params, carry0, xs = _setup(cfg_b)
    batched = _grads(cfg_b, c, params, carry0, xs)
    unbatched = jax.jit(functools.partial(step_gradients, cfg_u, c))
    for b in range(3):
        one = unbatched(params, jax.tree.map(lambda a: a[b], carry0), xs[b])
        for gb, gu in zip(jax.tree.leaves(batched.carry_grads), jax.tree.leaves(one.carry_grads)):
            np.testing.assert_allclose(gb[:, b], gu, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(batched.input_grads[:, b], one.input_grads, rtol=1e-5, atol=1e-7)


def test_example_norms_are_consistent_with_total():
    a = analyze(RunConfig(cell="gru", batch_size=5, seq_len=12), repeats=1)
    assert a.example_grad_norms.shape == (13, 5)
    np.testing.assert_allclose(np.sqrt((a.example_grad_norms**2).sum(axis=1)), a.grad_norms, rtol=1e-5)


@pytest.mark.parametrize("kind", ["zeros", "normal", "uniform", "constant"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_carry_init_distribution_and_dtype(kind, dtype):
    cfg = RunConfig(
        cell="lstm", carry_init=kind, carry_scale=0.5, hidden_size=128, batch_size=64, seq_len=2, dtype=dtype
    )
    a = analyze(cfg, repeats=1, log_pass=False)  # the initial carries are what is checked
    for comp in ("c", "h"):
        c0 = a.carries[comp][0].astype(np.float64)
        assert a.carries[comp].dtype == np.dtype(jnp.dtype(dtype)) and c0.shape == (64, 128)
        if kind == "zeros":
            assert np.all(c0 == 0)
        elif kind == "constant":
            assert np.all(c0 == 0.5)
        elif kind == "normal":
            assert abs(c0.mean()) < 0.02 and c0.std() == pytest.approx(0.5, rel=0.03)
        else:
            assert (
                c0.min() >= -0.5 and c0.max() <= 0.5 and c0.std() == pytest.approx(0.5 / np.sqrt(3), rel=0.03)
            )


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("cell", CELLS)
def test_low_precision_runs_keep_the_carry_dtype(cell, dtype):
    """Params, inputs and carries in the low precision; the mLSTM's memory (C, n, m) in float32,
    its ``state_dtype``, as the reference's kernels keep it."""
    a = analyze(RunConfig(cell=cell, dtype=dtype, seq_len=5, hidden_size=8), repeats=1)
    want = np.dtype(jnp.dtype(dtype))
    carry_dtype = np.dtype(np.float32) if cell == "mlstm" else want
    assert all(v.dtype == carry_dtype for v in a.carries.values())
    assert a.inputs.dtype == want
    assert all(leaf.dtype == want for leaf in jax.tree.leaves(a.params))
    assert np.all(np.isfinite(a.grad_norms)) and a.grad_norms[-1] > 0


@pytest.mark.parametrize("batch", [None, 4])
def test_learned_carry_gets_a_nonzero_gradient_equal_to_summed_carry0_gradient(batch):
    cfg = RunConfig(
        cell="lstm",
        carry_init="learned",
        carry_scale=0.1,
        seq_len=6,
        hidden_size=8,
        batch_size=batch,
        loss="all",
    )
    a = analyze(cfg, repeats=1)
    assert a.learned_carry_grad is not None
    c, params, carry0, xs = _setup(cfg)
    assert carry0[0].shape == (8,)
    sg = _grads(cfg, c, params, carry0, xs)
    for comp, g_eps in zip(("c", "h"), sg.carry_grads):
        g = a.learned_carry_grad[comp]
        assert g.shape == (8,) and np.abs(g).max() > 0
        want = np.asarray(g_eps[0]) if batch is None else np.asarray(g_eps[0]).sum(axis=0)
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-8)
    assert (
        a.learned_carry_grad is not None
        and analyze(cfg.replace(carry_init="zeros"), repeats=1).learned_carry_grad is None
    )


def test_recurrent_gain_scales_the_recurrent_kernels_only():
    base = analyze(RunConfig(cell="gru", seq_len=3), repeats=1).params
    scaled = analyze(RunConfig(cell="gru", seq_len=3, recurrent_gain=0.9), repeats=1).params
    for name in base:
        for leaf in base[name]:
            factor = 0.9 if name.startswith("h") and leaf == "kernel" else 1.0
            np.testing.assert_allclose(scaled[name][leaf], factor * base[name][leaf], rtol=1e-6)
    q = base["hr"]["kernel"]
    np.testing.assert_allclose(q.T @ q, np.eye(q.shape[0]), atol=1e-5)  # orthogonal at gain 1


def test_forget_bias_goes_into_the_lstm_forget_gate():
    p = analyze(RunConfig(cell="lstm", seq_len=3, forget_bias=1.0), repeats=1).params
    np.testing.assert_allclose(p["hf"]["bias"], 1.0)
    np.testing.assert_allclose(p["hi"]["bias"], 0.0)


def test_identity_recurrent_init_and_inputs_are_seeded():
    a = analyze(RunConfig(recurrent_init="identity", inputs="sine", seq_len=20), repeats=1)
    np.testing.assert_allclose(a.params["h"]["kernel"], np.eye(32))
    assert a.inputs.shape == (4, 20, 8) and np.abs(a.inputs).max() <= 1.0
    again = analyze(RunConfig(recurrent_init="identity", inputs="sine", seq_len=20), repeats=1)
    other = analyze(RunConfig(recurrent_init="identity", inputs="sine", seq_len=20, seed=1), repeats=1)
    np.testing.assert_array_equal(a.inputs, again.inputs)
    assert not np.allclose(a.inputs, other.inputs)


def test_changing_values_does_not_recompile():
    cfg = RunConfig(cell="mgu", seq_len=9, hidden_size=7)
    analyze(cfg, repeats=1)
    misses = executables.cache_info().misses
    for change in (
        dict(seed=5),
        dict(recurrent_gain=0.3),
        dict(carry_scale=2.0, carry_init="zeros"),
        dict(input_scale=4.0),
    ):
        b = analyze(cfg.replace(**change), repeats=1)
        assert b.timing.cache_hit
    assert executables.cache_info().misses == misses
    analyze(cfg.replace(seq_len=10), repeats=1)
    assert executables.cache_info().misses == misses + 1


def test_only_the_run_once_executables_and_small_analyses_are_compiled_for_compile_speed(monkeypatch):
    """The parameters, inputs and a training init run once per value change: they compile
    with :data:`RUN_ONCE_OPTIONS` on the CPU. So does the analysis of a shape of at most
    :data:`QUICK_COMPILE_FLOPS` (with its log pass and its plain-grad yardstick), and
    ``Timing.quick_compiled`` says so; a larger one, and any analysis under
    ``optimised_code()`` (what recorded measurements time), compiles with XLA's defaults."""
    from rnnviz.analysis import baseline_executable, compile_analysis
    from rnnviz.engine import compile as compile_mod
    from rnnviz.studies.comparisons import measure
    from rnnviz.studies.training import train

    seen = {}
    real = compile_mod.compile_lowered

    def spy(lowered, what, options=None):
        seen[what] = options
        return real(lowered, what, options)

    monkeypatch.setattr(compile_mod, "compile_lowered", spy)
    from rnnviz.studies.training import loop

    monkeypatch.setattr(loop, "compile_lowered", spy)
    quick = compile_mod.RUN_ONCE_OPTIONS
    # a shape no other test uses: each executable is compiled here, where the spy sees it
    cfg = RunConfig(cell="gru", seq_len=17, hidden_size=7, batch_size=3, input_size=2)
    assert estimate_flops(cfg) <= compile_mod.QUICK_COMPILE_FLOPS
    assert analyze(cfg, repeats=1, log_pass=True).timing.quick_compiled
    assert seen["prepare_params"] == seen["draw_inputs"] == quick
    assert seen["analysis_outputs"] == seen["log_outputs"] == quick
    device = jax.devices("cpu")[0]
    baseline_executable(static_config(cfg), device)
    assert seen.pop("plain_grad") == quick
    # a recorded measurement: the same shape's fastest code, compiled apart from the quick one
    del seen["analysis_outputs"]
    measure(cfg, repeats=1)
    assert seen.pop("analysis_outputs") is None
    measure(cfg, measure="grad", strategy="plain_grad", repeats=1)
    assert seen["plain_grad"] is None
    # over the threshold (lowered here so that the shape stays small): XLA's defaults, the
    # executable the measurement compiled (nothing compiled again)
    monkeypatch.setattr(compile_mod, "QUICK_COMPILE_FLOPS", estimate_flops(cfg) / 2)
    assert not analyze(cfg.replace(seed=1), repeats=1, log_pass=False).timing.quick_compiled
    assert "analysis_outputs" not in seen and compile_analysis(cfg) is False
    train(cfg, "adding", steps=2, log_every=2)
    assert seen["the gru training init"] == quick
    assert seen["the gru training chunk"] is None
    assert compile_mod.run_once_options(device) == quick


@pytest.mark.parametrize("cell", ["lstm", "mlstm"])
def test_the_run_once_options_draw_what_xlas_defaults_draw(cell):
    """:data:`RUN_ONCE_OPTIONS` change only the machine code. The fusion emitters and one LLVM
    module instead of 32 change no bit of the seed's parameters, carry and inputs; LLVM's -O0
    only float32 rounding (-O3 fuses a multiply and an add), against XLA's defaults named
    here (the suite's own XLA_FLAGS change three of them)."""
    from rnnviz.engine import compile as compile_mod
    from rnnviz.engine.prepare import Values, draw_inputs, prepare_params, seed_key, static_config

    cfg = static_config(RunConfig(cell=cell, hidden_size=6, input_size=3, seq_len=5, batch_size=2))
    device = jax.devices("cpu")[0]
    xla_codegen = {  # the fast options with XLA's emitters and its 32 modules
        **compile_mod.RUN_ONCE_OPTIONS,
        "xla_cpu_use_fusion_emitters": True,
        "xla_cpu_parallel_codegen_split_count": 32,
    }
    defaults = {
        "xla_backend_optimization_level": 3,
        "xla_llvm_disable_expensive_passes": False,
        "xla_cpu_use_fusion_emitters": True,
        "xla_cpu_parallel_codegen_split_count": 32,
    }
    assert set(defaults) == set(compile_mod.RUN_ONCE_OPTIONS)
    for fn in (functools.partial(prepare_params, cfg), functools.partial(draw_inputs, cfg, 5)):
        args = (seed_key(0), Values.of(cfg))
        fast = compile_mod.compile_for(fn, args, device, run_once=True).fn(seed_key(7), Values.of(cfg))
        lowered = jax.jit(fn).lower(*compile_mod.abstract(args, device))

        def draw(options, lowered=lowered):
            return jax.tree.leaves(
                compile_mod.compile_lowered(lowered, "a draw", options)(seed_key(7), Values.of(cfg))
            )

        for a, b, c in zip(jax.tree.leaves(fast), draw(xla_codegen), draw(defaults), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-5, atol=1e-6)


def test_analysis_record_shapes_and_types():
    cfg = RunConfig(cell="lstm", seq_len=11, hidden_size=6, batch_size=None)
    a = analyze(cfg, repeats=3)
    assert a.grad_norms.shape == (12,) and a.input_grad_norms.shape == (11,)
    assert a.carries["c"].shape == (12, 6) and a.example_grad_norms.shape == (12, 1)
    assert isinstance(a.grad_norms, np.ndarray) and isinstance(a.loss, float)
    assert all(isinstance(x, np.ndarray) for x in jax.tree.leaves(a.param_grads))
    spread = [
        a.timing.run_min_s,
        a.timing.run_s,
        a.timing.run_max_s,
    ]  # min, median, max: an ordering, not a time limit
    assert a.timing.repeats == 3 and spread == sorted(spread)
    assert a.timing.peak_bytes > 0 and a.timing.backend == "cpu"
    np.testing.assert_array_equal(a.final_carry["h"], a.carries["h"][-1])
    assert a.nonfinite_carry_step is None and a.nonfinite_grad_step is None


def test_missing_gpu_is_a_config_error():
    if jax.devices()[0].platform == "gpu":
        pytest.skip("a GPU is present")
    with pytest.raises(ConfigError, match="device='gpu'"):
        analyze(RunConfig(device="gpu"))


def test_exploding_run_reports_where_values_overflow():
    # float16 tops out at 65504; 3^t·‖h_0‖ passes that near t = 10.
    a = analyze(RunConfig(activation="identity", recurrent_gain=3.0, seq_len=60, dtype="float16"), repeats=1)
    t = a.nonfinite_carry_step
    assert t is not None and 3 < t < 30
    assert np.all(np.isfinite(a.carry_norms[:t])) and not np.isfinite(a.carry_norms[t])
    assert a.nonfinite_grad_step is not None


def test_gradient_overflow_without_carry_overflow_is_located_and_measured_exactly():
    # Gain 1.5, identity, loss last: the carry stays near 1e20, but ∂L/∂h_t = (Wᵀ)^{T-t} h_T
    # has norm 1.5^{T-t}·‖h_T‖ ≈ 1e40 at t = 0: its float32 elements overflow a few steps back.
    t_len = 110
    a = analyze(RunConfig(activation="identity", recurrent_gain=1.5, seq_len=t_len), repeats=1)
    assert a.nonfinite_carry_step is None
    g = a.nonfinite_grad_step
    assert g is not None and 0 < g < t_len
    assert np.all(np.isfinite(a.grad_norms[g + 1 :])) and not np.isfinite(a.grad_norms[g])
    # The log-magnitude pass still knows the exact size: W = 1.5·Q with Q orthogonal.
    lags = t_len - np.arange(t_len + 1)
    np.testing.assert_allclose(a.log10_grad_norms, a.log10_grad_norms[-1] + lags * np.log10(1.5), atol=1e-4)
    assert a.log10_grad_norms[0] > 38.6


def test_timing_bounded_by_time_runs_once_then_while_under_budget():
    from rnnviz.engine.timing import time_within

    calls = []

    def fn(x):
        calls.append(x)
        return x + 1

    out, t = time_within(fn, (jnp.float32(1.0),), budget_s=0.0, max_repeats=5)
    assert float(out) == 2.0 and t.repeats == 1 and len(calls) == 1  # at least one run, no warm-up
    _, t = time_within(fn, (jnp.float32(1.0),), budget_s=60.0, max_repeats=4)
    assert t.repeats == 4 and len(calls) == 5  # never more than asked
    cfg = RunConfig(cell="lstm", seq_len=30, hidden_size=8)
    fast = analyze(cfg, repeats=5, budget_s=0.0)
    full = analyze(cfg, repeats=2)
    assert fast.timing.repeats == 1 and full.timing.repeats == 2
    np.testing.assert_array_equal(fast.grad_norms, full.grad_norms)


def test_the_interval_of_the_mean_run_is_students_and_timing_stops_once_it_is_tight(monkeypatch):
    from scipy import stats

    from rnnviz.engine import timing

    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 12, 31, 40):
        times = list(rng.lognormal(-3, 0.2, n))
        lo, hi = stats.t.interval(0.90, n - 1, loc=np.mean(times), scale=stats.sem(times))
        expected = (hi - lo) / 2 if n <= 31 else stats.norm.ppf(0.95) * stats.sem(times)
        assert timing.mean_halfwidth(times) == pytest.approx(expected, rel=1e-4), n
    assert timing.mean_halfwidth([0.1]) == float("inf")

    def clocked(durations):
        """A clock whose every timed run lasts the next of ``durations`` seconds."""
        ticks = iter(np.cumsum([0.0] + [d for d in durations for d in (d, 0.0)]))
        monkeypatch.setattr(timing.time, "perf_counter", lambda: float(next(ticks)))

    calls = []
    fn = lambda x: calls.append(x) or x  # noqa: E731
    clocked([0.100, 0.101, 0.099, 0.1, 0.1])  # steady: known to ±10 % after the 3 fewest runs
    _, t = timing.time_until_precise(fn, (jnp.float32(1.0),), max_repeats=8, precision=0.10)
    assert t.repeats == 3 and len(calls) == 4  # and one warm-up
    assert t.halfwidth_s == pytest.approx(timing.mean_halfwidth([0.100, 0.101, 0.099]))
    noisy = [0.1, 0.2, 0.1, 0.2, 0.1, 0.2, 0.1, 0.2]
    clocked(noisy)  # ±50 %: never tight enough, so every allowed run
    _, t = timing.time_until_precise(fn, (jnp.float32(1.0),), max_repeats=5, precision=0.10)
    assert t.repeats == 5 and t.median_s == pytest.approx(0.1) and t.max_s == pytest.approx(0.2)
    clocked(noisy)  # one run allowed: one run
    _, t = timing.time_until_precise(fn, (jnp.float32(1.0),), max_repeats=1, precision=0.10)
    assert t.repeats == 1 and t.halfwidth_s == float("inf")
    monkeypatch.undo()
    cfg = RunConfig(cell="gru", seq_len=9, hidden_size=6)
    a = analyze(cfg, repeats=7, precision=1e9)  # any spread is within: the fewest runs
    assert a.timing.repeats == 3 and 0 < a.timing.run_halfwidth_s < math.inf

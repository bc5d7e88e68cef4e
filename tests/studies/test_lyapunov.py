"""Step Jacobians and Lyapunov exponents: closed forms, an independent float64 computation,
the chaos transition of random tanh networks, and every registered cell."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CELLS

from rnnviz import ConfigError, RunConfig
from rnnviz.base.readings import decay_fit, regime, zero_crossing
from rnnviz.config import BudgetError
from rnnviz.engine.cells import make_cell
from rnnviz.engine.gradients import full_carry0, time_major
from rnnviz.engine.prepare import prepared_inputs
from rnnviz.engine.rollout import reference_loop
from rnnviz.studies.jacobians import carry_dim, choose_method, initial_directions, jacobians, step_jacobian
from rnnviz.studies.lyapunov import lyapunov, lyapunov_phase, lyapunov_sweep


@pytest.mark.parametrize("gain", [0.7, 1.25])
def test_orthogonal_linear_rnn_has_every_exponent_log_g(gain):
    cfg = RunConfig(activation="identity", hidden_size=8, seq_len=120, recurrent_gain=gain, batch_size=2)
    ly = lyapunov(cfg, k=8)
    np.testing.assert_allclose(ly.exponents, math.log(gain), atol=1e-4)
    assert ly.example_exponents.shape == (2, 8) and ly.running.shape == (120, 2, 8)
    # The measured gradient decay of the same network is exactly log g per step too.
    assert ly.decay.slope == pytest.approx(math.log(gain), abs=1e-4)


def test_identity_recurrence_has_zero_exponents():
    cfg = RunConfig(activation="identity", recurrent_init="identity", hidden_size=5, seq_len=60)
    np.testing.assert_allclose(lyapunov(cfg, k=5, measure_decay=False).exponents, 0.0, atol=1e-6)


def test_diagonal_recurrences_have_exponents_log_lambda_sorted():
    cfg = RunConfig(cell="indrnn", activation="identity", hidden_size=6, seq_len=300, batch_size=None)
    u = np.asarray(prepared_inputs(cfg)[0]["u"], np.float64)
    np.testing.assert_allclose(
        lyapunov(cfg, k=6, measure_decay=False).exponents, np.sort(np.log(np.abs(u)))[::-1], atol=1e-4
    )
    # LRU: a complex λ_j acts on (re_j, im_j) as |λ_j|·rotation, so log|λ_j| appears twice.
    # The rotation keeps mixing each pair's two directions, so the estimate converges as 1/T.
    cfg = RunConfig(cell="lru", hidden_size=4, seq_len=2000, batch_size=None, recurrent_gain=0.97)
    p = prepared_inputs(cfg)[0]
    modulus = float(p["a"]) * np.exp(-np.exp(np.asarray(p["nu_log"], np.float64)))
    want = np.sort(np.repeat(np.log(modulus), 2))[::-1]
    np.testing.assert_allclose(lyapunov(cfg, k=8, measure_decay=False).exponents, want, atol=5e-4)


@pytest.mark.parametrize(
    "cell, hidden, k",
    [("rglru", 4, 4), ("mamba", 2, 4)],  # Mamba: 2 channels × N = 16 state units, the top 4
)
def test_input_gated_diagonal_recurrences_have_the_time_averages_of_ln_a(cell, hidden, k):
    # ∂h_t/∂h_{t−1} = diag(a_t) with a_t from the input (RG-LRU a_t, the selective SSM
    # exp(Δ_t A)): λ_j is the time average of ln a_t,j along the trajectory. The QR estimate
    # converges as 1/T from a random start; after its directions align with the units (a
    # warm-up of half the run) it is the average over the rest exactly, up to float32.
    from rnnviz.engine.cells.mamba import selective_ssm_log_decay
    from rnnviz.engine.cells.rglru import rglru_log_a

    log_a = {"rglru": rglru_log_a, "mamba": selective_ssm_log_decay}[cell]
    t_len = 3000
    cfg = RunConfig(cell=cell, hidden_size=hidden, input_size=3, seq_len=t_len, batch_size=None)
    params, _, xs = prepared_inputs(cfg)
    per_step = jax.jit(jax.vmap(lambda x: log_a(params, x)))(time_major(cfg, xs))
    per_step = np.asarray(per_step, np.float64).reshape(t_len, -1)
    want = np.sort(per_step[t_len // 2 :].mean(axis=0))[::-1][:k]
    got = lyapunov(cfg, k=k, measure_decay=False, warmup=t_len // 2).exponents
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def _explicit_jacobians(cfg, example):
    """float64 J_1 … J_T from ``jax.jacfwd`` of one ``cell.apply`` on the carry tuple."""
    params, carry0, xs = prepared_inputs(cfg)
    cell = make_cell(cfg)
    xs_tm = time_major(cfg, xs)
    carries = reference_loop(cell, params, full_carry0(cfg, carry0), xs_tm)
    pick = (lambda a: a[:, example]) if cfg.batch_size else (lambda a: a)
    carries, xs_tm = jax.tree.map(pick, carries), pick(xs_tm)
    out = []
    for t in range(cfg.seq_len):
        c = jax.tree.map(lambda a: a[t], carries)
        jac = jax.jacfwd(lambda cc: cell.apply({"params": params}, cc, xs_tm[t])[0])(c)
        # Block (i, j) = ∂component_i'/∂component_j, assembled in the spec's order.
        blocks = (
            [[jac[i][j] for j in range(len(c))] for i in range(len(c))] if isinstance(c, tuple) else [[jac]]
        )
        out.append(np.block([[np.asarray(b, np.float64) for b in row] for row in blocks]))
    return out, params, carries, xs_tm


@pytest.mark.parametrize("cell", ["simple", "lstm"])
def test_exponents_equal_an_independent_float64_product(cell):
    # Short T: the explicit float64 product must keep its smallest direction (condition < 1e12).
    cfg = RunConfig(
        cell=cell,
        hidden_size=4,
        input_size=3,
        seq_len=8,
        batch_size=2,
        recurrent_gain=1.6,
        carry_init="normal",
    )
    d = 4 * len(cfg.carry_components)
    ly = lyapunov(cfg, k=d, warmup=0, measure_decay=False)
    q0 = np.asarray(initial_directions(jax.random.key_data(jax.random.key(cfg.seed)), d, d), np.float64)
    for example in range(2):
        jacs, *_ = _explicit_jacobians(cfg, example)
        product = np.eye(d)
        for j in jacs:
            product = j @ product
        assert np.linalg.cond(product) < 1e12  # else float64 loses the smallest direction, not the QR method
        # QR of a product = product of the QRs: log|R_ii| of (J_T⋯J_1)Q₀, over T, exactly.
        r = np.linalg.qr(product @ q0)[1]
        want = np.sort(np.log(np.abs(np.diag(r))) / cfg.seq_len)[::-1]
        np.testing.assert_allclose(np.sort(ly.example_exponents[example])[::-1], want, atol=2e-4)
        # With k = D the sum is log|det(J_T⋯J_1)| / T = Σ_t log|det J_t| / T (per step: the
        # product's own determinant is below float64's conditioning here).
        want_sum = sum(np.linalg.slogdet(j)[1] for j in jacs) / cfg.seq_len
        assert ly.example_exponents[example].sum() == pytest.approx(want_sum, abs=5e-4)


def test_exponents_approach_the_log_singular_values_of_the_product():
    # A linear RNN with a random (non-normal) W: log σ_i(W^T) / T → log|eig_i(W)|, the
    # exponents. The leading ones are well inside float64's range at T = 300.
    cfg = RunConfig(
        activation="identity", recurrent_init="normal", hidden_size=4, seq_len=300, batch_size=None, seed=3
    )
    w = np.asarray(prepared_inputs(cfg)[0]["h"]["kernel"], np.float64).T  # Flax: h @ kernel, so J = kernelᵀ
    sigma = np.linalg.svd(np.linalg.matrix_power(w, cfg.seq_len), compute_uv=False)
    ly = lyapunov(cfg, k=2, warmup=0, measure_decay=False)
    np.testing.assert_allclose(ly.exponents, np.log(sigma[:2]) / cfg.seq_len, atol=0.02)


@pytest.mark.parametrize("cell", ["simple", "lstm", "lru"])
def test_step_jacobians_equal_jacfwd_of_one_step(cell):
    cfg = RunConfig(cell=cell, hidden_size=5, input_size=3, seq_len=9, batch_size=3, carry_init="normal")
    jacs, params, carries, xs_tm = _explicit_jacobians(cfg, example=1)
    for t in (0, 4, 8):
        got = step_jacobian(cfg, params, jax.tree.map(lambda a: a[t], carries), xs_tm[t])
        np.testing.assert_allclose(np.asarray(got, np.float64), jacs[t], rtol=1e-5, atol=1e-6)
    d = jacs[0].shape[0]
    exact = jacobians(cfg, k=d, example=1, method="exact")
    assert exact.method == "exact" and list(exact.steps) == list(range(1, 10))
    for t in range(9):
        np.testing.assert_allclose(
            exact.singular_values[t], np.linalg.svd(jacs[t], compute_uv=False), rtol=1e-4, atol=1e-6
        )


def test_matrix_free_singular_values_match_the_exact_ones():
    cfg = RunConfig(
        hidden_size=48,
        seq_len=20,
        recurrent_init="normal",
        recurrent_gain=1.5,
        carry_init="normal",
        batch_size=None,
    )
    exact = jacobians(cfg, k=3, method="exact")
    free = jacobians(cfg, k=3, method="subspace", iterations=30)
    assert free.method == "subspace"
    np.testing.assert_allclose(free.singular_values[:, 0], exact.singular_values[:, 0], rtol=1e-3)
    assert (free.singular_values <= exact.singular_values * (1 + 1e-4)).all()  # Ritz values never exceed σ_i
    strided = jacobians(cfg, k=3, max_steps=6)
    assert strided.stride == 4 and list(strided.steps) == [4, 8, 12, 16, 20]
    np.testing.assert_allclose(strided.singular_values, exact.singular_values[3::4], rtol=1e-5)
    assert (choose_method(256), choose_method(257), choose_method(300, "exact")) == (
        "exact",
        "subspace",
        "exact",
    )


def test_qr_every_few_steps_gives_the_same_exponents():
    cfg = RunConfig(hidden_size=16, seq_len=200, recurrent_gain=1.3, carry_init="normal")
    every = lyapunov(cfg, k=6, warmup=20, measure_decay=False)
    fifth = lyapunov(cfg, k=6, warmup=20, qr_every=5, measure_decay=False)
    np.testing.assert_allclose(fifth.exponents, every.exponents, atol=1e-4)
    np.testing.assert_allclose(fifth.running[-1], every.running[-1], atol=1e-4)
    assert (
        np.isnan(every.running[:20]).all() and np.isfinite(every.running[20:]).all()
    )  # counted from the warm-up on


def test_random_tanh_network_is_ordered_at_gain_08_and_chaotic_at_2():
    cfg = RunConfig(
        hidden_size=256,
        seq_len=300,
        batch_size=None,
        recurrent_init="normal",
        carry_init="normal",
        input_scale=0.0,
    )
    df = lyapunov_sweep(cfg, {"recurrent_gain": [0.8, 2.0]}, k=1)
    lam = dict(zip(df.recurrent_gain, df.lyapunov))
    assert lam[0.8] < -0.05 and lam[2.0] > 0.05, lam
    # The sweep's vmapped points equal single runs.
    single = lyapunov(cfg.replace(recurrent_gain=2.0), k=1, measure_decay=False)
    assert single.lambda1 == pytest.approx(lam[2.0], abs=1e-5)


def test_lambda1_phase_crosses_zero_between_the_regimes():
    cfg = RunConfig(
        hidden_size=32, seq_len=150, recurrent_init="normal", carry_init="normal", input_scale=0.0
    )
    per, edge = lyapunov_phase(cfg, [0.5, 1.0, 1.5, 2.5], seeds=[0, 1])
    assert list(per.columns) == ["recurrent_gain", "lyapunov", "lo", "hi"] and len(per) == 4
    assert per.lyapunov.iloc[0] < 0 < per.lyapunov.iloc[-1] and (per.lo <= per.lyapunov).all()
    assert edge is not None and 0.5 < edge < 2.5
    assert zero_crossing([0, 1, 2], [-1.0, -0.5, 0.5]) == pytest.approx(1.5)
    assert zero_crossing([0, 1], [1.0, 2.0]) is None


def test_decay_fit_excludes_the_ends_and_needs_three_points():
    logs = np.log10(0.9) * (50 - np.arange(51.0))  # ‖g_t‖ = 0.9^{T−t}
    logs[-1], logs[0] = 5.0, -99.0  # the ends, left out of the fit
    fit = decay_fit(logs)
    assert fit.slope == pytest.approx(math.log(0.9)) and (fit.lag_lo, fit.lag_hi) == (5, 45)
    assert decay_fit(np.array([0.0, -1.0, -2.0])) is None

    assert [regime(x).split()[0] for x in (-0.1, 0.0005, 0.1)] == ["ordered", "at", "chaotic"]


def test_bad_options_are_config_errors_naming_the_field():
    cfg = RunConfig(hidden_size=4, seq_len=20)
    for kwargs, field in [
        ({"k": 0}, "k"),
        ({"k": 5}, "k"),
        ({"warmup": 20}, "warmup"),
        ({"warmup": 3, "qr_every": 2}, "warmup"),
        ({"qr_every": 0}, "qr_every"),
    ]:
        with pytest.raises(ConfigError, match=f"^{field}="):
            lyapunov(cfg, **{"k": 2, **kwargs})
    with pytest.raises(ConfigError, match="^method="):
        jacobians(cfg, method="lanczos")
    with pytest.raises(ConfigError, match="^example="):
        jacobians(cfg, k=2, example=4)
    big = RunConfig(hidden_size=1024, seq_len=1000, batch_size=16, input_size=8)
    with pytest.raises(BudgetError, match=r"^k=512 .*the largest k that fits is \d+"):
        lyapunov(big, k=512)


def test_low_precision_cells_run_in_their_dtype():
    ly = lyapunov(
        RunConfig(hidden_size=8, seq_len=40, dtype="bfloat16", activation="identity", recurrent_gain=0.8),
        k=2,
        measure_decay=False,
    )
    np.testing.assert_allclose(ly.exponents, math.log(0.8), atol=0.02)
    assert jnp.dtype(RunConfig(dtype="bfloat16").dtype) == jnp.bfloat16


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_step_jacobians_of_low_precision_cells_take_their_svd_in_float32(dtype):
    # W_h = 0.8·Q and the identity activation: every singular value of J_t is 0.8, to the dtype's rounding
    cfg = RunConfig(hidden_size=8, seq_len=6, dtype=dtype, activation="identity", recurrent_gain=0.8)
    np.testing.assert_allclose(jacobians(cfg, k=3).singular_values, 0.8, rtol=0.02)


# ---- CLI, charts and the dashboard -------------------------------------------------------


def test_cli_lyapunov_json_and_bad_flags(capsys):
    import json

    from rnnviz.cli.main import main

    assert (
        main(
            [
                "lyapunov",
                "--cell",
                "simple",
                "--recurrent-gain",
                "1.5",
                "--k",
                "3",
                "--seq-len",
                "40",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert (
        len(out["exponents"]) == 3
        and out["lambda1"] == out["exponents"][0]
        and out["measured_decay"]["lag_lo"] == 4
    )
    assert main(["lyapunov", "--k", "40"]) == 2  # D = 32
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: k=40")
    with pytest.raises(SystemExit) as exit_:
        main(["lyapunov", "--k", "zero"])
    assert exit_.value.code == 2


def test_lyapunov_charts_from_frames():
    import pandas as pd

    from rnnviz import charts

    spectrum = pd.DataFrame({"i": [1, 2, 3], "lyapunov": [0.1, -0.2, -np.inf], "spread": [0.01, 0.02, 0.0]})
    fig = charts.spectrum_figure(spectrum)
    assert list(fig.data[0].y) == [0.1, -0.2] and list(fig.data[0].marker.color) == [
        charts.OKABE_ITO[5],
        charts.OKABE_ITO[0],
    ]
    assert "−∞" in fig.layout.annotations[0].text
    phase = pd.DataFrame(
        {
            "recurrent_gain": [0.5, 1.0, 1.5],
            "lyapunov": [-0.3, -0.01, 0.2],
            "lo": [-0.31, -0.02, 0.1],
            "hi": [-0.29, 0, 0.3],
        }
    )
    fig = charts.lyapunov_phase_figure(phase, 1.02)
    assert [t.name for t in fig.data] == [None, "seed range", "λ₁"]
    assert {s.x0 for s in fig.layout.shapes if s.type == "line" and s.x0 == s.x1} == {1.02}  # the crossing
    assert any(a.text.startswith("λ₁ = 0") for a in fig.layout.annotations)
    decay = pd.DataFrame(
        {
            "lag": [0, 1, 2, 0, 2],
            "series": ["measured"] * 3 + ["fit"] * 2,
            "value": [0.0, -40.0, -80.0, 0.0, -80.0],
        }
    )
    fig = charts.decay_figure(decay)
    assert len(fig.data) == 2 and fig.layout.yaxis.ticktext[0].startswith("10")


@pytest.mark.parametrize("cell", CELLS)
def test_jacobians_tab_renders_for_every_cell(cell):
    from apptest_helpers import figure_by_title, run_app

    at = run_app({"cell": cell, "seq_len": "20", "hidden_size": "4", "tab": "Jacobians"})
    assert not at.exception and not at.error, [e.value for e in at.error]
    d = carry_dim(RunConfig(cell=cell, seq_len=20, hidden_size=4))  # a matrix memory: all its entries
    (sv,) = figure_by_title(at, "Singular values of J_t")["data"]  # a heatmap: a row per σ_i
    assert sv["type"] == "heatmap" and list(sv["y"]) == [f"σ{i}" for i in range(1, min(8, d) + 1)]
    assert len(figure_by_title(at, "Lyapunov spectrum")["data"]) == 1
    assert len(figure_by_title(at, "Predicted (λ₁) vs measured")["data"]) == 3
    assert any(m.label == "λ₁ (per step)" for m in at.metric)
    # The same numbers from the library (the app's executables are reused in-process).
    cfg = RunConfig(cell=cell, seq_len=20, hidden_size=4)
    ly = lyapunov(cfg, k=min(8, d))
    assert ly.exponents.shape == (min(8, d),) and np.all(np.diff(ly.exponents) <= 1e-6)
    assert np.isfinite(ly.exponents).all() or cell == "indrnn"  # a dead ReLU unit is a true −∞ direction
    jac = jacobians(cfg, k=min(8, d), max_steps=400)
    assert jac.singular_values.shape == (20, min(8, d)) and (jac.singular_values >= 0).all()


def test_phase_tab_draws_lambda1_and_learn_has_a_preset_per_regime():
    from apptest_helpers import decode, figure_by_title, run_app, trace

    at = run_app({"tab": "Phase diagram", "seq_len": "30", "hidden_size": "8"})
    assert not at.exception and not at.error
    fig = figure_by_title(at, "λ₁ against the recurrent gain")
    assert len(decode(trace(fig, "λ₁")["x"])) == 41
    at = run_app({"tab": "Learn"})
    keys = [b.key for b in at.button if b.key.startswith("learn")]
    regimes = [b for b in at.button if b.key in keys and "Lyapunov" in b.label]
    assert len(regimes) == 3
    regimes[-1].click().run()
    assert at.session_state["cfg_recurrent_gain"] == 2.0 and at.session_state["cfg_input_scale"] == 0.0
    assert not at.exception and not at.error


def test_jacobians_controls_follow_the_config():
    from apptest_helpers import run_app

    at = run_app({"cell": "simple", "seq_len": "20", "hidden_size": "4", "tab": "Jacobians"})
    at.number_input(key="jac_example").set_value(3).run()
    at.number_input(key="jac_k").set_value(4).run()
    at.number_input(key="cfg_batch_size").set_value(2).run()  # example 3 no longer exists
    at.number_input(key="cfg_hidden_size").set_value(2).run()  # nor k = 4 (D = 2)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.number_input(key="jac_example").value == 1 and at.number_input(key="jac_k").value == 2


def test_the_parts_of_an_interleaved_pass_are_the_whole_pass_and_share_one_executable():
    """Every ``parts``-th step from the ``part``-th on: together exactly the whole pass's
    steps and singular values (bit for bit), one compile for all parts, bad parts refused."""
    from rnnviz.studies.jacobians import jacobian_executable, part_steps

    cfg = RunConfig(cell="lstm", hidden_size=6, input_size=2, seq_len=23, batch_size=3, carry_init="normal")
    whole = jacobians(cfg, k=4, example=2, max_steps=12)  # stride 2: t = 2, 4, …, 22
    before = jacobian_executable.cache_info().misses
    got = [jacobians(cfg, k=4, example=2, max_steps=12, part=p, parts=3) for p in range(3)]
    assert jacobian_executable.cache_info().misses == before + 1  # 4, 4 and 3 steps: one shape
    assert [list(j.steps) for j in got] == [[2, 8, 14, 20], [4, 10, 16, 22], [6, 12, 18]]
    assert [list(part_steps(23, 2, p, 3)) for p in range(3)] == [list(j.steps) for j in got]
    steps = np.concatenate([j.steps for j in got])
    order = np.argsort(steps)
    assert list(steps[order]) == list(whole.steps)
    assert np.array_equal(np.concatenate([j.singular_values for j in got])[order], whole.singular_values)
    assert all(j.stride == whole.stride == 2 for j in got)
    with pytest.raises(ConfigError, match="part"):
        jacobians(cfg, k=4, max_steps=12, part=3, parts=3)
    with pytest.raises(ConfigError, match="parts"):
        jacobians(cfg, k=4, max_steps=12, parts=12)  # 11 steps, so at most 11 parts


def test_the_jacobians_tab_draws_its_parts_into_one_chart_of_every_step(monkeypatch):
    """Over the estimate's line, σ_i(J_t) comes in interleaved parts, asked for in order; the
    chart that stays holds every step, equal to the whole pass."""
    from apptest_helpers import decode, figure_by_title, run_app

    from rnnviz.serve import budget, jobs

    asked = []
    real = jobs.jacobians

    def recording(cfg_json, k, example, steps, part=0, parts=1):
        asked.append((part, parts))
        return real(cfg_json, k, example, steps, part, parts)

    monkeypatch.setattr(jobs, "jacobians", recording)
    monkeypatch.setattr(budget, "JACOBIAN_PARTS_OVER_S", -1.0)  # any estimate is over it
    at = run_app({"cell": "gru", "seq_len": "40", "hidden_size": "4", "seed": "3", "tab": "Jacobians"})
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert asked == [(p, budget.JACOBIAN_PARTS) for p in range(budget.JACOBIAN_PARTS)]
    (sv,) = figure_by_title(at, "Singular values of J_t")["data"]
    whole = jacobians(RunConfig(cell="gru", seq_len=40, hidden_size=4, seed=3), k=4, max_steps=400)
    assert list(decode(sv["x"])) == list(whole.steps)
    z = decode(sv["z"])
    np.testing.assert_allclose(z, np.log10(whole.singular_values.T), rtol=1e-6)
    assert not any("parts of the steps in" in c.value for c in at.caption)  # the progress line is gone

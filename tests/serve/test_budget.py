"""Each view's work is estimated before it starts and shrunk to the budget, with one message."""

import pytest

from rnnviz import RunConfig
from rnnviz.serve import budget
from rnnviz.serve.budget import (
    Cost,
    block_phase_plan,
    devices_plan,
    jacobians_plan,
    lyapunov_plan,
    phase_plan,
    strategies_plan,
    tangent_s,
    training_plan,
)

MID = RunConfig(cell="lstm", hidden_size=128, seq_len=1000, batch_size=32)


LSTM = ("accumulate", "per_step", "split_transpose", "fused", "checkpoint")
#: A shape whose per-step buffers are negligible: 2·T·P = 2·10·40 floats.
TINY = RunConfig(cell="simple", hidden_size=4, input_size=5, seq_len=10, batch_size=1)


def test_a_plan_that_fits_changes_nothing_and_says_nothing():
    plan = strategies_plan(MID, Cost(run_s=0.01, compile_s=0.5), LSTM, budget=15)
    assert plan.settings == {"repeats": 5} and plan.fits and plan.note is None
    # compiles: 1 + 1.5 + 1 + 1.3 + 1.6 (each strategy's compile_cost) of 0.5 s, and the
    # contributions' analysis; each run 1 + 1 + 1.3 + 1.15 + 1.5 of 0.01 s, and per-step's
    # 2·T copies of P = 70 144 floats at 5 ns; warm-up + the 3 runs a steady run stops at
    compile, runs = 6.4 * 0.5 + 0.5, 5.95 * 0.01 + 2 * 1000 * 70144 * 5e-9
    assert plan.estimate_s == pytest.approx(compile + 4 * runs + 0.01)


def test_a_strategy_is_counted_at_its_factors_of_the_accumulators_compile_and_run():
    assert budget.strategy_compile_s("per_step", Cost(run_s=0.3, compile_s=2.0)) == 3.0  # 1.5 × 2 s
    c = Cost(run_s=0.3, compile_s=1.0)
    assert budget.strategy_run_s(MID, "accumulate", c) == 0.3
    assert round(budget.strategy_run_s(MID, "per_step", c), 2) == 1.0  # + 2·T·P floats (P = 70 144)


def test_each_strategy_counts_its_own_costs_and_per_step_its_buffers():
    """Per-step's cost beyond the accumulator's is its [T, …] tangent buffer, not a factor
    of the run: a factor of 2.3 fitted LSTM H=128 T=1000 and 4.6 was measured at H=256
    T=300, where each step's copy is 4× larger."""
    c = Cost(run_s=0.3, compile_s=2.0)
    assert budget.strategy_run_s(MID, "accumulate", c) == pytest.approx(0.3)
    assert budget.strategy_run_s(MID, "checkpoint", c) == pytest.approx(0.45)
    wide = MID.replace(hidden_size=256, seq_len=300)
    grown = [budget.strategy_run_s(cfg, "per_step", c) / 0.3 for cfg in (MID, wide)]
    assert grown[0] == pytest.approx(1 + 2 * 1000 * 70144 * 5e-9 / 0.3) and grown[1] > grown[0]
    assert budget.strategy_compile_s("parallel", c) == pytest.approx(6.0)  # an associative scan
    # the same unit, another cell's strategies: the matrix memory's parallel form compiles 3×
    mlstm = ("accumulate", "per_step", "split_transpose", "parallel", "checkpoint")
    short = MID.replace(seq_len=10)
    assert (
        strategies_plan(short, c, mlstm, budget=100).estimate_s
        > strategies_plan(short, c, LSTM, budget=100).estimate_s
    )


def test_a_slow_compile_does_not_starve_a_small_view():
    # Five strategies compiling 3 s each (a loaded machine) but running in 1 ms: nothing to shrink.
    plan = strategies_plan(TINY, Cost(run_s=0.001, compile_s=3.0), LSTM, budget=15)
    assert plan.settings == {"repeats": 5} and plan.fits and plan.note is None and plan.estimate_s > 15


def test_strategies_shrink_their_repeats_and_say_what_changed():
    plan = strategies_plan(TINY, Cost(run_s=0.3, compile_s=0.6), LSTM, budget=15)
    # compiles 6.4·0.6 + 0.6 = 4.44 s; a round of runs 5.95·0.3 = 1.785 s (and 4 µs of
    # buffers): 5 runs asked count as warm-up + 3, 4.44 + 4·1.785 + 0.3 = 11.88; at 15
    # that fits, so at 10 s: warm-up + 2 runs, 4.44 + 3·1.785 + 0.3 = 10.1 > 10 ≥ 8.3
    plan = strategies_plan(TINY, Cost(run_s=0.3, compile_s=0.6), LSTM, budget=10)
    assert plan.settings == {"repeats": 1} and plan.fits
    assert plan.asked_estimate_s == pytest.approx(11.88, abs=1e-3) and plan.estimate_s == pytest.approx(
        8.31, abs=1e-3
    )
    assert plan.note == (
        "Within the 10 s budget of a view: what was asked would take ≈ 12 s here, so runs per strategy 5 → 1 "
        "(≈ 8 s)."
    )


def test_strategies_compiled_already_are_not_counted_again():
    cost = Cost(run_s=0.25, compile_s=2.0)
    # compiling five: 6.4·2 + 2 = 14.8 s leaves a third of the budget, and one run each
    # (2·5.95·0.25 + 0.25 = 3.225 s) fits it; compiling twice as long does not
    assert strategies_plan(TINY, cost, LSTM, budget=15).fits
    slow = cost._replace(compile_s=4.0, run_s=0.5)  # one run each: 6.2 s > 5 s
    assert not strategies_plan(TINY, slow, LSTM, budget=15).fits
    ready = strategies_plan(TINY, slow, LSTM, budget=15, compiled=LSTM)  # e.g. in the worker's idle time
    assert (
        ready.fits and ready.settings == {"repeats": 5} and ready.estimate_s == pytest.approx(12.4, abs=1e-3)
    )
    # nothing left to compile: warm-up + 3 runs, 4·5.95·0.5 + 0.5 = 12.4 s. Per-step and
    # checkpoint left: 3.1·4 s and the contributions' 4 s, 16.4 s, and one run each is over
    half = strategies_plan(TINY, slow, LSTM, budget=15, compiled=("accumulate", "split_transpose", "fused"))
    assert half.estimate_s == pytest.approx(16.4 + 6.45, abs=1e-3) and not half.fits
    # the Devices tab compiles nothing the default device has, and all of it on another
    assert devices_plan(TINY, cost, LSTM, 1, budget=15, compiled=LSTM).estimate_s == pytest.approx(
        4 * 5.95 * 0.25, abs=1e-3
    )
    two = devices_plan(TINY, cost, LSTM, 2, budget=100, compiled=LSTM)
    assert two.estimate_s == pytest.approx(6.4 * 2 + 2 * 4 * 5.95 * 0.25, abs=1e-3)


def test_the_phase_diagram_drops_seeds_before_gains_and_keeps_two_gains():
    cost = Cost(run_s=0.25, compile_s=1.5)
    plan = phase_plan(MID, cost, gains=41, seeds=3, budget=15)
    assert plan.settings["seeds"] == 1 and 2 <= plan.settings["gains"] < 41 and plan.fits
    more = phase_plan(
        MID, cost, plan.settings["gains"] + 1, 1, budget=15
    )  # one gain more is over: it shrinks back
    assert plan.estimate_s <= 15 < more.asked_estimate_s and more.settings["gains"] == plan.settings["gains"]
    assert "seeds 3 → 1" in plan.note and f"gains 41 → {plan.settings['gains']}" in plan.note
    tiny = phase_plan(MID, Cost(run_s=60.0, compile_s=1.0), gains=41, seeds=3, budget=15)
    assert (
        tiny.settings == {"gains": 2, "seeds": 1}
        and not tiny.fits
        and tiny.note.startswith("Even the smallest version")
    )


def test_a_blocks_phase_diagram_drops_seeds_before_values_and_keeps_two_values():
    """values × seeds analyses of the block (1.6 × its run each) after one compile."""
    cost = Cost(run_s=0.2, compile_s=3.0)  # 0.32 s a point, 12 s of room: 37 points
    plan = block_phase_plan(cost, values=64, seeds=8, budget=15)
    assert plan.settings == {"values": 37, "seeds": 1} and plan.fits
    assert plan.estimate_s == pytest.approx(3.0 + 37 * 0.32) and plan.estimate_s <= 15
    assert "seeds 8 → 1" in plan.note and f"values 64 → {plan.settings['values']}" in plan.note
    small = block_phase_plan(cost, values=8, seeds=4, budget=15)
    assert small.settings == {"values": 8, "seeds": 4} and small.note is None and small.fits
    slow = block_phase_plan(Cost(run_s=30.0, compile_s=1.0), values=8, seeds=4, budget=15)
    assert slow.settings == {"values": 2, "seeds": 1} and not slow.fits


def test_lyapunov_devices_and_training_shrink_within_the_budget():
    ly = lyapunov_plan(MID, Cost(run_s=0.25, compile_s=1.0), k=64, budget=3)
    assert 1 <= ly.settings["k"] < 64 and ly.estimate_s <= 3 and "exponents k 64 →" in ly.note
    dev = devices_plan(TINY, Cost(run_s=0.3, compile_s=0.5), LSTM, 2, budget=15)
    # two devices: compiles 2·6.4·0.5 = 6.4 s, a round of runs 2·5.95·0.3 = 3.57 s: 6.4 + 2·3.57
    assert dev.settings == {"repeats": 1} and dev.estimate_s == pytest.approx(6.4 + 2 * 3.57, abs=1e-3)
    assert dev.fits
    assert not devices_plan(TINY, Cost(run_s=1.0, compile_s=1.0), LSTM, 2, budget=15).fits  # 23.8 s of runs
    train = training_plan(MID.replace(input_size=2, batch_size=64), chunk=1000, budget=15)
    assert (
        1 <= train.settings["chunk"] < 1000
        and train.estimate_s <= 15
        and "steps per chunk 1000 →" in train.note
    )


def test_a_matrix_memory_is_counted_by_its_carry_not_its_matmuls():
    # DeltaNet at H=128 holds a [4, 32, 32] memory (D = 4096) behind LSTM-sized matmuls: the
    # same measured analysis costs the Jacobians tab far more, in its [D, k] QRs.
    delta = RunConfig(cell="deltanet", hidden_size=128, seq_len=1000, batch_size=4)
    lstm = delta.replace(cell="lstm")
    cost = Cost(run_s=0.73, compile_s=5.0)
    assert tangent_s(delta, cost) == pytest.approx(0.73 / (3 * 4 * 1000))
    ly_delta = lyapunov_plan(delta, cost, k=8, budget=1e9)
    ly_lstm = lyapunov_plan(lstm, cost, k=8, budget=1e9)
    qr = 4 * 1000 * 4 * 4096 * 64 / budget.QR_FLOPS_PER_S  # B·T QRs of [D, 8]
    assert ly_delta.estimate_s - ly_lstm.estimate_s == pytest.approx(qr * (1 - 256 / 4096))
    # σ_i(J_t) by subspace iteration: 25 rounds of 16 tangents and 13 QRs of [D, 16] per step
    per_step = 25 * 16 * tangent_s(delta, cost) + 13 * 4 * 4096 * 256 / budget.QR_FLOPS_PER_S
    full = jacobians_plan(delta, cost, "subspace", 8, 400, budget=1e9)
    assert full.estimate_s == pytest.approx(5.0 + 400 * per_step) and full.note is None
    cut = jacobians_plan(delta, cost, "subspace", 8, 400, budget=15)
    n = cut.settings["steps"]
    assert 10 <= n < 400 and cut.fits and n * per_step <= 10 < (n + 1) * per_step
    assert f"steps with J_t 400 → {n}" in cut.note
    # exact (LSTM, D = 256): 256 tangents and a 256×256 SVD per step
    exact = jacobians_plan(lstm, cost, "exact", 8, 400, budget=1e9)
    assert exact.estimate_s == pytest.approx(
        5.0 + 400 * (256 * tangent_s(lstm, cost) + 10 * 256**3 / budget.SVD_FLOPS_PER_S)
    )
    slow = jacobians_plan(delta, Cost(run_s=60.0, compile_s=1.0), "subspace", 8, 400, budget=15)
    assert not slow.fits and slow.settings == {"steps": 10} and slow.note.startswith("Even the smallest")


def test_the_phase_tab_shows_the_plan_and_runs_the_over_budget_version_only_on_request(monkeypatch):
    from apptest_helpers import figure_by_title, run_app

    monkeypatch.setattr(budget, "VIEW_BUDGET_S", 1e-6)
    at = run_app({"tab": "Phase diagram", "seq_len": "9", "hidden_size": "4"})
    assert not at.exception and not at.error
    notes = " ".join(i.value for i in at.info)
    assert "Even the smallest version takes" in notes and "over the 1e-06 s budget" in notes
    with pytest.raises(AssertionError, match="no figure titled"):
        figure_by_title(at, "λ₁")
    at.button(key="anyway_phase").click().run()
    assert not at.exception and not at.error
    figure_by_title(at, "λ₁")  # drawn with the smallest version: 2 gains × 1 seed


def test_a_long_phase_diagram_is_computed_in_interleaved_parts_of_one_size():
    from rnnviz.serve.budget import PHASE_PARTS, phase_parts
    from rnnviz.serve.jobs import part_gains

    quick = phase_plan(RunConfig(), Cost(run_s=0.0003, compile_s=3.0), gains=41, seeds=3, budget=15)
    assert quick.work_s < 1.5 < quick.estimate_s and phase_parts(quick) == 1  # compiling does not count
    slow = phase_plan(MID, Cost(run_s=0.05, compile_s=0.5), gains=41, seeds=3, budget=15)
    assert slow.work_s > 1.5 and phase_parts(slow) == PHASE_PARTS == 8
    gains = [0.5 + 0.025 * i for i in range(41)]
    parts = [part_gains(gains, p, 3) for p in range(3)]
    assert {len(p) for p in parts} == {14}  # one executable for every part
    assert sorted(set().union(*parts)) == gains and parts[0][:3] == [0.5, 0.575, 0.65]
    five = [0.5, 0.75, 1.0, 1.25, 1.5]
    assert (part_gains(five, 1, 3), part_gains(five, 2, 3)) == (
        [0.75, 1.5],
        [1.0, 1.0],
    )  # padded with its last


def test_a_timed_row_is_precise_after_the_fewest_runs_the_rule_stops_at():
    from rnnviz.serve.jobs import _precise

    assert _precise({"repeats": 3, "run_s": 0.5, "run_halfwidth_s": 0.02})
    assert not _precise({"repeats": 2, "run_s": 0.5, "run_halfwidth_s": 0.02})  # fewer runs than the rule's
    assert not _precise({"repeats": 3, "run_s": 0.5, "run_halfwidth_s": 0.2})


def test_the_jacobians_pass_comes_in_parts_where_its_estimate_is_long():
    """At LSTM H=128 T=1000 B=32 (D = 256, 333 steps; the quiet timing measured there) the
    singular values come in JACOBIAN_PARTS parts; at the default config, and wherever a part
    would hold fewer than 8 steps, in one."""
    from rnnviz.serve.budget import JACOBIAN_PARTS, jacobians_parts

    big = RunConfig(cell="lstm", hidden_size=128, seq_len=1000, batch_size=32)
    plan = jacobians_plan(big, Cost(run_s=0.38, compile_s=1.0), "exact", 8, 400)
    assert plan.fits and plan.settings["steps"] == 400 and jacobians_parts(plan) == JACOBIAN_PARTS
    default = RunConfig()
    small = jacobians_plan(default, Cost(run_s=0.001, compile_s=0.5), "exact", 8, default.seq_len)
    assert jacobians_parts(small) == 1
    short = jacobians_plan(big.replace(seq_len=31), Cost(run_s=0.38, compile_s=1.0), "exact", 8, 31)
    assert short.work_s > 0 and jacobians_parts(short) == 1  # 31 steps: under 8 a part


def test_the_model_refusal_says_the_longest_t_and_that_the_command_line_has_no_such_limit():
    assert budget.model_refusal(28_480, 1, 24, limit_m=1) is None
    assert budget.model_refusal(130_000_000, 1, 1000, limit_m=20_000) == (
        "130,000,000 parameters × 1 × 1000 tokens is 130,000 M parameter-tokens, over this dashboard's "
        "limit of 20,000 M (RNNVIZ_MODEL_WORK_M): at most T = 153 here. `rnnviz analyze --model` on the "
        "command line has no such limit."
    )

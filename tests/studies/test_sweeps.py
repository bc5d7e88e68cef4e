"""Sweeps: vmapped values equal single analyses; sharded equals single-device; shapes loop."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from rnnviz import ConfigError, RunConfig, analyze, charts
from rnnviz.cli.main import main as cli_main
from rnnviz.frames.dynamics import phase_frames, survival_sentence
from rnnviz.studies import sweep as sweep_module
from rnnviz.studies.sweep import critical_gain, sweep, sweep_executable, sweep_reusing

ROOT = Path(__file__).resolve().parents[2]


def test_sweep_equals_individual_analyses_at_sampled_points():
    cfg = RunConfig(cell="lstm", seq_len=15, hidden_size=8, batch_size=3)
    over = {"recurrent_gain": [0.6, 1.0, 1.3], "seed": [0, 4], "forget_bias": [0.0, 1.0]}
    df = sweep(cfg, over)
    assert list(df.columns) == [
        "recurrent_gain",
        "seed",
        "forget_bias",
        "t",
        "lag",
        "component",
        "grad_norm",
        "log10_grad_norm",
    ]
    assert len(df) == 3 * 2 * 2 * 3 * 16  # points × (total, c, h) × (T+1)
    for gain, seed, fb in [(0.6, 0, 1.0), (1.3, 4, 0.0), (1.0, 4, 1.0)]:
        a = analyze(cfg.replace(recurrent_gain=gain, seed=seed, forget_bias=fb), repeats=1)
        pick = df[(df.recurrent_gain == gain) & (df.seed == seed) & (df.forget_bias == fb)]
        for comp, want in [
            ("total", a.grad_norms),
            ("c", a.component_grad_norms["c"]),
            ("h", a.component_grad_norms["h"]),
        ]:
            got = pick[pick.component == comp].sort_values("t")["grad_norm"].to_numpy()
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-30)
        np.testing.assert_allclose(
            pick[pick.component == "total"].sort_values("t")["log10_grad_norm"], a.log10_grad_norms, atol=1e-5
        )


def _sweep_key(cfg, n):
    return sweep_module._executable_key(cfg, n, sweep_module.GRADIENTS, None, None)[0]


@pytest.mark.parametrize("cell", ["lstm", "simple"])
def test_a_cheap_grid_goes_through_the_compiled_analysis_and_equals_the_sweep(cell):
    """With the analysis compiled, a grid that takes less point by point than compiling a
    sweep compiles none, and its frame is the sweep's: the same rows and columns, log₁₀
    norms equal up to float32 rounding, also where float32 underflows (gain 0.02 over 30
    steps: the analysis's log-magnitude pass)."""
    cfg = RunConfig(cell=cell, seq_len=30, hidden_size=5, batch_size=3)
    over = {"recurrent_gain": [0.9, 1.4, 0.02], "seed": [0, 3]}
    analyze(cfg, repeats=1)
    assert _sweep_key(cfg, 6) not in sweep_executable
    got = sweep_reusing(cfg, over)
    assert _sweep_key(cfg, 6) not in sweep_executable  # nothing compiled for the grid
    want = sweep(cfg, over)
    assert list(got.columns) == list(want.columns) and len(got) == len(want) == 6 * (
        31 if cell == "simple" else 93
    )
    keys = ["recurrent_gain", "seed", "t", "lag", "component"]
    assert got[keys].equals(want[keys])
    deep = want.log10_grad_norm < -40
    assert deep.any()  # below float32's smallest normal: the log pass's numbers
    np.testing.assert_allclose(got.log10_grad_norm, want.log10_grad_norm, atol=1e-4)
    np.testing.assert_allclose(got.grad_norm, want.grad_norm, rtol=3e-4, atol=0)


def test_a_grid_compiles_its_sweep_when_the_analysis_is_not_compiled_or_the_points_cost_more(monkeypatch):
    cfg = RunConfig(seq_len=9, hidden_size=7, batch_size=2)
    over = {"recurrent_gain": [0.8, 1.2], "seed": [0, 1, 2]}
    # nothing compiled: the vmapped sweep, not the analysis and then the points
    got = sweep_reusing(cfg, over)
    assert _sweep_key(cfg, 6) in sweep_executable and len(got) == 6 * 10
    # compiled: then the sweep, already compiled, serves (even where the points are cheap)
    analyze(cfg, repeats=1)
    calls = []
    monkeypatch.setattr(sweep_module, "analyze", lambda *a, **k: calls.append(a))
    pd.testing.assert_frame_equal(sweep_reusing(cfg, over), got)
    assert calls == []
    # the analysis compiled and no sweep, but each point slow: the first point says so
    monkeypatch.undo()
    other = {"recurrent_gain": [0.8, 1.2, 1.3], "seed": [0, 1, 2]}
    clock = iter(range(0, 10**6, 100))  # every reading 100 s after the last
    monkeypatch.setattr(sweep_module, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    slow = sweep_reusing(cfg, other)
    monkeypatch.undo()
    assert _sweep_key(cfg, 9) in sweep_executable and len(slow) == 9 * 10


def _clocked_grid(monkeypatch, calls: dict, cfg, gains, per_point: float, **kwargs):
    """:func:`sweep_reusing` over ``gains`` on a clock where each point through the analysis
    takes ``per_point`` × the analysis's compile; ``calls["analyze"]`` counts those points."""
    compile_s = analyze(cfg, repeats=1).timing.fresh_compile_s
    clock = (k * per_point * compile_s for k in range(10**6))  # each reading a point later
    real_analyze = sweep_module.analyze

    def counted(*args, **kw):
        calls["analyze"] += 1
        return real_analyze(*args, **kw)

    monkeypatch.setattr(sweep_module, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    monkeypatch.setattr(sweep_module, "analyze", counted)
    try:
        return sweep_reusing(cfg, {"recurrent_gain": gains}, budget_s=0.0, **kwargs)
    finally:
        monkeypatch.undo()


def test_one_by_one_until_that_has_cost_what_compiling_the_sweep_would(monkeypatch):
    """Five points at half the analysis's compile each: all five (2.5×) cost more than the
    sweep's compile at its least (2×), but the three left after the two that decide (1.5×)
    cost less, so they run one by one too and no sweep is compiled; at 0.7× a point the three
    left (2.1×) do not, and the sweep is compiled. The next grid of the first shape: the 2.5×
    spent one by one and its own five points cost more than the compile, so it compiles at
    once, without running a point (as a skier buys once renting has cost the skis' price)."""
    clocked = {"analyze": 0}
    grid = lambda cfg, gains, per_point: _clocked_grid(monkeypatch, clocked, cfg, gains, per_point)  # noqa: E731

    assert sweep_module.SWEEP_COMPILE_RATIO == 2.0
    gains = [0.6, 0.8, 1.0, 1.2, 1.4]
    cheap, dear = (
        RunConfig(seq_len=8, hidden_size=6, batch_size=2),
        RunConfig(seq_len=7, hidden_size=6, batch_size=2),
    )
    got = grid(cheap, gains, 0.5)
    assert _sweep_key(cheap, 5) not in sweep_executable and len(got) == 5 * 9 and clocked["analyze"] == 5
    assert len(grid(dear, gains, 0.7)) == 5 * 8 and _sweep_key(dear, 5) in sweep_executable
    clocked["analyze"] = 0
    again = grid(cheap, [0.7, 0.9, 1.1, 1.3, 1.5], 0.5)
    assert _sweep_key(cheap, 5) in sweep_executable and clocked["analyze"] == 0 and len(again) == 5 * 9
    want = sweep(cheap, {"recurrent_gain": gains})  # the one-by-one frame is the sweep's
    np.testing.assert_allclose(got.log10_grad_norm, want.log10_grad_norm, atol=1e-4)


def test_the_parts_still_to_come_have_the_second_part_compile_the_sweep(monkeypatch):
    """The Phase diagram's parts of 2 points, each point at half the analysis's compile: the
    first part runs one by one whatever comes after it (its picture comes first); the second,
    with 10 points still to come, compiles the sweep at once (spent 1× + 12 points × 0.5×
    is over the compile's 2×). Without those it would run one by one (1× + 2 × 0.5× is not)."""
    calls = {"analyze": 0}
    part = lambda cfg, gains, to_come: _clocked_grid(monkeypatch, calls, cfg, gains, 0.5, to_come=to_come)  # noqa: E731

    told, untold = (
        RunConfig(seq_len=10, hidden_size=6, batch_size=2),
        RunConfig(seq_len=11, hidden_size=6, batch_size=2),
    )
    seconds = {}
    for cfg, to_come in ((told, 10), (untold, 0)):
        calls["analyze"] = 0
        first = part(cfg, [0.6, 1.4], to_come + 2)
        assert calls["analyze"] == 2 and _sweep_key(cfg, 2) not in sweep_executable  # one by one
        seconds[cfg] = part(cfg, [0.8, 1.2], to_come)
        compiled = _sweep_key(cfg, 2) in sweep_executable
        assert compiled == (to_come > 0) and calls["analyze"] == (2 if compiled else 4)
        assert len(first) == len(seconds[cfg]) == 2 * (cfg.seq_len + 1)
    # either way the same frame: the sweep's, or the analyses' one by one
    for cfg in (told, untold):
        want = sweep(cfg, {"recurrent_gain": [0.8, 1.2]})
        np.testing.assert_allclose(seconds[cfg].log10_grad_norm, want.log10_grad_norm, atol=1e-4)


def test_a_grid_over_a_shape_field_is_refused_by_sweep_reusing():
    with pytest.raises(ConfigError, match="value fields only"):
        sweep_reusing(RunConfig(hidden_size=4, seq_len=5), {"hidden_size": [4, 8]})


def test_shape_fields_loop_with_one_compile_per_shape():
    cfg = RunConfig(seq_len=6, hidden_size=4)
    before = sweep_executable.cache_info().misses
    df = sweep(cfg, {"hidden_size": [3, 5], "recurrent_gain": [0.5, 0.9, 1.1]})
    assert sweep_executable.cache_info().misses == before + 2
    sweep(cfg, {"hidden_size": [3, 5], "recurrent_gain": [0.2, 0.3, 0.4]})  # same shapes, new values
    assert sweep_executable.cache_info().misses == before + 2
    a = analyze(cfg.replace(hidden_size=5, recurrent_gain=1.1), repeats=1)
    got = df[(df.hidden_size == 5) & (df.recurrent_gain == 1.1)].sort_values("t")["grad_norm"].to_numpy()
    np.testing.assert_allclose(got, a.grad_norms, rtol=2e-5)


def test_bad_sweeps_are_config_errors():
    with pytest.raises(ConfigError, match="recurrent_gain=-1"):
        sweep(RunConfig(), {"recurrent_gain": [0.5, -1]})
    with pytest.raises(ConfigError, match="forget_bias"):
        sweep(RunConfig(), {"forget_bias": [1.0]})  # the simple cell has none
    with pytest.raises(ConfigError, match="at most 4096 points"):
        sweep(RunConfig(), {"seed": list(range(100)), "recurrent_gain": [0.1 * i for i in range(50)]})
    assert cli_main(["sweep", "--over", "colour=1,2"]) == 2


def test_sharded_sweep_on_two_forced_cpu_devices_equals_single_device(tmp_path):
    # Batched (B=4): both devices split each point's batch. Unbatched: they split the
    # 9 sweep points (padded to 10).
    script = textwrap.dedent("""
        import json, sys, jax
        from rnnviz import RunConfig
        from rnnviz.studies.sweep import mesh_shape, sweep, sweep_devices
        out = {}
        configs = {
            "batched": RunConfig(cell="gru", seq_len=10, hidden_size=6, batch_size=4),
            "unbatched": RunConfig(cell="lstm", seq_len=10, hidden_size=6, batch_size=None),
        }
        for name, cfg in configs.items():
            df = sweep(cfg, {"recurrent_gain": [0.5, 0.8, 1.1], "seed": [0, 1, 2]})
            out[name] = {"mesh": mesh_shape(cfg, len(sweep_devices(cfg))), "values": df["grad_norm"].tolist()}
        print(json.dumps(out))
    """)
    results = {}
    for n in (1, 2):
        env = {
            **os.environ,
            "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={n}",
            "PYTHONPATH": str(ROOT),
        }
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
        )
        assert out.returncode == 0, out.stderr[-3000:]
        results[n] = json.loads(out.stdout.strip().splitlines()[-1])
    assert results[1]["batched"]["mesh"] == [1, 1] and results[2]["batched"]["mesh"] == [1, 2]
    assert results[2]["unbatched"]["mesh"] == [2, 1]
    for name in ("batched", "unbatched"):
        np.testing.assert_allclose(results[2][name]["values"], results[1][name]["values"], rtol=1e-6)


def test_phase_diagram_axes_boundary_and_survival():
    cfg = RunConfig(activation="identity", seq_len=20)
    gains = [0.5, 0.75, 1.0, 1.25]
    df = sweep(cfg, {"recurrent_gain": gains, "seed": [0, 1]})
    matrix, survival = phase_frames(df)
    assert list(matrix.columns) == gains and list(matrix.index) == list(range(21))
    # Linear RNN with W = g·Q: log10 ratio at lag k is exactly k·log10 g.
    np.testing.assert_allclose(matrix.loc[10].to_numpy(), 10 * np.log10(gains), atol=1e-4)
    # ≥1 % survives lag k iff k·log10 g ≥ −2: at lag 10 the smallest such gain is 0.75.
    assert survival.set_index("lag").loc[10, "gain_mean"] == 0.75
    boundary = critical_gain(cfg, [0, 1])
    assert boundary == pytest.approx(1.0, rel=1e-5)  # orthogonal: σ₁(W₀) = 1
    fig = charts.phase_figure(matrix, survival, boundary)
    assert fig.data[0].type == "heatmap"
    assert fig.layout.xaxis.title.text == "recurrent gain g" and fig.layout.yaxis.title.text == "lag T − t"
    line = [t for t in fig.data if t.name and t.name.startswith("Pascanu")][0]
    assert list(line.x) == [boundary, boundary]
    assert critical_gain(RunConfig(cell="lstm"), [0]) is None
    # the line in words where it lies along an edge (k·log₁₀ g against −2): here it crosses
    assert survival_sentence(matrix, survival) == ""
    kept = phase_frames(sweep(cfg, {"recurrent_gain": [1.0, 1.25]}))  # ratio ≥ 1 at every lag
    assert survival_sentence(*kept).startswith("The lowest gain here already keeps at least 1 % at every lag")
    lost = phase_frames(sweep(cfg, {"recurrent_gain": [0.001, 0.005]}))  # lag 1: 10^-2.3 at most
    assert survival_sentence(*lost).startswith("No gain here keeps 1 % beyond lag 0")


def test_the_survival_line_equals_a_loop_over_seeds_and_lags():
    """phase_frames' survival line, computed in one groupby, against the smallest passing gain
    per seed and lag found by hand: ratios that vanish (−inf), gaps (NaN), lags where no
    gain of a seed passes, and rows of another component left out."""
    rng = np.random.default_rng(0)
    gains, seeds, lags = [0.3, 0.5, 0.7, 0.8], [0, 1, 2], range(40)
    rows, ratio = [], {}
    for g in gains:
        for s in seeds:
            end = rng.normal()
            for k in lags:
                r = 0.0 if k == 0 else k * np.log10(g) + rng.normal(scale=0.5)
                r = -np.inf if (g, s, k) == (0.7, 1, 7) else np.nan if (g, s, k) == (0.8, 2, 9) else r
                ratio[g, s, k] = r
                at = {"recurrent_gain": g, "seed": s, "lag": k}
                rows += [{**at, "component": "total", "log10_grad_norm": end + r}]
                rows += [{**at, "component": "c", "log10_grad_norm": 9.0}]
    _, survival = phase_frames(pd.DataFrame(rows))
    want = []
    for k in lags:
        per_seed = [min((g for g in gains if ratio[g, s, k] >= -2.0), default=np.nan) for s in seeds]
        seen = [v for v in per_seed if not np.isnan(v)]
        want.append([k, *((np.mean(seen), min(seen), max(seen)) if seen else (np.nan,) * 3)])
    assert np.isnan(want[-1][1]) and not np.isnan(want[1][1])  # both kinds of lag are there
    got = survival[["lag", "gain_mean", "gain_min", "gain_max"]].to_numpy(dtype=float)
    np.testing.assert_allclose(got, np.array(want, dtype=float), equal_nan=True)


def test_cli_sweep_writes_csv(tmp_path, capsys):
    path = tmp_path / "s.csv"
    assert (
        cli_main(
            [
                "sweep",
                "--seq-len",
                "5",
                "--hidden-size",
                "3",
                "--over",
                "recurrent_gain=0.5:1.5:3",
                "--over",
                "seed=0,1",
                "--csv",
                str(path),
            ]
        )
        == 0
    )
    import pandas as pd

    df = pd.read_csv(path)
    assert sorted(df.recurrent_gain.unique()) == [0.5, 1.0, 1.5] and len(df) == 3 * 2 * 6


def test_two_processes_with_gloo_collectives_equal_the_single_process_sweep(tmp_path):
    """The several-hosts path, run: two local processes joined by jax.distributed."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "norms.npy"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    # one CPU device per process (the suite's XLA_FLAGS, conftest.py, name no device count)
    procs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "distributed_worker.py"), str(port), str(i), str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for i in range(2)
    ]
    try:
        results = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (stdout, stderr) in zip(procs, results):
        assert p.returncode == 0 and stdout.strip().endswith("ok"), stderr[-3000:]
    single = sweep(
        RunConfig(cell="lstm", hidden_size=8, input_size=3, seq_len=20, batch_size=2),
        {"recurrent_gain": [0.5 + i / 7 for i in range(8)]},
    )["log10_grad_norm"].to_numpy()
    np.testing.assert_allclose(np.load(out), single, atol=1e-5)


def test_a_small_sweep_compiles_for_compile_speed_and_a_large_one_or_a_measured_one_does_not(monkeypatch):
    """:func:`sweep_flops` counts each point's gradient evaluation and its parameter draw (12·H³
    per orthogonal kernel); at most ``QUICK_COMPILE_FLOPS`` the sweep compiles with the run-once
    options, above it or under ``optimised_code()`` with XLA's defaults, each its own executable."""
    from rnnviz.engine import compile as compile_mod
    from rnnviz.studies.sweep import sweep_devices, sweep_flops

    seen = []
    real = sweep_module.compile_lowered
    monkeypatch.setattr(
        sweep_module,
        "compile_lowered",
        lambda low, what, options=None: seen.append(options) or real(low, what, options),
    )
    cfg = RunConfig(cell="gru", hidden_size=5, input_size=2, seq_len=9, batch_size=2)
    assert sweep_flops(cfg, 3) == 3 * (sweep_module.estimate_flops(cfg) + 3 * 12.0 * 5**3)
    assert sweep_flops(cfg.replace(recurrent_init="normal"), 3) == 3 * sweep_module.estimate_flops(cfg)
    devices = sweep_devices(cfg)
    sweep_executable(cfg, devices, 3)
    assert seen == [compile_mod.RUN_ONCE_OPTIONS]
    with compile_mod.optimised_code():
        sweep_executable(cfg, devices, 3)  # not the quick one, which is held
    assert seen[1:] == [None]
    monkeypatch.setattr(compile_mod, "QUICK_COMPILE_FLOPS", sweep_flops(cfg, 3) / 2)
    sweep_executable(cfg, devices, 3)  # over the line: the optimised one, held already
    assert len(seen) == 2

"""Compile and run time of the analysis under XLA's defaults and under the options a small
shape compiles with (:data:`rnnviz.engine.compile.RUN_ONCE_OPTIONS`), per config, and the
default Phase diagram's two sweeps (41 gains × 3 seeds) with and without
:func:`rnnviz.engine.compile.optimised_code`: the measurement behind
:data:`rnnviz.engine.compile.QUICK_COMPILE_FLOPS`.

    .venv/bin/python scripts/quick_compile.py [--runs 5]

Run it outside the test suite (whose XLA_FLAGS already compile everything at -O0). Each
config's analysis is lowered once and compiled both ways in this process; a run is the
fastest of ``--runs`` after a warm-up. Prints one row per config and option set, then
each sweep's first call (compile and run) and its fastest later run (another seed).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax

from rnnviz import RunConfig
from rnnviz.config import estimate_flops
from rnnviz.engine.cells import make_cell
from rnnviz.engine.compile import QUICK_COMPILE_FLOPS, RUN_ONCE_OPTIONS, optimised_code
from rnnviz.engine.gradients import analysis_outputs
from rnnviz.engine.prepare import Values, prepare_executables, resolve_device, seed_key, static_config
from rnnviz.studies.lyapunov import lyapunov_phase
from rnnviz.studies.sweep import sweep, sweep_flops

CONFIGS = (
    RunConfig(),
    RunConfig(cell="gru"),
    RunConfig(cell="lstm", hidden_size=48, seq_len=60, batch_size=8),
    RunConfig(cell="mlstm"),
    RunConfig(cell="mamba"),
    RunConfig(cell="gated_deltanet"),
    RunConfig(cell="slstm"),
    RunConfig(cell="lstm", hidden_size=32, seq_len=1000, batch_size=4),
    RunConfig(cell="lstm", hidden_size=64, seq_len=200, batch_size=8),
    RunConfig(cell="mlstm", hidden_size=64, seq_len=200, batch_size=16),
    RunConfig(cell="lstm", hidden_size=64, seq_len=200, batch_size=32),
    RunConfig(cell="lstm", hidden_size=128, seq_len=200, batch_size=32),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs per executable (the fastest is shown)")
    args = ap.parse_args()
    print(f"threshold: {QUICK_COMPILE_FLOPS:.0e} FLOPs")
    print(f"{'config':34s} {'FLOPs':>8s} {'options':8s} {'compile s':>9s} {'run ms':>8s}")
    for cfg in CONFIGS:
        static, device = static_config(cfg), resolve_device(cfg)
        params, inputs = prepare_executables(static, device)
        p, c0 = params.fn(seed_key(0), Values.of(cfg))
        xs = inputs.fn(seed_key(0), Values.of(cfg))[..., : cfg.seq_len, :]
        analysis = jax.jit(functools.partial(analysis_outputs, static, make_cell(static)))
        lowered = analysis.lower(p, c0, xs, None)
        name = f"{cfg.cell} H={cfg.hidden_size} T={cfg.seq_len} B={cfg.batch_size}"
        for label, options in (("defaults", None), ("quick", RUN_ONCE_OPTIONS)):
            start = time.perf_counter()
            compiled = lowered.compile(compiler_options=options) if options else lowered.compile()
            compile_s = time.perf_counter() - start
            jax.block_until_ready(compiled(p, c0, xs, None))
            runs = []
            for _ in range(args.runs):
                start = time.perf_counter()
                jax.block_until_ready(compiled(p, c0, xs, None))
                runs.append(time.perf_counter() - start)
            print(f"{name:34s} {estimate_flops(cfg):8.1e} {label:8s} {compile_s:9.2f} {min(runs) * 1e3:8.1f}")
    _phase_sweeps(args.runs)


def _phase_sweeps(runs: int) -> None:
    cfg = RunConfig()
    gains = [0.5 + i * 1.5 / 40 for i in range(41)]
    print(f"\nthe default Phase diagram's sweeps ({sweep_flops(cfg, 123):.1e} FLOPs)")
    print(f"{'sweep':10s} {'options':8s} {'first call s':>12s} {'run ms':>8s}")
    for label, context in (("defaults", optimised_code), ("quick", contextlib.nullcontext)):
        for name, fn in (
            ("gradients", lambda c: sweep(c, {"recurrent_gain": gains, "seed": [0, 1, 2]})),
            ("λ₁", lambda c: lyapunov_phase(c, gains, [0, 1, 2])),
        ):
            with context():
                start = time.perf_counter()
                fn(cfg)
                first = time.perf_counter() - start
                later = []
                for seed in range(1, runs + 1):
                    start = time.perf_counter()
                    fn(cfg.replace(seed=seed))
                    later.append(time.perf_counter() - start)
            print(f"{name:10s} {label:8s} {first:12.2f} {min(later) * 1e3:8.1f}")


if __name__ == "__main__":
    main()

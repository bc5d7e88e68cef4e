"""List the LAPACK calls of every executable rnnviz builds, and the pairs that may overlap.

    .venv/bin/python scripts/lapack_audit.py

Every registered cell, batched and unbatched: the analysis (with the log pass), every
strategy's analysis and gradient, the plain gradient, sweeps of gradients and of λ₁ over
1, 16 and 256 points, Lyapunov (QR every step and every second step), Jacobians (exact
and subspace), ``train_many`` over 1 and 16 runs. Each compile goes through
``rnnviz.engine.compile.compile_lowered``, which raises on an overlapping pair; this script also counts
what each executable calls. A measurement script, not a test (several minutes).
"""

from __future__ import annotations

import collections
import time

import rnnviz.engine.compile as compiling
from rnnviz.base.hlo import concurrent_lapack, lapack_calls

calls: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
compiled: collections.Counter = collections.Counter()
pairs: collections.Counter = collections.Counter()
_check = compiling.check_serial_lapack


def _spy(executable, what: str) -> None:
    text = executable.as_text()
    kind = what.split(" ")[-1] if what.startswith("the ") else what
    if kind == "sweep":
        kind = "sweep (λ₁)" if "lapack_" in text else "sweep (gradients)"
    compiled[kind] += 1
    calls[kind].update(c.target for c in lapack_calls(text))
    pairs[kind] += len(concurrent_lapack(text))
    _check(executable, what)


def main() -> None:
    compiling.check_serial_lapack = _spy  # compile_lowered looks it up in its module
    from rnnviz import RunConfig, analyze, cell_names
    from rnnviz.analysis import baseline_executable
    from rnnviz.engine.prepare import resolve_device, static_config
    from rnnviz.studies.comparisons import available_strategies, compare_strategies, strategy_executable
    from rnnviz.studies.jacobians import jacobians
    from rnnviz.studies.lyapunov import lyapunov, lyapunov_sweep
    from rnnviz.studies.sweep import sweep
    from rnnviz.studies.training import train_many

    start = time.time()
    for cell in cell_names():
        for batch in (None, 3):
            cfg = RunConfig(cell=cell, hidden_size=8, input_size=2, seq_len=6, batch_size=batch)
            analyze(cfg, log_pass=True)
            compare_strategies(cfg, repeats=1)
            for s in available_strategies(cfg):
                strategy_executable(static_config(cfg.replace(strategy=s)), resolve_device(cfg))
            baseline_executable(static_config(cfg), resolve_device(cfg))
            for n in (1, 16, 256):
                gains = [0.5 + i / n for i in range(n)]
                sweep(cfg, {"recurrent_gain": gains})
                lyapunov_sweep(cfg, {"recurrent_gain": gains}, k=1)
            lyapunov(cfg, k=2)
            lyapunov(cfg, k=2, qr_every=2)
            jacobians(cfg, k=2, method="exact")
            jacobians(cfg, k=2, method="subspace")
            if batch:
                for n in (1, 16):
                    train_many(cfg, {"seed": list(range(n))}, steps=1, log_every=1)
        print(f"{cell}: {time.time() - start:.0f} s", flush=True)
    print(
        "\n| executable | compiled | LAPACK calls (target: count over all compiles) | pairs that may "
        "overlap |"
    )
    print("|---|---|---|---|")
    for kind in sorted(compiled):
        found = ", ".join(f"{t}: {n}" for t, n in sorted(calls[kind].items())) or "none"
        print(f"| {kind} | {compiled[kind]} | {found} | {pairs[kind]} |")


if __name__ == "__main__":
    main()

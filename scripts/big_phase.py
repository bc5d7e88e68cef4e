"""Time the Phase diagram's jobs at the big config (LSTM H=128 T=1000 B=32) in one fresh
process, without the page: what a worker does when the tab opens there (#33's profile).

    XLA_FLAGS= .venv/bin/python scripts/big_phase.py

Prints the analysis (compile and run), the tab's plan (gains × seeds, in how many parts),
each part of the gradient diagram (:func:`rnnviz.serve.jobs.phase`: one by one through the
analysis, or the vmapped sweep compiled and run), and λ₁ over the gains; then each again,
compiled. A measurement script, not a test.
"""

from __future__ import annotations

import json
import time

from rnnviz import RunConfig, analyze
from rnnviz.serve import budget, jobs
from rnnviz.ui.tabs import phase as phase_tab


def timed(label: str, fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    print(f"{time.perf_counter() - start:7.2f} s  {label}", flush=True)
    return out


def main() -> None:
    cfg = RunConfig(cell="lstm", hidden_size=128, seq_len=1000, batch_size=32)
    key = json.dumps(cfg.to_dict(), sort_keys=True)
    a = timed("the analysis, compiled and run (10 repeats)", analyze, cfg)
    print(f"          compile {a.timing.compile_s:.2f} s, a run {a.timing.run_s:.3f} s")
    quiet = timed("the worker's quiet timing of a run", jobs.quiet_run_s, key)
    cost = budget.Cost.of(a)._replace(run_s=min(budget.Cost.of(a).run_s, quiet))
    plan = budget.phase_plan(cfg, cost, phase_tab.GAINS, phase_tab.SEEDS)
    parts = budget.phase_parts(plan)
    n, seeds = plan.settings["gains"], plan.settings["seeds"]
    print(f"          plan: {n} gains × {seeds} seeds, {parts} parts, {plan.work_s:.1f} s of runs estimated")
    for again in ("", " again"):
        for p in range(parts):
            label = f"gradient diagram, part {p + 1} of {parts}{again}"
            timed(label, jobs.phase, key, 0.5, 1.5, n, seeds, p, parts)
        timed(f"λ₁ over the gains{again}", jobs.lyapunov_phase_table, key, 0.5, 1.5, n, seeds)


if __name__ == "__main__":
    main()

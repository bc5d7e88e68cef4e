"""What each strategy costs against the accumulator, and what the Strategies tab's budget
estimated, for configs given as ``cell:H:T:B`` (the measurements behind the
``compile_cost`` and ``run_cost`` of :mod:`rnnviz.tables.strategies`).

    XLA_FLAGS= .venv/bin/python scripts/strategy_costs.py lstm:128:1000:32 lstm:256:300:32

For each config, in one fresh process per config (nothing compiled before): the page's
analysis (its compile, and the worker's quiet run: the budget's unit), then every strategy
the cell can run, compiled and timed as the tab times it
(:func:`~rnnviz.studies.comparisons.compare_strategies` at the tab's precision). Prints
each strategy's compile and run over the accumulator's, per-step's run beyond the
accumulator's per float of its ``2·T·P`` buffers, and the tab's plan (the accumulator
compiled, as after the page) against the seconds the strategies took. A measurement
script, not a test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def measure(cell: str, h: int, t: int, b: int) -> dict:
    """One config, in this process: the ratios, the plan and the wall time."""
    from rnnviz import RunConfig, analyze
    from rnnviz.config import param_count
    from rnnviz.serve import budget, jobs
    from rnnviz.serve.settings import TIMING_PRECISION
    from rnnviz.studies.comparisons import available_strategies, compare_strategies

    cfg = RunConfig(cell=cell, hidden_size=h, seq_len=t, batch_size=b)
    a = analyze(cfg, repeats=10, budget_s=0.3)
    key = json.dumps(cfg.to_dict(), sort_keys=True)
    c = budget.Cost.of(a)._replace(run_s=min(a.timing.run_s, jobs.quiet_run_s(key)))
    names = available_strategies(cfg)
    plan = budget.strategies_plan(cfg, c, names, compiled=("accumulate",), budget=1e9)
    start = time.perf_counter()
    df = compare_strategies(cfg, repeats=5, precision=TIMING_PRECISION)
    wall = time.perf_counter() - start
    rows = {
        r.strategy: (r.compile_s / c.compile_s, r.run_s / c.run_s, int(r.repeats)) for r in df.itertuples()
    }
    out = {"config": f"{cell} H={h} T={t} B={b}", "compile_s": c.compile_s, "run_s": c.run_s}
    out |= {"rows": rows, "estimate_s": plan.estimate_s, "took_s": wall}
    if "per_step" in rows:
        extra = (rows["per_step"][1] - rows["accumulate"][1]) * c.run_s
        out["per_step_ns_per_float"] = extra / (2 * t * param_count(cfg)) * 1e9
    return out


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        print(json.dumps(measure(*[int(x) if x.isdigit() else x for x in sys.argv[2].split(":")])))
        return
    for spec in sys.argv[1:] or ["lstm:128:1000:32"]:
        line = (
            subprocess.run(
                [sys.executable, __file__, "--one", spec], capture_output=True, text=True, check=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        m = json.loads(line)
        print(f"{m['config']}: compile {m['compile_s']:.2f} s, run {m['run_s'] * 1e3:.1f} ms (the unit)")
        for name, (comp, run, repeats) in m["rows"].items():
            print(f"  {name:16s} compile ×{comp:4.2f}  run ×{run:4.2f}  ({repeats} timed runs)")
        if "per_step_ns_per_float" in m:
            print(
                f"  per-step beyond the accumulator: {m['per_step_ns_per_float']:.1f} ns per float of 2·T·P"
            )
        print(
            f"  plan (accumulator compiled) {m['estimate_s']:.1f} s; the strategies took {m['took_s']:.1f} s"
        )


if __name__ == "__main__":
    main()

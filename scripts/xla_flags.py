"""Compare XLA:CPU flag sets by what they cost to compile and what their code costs to run.

    .venv/bin/python scripts/xla_flags.py [--rounds 2] [--flags=""] \
        [--flags="--xla_cpu_use_fusion_emitters=false"] ...  (with "=": a value starting with --)

Each flag set runs in a fresh process (XLA reads ``XLA_FLAGS`` once, when its backend
starts), alternating over ``--rounds``. A process compiles and runs every built-in cell's
analysis at a tiny shape (H=6, T=7, B=2), a gain sweep and a Lyapunov run of the LSTM and of
Mamba, as the test suite does, and sums the backend's compile seconds (``jax.monitoring``);
then it times the analysis of four cells at a real size (B=32, T=200, H=128; the matrix
memories at H=32), median of 15 runs. This is how the suite's ``--xla_cpu_use_fusion_emitters=false``
(tests/conftest.py) and the run-once executables' options (rnnviz.engine.compile.RUN_ONCE_OPTIONS)
were chosen. A measurement script: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, time
import jax, jax.monitoring
acc = {"compile_s": 0.0, "compiles": 0}
def listen(event, seconds, **_):
    if event.endswith("backend_compile_duration"):
        acc["compile_s"] += seconds
        acc["compiles"] += 1
jax.monitoring.register_event_duration_secs_listener(listen)
from rnnviz import RunConfig, analyze
from rnnviz.tables.cells import cell_names
from rnnviz.studies.sweep import sweep
from rnnviz.studies.lyapunov import lyapunov
start = time.perf_counter()
for cell in cell_names():
    analyze(RunConfig(cell=cell, hidden_size=6, input_size=3, seq_len=7, batch_size=2), repeats=1)
for cell in ("lstm", "mamba"):
    tiny = RunConfig(cell=cell, hidden_size=6, input_size=3, seq_len=7, batch_size=2)
    sweep(tiny, {"recurrent_gain": [0.5, 1.0, 1.5]})
    lyapunov(tiny)
out = {"tiny_s": time.perf_counter() - start, **acc, "run_ms": {}}
for cell, h in (("lstm", 128), ("gru", 128), ("mamba", 64), ("mlstm", 32)):
    a = analyze(RunConfig(cell=cell, hidden_size=h, input_size=32, seq_len=200, batch_size=32), repeats=15)
    out["run_ms"][f"{cell} H={h}"] = a.timing.run_s * 1e3
print(json.dumps(out))
"""


def measure(flags: str) -> dict:
    env = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800
    )
    if done.returncode != 0:
        raise SystemExit(f"flags {flags!r} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--flags", action="append", help='an XLA_FLAGS value to compare (repeat; "" is XLA\'s defaults)'
    )
    ap.add_argument("--rounds", type=int, default=2, help="times each flag set runs, alternating")
    args = ap.parse_args()
    sets = args.flags or ["", "--xla_cpu_use_fusion_emitters=false"]
    runs: dict[str, list[dict]] = {flags: [] for flags in sets}
    for _ in range(args.rounds):  # alternating: a slower spell of the machine hits every set
        for flags in sets:
            runs[flags].append(measure(flags))
    cells = list(runs[sets[0]][0]["run_ms"])
    print(
        "| XLA_FLAGS | compiles | backend compile s | tiny configs s | "
        + " | ".join(f"{c} ms" for c in cells)
        + " |"
    )
    print("|---|---:|---:|---:|" + "---:|" * len(cells))
    for flags, got in runs.items():
        cols = [
            str(got[0]["compiles"]),
            " / ".join(f"{r['compile_s']:.1f}" for r in got),
            " / ".join(f"{r['tiny_s']:.1f}" for r in got),
        ] + [" / ".join(f"{r['run_ms'][c]:.0f}" for r in got) for c in cells]
        print(f"| `{flags or '(defaults)'}` | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    main()

"""Where a tab's time goes (#33's profile): compile, run, transfer, the Streamlit rerun, and
what is left for the browser.

    XLA_FLAGS= .venv/bin/python scripts/profile_tab.py --tab "Phase diagram" --config big \
        [--complete-s 11.4]

Runs the app's script in this process (Streamlit's AppTest with ``RNNVIZ_WORKERS=0``: every
job runs here, one after another, as one worker would run it), first on the page alone (its
analysis compiled and cached), then opened on the tab, and times every job the tab asks for:

* compile: the seconds JAX spent tracing, lowering and compiling during the job
  (``jax.monitoring``'s duration events);
* run: the rest of the job's seconds;
* transfer: pickling its answer and reading it back, as the pipe from a worker does, and
  the answer's size.

Then the same page once more, every answer cached: the script's run alone (the Streamlit
rerun, the figures serialised included). With ``--complete-s`` (the tab's "complete" from
``scripts/measure_app.py``, in the browser against a real server) it prints what is left
for the browser: the websocket, React and Plotly's render. A measurement script, not a test:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import pickle
import time
from pathlib import Path

os.environ["RNNVIZ_WORKERS"] = "0"  # every job in this process: its compile and run seen here
os.environ.setdefault("RNNVIZ_JAX_CACHE", "off")  # cold, as a fresh shape is

import jax.monitoring
from streamlit.testing.v1 import AppTest

from rnnviz.ui import calls

#: The page's script (AppTest runs scripts, not the st.App that app.py defines).
ENTRY = str(Path(__file__).resolve().parent.parent / "rnnviz" / "ui" / "entry.py")
CONFIGS = {
    "default": {},
    "big": {"cell": "lstm", "hidden_size": "128", "seq_len": "1000", "batch_size": "32"},
}
_COMPILING = ("jaxpr_trace_duration", "jaxpr_to_mlir_module_duration", "backend_compile_duration")
_compile_s = [0.0]


def _listen(event: str, seconds: float, **_) -> None:
    if event.endswith(_COMPILING):
        _compile_s[0] += seconds


def _timed_get(rows: list[dict]):
    """:func:`rnnviz.ui.calls.get`, each request's seconds split and kept in ``rows``."""
    real = calls.get

    def get(request, quiet: bool = False):
        cached = calls.has(request)
        before, start = _compile_s[0], time.perf_counter()
        out = real(request, quiet)
        what = request.what
        wall, compiling = time.perf_counter() - start, _compile_s[0] - before
        start = time.perf_counter()
        blob = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(blob)
        rows.append(
            {
                "job": what,
                "cached": cached,
                "compile": compiling,
                "run": wall - compiling,
                "transfer": time.perf_counter() - start,
                "kB": len(blob) / 1024,
            }
        )
        return out

    return get


def _page(query: dict) -> float:
    """Seconds of one run of the app's script with ``query`` (an exception is raised)."""
    at = AppTest.from_file(ENTRY, default_timeout=600)
    for k, v in query.items():
        at.query_params[k] = v
    start = time.perf_counter()
    at.run()
    took = time.perf_counter() - start
    if at.exception:
        raise RuntimeError(f"the page failed: {at.exception[0].message}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tab", default="Phase diagram", help="the tab's title")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="big")
    ap.add_argument("--complete-s", type=float, help="the tab's 'complete' in the browser (measure_app.py)")
    args = ap.parse_args()
    jax.monitoring.register_event_duration_secs_listener(_listen)
    rows: list[dict] = []
    calls.get = _timed_get(rows)
    query = CONFIGS[args.config]
    page_s = _page(query)
    rows.clear()
    tab_s = _page({**query, "tab": args.tab})
    jobs = [r for r in rows if not r["cached"]]
    rerun_s = _page({**query, "tab": args.tab})
    print(f"{args.tab} at the {args.config} config: the page alone {page_s:.2f} s (its analysis compiled)")
    print("\n| job | compile s | run s | transfer s | answer kB |\n|---|---:|---:|---:|---:|")
    for r in jobs:
        print(f"| {r['job']} | {r['compile']:.2f} | {r['run']:.2f} | {r['transfer']:.3f} | {r['kB']:.0f} |")
    total = {k: sum(r[k] for r in jobs) for k in ("compile", "run", "transfer")}
    print(
        f"| **all {len(jobs)} jobs** | {total['compile']:.2f} | {total['run']:.2f} "
        f"| {total['transfer']:.3f} | |"
    )
    print(
        f"\nthe tab's page run, computing: {tab_s:.2f} s; "
        f"again, every answer cached (the rerun): {rerun_s:.2f} s"
    )
    if args.complete_s is not None:
        rest = args.complete_s - sum(total.values()) - rerun_s
        print(
            f"complete in the browser {args.complete_s:.2f} s = compile {total['compile']:.2f} + run "
            f"{total['run']:.2f} + transfer {total['transfer']:.2f} + rerun {rerun_s:.2f} + the rest "
            f"{rest:.2f} (the websocket, React and Plotly's render; negative: the workers ran jobs at once)"
        )


if __name__ == "__main__":
    main()

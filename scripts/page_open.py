"""Page open → first chart, where the time goes: the dashboard against the floor of its stack.

    .venv/bin/python scripts/page_open.py --pages 5 [--fresh-browsers] [--trace] [--profile] [--class-size 8]

Starts a fresh ``rnnviz app`` (waits for its warm-up) and, beside it, a minimal Streamlit page
that draws one Plotly chart of 200 points: the least any Streamlit + Plotly page costs a
fresh browser on this machine. Each page is opened ``--pages`` times in a fresh Chromium
context (1366×768, no cache: a first visit) and timed from navigation start, in ms:

* ``dom``: the HTML and Streamlit's own JavaScript parsed (DOMContentLoaded);
* ``socket``: the first websocket message (the session begins);
* ``run``: the script run's begin and end, as the server's messages say;
* ``plotly``: the fetch of Streamlit's Plotly chunk, begin and end, and its size;
* ``last frame``: the last websocket message before the chart (the server has sent the page:
  from here to ``chart`` is the browser's own work);
* ``chart``: the main area's first chart holds data (what ``measure_app.py`` calls the first chart).

With ``--class-size N`` it then opens each page in N fresh contexts at once, as
``measure_app.py``'s class does, and prints their first charts' median and maximum: what a
class costs these cores before anything is computed (every visitor here asks for the default
page, whose results the warm-up left cached).

With ``--fresh-browsers`` each open launches a new Chromium, as the walk's page open does,
instead of a new context of one browser. The list after the table gives each open's chart in
order: the first comes right after the warm-up (and its idle-time work).

With ``--trace`` it opens each page once more with Chrome's tracing on and prints how busy the
page's main thread (the renderer's, where Streamlit, React and Plotly run) was until the
first chart, by kind of work: evaluating the JavaScript bundles (Streamlit's, and Plotly's
4.5 MB chunk), other script (React rendering the elements, Plotly drawing), style and layout,
garbage collection. A main thread busy nearly all the time to the chart is the floor: only
less work there draws sooner.

With ``--profile`` it also samples the page's main thread (Chrome's CPU profiler) on the last
open of each page and prints where it went, by script file. The table gives medians. Run
it alone: the browser and both servers share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))
from browser_helpers import CHART, CHROMIUM, FLAGS, RUN_COUNTER  # noqa: E402  (the tests' browser)
from measure_app import _healthy, _port  # noqa: E402

#: The floor: Streamlit's page with one Plotly chart, nothing else.
MINIMAL = """import numpy as np, plotly.graph_objects as go, streamlit as st
st.set_page_config(layout="wide")
st.title("one chart")
st.plotly_chart(go.Figure(go.Scatter(y=np.sin(np.arange(200) / 10))))
"""
#: The run counter of the browser tests, also stamping when the first message, the first run's
#: begin (``new_session``) and its end (``script_finished``) arrived.
PROBE = (
    RUN_COUNTER.replace(
        "const count = (data) => {",
        "const count = (data) => {\n    if (s.t_socket === undefined) s.t_socket = performance.now();"
        "\n    (s.t_frames = s.t_frames || []).push(performance.now());",
    )
    .replace(
        "if (field === 4) {",
        "if (field === 4) { if (s.t_begin === undefined) s.t_begin = performance.now();",
    )
    .replace(
        "if (field === 6) s.ended += 1;",
        "if (field === 6) { s.ended += 1; if (s.t_end === undefined) s.t_end = performance.now(); }",
    )
)
#: Stamps, once a frame, when the main area's first chart first holds data.
CHART_WATCH = f"""(() => {{
  const tick = () => {{
    const p = document.querySelector('{CHART}'); const d = p && p._fullData && p._fullData[0];
    if (d && ((d.y && d.y.length) || (d.z && d.z.length))) window.__chart = performance.now();
    else requestAnimationFrame(tick);
  }};
  requestAnimationFrame(tick);
}})();"""
READ = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const plotly = performance.getEntriesByType('resource').find((e) => e.name.includes('PlotlyChart')) || {};
  return { dom: nav.domContentLoadedEventEnd, socket: window.__runs.t_socket,
    'run begin': window.__runs.t_begin, 'run end': window.__runs.t_end,
    'plotly begin': plotly.startTime, 'plotly end': plotly.responseEnd,
    'plotly MB': plotly.encodedBodySize / 2 ** 20, chart: window.__chart,
    'last frame': Math.max(...(window.__runs.t_frames || [0]).filter((t) => t <= window.__chart)) };
}"""
COLUMNS = (
    *("dom", "socket", "run begin", "run end", "plotly begin", "plotly end"),
    *("last frame", "chart", "plotly MB"),
)


def _serve(cmd: list[str], port: int, warm: bool) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "RNNVIZ_JAX_CACHE": tempfile.mkdtemp(prefix="rnnviz-jax-"), "PYTHONUNBUFFERED": "1"}
    env.pop("XLA_FLAGS", None)  # a user's server
    log = Path(tempfile.mkdtemp(prefix="rnnviz-page-open-")) / "server.log"
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    start = time.perf_counter()
    while not _healthy(port) or (warm and "warm-up:" not in log.read_text()):
        if proc.poll() is not None or time.perf_counter() - start > 180:
            proc.kill()
            raise RuntimeError(f"the server did not start; see {log}")
        time.sleep(0.1)
    return proc, log


async def _open(browser, url: str, profile: bool) -> tuple[dict, collections.Counter]:
    ctx = await browser.new_context(viewport={"width": 1366, "height": 768})
    await ctx.add_init_script(PROBE)
    await ctx.add_init_script(CHART_WATCH)
    page = await ctx.new_page()
    cdp = None
    if profile:
        cdp = await ctx.new_cdp_session(page)
        await cdp.send("Profiler.enable")
        await cdp.send("Profiler.setSamplingInterval", {"interval": 200})
        await cdp.send("Profiler.start")
    await page.goto(url, timeout=120_000)
    await page.wait_for_function("() => window.__chart !== undefined", timeout=120_000)
    row = await page.evaluate(READ)
    where: collections.Counter = collections.Counter()
    if cdp is not None:  # main-thread ms by script file (or V8's own buckets: idle, program, GC)
        prof = (await cdp.send("Profiler.stop"))["profile"]
        nodes = {n["id"]: n["callFrame"] for n in prof["nodes"]}
        for sample, delta in zip(prof["samples"], prof["timeDeltas"][1:] + [0]):
            frame = nodes[sample]
            where[frame["url"].rsplit("/", 1)[-1] or frame["functionName"] or "(native)"] += delta / 1000
    await ctx.close()
    return row, where


#: Chrome's trace categories for the main thread's tasks and what runs in them.
TRACE_CATEGORIES = [
    *("devtools.timeline", "disabled-by-default-devtools.timeline", "v8", "v8.execute"),
    "blink.user_timing",  # navigationStart: where the page's clock starts
]
#: Kinds of main-thread work, by trace event name (the first prefix that matches).
WORK_KINDS = (
    ("evaluating bundles", ("v8.evaluateModule", "EvaluateScript", "v8.compile", "v8.compileModule")),
    ("garbage collection", ("V8.GC", "MajorGC", "MinorGC", "BlinkGC")),
    ("style and layout", ("UpdateLayoutTree", "Layout", "PrePaint", "Paint", "Layerize", "Commit")),
    ("other script (React, Plotly)", ("FunctionCall", "RunMicrotasks", "v8.", "V8.", "TimerFire")),
)


def _work_kind(name: str) -> str:
    return next((kind for kind, prefixes in WORK_KINDS if name.startswith(prefixes)), "other")


def main_thread_work(events: list[dict], chart_ms: float) -> tuple[float, collections.Counter]:
    """From a Chrome trace: the renderer main thread's busy ms from its last navigation to
    ``chart_ms`` after it, and that time split by :data:`WORK_KINDS` (each event's self time,
    its nested events' taken out)."""
    names = {(e["pid"], e["tid"]): e["args"].get("name") for e in events if e.get("name") == "thread_name"}
    navs = [
        e
        for e in events
        if e.get("name") == "navigationStart" and names.get((e["pid"], e["tid"])) == "CrRendererMain"
    ]
    nav = max(navs, key=lambda e: e["ts"])  # the page's (a blank page's renderer may come first)
    mine = [e for e in events if (e["pid"], e["tid"]) == (nav["pid"], nav["tid"])]
    t0 = nav["ts"]
    end = t0 + chart_ms * 1000
    spans = sorted(
        (e for e in mine if e.get("ph") == "X" and "dur" in e and t0 <= e["ts"] < end),
        key=lambda e: (e["ts"], -e["dur"]),
    )
    kinds: collections.Counter = collections.Counter()
    stack: list[tuple[float, str]] = []  # (end, kind) of the enclosing events
    busy = 0.0
    for e in spans:
        start, stop = e["ts"], min(e["ts"] + e["dur"], end)
        while stack and stack[-1][0] <= start:
            stack.pop()
        if stack:
            kinds[stack[-1][1]] -= stop - start  # nested: not its parent's own time
        else:
            busy += stop - start
        kind = _work_kind(e["name"])
        kinds[kind] += stop - start
        stack.append((stop, kind))
    return busy / 1000, collections.Counter({k: v / 1000 for k, v in kinds.items()})


async def _trace(browser, url: str) -> tuple[float, float, collections.Counter]:
    """One more fresh open with tracing on: ``(chart ms, main thread busy ms, ms by kind)``."""
    ctx = await browser.new_context(viewport={"width": 1366, "height": 768})
    await ctx.add_init_script(CHART_WATCH)
    page = await ctx.new_page()
    with tempfile.TemporaryDirectory(prefix="rnnviz-trace-") as folder:  # a trace is tens of MB
        path = Path(folder) / "trace.json"
        await browser.start_tracing(page=page, path=str(path), categories=TRACE_CATEGORIES)
        await page.goto(url, timeout=120_000)
        await page.wait_for_function("() => window.__chart !== undefined", timeout=120_000)
        chart = await page.evaluate("() => window.__chart")
        await browser.stop_tracing()
        await ctx.close()
        events = json.loads(path.read_text())
    busy, kinds = main_thread_work(events["traceEvents"] if isinstance(events, dict) else events, chart)
    return chart, busy, kinds


async def _measure(
    name: str, url: str, pages: int, profile: bool, trace: bool = False, fresh_browsers: bool = False
) -> list[dict]:
    rows = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            for i in range(pages):
                if fresh_browsers and i:  # as the walk's page open: a browser just launched
                    await browser.close()
                    browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                row, where = await _open(browser, url, profile and i == pages - 1)
                rows.append(row)
                if where:
                    total = sum(where.values())
                    print(f"{name}: the main thread until the first chart ({total:.0f} ms sampled), by file:")
                    for file, ms in where.most_common(8):
                        print(f"  {ms:7.0f} ms  {file}")
            if trace:
                chart, busy, kinds = await _trace(browser, url)
                print(f"{name}: traced open, chart at {chart:.0f} ms; main thread busy {busy:.0f} ms of it:")
                for kind, ms in kinds.most_common():
                    print(f"  {ms:7.0f} ms  {kind}")
        finally:
            await browser.close()
    return rows


async def _class(url: str, size: int) -> list[float]:
    """``size`` fresh browser contexts opening ``url`` at once (one browser, as
    ``measure_app.py``'s class): each one's seconds from its navigation start to its first chart."""
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            opened = await asyncio.gather(*(_open(browser, url, False) for _ in range(size)))
        finally:
            await browser.close()
    return sorted(row["chart"] / 1000 for row, _ in opened)


def _median(values: list) -> float | None:
    """The median of the values a page reported (None where no open saw the stage)."""
    seen = [v for v in values if v is not None]
    return statistics.median(seen) if seen else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=5, help="fresh contexts per page (the table gives medians)")
    ap.add_argument("--profile", action="store_true", help="also sample the main thread on the last open")
    ap.add_argument(
        "--trace", action="store_true", help="then one traced open: the main thread's work by kind"
    )
    ap.add_argument(
        "--fresh-browsers",
        action="store_true",
        help="open each page in a newly launched Chromium (as the walk's page open), not a new context",
    )
    ap.add_argument(
        "--settle-s",
        type=float,
        default=0.0,
        help="seconds to wait after the server is up (and rnnviz warmed) before the first open (default 0)",
    )
    ap.add_argument(
        "--class-size",
        type=int,
        default=0,
        help="then this many fresh contexts opening each page at once: the floor of a class's first "
        "charts on these cores (measure_app.py's class also computes: each visitor has another cell)",
    )
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="rnnviz-minimal-"))
    (folder / "minimal.py").write_text(MINIMAL)
    pages = {
        "rnnviz": lambda port: [sys.executable, "-m", "rnnviz", "app", "--port", str(port)],
        "minimal Streamlit + Plotly": lambda port: [
            *(sys.executable, "-m", "streamlit", "run", str(folder / "minimal.py")),
            *("--server.port", str(port), "--browser.gatherUsageStats=false"),
        ],
    }
    table, classes, opens = {}, {}, {}
    for name, cmd in pages.items():
        port = _port()
        proc, _ = _serve([*cmd(port), "--server.headless=true"], port, warm=name == "rnnviz")
        time.sleep(args.settle_s)
        try:
            rows = asyncio.run(
                _measure(
                    *(name, f"http://127.0.0.1:{port}/", args.pages, args.profile),
                    *(args.trace, args.fresh_browsers),
                )
            )
            if args.class_size:
                classes[name] = asyncio.run(_class(f"http://127.0.0.1:{port}/", args.class_size))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        table[name] = {c: _median([r[c] for r in rows]) for c in COLUMNS}
        opens[name] = [r["chart"] for r in rows]
    fresh = "newly launched browsers" if args.fresh_browsers else "fresh contexts"
    print(f"\npage open, median of {args.pages} {fresh} (ms from navigation start)\n")
    print("| page | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for name, med in table.items():
        cells = [
            "–" if med[c] is None else f"{med[c]:.1f}" if c == "plotly MB" else f"{med[c]:.0f}"
            for c in COLUMNS
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nthe chart of each open, in order (the first comes right after the warm-up):\n")
    for name, charts in opens.items():
        print(f"- {name}: " + ", ".join(f"{c:.0f}" for c in charts) + " ms")
    if classes:
        print(f"\n{args.class_size} fresh contexts opening the page at once: seconds to each first chart\n")
        print("| page | median | max | all |")
        print("|---|---:|---:|---|")
        for name, times in classes.items():
            each = ", ".join(f"{t:.1f}" for t in times)
            print(f"| {name} | {statistics.median(times):.1f} | {max(times):.1f} | {each} |")


if __name__ == "__main__":
    main()

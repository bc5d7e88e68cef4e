"""Measure the dashboard as a user feels it (#33): the scripted walk whose table the issue's
targets are judged on, the median over ``--runs`` fresh servers.

    .venv/bin/python scripts/measure_app.py [--runs 3] [--class-size 8] [--json out.json]
        [--entry app.py] [--first-chart-only] [--warm-wait-s 60]

Each run starts ``rnnviz app`` (the warm-up included, as a user starts it; ``--entry app.py``:
``streamlit run app.py`` in the checkout instead) on a free port with an empty JAX compilation
cache, waits for the warm-up's line in the server's log (at most ``--warm-wait-s``), then
drives Debian's chromium through Playwright and times, from the browser's side:

* server start → its health check answers, and the warm-up's end;
* page open → the first chart holds data (a fresh browser);
* value changes (seed, gain, input scale) and shape changes (cell, H, T, B): the change →
  the chart's data changed;
* every tab at the default config and at the big one (LSTM H=128 T=1000 B=32): the click →
  the tab's first chart holds data ("first chart"), and → the page stops running
  ("complete"); with ``--read-s S`` the visitor looks at each tab for S seconds before
  opening the next (the workers' idle time, :mod:`rnnviz.serve.idle`);
* a second visitor's first chart while the first computes the Phase diagram at the big
  config;
* a class: ``--class-size`` browsers opening the page at once, each with another cell or
  seed (H=64, T=200), beside one visitor already there; and the CPU seconds the workers,
  the browsers and the server spent meanwhile (where a class's time goes on shared cores).

``--first-chart-only`` stops after the page's first chart (a fresh server's first visitor).
``--visitors-only`` runs just the last two (a second visitor, the class; the Phase diagram
opened at the big config first, as the walk has) on each fresh server: enough to compare
two server settings or checkouts (set in the environment) in a third of the time.

It prints one table (step, target, median, the runs, met) and every tab's times, and writes
them with ``--json``. A measurement script, not a test: nothing here is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.async_api import async_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from browser_helpers import CHART, CHROMIUM, FLAGS, RUN_COUNTER, RUNS, SETTLED  # noqa: E402  (the tests' browser)

sys.path.insert(0, str(ROOT))
from rnnviz.ui.tabs import TABS  # noqa: E402

TITLES = tuple(t.TITLE for t in TABS)
#: JavaScript: the first values of the page's first chart as drawn (null before it holds data).
FIRST_Y = f"""() => {{ const p = document.querySelector('{CHART}');
  const d = p && p._fullData && p._fullData[0];  // what Plotly drew (data may hold base64 arrays)
  return d && d.y && d.y.length ? Array.from(d.y).slice(0, 3).join(',') : null; }}"""
#: JavaScript: whether the open tab's panel holds a chart with data.
TAB_CHART = """() => { const panel = [...document.querySelectorAll('[role="tabpanel"]')]
    .find((p) => !p.hidden && p.offsetParent !== null);
  const plot = panel && panel.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
  return !!(plot && plot._fullData && plot._fullData.length); }"""
BIG = "cell=lstm&hidden_size=128&seq_len=1000&batch_size=32"
CLASS_CELLS = ("simple", "lstm", "gru", "mgu", "indrnn", "mingru", "minlstm", "lru", "rglru", "mamba")

#: The issue's targets in seconds, by step (None: measured, no target).
TARGETS: dict[str, float | None] = {
    "server start → health": 1.5,
    "server start → warm-up done": None,
    "page open → first chart": 2.0,
    "value change (seed, gain, scale)": 0.4,
    "shape change (cell, H, T, B)": 1.5,
    "any tab → its first chart (default)": 2.0,
    "any tab → complete (default)": 5.0,
    "any tab → its first chart (big)": 2.0,
    "any tab → complete (big)": 5.0,
    "Phase diagram complete (big)": 5.0,
    "Devices complete (big)": 5.0,
    "second visitor's first chart": 3.0,
    "class: median first chart": 6.0,
    "class: max first chart": 10.0,
}
STEP_LIMIT_S = 300.0
#: How each ``--entry`` starts a server, from the checkout's root (the port follows).
ENTRIES = {
    "rnnviz app": [sys.executable, "-m", "rnnviz", "app", "--server.headless=true", "--port"],
    "app.py": [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless=true", "--server.port"],
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


async def _page(browser, url: str):
    ctx = await browser.new_context(viewport={"width": 1366, "height": 768})
    await ctx.add_init_script(RUN_COUNTER)
    page = await ctx.new_page()
    start = time.perf_counter()
    await page.goto(url, timeout=STEP_LIMIT_S * 1000)
    await page.wait_for_function(f"() => ({FIRST_Y})() !== null", timeout=STEP_LIMIT_S * 1000)
    return page, time.perf_counter() - start


async def _idle(page, before: int) -> None:
    """Until the run an action started (the page's run count past ``before``) has ended, and
    any after it (:data:`~browser_helpers.SETTLED`)."""
    await page.wait_for_function(SETTLED, arg=before, timeout=STEP_LIMIT_S * 1000)


async def _changed(page, act) -> float:
    """Seconds from ``act()`` until the first chart's data differ, then wait for the run's end."""
    await page.wait_for_function(SETTLED, arg=-1, timeout=STEP_LIMIT_S * 1000)
    before_y, before_runs = await page.evaluate(FIRST_Y), await page.evaluate(RUNS)
    start = time.perf_counter()
    await act()
    await page.wait_for_function(
        f"prev => ({FIRST_Y})() !== null && ({FIRST_Y})() !== prev", arg=before_y, timeout=STEP_LIMIT_S * 1000
    )
    took = time.perf_counter() - start
    await _idle(page, before_runs)
    return took


def _number(page, key: str, value):
    async def act():
        box = page.locator(f".st-key-{key} input")
        await box.fill(str(value))
        await box.press("Enter")

    return act


def _select(page, key: str, option: str):
    async def act():
        box = page.locator(f".st-key-{key}").get_by_role("combobox")
        await box.click()
        await box.fill(option)  # the list filters as one types; the option then is the only match
        await page.get_by_role("option", name=option, exact=True).click()

    return act


async def _tabs(page, read_s: float) -> dict[str, dict[str, float | None]]:
    """Each tab after the first: ``read_s`` looking at the last one, then click → its first
    chart with data, and → the run's end."""
    out = {}
    for title in TITLES[1:] + TITLES[:1]:
        await asyncio.sleep(read_s)  # a visitor reading: the workers' idle time (not counted)
        before = await page.evaluate(RUNS)
        start = time.perf_counter()
        await page.get_by_role("tab", name=title, exact=True).click()
        first = None
        deadline = start + STEP_LIMIT_S
        while time.perf_counter() < deadline:
            if first is None and await page.evaluate(TAB_CHART):
                first = time.perf_counter() - start
            if await page.evaluate(SETTLED, before):
                break
            await asyncio.sleep(0.05)
        complete = time.perf_counter() - start
        if first is None and await page.evaluate(TAB_CHART):
            first = complete
        out[title] = {"first_chart": first, "complete": complete}
    return out


async def _walk(browser, url: str, read_s: float) -> dict:
    m: dict = {}
    page, m["page open → first chart"] = await _page(browser, url)
    values = [await _changed(page, _number(page, "cfg_seed", s)) for s in (1, 2, 3)]
    values += [await _changed(page, _number(page, "cfg_recurrent_gain", g)) for g in (0.9, 1.1)]
    values += [await _changed(page, _number(page, "cfg_input_scale", s)) for s in (0.5, 1.0)]
    m["value change (seed, gain, scale)"] = statistics.median(values)
    shapes = [await _changed(page, _select(page, "cfg_cell", c)) for c in ("gru · classic", "lstm · classic")]
    shapes += [await _changed(page, _number(page, "cfg_hidden_size", 48))]
    shapes += [await _changed(page, _number(page, "cfg_seq_len", 60))]
    shapes += [await _changed(page, _number(page, "cfg_batch_size", 8))]
    m["shape change (cell, H, T, B)"] = statistics.median(shapes)
    await page.goto(url)
    await page.wait_for_function(f"() => ({FIRST_Y})() !== null", timeout=STEP_LIMIT_S * 1000)
    await _idle(page, 0)  # a page's first run has ended
    m["tabs (default)"] = await _tabs(page, read_s)
    await page.context.close()
    page, m["big: first chart"] = await _page(browser, f"{url}?{BIG}")
    await _idle(page, 0)  # a page's first run has ended
    m["tabs (big)"] = await _tabs(page, read_s)
    m["second visitor's first chart"] = await _second_visitor(browser, url, page)
    return m


async def _second_visitor(browser, url: str, page=None) -> float:
    """A second visitor's first chart while the first computes the Phase diagram at the big
    config (``page``: the first visitor's, already at the big config; None: opened here)."""
    if page is None:  # as the walk leaves it: the Phase diagram opened there once already
        page, _ = await _page(browser, f"{url}?{BIG}&tab=Phase+diagram")
        await _idle(page, 0)
    before = await page.evaluate(RUNS)
    await page.get_by_role("tab", name="Carry", exact=True).click()
    await _idle(page, before)
    await page.goto(f"{url}?{BIG}&seed=5&tab=Phase+diagram")  # a new seed: nothing cached
    await asyncio.sleep(1.0)
    other, seconds = await _page(browser, f"{url}?seed=9")
    await _idle(page, 0)  # a page's first run has ended
    await other.context.close()
    await page.context.close()
    return seconds


def _cpu_seconds(server_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) used so far by the server, its worker processes and every
    chromium process: where a step's time went, on a machine whose cores they share."""
    import psutil  # a measurement script: psutil comes with flax's orbax-checkpoint

    out = {"server": 0.0, "workers": 0.0, "browser": 0.0}
    server = psutil.Process(server_pid)
    groups = [("server", [server]), ("workers", server.children(recursive=True))]
    chromium = [p for p in psutil.process_iter(["name"]) if "chrom" in (p.info["name"] or "")]
    groups.append(("browser", chromium))
    for name, procs in groups:
        for p in procs:
            try:
                t = p.cpu_times()
                out[name] += t.user + t.system
            except psutil.Error:  # ended meanwhile
                pass
    return out


async def _class(browser, url: str, size: int, server_pid: int) -> tuple[list[float], dict[str, float]]:
    """One visitor already there, then ``size`` opening the page at once: their seconds to
    the first chart, and the CPU seconds each group of processes spent meanwhile."""
    there, _ = await _page(browser, f"{url}?hidden_size=64&seq_len=200")
    urls = [
        f"{url}?cell={CLASS_CELLS[i % len(CLASS_CELLS)]}&seed={i}&hidden_size=64&seq_len=200"
        for i in range(size)
    ]
    before, start = _cpu_seconds(server_pid), time.perf_counter()
    opened = await asyncio.gather(*(_page(browser, u) for u in urls))
    after, wall = _cpu_seconds(server_pid), time.perf_counter() - start
    for page, _ in opened:
        await page.context.close()
    await there.context.close()
    cpu = {k: after[k] - before[k] for k in before} | {"wall": wall}
    return [t for _, t in opened], cpu


def _summary(m: dict) -> dict[str, float]:
    """The table's rows from one run's measurements."""
    row = {k: m[k] for k in ("server start → health", "server start → warm-up done") if m.get(k) is not None}
    if "page open → first chart" not in m:  # --visitors-only
        return row | _visitors(m)
    if "value change (seed, gain, scale)" not in m:  # --first-chart-only
        return row | {"page open → first chart": m["page open → first chart"]}
    row.update({k: m[k] for k in ("page open → first chart", "value change (seed, gain, scale)")})
    row["shape change (cell, H, T, B)"] = m["shape change (cell, H, T, B)"]
    for which in ("default", "big"):
        tabs = m[f"tabs ({which})"]
        firsts = [t["first_chart"] for t in tabs.values() if t["first_chart"] is not None]
        row[f"any tab → its first chart ({which})"] = max(firsts) if firsts else float("nan")
        row[f"any tab → complete ({which})"] = max(t["complete"] for t in tabs.values())
    row["Phase diagram complete (big)"] = m["tabs (big)"]["Phase diagram"]["complete"]
    row["Devices complete (big)"] = m["tabs (big)"]["Devices"]["complete"]
    return row | _visitors(m)


def _visitors(m: dict) -> dict[str, float]:
    row = {"second visitor's first chart": m["second visitor's first chart"]}
    if m.get("class"):
        row["class: median first chart"] = statistics.median(m["class"])
        row["class: max first chart"] = max(m["class"])
    return row


async def _one_run(args, run: int) -> dict:
    port = _port()
    cache = tempfile.mkdtemp(prefix="rnnviz-jax-")  # every run as cold as the first
    env = {**os.environ, "RNNVIZ_JAX_CACHE": cache, "PYTHONUNBUFFERED": "1"}
    env.pop("XLA_FLAGS", None)  # a user's server: the suite's -O0 must not leak in
    log_path = Path(tempfile.mkdtemp(prefix="rnnviz-measure-")) / "server.log"
    log = log_path.open("w")
    start = time.perf_counter()
    cmd = [*ENTRIES[args.entry], str(port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    m: dict = {}
    try:
        while not _healthy(port):
            if proc.poll() is not None or time.perf_counter() - start > 120:
                raise RuntimeError(f"the server did not start; see {log_path}")
            await asyncio.sleep(0.05)
        m["server start → health"] = time.perf_counter() - start
        while "warm-up:" not in log_path.read_text() and time.perf_counter() - start < args.warm_wait_s:
            await asyncio.sleep(0.2)
        if "warm-up:" in log_path.read_text():  # else nothing warmed it: the page opens after the wait
            m["server start → warm-up done"] = time.perf_counter() - start
        url = f"http://127.0.0.1:{port}/"
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                if args.first_chart_only:
                    page, m["page open → first chart"] = await _page(browser, url)
                    await page.context.close()
                elif args.visitors_only:
                    m["second visitor's first chart"] = await _second_visitor(browser, url)
                else:
                    m.update(await _walk(browser, url, args.read_s))
                if args.class_size and not args.first_chart_only:
                    m["class"], m["class cpu"] = await _class(browser, url, args.class_size, proc.pid)
            finally:
                await browser.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    print(f"run {run + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in _summary(m).items()), flush=True)
    return m


def _fmt(v: float | None) -> str:
    return "—" if v is None or v != v else f"{v:.2f}"


def report(runs: list[dict], read_s: float = 0.0) -> str:
    """The table (median over the runs, each run, target, met) and every tab's medians."""
    rows = [_summary(m) for m in runs]
    lines = [
        f"rnnviz dashboard walk: {len(runs)} run(s), chromium 1366×768, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}, {read_s:g} s on each tab before the next",
        "",
        "| step | target s | median s | runs s | met |",
        "|---|---:|---:|---|---|",
    ]
    for step, target in TARGETS.items():
        values = [r[step] for r in rows if step in r]
        if not values:
            continue
        med = statistics.median(values)
        met = "" if target is None else ("yes" if med <= target else "no")
        lines.append(
            f"| {step} | {_fmt(target)} | {_fmt(med)} | {' / '.join(_fmt(v) for v in values)} | {met} |"
        )
    cpus = [m["class cpu"] for m in runs if m.get("class cpu")]
    if cpus:
        med = {k: statistics.median(c[k] for c in cpus) for k in cpus[0]}
        busy = med["server"] + med["workers"] + med["browser"]
        lines += [
            "",
            f"The class, where the time went (median CPU seconds until the last first chart, "
            f"{med['wall']:.1f} s of wall time on {os.cpu_count()} cores): workers (compiling, running) "
            f"{med['workers']:.1f}, browsers {med['browser']:.1f}, server {med['server']:.1f}; together "
            f"{busy:.1f} CPU s, at least {busy / (os.cpu_count() or 1):.1f} s on these cores.",
        ]
    for which in ("default", "big"):
        if any(f"tabs ({which})" not in m for m in runs):  # --visitors-only
            continue
        lines += ["", f"Tabs at the {which} config (median s): first chart / complete", ""]
        lines += ["| tab | first chart | complete |", "|---|---:|---:|"]
        for title in TITLES:
            firsts = [m[f"tabs ({which})"][title]["first_chart"] for m in runs]
            known = [f for f in firsts if f is not None]
            done = statistics.median(m[f"tabs ({which})"][title]["complete"] for m in runs)
            lines.append(f"| {title} | {_fmt(statistics.median(known) if known else None)} | {_fmt(done)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh servers to walk (the table gives the median)")
    ap.add_argument("--class-size", type=int, default=8, help="browsers opening the page at once (0: none)")
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    ap.add_argument(
        "--read-s",
        type=float,
        default=0.0,
        help="seconds a visitor looks at a tab before opening the next (the workers' idle time; default 0)",
    )
    ap.add_argument(
        "--visitors-only",
        action="store_true",
        help="only the second visitor and the class (no walk, no tabs): to compare server settings",
    )
    ap.add_argument(
        "--first-chart-only",
        action="store_true",
        help="only a fresh server's first visitor: page open → first chart (no walk, no class)",
    )
    ap.add_argument(
        "--entry",
        choices=tuple(ENTRIES),
        default="rnnviz app",
        help="how each server starts: 'rnnviz app' (default) or 'app.py' (streamlit run app.py)",
    )
    ap.add_argument(
        "--warm-wait-s",
        type=float,
        default=STEP_LIMIT_S,
        help="seconds to wait for the warm-up's line in the server's log before opening the page",
    )
    args = ap.parse_args()
    runs = [asyncio.run(_one_run(args, i)) for i in range(args.runs)]
    text = report(runs, args.read_s)
    print(text)
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "table": text}, indent=1))


if __name__ == "__main__":
    main()

"""Time tabs opened after a visitor has read the page: what the workers' idle time
(:mod:`rnnviz.serve.idle`) buys, for any checkout.

    .venv/bin/python scripts/tab_after_read.py [--checkout DIR] [--read-s 10]
        [--query "cell=lstm&hidden_size=128&seq_len=1000&batch_size=32"] [--tabs "Strategies,Phase diagram"]

A fresh ``rnnviz app`` from ``--checkout`` (its package first on the path; default this one)
with an empty JAX compilation cache, warmed as it starts; Chromium at 1366×768 opens the page
at ``--query``, waits for its run to end, then for each tab of ``--tabs``: ``--read-s``
seconds looking at the page, the click, and the seconds to the tab's first chart with data
and to the end of its run (a tab that drew no chart: what its message box says, e.g. a budget's
refusal). Run it for two checkouts (``git worktree add /tmp/before REV``)
to compare. A measurement script: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from browser_helpers import CHROMIUM, FLAGS, RUN_COUNTER, RUNS, SETTLED, WHERE  # noqa: E402  (the tests' browser)

#: JavaScript: whether the open tab's panel holds a chart with data.
TAB_CHART = """() => { const panel = [...document.querySelectorAll('[role="tabpanel"]')]
    .find((p) => !p.hidden && p.offsetParent !== null);
  const plot = panel && panel.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
  const d = plot && plot._fullData && plot._fullData[0];
  return !!(d && ((d.y && d.y.length) || (d.z && d.z.length))); }"""
#: JavaScript: the open tab's first message box (a budget's refusal says why), or "".
TAB_NOTE = """() => { const panel = [...document.querySelectorAll('[role="tabpanel"]')]
    .find((p) => !p.hidden && p.offsetParent !== null);
  const alert = panel && panel.querySelector('[data-testid="stAlert"], [data-testid="stException"]');
  return alert ? alert.innerText.trim() : ""; }"""
LIMIT_S = 300


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _visit(url: str, tabs: list[str], read_s: float) -> dict[str, tuple[float | None, float, str]]:
    from playwright.async_api import async_playwright

    out = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        ctx = await browser.new_context(viewport={"width": 1366, "height": 768})
        await ctx.add_init_script(RUN_COUNTER)
        page = await ctx.new_page()
        await page.goto(url, timeout=LIMIT_S * 1000)
        await page.wait_for_function(SETTLED, arg=0, timeout=LIMIT_S * 1000)
        for tab in tabs:
            await asyncio.sleep(read_s)
            before = await page.evaluate(RUNS)
            start = time.perf_counter()
            await page.get_by_role("tab", name=tab, exact=True).click()
            first = None
            while time.perf_counter() - start < LIMIT_S:
                if first is None and await page.evaluate(TAB_CHART):
                    first = time.perf_counter() - start
                if await page.evaluate(SETTLED, before):
                    break
                await asyncio.sleep(0.05)
            done = time.perf_counter() - start
            said = "" if first is not None else await page.evaluate(TAB_NOTE)
            if first is None and not said:  # no chart and no message: where the page is
                said = "(no message) " + await page.evaluate(WHERE)
            out[tab] = (first, done, said)
        await browser.close()
    return out


@contextlib.contextmanager
def served(checkout: Path, prefix: str) -> Iterator[str]:
    """A fresh ``rnnviz app`` from ``checkout`` (its package first on the path), with an
    empty JAX compilation cache and trained-runs folder, once its warm-up has run: its URL.
    Stopped on leaving (``scripts/cell_switch.py`` serves its checkouts the same way)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve()), "RNNVIZ_JAX_CACHE": str(tmp / "jax")}
    env["RNNVIZ_TRAINED_DIR"] = str(tmp / "trained")
    env.pop("XLA_FLAGS", None)  # a user's server
    port = _port()
    log = (tmp / "server.log").open("w")
    cmd = [sys.executable, "-m", "rnnviz", "app", f"--port={port}", "--server.headless=true"]
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "warm-up:" not in (tmp / "server.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.3)  # the warm-up's line: the server answers and its page has run once
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to serve (default: this one)")
    ap.add_argument("--read-s", type=float, default=10.0, help="seconds on the page before each tab")
    ap.add_argument("--query", default="cell=lstm&hidden_size=128&seq_len=1000&batch_size=32")
    ap.add_argument("--tabs", default="Strategies,Phase diagram", help="comma-separated tab titles")
    args = ap.parse_args()
    with served(args.checkout, "rnnviz-tab-after-read-") as base:
        times = asyncio.run(_visit(f"{base}?{args.query}", args.tabs.split(","), args.read_s))
    print(f"{args.checkout} ?{args.query}, {args.read_s:g} s on the page before each tab:")
    for tab, (first, done, note) in times.items():
        shown = "no chart" if first is None else f"{first:.2f} s"
        said = f" — the tab says: {note}" if note else ""
        print(f"  {tab}: first chart {shown}, complete {done:.2f} s{said}")


if __name__ == "__main__":
    main()

"""Measure the dashboard as a user feels it: first chart, a seed change, a shape change.

    .venv/bin/python scripts/measure_app.py [--cold-cache]

Starts ``streamlit run app.py`` on a free localhost port, drives Debian's chromium with
Playwright, and prints wall-clock times from the browser's point of view (launch → first
chart; widget change → chart data changed) plus the server-side compute times that the
page reports. A measurement script, not a test.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic"]
CHART = '[data-testid="stPlotlyChart"] .js-plotly-plot'
FIRST_Y = """() => { const p = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
  const d = p && p._fullData && p._fullData[0];  // what Plotly drew (data may hold base64 arrays)
  return d && d.y && d.y.length ? Array.from(d.y).slice(0, 3).join(',') : null; }"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _set_number(page, key: str, value) -> None:
    box = page.locator(f".st-key-{key} input")
    box.fill(str(value))
    box.press("Enter")


def _time_change(page, key: str, value) -> float:
    before = page.evaluate(FIRST_Y)
    start = time.perf_counter()
    _set_number(page, key, value)
    page.wait_for_function(f"prev => ({FIRST_Y})() !== null && ({FIRST_Y})() !== prev", arg=before, timeout=120_000)
    return time.perf_counter() - start


def _metric(page, label: str) -> str:
    return page.locator('[data-testid="stMetric"]', has_text=label).locator('[data-testid="stMetricValue"]').inner_text()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold-cache", action="store_true", help="use an empty JAX persistent cache")
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="rnnviz-jax-") if args.cold_cache else os.environ.get("RNNVIZ_JAX_CACHE", "")
    env = {**os.environ, **({"RNNVIZ_JAX_CACHE": cache} if cache else {})}
    port = _port()
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            while True:
                try:
                    page.goto(f"http://127.0.0.1:{port}/", timeout=2000)
                    break
                except Exception:
                    time.sleep(0.2)
            page.wait_for_selector(CHART, timeout=120_000)
            page.wait_for_function(f"() => ({FIRST_Y})() !== null")
            first = time.perf_counter() - start
            print(f"launch → first chart rendered: {first:.2f} s (JAX cache: {'cold' if args.cold_cache else 'as is'})")
            for seed in (1, 2, 3):
                t = _time_change(page, "cfg_seed", seed)
                print(f"seed → {seed}: page updated in {t * 1e3:.0f} ms; compute run {_metric(page, 'run (median')}")
            for t_len in (60, 70):
                t = _time_change(page, "cfg_seq_len", t_len)
                print(f"seq_len → {t_len} (new shape): page updated in {t:.2f} s; compile {_metric(page, 'compile')}")
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    main()

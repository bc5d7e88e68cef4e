"""Measure the dashboard as a user feels it: first chart, a seed change, a shape change,
a cell change, and every tab at a mid-size config.

    .venv/bin/python scripts/measure_app.py [--cold-cache] [--tabs] [--tab-timeout 120]

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
sys.path.insert(0, str(ROOT / "tests"))
from browser_helpers import CHROMIUM, FLAGS  # noqa: E402  (the tests' browser)

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
    page.wait_for_function(
        f"prev => ({FIRST_Y})() !== null && ({FIRST_Y})() !== prev", arg=before, timeout=120_000
    )
    return time.perf_counter() - start


IDLE = '[data-test-script-state="notRunning"]'
TABS = (
    "Gradients",
    "Carry",
    "Strategies",
    "Phase diagram",
    "Jacobians",
    "Training",
    "Devices",
    "Compare",
    "Learn",
)


def _settle(page, timeout_ms: int) -> None:
    """Wait until the script has started (or finished at once) and then finished."""
    try:
        page.wait_for_selector('[data-test-script-state="running"]', timeout=2000)
    except Exception:
        pass
    page.wait_for_selector(IDLE, timeout=timeout_ms)


def _time_tabs(page, url: str, timeout_s: float) -> None:
    page.goto(url)
    page.wait_for_selector(CHART, timeout=300_000)
    _settle(page, 300_000)
    for name in TABS:
        start = time.perf_counter()
        page.get_by_role("tab", name=name, exact=True).click()
        try:
            _settle(page, int(timeout_s * 1000))
            errors = page.locator('[data-testid="stAlert"]').all_inner_texts()
            bad = [e for e in errors if "did not finish" in e or "failed" in e]
            print(f"tab {name}: {time.perf_counter() - start:.2f} s" + (f"  ({bad[0][:160]})" if bad else ""))
        except Exception:
            print(f"tab {name}: still running after {timeout_s:.0f} s (hung?)")
            return


def _time_select(page, key: str, option: str) -> float:
    page.wait_for_selector(IDLE, timeout=120_000)  # a redraw would close the list again
    before = page.evaluate(FIRST_Y)
    start = time.perf_counter()
    box = page.locator(f".st-key-{key}").get_by_role("combobox")
    box.click()
    box.fill(option)  # the list filters as one types; the option then is the only match
    page.get_by_role("option", name=option, exact=True).click()
    page.wait_for_function(
        f"prev => ({FIRST_Y})() !== null && ({FIRST_Y})() !== prev", arg=before, timeout=120_000
    )
    return time.perf_counter() - start


def _metric(page, key: str) -> str:
    """A header number (rnnviz.ui.page.metrics' key: loss, grad0, compile, run, peak), as drawn."""
    return page.locator(f".st-key-metric_{key} strong").inner_text()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold-cache", action="store_true", help="use an empty JAX persistent cache")
    ap.add_argument("--tabs", action="store_true", help="also time every tab at lstm H=128 T=1000 B=32")
    ap.add_argument("--tab-timeout", type=float, default=120.0, help="seconds before a tab counts as hung")
    args = ap.parse_args()
    cache = (
        tempfile.mkdtemp(prefix="rnnviz-jax-") if args.cold_cache else os.environ.get("RNNVIZ_JAX_CACHE", "")
    )
    env = {**os.environ, **({"RNNVIZ_JAX_CACHE": cache} if cache else {})}
    port = _port()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
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
            print(
                f"launch → first chart rendered: {first:.2f} s (JAX cache: "
                f"{'cold' if args.cold_cache else 'as is'})"
            )
            for seed in (1, 2, 3):
                t = _time_change(page, "cfg_seed", seed)
                print(f"seed → {seed}: page updated in {t * 1e3:.0f} ms; compute run {_metric(page, 'run')}")
            for t_len in (60, 70):
                t = _time_change(page, "cfg_seq_len", t_len)
                print(
                    f"seq_len → {t_len} (new shape): page updated in {t:.2f} s; compile "
                    f"{_metric(page, 'compile')}"
                )
            for cell in ("gru · classic", "simple · classic"):
                t = _time_select(page, "cfg_cell", cell)
                print(f"cell → {cell} (new shape): page updated in {t:.2f} s")
            for gain in (0.9, 1.1):
                t = _time_change(page, "cfg_recurrent_gain", gain)
                print(f"recurrent_gain → {gain}: page updated in {t * 1e3:.0f} ms")
            if args.tabs:
                _time_tabs(
                    page,
                    f"http://127.0.0.1:{port}/?cell=lstm&hidden_size=128&seq_len=1000&batch_size=32",
                    args.tab_timeout,
                )
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


if __name__ == "__main__":
    main()

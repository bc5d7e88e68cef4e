"""Each teaching page as a teacher makes it and a student uses it: ``rnnviz explorable --preset
NAME`` in a fresh process (build seconds, file size), then the file in Chromium from ``file://``
with the network off (seconds until drawn, and the in-page redraw time of every move of every
slider and menu: median and largest). Prints a Markdown table for docs/dev/benchmarks.md.

    .venv/bin/python scripts/measure_explorable.py [--presets vanishing,lru] \
        [--screenshot docs/images/explorable-vanishing.png]

The screenshot is of the first preset's page at 1366×900, after moving its first slider.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser_helpers import CHROMIUM, FLAGS  # noqa: E402

from rnnviz.base.presets import PAGES  # noqa: E402


def build(name: str, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "rnnviz", "explorable", "--preset", name, "--out", str(out)],
        check=True,
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def use(browser, path: Path, screenshot: Path | None) -> tuple[float, list[float], int]:
    """``(seconds until drawn, every move's redraw ms, requests other than the file)``."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    context.set_offline(True)
    others = []
    context.on("request", lambda r: None if r.url.startswith("file://") else others.append(r.url))
    page = context.new_page()
    start = time.perf_counter()
    page.goto(path.resolve().as_uri())
    page.wait_for_function("document.getElementById('rnnviz-app').dataset.ready === '1'", timeout=60_000)
    opened = time.perf_counter() - start
    moves = []
    controls = page.evaluate(
        "[...document.querySelectorAll('[id^=rnnviz-control-]')].map(e => [e.id, e.tagName])"
    )
    for element, tag in controls:
        if tag == "SELECT":
            for value in range(page.evaluate(f"document.getElementById('{element}').options.length")):
                page.select_option(f"#{element}", str(value))
                moves.append(page.evaluate("window.rnnviz.lastRedrawMs"))
            continue
        page.focus(f"#{element}")
        page.keyboard.press("Home")
        for _ in range(int(page.evaluate(f"document.getElementById('{element}').max"))):
            page.keyboard.press("ArrowRight")
            moves.append(page.evaluate("window.rnnviz.lastRedrawMs"))
    if screenshot is not None:
        page.evaluate("window.rnnviz.set(document.getElementById('rnnviz-control-0').dataset.field, 2)")
        page.screenshot(path=str(screenshot), full_page=True)
    context.close()
    return opened, moves, len(others)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default=",".join(PAGES))
    parser.add_argument("--screenshot", type=Path)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        for i, name in enumerate(args.presets.split(",")):
            path = Path(tmp) / f"{name}.html"
            built = build(name, path)
            opened, moves, others = use(browser, path, args.screenshot if i == 0 else None)
            points = 1
            for values in PAGES[name].over.values():
                points *= len(values)
            size = path.stat().st_size / 1e6
            rows.append(
                f"| `{name}` | {points} | {size:.2f} MB | {built:.1f} s | {opened:.2f} s "
                f"| {statistics.median(moves):.0f} ms | {max(moves):.0f} ms | {len(moves)} | {others} |"
            )
            print(rows[-1], flush=True)
        browser.close()
    print(
        "\n| preset | points | file | build (fresh process) | open in Chromium | redraw, median "
        "| redraw, largest | moves | requests |\n|---|---|---|---|---|---|---|---|---|"
    )
    print("\n".join(rows))


if __name__ == "__main__":
    main()

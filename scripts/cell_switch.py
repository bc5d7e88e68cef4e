"""Time switching the cell, or loading a teaching preset, after a visitor has read the page:
what preparing the other cells and the presets' shapes in the workers' idle time
(:func:`rnnviz.ui.calls.prepare_neighbours`) buys, for any checkout.

    .venv/bin/python scripts/cell_switch.py [--checkout DIR] [--read-s 20] [--runs 1]
        [--query ""] [--cells "gru · classic,lstm · classic,mgu · classic,simple · classic"]
        [--presets "LSTM with forget bias 1;bf16 underflow" --then-read-s 0]

A fresh ``rnnviz app`` from ``--checkout`` (its package first on the path; default this one)
with an empty JAX compilation cache, warmed as it starts; Chromium at 1366×768 opens the page
at ``--query``, waits for its run to end, then for each cell of ``--cells`` (as the selector
labels it): ``--read-s`` seconds looking at the page, the pick in the cell selector, and the
seconds until the main chart's data changed (``scripts/measure_app.py``'s shape change,
after reading instead of at once). With ``--runs`` > 1, fresh servers, and the median of
each switch. With ``--presets`` (titles separated by ``;``), the sidebar's *Teaching presets*
instead of the cells, ``--read-s`` before the first and ``--then-read-s`` before each later one.
Run it for two checkouts (``git worktree add /tmp/before REV``) to compare.
A measurement script: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))
from browser_helpers import CHROMIUM, FLAGS, SETTLED  # noqa: E402  (the tests' browser)
from measure_app import STEP_LIMIT_S, _changed, _page, _select  # noqa: E402  (the walk's steps)
from tab_after_read import served  # noqa: E402  (a checkout's server, warmed)


async def _switches(
    url: str, cells: list[str], read_s: float, presets: list[str], then_read_s: float | None
) -> dict[str, float]:
    from playwright.async_api import async_playwright

    out = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page, out["page open → first chart"] = await _page(browser, url)
        await page.wait_for_function(SETTLED, arg=0, timeout=STEP_LIMIT_S * 1000)
        if presets:
            await page.get_by_text("Teaching presets").click()  # the sidebar's expander
        for i, step in enumerate(presets or cells):
            # a visitor reading: the workers' idle time (not counted)
            await asyncio.sleep(read_s if i == 0 or then_read_s is None else then_read_s)
            if presets:
                button = page.get_by_role("button", name=step, exact=True)
                out[f"→ {step}"] = await _changed(page, button.click)
            else:
                out[f"→ {step}"] = await _changed(page, _select(page, "cfg_cell", step))
        await browser.close()
    return out


def _one_run(args) -> dict[str, float]:
    with served(args.checkout, "rnnviz-cell-switch-") as base:
        url = base + (f"?{args.query}" if args.query else "")
        presets = [t for t in args.presets.split(";") if t]
        return asyncio.run(_switches(url, args.cells.split(","), args.read_s, presets, args.then_read_s))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to serve (default: this one)")
    ap.add_argument("--read-s", type=float, default=20.0, help="seconds on the page before each switch")
    ap.add_argument("--runs", type=int, default=1, help="fresh servers (each switch's median is printed)")
    ap.add_argument("--query", default="", help="the page's URL query (default: the default configuration)")
    ap.add_argument(
        "--cells",
        default="gru · classic,lstm · classic,mgu · classic,simple · classic",
        help="comma-separated cells as the selector labels them",
    )
    ap.add_argument("--presets", default="", help="';'-separated preset titles to load instead of cells")
    ap.add_argument(
        "--then-read-s",
        type=float,
        default=None,
        help="seconds before each switch after the first (default: --read-s)",
    )
    args = ap.parse_args()
    runs = [_one_run(args) for _ in range(args.runs)]
    print(
        f"{args.checkout} ?{args.query}, {args.read_s:g} s on the page before "
        + (
            f"the first switch, {args.then_read_s:g} s before each other, "
            if args.then_read_s is not None
            else "each switch, "
        )
        + f"{args.runs} run(s):"
    )
    for step in runs[0]:
        values = [r[step] for r in runs]
        shown = " / ".join(f"{v:.2f}" for v in values)
        print(f"  {step}: {statistics.median(values):.2f} s ({shown})")


if __name__ == "__main__":
    main()

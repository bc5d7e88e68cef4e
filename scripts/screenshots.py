"""Every tab at 1366×768, for the default and the big configuration: one PNG each into
``docs/images/`` (the README and the docs use them), and the above-the-fold rule checked.

    .venv/bin/python scripts/screenshots.py [--out docs/images] [--configs default,big] [--tabs Carry]
        [--read-s 40]

The rule (#33): on a 1366×768 projector, a tab's main picture lies wholly inside the
viewport without scrolling, and the page shows no exception and no error box. The main
picture is the open tab's first chart, or the note in its place (a view over its time budget
says so, with a button to run it anyway); for a tab that draws none before the user acts, its
first control (Training: the Train button; Compare: the pin button; Learn: the first
lesson's preset).

With ``--read-s S`` a visitor first looks at each configuration's page for S seconds, as a
class does while the teacher talks: the workers' idle time prepares the tabs meanwhile
(:mod:`rnnviz.serve.idle`), so a tab that a cold page would refuse over its time budget (the
Strategies and Devices tabs at the big configuration) is shown computed.

Starts ``streamlit run app.py`` on a free localhost port and drives Debian's chromium with
Playwright. Prints one line per (configuration, tab) and exits 1 when any breaks the rule.
``tests/ui/test_above_the_fold.py`` runs :func:`check_tabs` for every tab.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from browser_helpers import CHROMIUM, FLAGS, PROBLEMS, RUN_COUNTER, RUNS, SETTLED  # noqa: E402  (the tests' browser)

#: A classroom projector.
VIEWPORT = {"width": 1366, "height": 768}
#: The two configurations of the issue: the page as it opens, and LSTM at H=128, T=1000, B=32.
CONFIGS = {"default": "", "big": "cell=lstm&hidden_size=128&seq_len=1000&batch_size=32"}
CHART = '[data-testid="stPlotlyChart"]'
#: The tab's first chart, or the note that stands in its place.
CHART_OR_NOTE = f'{CHART}, [data-testid="stAlert"]'
#: Where a tab's main picture is not a chart until the user acts.
MAIN = {
    "Training": ".st-key-train_start",
    "Compare": ".st-key-pin",
    "Learn": ".st-key-learn_1",
}


@dataclass(frozen=True)
class Shot:
    """One tab at one configuration: its main picture's box (CSS pixels, from the viewport's
    top left), whether it lies inside the viewport, the error boxes, and the seconds from
    opening the tab (a page load or a click) to the page's end."""

    config: str
    tab: str
    x: float
    y: float
    width: float
    height: float
    inside: bool
    problems: tuple[str, ...]
    seconds: float
    path: str | None

    @property
    def ok(self) -> bool:
        return self.inside and not self.problems


def slug(title: str) -> str:
    """``Phase diagram`` → ``phase-diagram``: the PNG's name."""
    return "-".join(title.lower().split())


def shoot(
    page, url: str, config: str, tab: str, out: Path | None, timeout_s: float = 180.0, load: bool = True
) -> Shot:
    """Open ``tab`` at ``config``, wait until the page stops running, measure its main
    picture and, with ``out``, save the viewport as ``<tab>-<config>.png``. With ``load``, in
    a fresh page load of the tab's address; else by clicking the tab on the page already at
    ``config`` (as a visitor does: the page stays scrolled to its top)."""
    start = time.perf_counter()
    if load:
        query = "&".join(q for q in (CONFIGS[config], f"tab={quote(tab)}") if q)
        page.goto(f"{url}/?{query}")
        after = 0
    else:
        after = page.evaluate(RUNS)
        page.get_by_role("tab", name=tab, exact=True).click()
    _settled(page, timeout_s, after=after)
    x, y, width, height, inside = _measure(page, tab)
    if not inside:  # once more, after a longer quiet spell: a late rerun may have moved it
        _settled(page, timeout_s, quiet_s=2.0, after=after)
        x, y, width, height, inside = _measure(page, tab)
    seconds = time.perf_counter() - start
    problems = tuple(page.locator(PROBLEMS).all_inner_texts())
    path = None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        path = str(out / f"{slug(tab)}-{config}.png")
        page.screenshot(path=path)  # the viewport: what the projector shows
    return Shot(config, tab, x, y, width, height, inside, problems, seconds, path)


def _measure(page, tab: str) -> tuple[float, float, float, float, bool]:
    """``(x, y, width, height, inside the viewport)`` of the open tab's main picture, once it
    is drawn (NaN and False when there is none)."""
    main = page.locator('[role="tabpanel"]:visible').locator(MAIN.get(tab, CHART_OR_NOTE)).first
    try:  # Plotly draws after the run has ended
        main.wait_for(state="visible", timeout=10_000)
        if main.get_attribute("data-testid") == "stPlotlyChart":
            main.locator(".main-svg").first.wait_for(timeout=10_000)
    except Exception:
        pass  # measured as it is: none, or not drawn
    box = main.bounding_box() if main.count() else None
    if box is None:
        return float("nan"), float("nan"), float("nan"), float("nan"), False
    x, y, width, height = box["x"], box["y"], box["width"], box["height"]
    inside = x >= 0 and y >= 0 and x + width <= VIEWPORT["width"] and y + height <= VIEWPORT["height"]
    return x, y, width, height, inside


def _settled(page, timeout_s: float, quiet_s: float = 0.6, after: int = 0) -> None:
    """Until the page has run its script once more than the ``after`` runs it had seen
    (:data:`RUN_COUNTER`) and then stayed idle, with no new run, for ``quiet_s``: a page may
    rerun itself once (the URL synced)."""
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = page.evaluate(f"() => [({RUNS})(), ({SETTLED})({after})]")
        if now != last:
            last, since = now, time.monotonic()
        elif now[0] > after and now[1] and time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.1)
    raise TimeoutError(f"the page still ran after {timeout_s:g} s")


def check_tabs(
    url: str, tabs: list[str], configs: list[str], out: Path | None = None, read_s: float = 0.0
) -> list[Shot]:
    """:func:`shoot` every tab at every configuration in one Chromium at :data:`VIEWPORT`,
    each configuration's page looked at for ``read_s`` seconds first: its first tab opened by
    its address, the others by a click on the page (a page load per tab took 2 s more each)."""
    from playwright.sync_api import sync_playwright

    shots = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            context = browser.new_context(viewport=VIEWPORT)
            context.add_init_script(RUN_COUNTER)
            page = context.new_page()
            for config in configs:
                if read_s > 0:  # a visitor reading the page: the workers' idle time
                    page.goto(f"{url}/?{CONFIGS[config]}")
                    _settled(page, 180.0)
                    time.sleep(read_s)
                for i, tab in enumerate(tabs):
                    shots.append(shoot(page, url, config, tab, out, load=i == 0))
        finally:
            browser.close()
    return shots


def describe(shot: Shot) -> str:
    """One line: the verdict, the tab, the box's top and bottom against the viewport."""
    verdict = "ok  " if shot.ok else "FAIL"
    where = f"main picture y {shot.y:.0f}…{shot.y + shot.height:.0f} of {VIEWPORT['height']}"
    extra = f"; errors: {list(shot.problems)}" if shot.problems else ""
    return f"{verdict} {shot.config:8} {shot.tab:14} {where} ({shot.seconds:.1f} s){extra}"


def main(argv: list[str] | None = None) -> int:
    from apptest_helpers import start_server  # the suite's way to start the app

    sys.path.insert(0, str(ROOT))
    from rnnviz.ui.tabs import TABS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="where the PNGs go")
    ap.add_argument("--configs", default="default,big", help="of: " + ", ".join(CONFIGS))
    ap.add_argument("--tabs", default=",".join(t.TITLE for t in TABS), help="tab titles, comma-separated")
    ap.add_argument("--read-s", type=float, default=0.0, help="seconds on each configuration's page first")
    args = ap.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        ap.error(f"unknown configuration(s) {unknown}; allowed: {sorted(CONFIGS)}")
    env = {**os.environ, "RNNVIZ_WORKERS": os.environ.get("RNNVIZ_WORKERS", "2")}
    with tempfile.TemporaryDirectory(prefix="rnnviz-shots-") as tmp:
        proc, url = start_server(env, Path(tmp) / "streamlit.log")
        try:
            shots = check_tabs(url, args.tabs.split(","), configs, args.out, args.read_s)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    for shot in shots:
        print(describe(shot))
    failed = [s for s in shots if not s.ok]
    print(f"{len(shots) - len(failed)} of {len(shots)} within {VIEWPORT['width']}×{VIEWPORT['height']}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Soak: every tab × every registered cell (the example plugin installed too) at a mid-size
config, H=128 and T=1000, in a real browser against ``streamlit run app.py`` with its worker
processes, while a second session does other things at the same time. Every step is
bounded in time; none may hang, raise or show an error box.

Runs when ``RNNVIZ_SOAK=1`` (``.ci/run`` sets it): 15 minutes alone on 2 cores, about 20 in CI's ui group.
"""

import asyncio
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, FLAGS, FRAMES, POLL_MS, PROBLEMS, RUN_COUNTER, RUNS, SETTLED, WHERE

from rnnviz.ui.tabs import TABS

ROOT = Path(__file__).resolve().parents[2]
TITLES = tuple(t.TITLE for t in TABS)  # every tab, in the page's order
MID = "hidden_size=128&seq_len=1000"
#: Seconds one step may take: a view's 15 s budget plus its compiles, with room for the
#: other session's work on the same 2 cores. A step still running then counts as hung.
STEP_LIMIT_S = 180

#: One xdist group with the soak with faults (tests/ui/test_soak_faults.py): the two servers
#: never share the 2 cores (the Makefile runs tests/ui with --dist loadgroup).
pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.soak, pytest.mark.xdist_group("soaks")]


@pytest.fixture(scope="module")
def soak_server(tmp_path_factory):
    if os.environ.get("RNNVIZ_SOAK") != "1":
        pytest.skip("the soak runs with RNNVIZ_SOAK=1 (as .ci/run sets)")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is not installed (make test installs it)")
    site = tmp_path_factory.mktemp(
        "site"
    )  # the example plugin, installed where the server (and its workers) look
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(ROOT / "examples" / "custom_cell"),
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    from apptest_helpers import start_server

    env = {
        **os.environ,
        "PYTHONPATH": f"{site}{os.pathsep}{ROOT}",
        "RNNVIZ_WORKERS": "2",
        "RNNVIZ_VIEW_BUDGET_S": "15",
        "RNNVIZ_JAX_CACHE": str(tmp_path_factory.mktemp("jaxcache")),
        # the real sizes run as a user's server would, not at the suite's -O0 (conftest.py)
        "XLA_FLAGS": os.environ.get("RNNVIZ_SERVER_XLA_FLAGS", ""),
    }
    proc, url = start_server(env, tmp_path_factory.mktemp("soak") / "streamlit.log")
    cells = subprocess.run(
        [sys.executable, "-c", "from rnnviz import cell_names; print(' '.join(cell_names()))"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.split()
    yield url, cells
    proc.terminate()
    proc.wait(timeout=30)


async def _settle(page, step: str, log: list, before: int) -> None:
    """Wait for the run the last action started (the page's run count past ``before``,
    :data:`~browser_helpers.RUN_COUNTER`, read from the server's messages: a run over before we
    look is still seen, and nothing waits for a run that has ended) to finish; fail on a hang
    or an error box."""
    start = time.perf_counter()
    try:
        await page.wait_for_function(f"n => ({RUNS})() > n", arg=before, timeout=60_000, polling=POLL_MS)
    except Exception:
        raise AssertionError(f"{step}: no script run started within 60 s; {await _where(page)}") from None
    try:
        await page.wait_for_function(SETTLED, arg=before, timeout=STEP_LIMIT_S * 1000, polling=POLL_MS)
    except Exception:
        where = await _where(page)
        raise AssertionError(f"{step}: still running after {STEP_LIMIT_S} s (hung?); {where}") from None
    await page.evaluate(FRAMES)  # the run's last messages rendered before we look for errors
    problems = await page.locator(PROBLEMS).all_inner_texts()
    assert not problems, f"{step}: {problems}"
    log.append((step, time.perf_counter() - start))


async def _where(page) -> str:
    """What the page showed when a step failed: the runs it saw begin and end, its script
    state, its selected tab and its address."""
    return await page.evaluate(WHERE)


async def _every_tab_every_cell(browser, url: str, cells: list[str], log: list) -> None:
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    await ctx.add_init_script(RUN_COUNTER)
    page = await ctx.new_page()
    for cell in cells:
        await page.goto(f"{url}/?cell={cell}&{MID}")
        await _settle(page, f"{cell}: first chart", log, 0)  # a new page counts from 0
        for tab in TITLES[1:] + TITLES[:1]:
            before = await page.evaluate(RUNS)
            await page.get_by_role("tab", name=tab, exact=True).click()
            await _settle(page, f"{cell}: {tab}", log, before)
    await ctx.close()


async def _other_session(browser, url: str, done: asyncio.Event, log: list) -> int:
    """Meanwhile: another config, seeds changed, its own tabs opened, until the first is done.
    Its shape is small (H=32, T=200): it is there for the concurrency (two sessions' scripts,
    both workers, the shared result cache), while the first session holds the large shape;
    at H=128, T=1000 its fresh seeds took more worker time than the first session's steps."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    await ctx.add_init_script(RUN_COUNTER)
    page = await ctx.new_page()
    await page.goto(f"{url}/?cell=gru&hidden_size=32&seq_len=200&batch_size=8")
    await _settle(page, "other: first chart", log, 0)
    steps = 0
    while not done.is_set():
        box = page.locator(".st-key-cfg_seed input")
        before = await page.evaluate(RUNS)
        await box.fill(str(steps % 7 + 1))
        await box.press("Enter")
        await _settle(page, f"other: seed {steps % 7 + 1}", log, before)
        tab = ("Carry", "Phase diagram", "Jacobians", "Gradients")[steps % 4]
        before = await page.evaluate(RUNS)
        await page.get_by_role("tab", name=tab, exact=True).click()
        await _settle(page, f"other: {tab}", log, before)
        steps += 1
    await ctx.close()
    return steps


def test_every_tab_every_cell_with_a_second_session_at_the_same_time(soak_server):
    from playwright.async_api import async_playwright

    url, cells = soak_server
    assert "leaky" in cells and {"simple", "lstm", "gru", "lru"} <= set(cells), cells
    log: list = []

    async def main():
        async with async_playwright() as p:
            b = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            done = asyncio.Event()
            try:
                other = asyncio.create_task(_other_session(b, url, done, log))
                try:
                    await _every_tab_every_cell(b, url, cells, log)
                finally:
                    done.set()
                return await other
            finally:
                await b.close()

    with ThreadPoolExecutor(1) as pool:  # a fresh event loop, whatever the other browser tests hold
        other_steps = pool.submit(asyncio.run, main()).result()
    visited = {step for step, _ in log}
    assert all(f"{c}: {t}" in visited for c in cells for t in TITLES[1:]), sorted(visited)
    assert other_steps >= 1
    slowest = sorted(log, key=lambda s: -s[1])[:5]
    print("slowest steps:", ", ".join(f"{s} {t:.1f} s" for s, t in slowest))
    # where the soak's time goes (CI keeps the output of a failed run): seconds per tab and per cell
    for i, name in ((1, "tab"), (0, "cell")):
        totals: dict = {}
        for step, t in log:
            key = step.split(": ", 1)[i] if ": " in step else step
            totals[key] = totals.get(key, 0.0) + t
        print(
            f"seconds by {name}:",
            ", ".join(f"{k} {v:.0f}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1])),
        )

"""A real browser against ``streamlit run app.py``: Debian's chromium driven by Playwright.

Skips with a reason where no browser can be had, unless RNNVIZ_REQUIRE_BROWSER=1
(as .ci/run sets), where that is a failure.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from browser_helpers import CHART, CHROMIUM, FLAGS, POLL_MS, PROBLEMS, RUN_COUNTER, WHERE

ROOT = Path(__file__).resolve().parents[2]
#: Milliseconds a page may take to show what a step computes. Not a speed check (the suite never
#: asserts times): in CI this server shares 2 cores with the soak's, a tab may wait for a worker
#: busy with idle-time preparation, and a computation is stopped at the server's 90 s limit,
#: which then shows as an error box, not as this timeout.
TAB_MS = 240_000

#: One xdist group, "browser", with test_above_the_fold.py: these pages run one after another
#: on one worker, not beside each other. Two at once, each with its server, workers and
#: Chromium, took 48 s each where they take 13 and 32 s alone. (Putting them after the fault
#: soak on its worker instead moved the contention to the AppTest tests: 352 s for tests/ui.)
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def _unavailable(reason: str):
    if os.environ.get("RNNVIZ_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser required (RNNVIZ_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from apptest_helpers import start_server

    env = {
        **os.environ,
        "RNNVIZ_JAX_CACHE": str(tmp_path_factory.mktemp("jaxcache")),
        "RNNVIZ_WORKERS": "2",
        "RNNVIZ_VIEW_BUDGET_S": "15",
        "RNNVIZ_TRAINED_DIR": str(tmp_path_factory.mktemp("trained")),
    }
    proc, url = start_server(env, tmp_path_factory.mktemp("server") / "streamlit.log")
    os.environ["RNNVIZ_BROWSER_TRAINED_DIR"] = env["RNNVIZ_TRAINED_DIR"]  # where a test leaves runs
    yield url
    proc.terminate()
    proc.wait(timeout=20)


def _chart_title(page, index: int = 0) -> str:
    return page.locator(CHART).nth(index).locator(".gtitle").first.text_content()  # SVG text


def _open_tab(page, tab: str, expect: str, tmp_path: Path) -> None:
    """Click ``tab`` and wait for what it shows: ``expect``, a selector when it starts with a
    dot, else the start of a chart title. An error box or a traceback fails at once with its
    text; no picture in :data:`TAB_MS` fails with where the page was and a screenshot."""
    page.get_by_role("tab", name=tab, exact=True).click()
    shown = (
        f"!!document.querySelector({expect!r})"
        if expect.startswith(".")
        else f"[...document.querySelectorAll('.gtitle')].some(e => e.textContent.startsWith({expect!r}))"
    )
    try:
        page.wait_for_function(
            f"() => {shown} || !!document.querySelector({PROBLEMS!r})", timeout=TAB_MS, polling=POLL_MS
        )
    except Exception:
        shot = tmp_path / f"no-{tab}.png"
        page.screenshot(path=str(shot), full_page=True)
        where = page.evaluate(WHERE)
        raise AssertionError(f"{tab}: nothing shown in {TAB_MS / 1000:g} s; {where}; {shot}") from None
    problems = page.locator(PROBLEMS).all_inner_texts()
    assert not problems, f"{tab}: {problems}; {page.evaluate(WHERE)}"
    assert page.get_by_role("tab", name=tab, exact=True).get_attribute("aria-selected") == "true"


def test_page_renders_charts_reacts_to_the_cell_and_opens_every_tab(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.add_init_script(RUN_COUNTER)  # where the page is, should a tab fail (WHERE)
    page.goto(server)
    page.wait_for_selector(CHART, timeout=TAB_MS)
    assert "carry" in _chart_title(page)
    legend = (
        page.locator(CHART).first.locator(".legendtext").evaluate_all("els => els.map(e => e.textContent)")
    )
    assert "total" in legend and "c" not in legend

    # Change the cell to LSTM: the chart gains the c and h component lines.
    _choose(page, "cfg_cell", "lstm · classic")
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid="stPlotlyChart"] .legendtext')]
                 .some(e => e.textContent === 'c')""",
        timeout=TAB_MS,
        polling=POLL_MS,
    )
    assert "cell=lstm" in page.url
    page.screenshot(path=str(tmp_path / "gradients_lstm.png"), full_page=True)

    for tab, expect in [
        ("Carry", "Carry norm over time"),
        ("Strategies", "Cost of each strategy"),
        ("Devices", "This configuration, live"),
        ("Compare", ".st-key-pin button"),
        ("Learn", ".st-key-learn_1 button"),
    ]:
        _open_tab(page, tab, expect, tmp_path)
    page.screenshot(path=str(tmp_path / "learn.png"), full_page=True)
    # A Learn button loads its preset: the URL and the gradient chart follow.
    page.locator(".st-key-learn_1 button").first.click()
    page.wait_for_function(
        "() => location.search.includes('recurrent_gain=0.8')", timeout=TAB_MS, polling=POLL_MS
    )
    page.get_by_role("tab", name="Gradients").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.legendtext')].some(e => e.textContent.startsWith('bound'))",
        timeout=TAB_MS,
        polling=POLL_MS,
    )
    page.screenshot(path=str(tmp_path / "vanishing_preset.png"), full_page=True)
    assert (tmp_path / "gradients_lstm.png").stat().st_size > 10_000
    page.close()


#: The trace names of the Compare chart of a block's page (one line per design; what Plotly
#: drew, as a single trace has no legend).
COMPARE_LINES = f"""() => {{ const p = [...document.querySelectorAll('{CHART}')]
  .find(e => (e.querySelector('.gtitle') || {{}}).textContent?.startsWith('‖∂L/∂x_t‖ at the inputs'));
  return p && p._fullData ? p._fullData.map(d => d.name) : []; }}"""


def test_a_block_page_puts_two_designs_side_by_side_and_times_them_on_each_device(server, browser, tmp_path):
    """A 2-layer Mamba's page: the layer × step heatmap; Mamba, then a GRU stack pinned in
    Compare and drawn on one chart; the Devices tab's ways of computing the block's gradients."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.add_init_script(RUN_COUNTER)
    page.goto(f"{server}/?cell=mamba&block=reference&layers=2&hidden_size=16&seq_len=12")
    page.wait_for_selector(CHART, timeout=TAB_MS)
    _open_tab(page, "Gradients", "‖∂L/∂x_t‖ through every layer", tmp_path)
    _open_tab(page, "Compare", ".st-key-pin button", tmp_path)
    page.locator(".st-key-pin button").click()
    page.wait_for_function(f"() => ({COMPARE_LINES})().length === 1", timeout=TAB_MS, polling=POLL_MS)
    _idle(page)
    _choose(page, "cfg_cell", "gru · classic")
    page.wait_for_function("() => location.search.includes('cell=gru')", timeout=TAB_MS, polling=POLL_MS)
    _idle(page)
    # The chart holds two lines before this pin too (the current GRU beside the pinned Mamba):
    # wait for the pin's own mark, its second Remove button, and read the lines the wait saw
    # (a rerun may replace the chart between a wait and a later read).
    page.locator(".st-key-pin button").click()
    page.wait_for_selector(".st-key-unpin_1 button", timeout=TAB_MS)
    _idle(page)
    legend = page.wait_for_function(
        f"() => {{ const l = ({COMPARE_LINES})(); return l.length === 2 ? l : null; }}",
        timeout=TAB_MS,
        polling=POLL_MS,
    ).json_value()
    assert legend[0].startswith("gru block ×2") and legend[1].startswith("mamba block ×2"), legend
    page.screenshot(path=str(tmp_path / "compare_blocks.png"), full_page=True)
    _open_tab(page, "Devices", "Each way of computing the gradients, on each device", tmp_path)
    page.close()


def test_chromium_is_the_debian_build():
    if not shutil.which("chromium") and not Path(CHROMIUM).exists():
        _unavailable("chromium not installed")
    out = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True, timeout=30).stdout
    assert "Chromium" in out


FIRST_TOTAL = f"""() => {{ const p = document.querySelector('{CHART}');
  // _fullData holds what Plotly drew (data may still hold the base64-encoded arrays).
  if (!p || !p._fullData) return null; const t = p._fullData.find(d => d.name === 'total');
  return t && t.y && t.y.length > 0 ? Array.from(t.y) : null; }}"""


def test_eight_concurrent_sessions_each_see_their_own_results(server, browser):
    """8 browser contexts at once against one server, each with its own config (two
    shapes, several seeds and gains), each pins its run: no mixing of results or pins."""
    import asyncio

    import numpy as np
    from playwright.async_api import async_playwright

    from rnnviz import RunConfig, analyze
    from rnnviz.base.presets import config_to_params

    configs = [
        RunConfig(
            seed=i,
            recurrent_gain=0.8 + 0.05 * i,
            seq_len=30 if i % 2 else 40,
            cell="gru" if i % 4 == 3 else "simple",
        )
        for i in range(8)
    ]
    expected = [analyze(c, repeats=1).log10_grad_norms for c in configs]  # the chart draws log₁₀ magnitudes

    async def session(pw_browser, cfg):
        ctx = await pw_browser.new_context()
        page = await ctx.new_page()
        query = "&".join(f"{k}={v}" for k, v in config_to_params(cfg).items())
        # eight pages at once on 2 cores: the load, not only the chart, may take over 30 s
        await page.goto(f"{server}/?{query}", timeout=TAB_MS)
        # the values the wait saw: a rerun may replace the chart before a second read
        seen = await page.wait_for_function(FIRST_TOTAL, timeout=TAB_MS, polling=POLL_MS)
        y = await seen.json_value()
        await page.get_by_role("tab", name="Compare").click()
        await page.locator(".st-key-pin button").first.click()
        await page.wait_for_selector(".st-key-unpin_0", timeout=TAB_MS)
        pins = await page.locator("[class*='st-key-unpin_']").count()
        await ctx.close()
        return y, pins

    async def main():
        async with async_playwright() as p:
            b = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                return await asyncio.gather(*(session(b, c) for c in configs))
            finally:
                await b.close()

    # The sync Playwright of the other test owns this thread's event loop: use a fresh thread.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        results = pool.submit(asyncio.run, main()).result()
    for cfg, want, (got, pins) in zip(configs, expected, results):
        np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-6, err_msg=str(cfg))
        assert pins == 1, cfg


def _idle(page) -> None:
    """Wait until Streamlit's script run has finished (its run state on the app root)."""
    page.wait_for_selector('[data-test-script-state="notRunning"]', timeout=TAB_MS)


def _choose(page, key: str, name: str, exact: bool = True) -> None:
    """Pick ``name`` in the select box keyed ``key`` by typing it: typing opens the list and
    filters it to the match. (A click alone left the sidebar's data list closed on a page just
    drawn, which cost a 10 s wait and a second click each time, and the cell's list at times.)"""
    box = page.locator(f".st-key-{key}").get_by_role("combobox")
    option = page.get_by_role("option", name=name, exact=exact).first
    for _ in range(3):  # a rerun that lands between the typing and the pick closes the list
        box.click()
        box.fill(name)
        try:
            option.wait_for(timeout=5_000)
            break
        except Exception:
            _idle(page)
    option.click()


def test_data_previews_the_digit_the_text_and_an_uploaded_file(server, browser, tmp_path):
    import numpy as np

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/?data=digits:rows&hidden_size=8")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.gtitle')].some(e => e.textContent.startsWith('digits rows'))",
        timeout=TAB_MS,
        polling=POLL_MS,
    )
    _idle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    assert sidebar.locator(".st-key-data_preview .js-plotly-plot").count() == 1  # the digit, in the sidebar
    assert "T = 8 and I = 8 follow the data" in sidebar.inner_text()
    page.screenshot(path=str(tmp_path / "digits.png"), full_page=True)

    page.goto(f"{server}/?data=text:prose&seq_len=40&hidden_size=8")
    page.wait_for_selector('[data-testid="stSidebar"] [data-testid="stCode"]', timeout=TAB_MS)
    _idle(page)
    text = sidebar.locator('[data-testid="stCode"]').inner_text()
    assert len(text.strip()) > 20 and "text prose T=40" in page.inner_text("body")
    assert page.locator('[data-testid="stException"]').count() == 0

    path = tmp_path / "waves.npz"
    series = np.sin(np.linspace(0, 6, 30, dtype=np.float32)).reshape(1, 30, 1).repeat(4, 0)
    np.savez(path, inputs=series, targets=series)
    page.goto(f"{server}/?hidden_size=8")
    page.wait_for_selector(CHART, timeout=TAB_MS)  # the first run has drawn the page
    _idle(page)
    _choose(page, "data_choice", "upload a file…")
    page.locator('.st-key-data_upload input[type="file"]').set_input_files(str(path))
    page.wait_for_function(
        "() => [...document.querySelectorAll('.gtitle')].some(e => e.textContent.startsWith('waves.npz'))",
        timeout=TAB_MS,
        polling=POLL_MS,
    )
    _idle(page)
    assert "T = 30 and I = 1 follow the data" in sidebar.inner_text()
    page.screenshot(path=str(tmp_path / "upload.png"), full_page=True)
    page.close()


def test_memory_shades_the_text_by_what_a_trained_lstm_remembers(server, browser, tmp_path):
    from rnnviz import RunConfig, fit_to_data, load_dataset, train

    text = load_dataset("text", seq_len=40, max_sequences=96)
    cfg = fit_to_data(RunConfig(cell="lstm", hidden_size=8, batch_size=8, forget_bias=1.0), text)
    train(cfg, text, steps=10, log_every=10).save(
        Path(os.environ["RNNVIZ_BROWSER_TRAINED_DIR"]) / "lstm.rnnviz"
    )
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/?tab=Memory&seq_len=40&hidden_size=8")
    page.wait_for_selector(".st-key-weights_choice", timeout=TAB_MS)
    _idle(page)
    _choose(page, "weights_choice", "lstm on text prose T=40", exact=False)
    page.wait_for_selector(".rnnviz-char", timeout=TAB_MS)
    _idle(page)
    chars = page.locator(".rnnviz-char")
    assert chars.count() == 40
    shades = [float(x) for x in chars.evaluate_all("els => els.map(e => e.dataset.shade)")]
    colours = chars.evaluate_all("els => els.map(e => getComputedStyle(e).backgroundColor)")
    assert max(shades) == 1.0 and min(shades) < 0.9  # shaded by how much the output depends on each
    assert len(set(colours)) > 5  # drawn, not stripped: the browser computed each background
    assert all(
        c.startswith(("rgba(0, 114, 178", "rgb(0, 114, 178")) for c in colours if c != "rgba(0, 0, 0, 0)"
    )
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "lstm on text prose T=40, step 10" in page.inner_text("body")
    page.screenshot(path=str(tmp_path / "memory.png"), full_page=True)
    page.close()

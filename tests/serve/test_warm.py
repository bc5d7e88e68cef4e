"""``rnnviz app`` warms its server before anyone asks (:mod:`rnnviz.serve.warm`): once the
server answers, its page runs once in a headless session, so the first visitor's page takes the
default analysis from the server's result cache (no "Compiling…" box: nothing compiled for
them), while a page with another shape still compiles (the box is there: the check can fail).

Skips where no browser can be had, unless RNNVIZ_REQUIRE_BROWSER=1 (as .ci/run sets).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser_helpers import CHART, CHROMIUM, FLAGS

from rnnviz.cli.launch import served_at
from rnnviz.serve.warm import warm

ROOT = Path(__file__).resolve().parents[2]
IDLE = '[data-test-script-state="notRunning"]'
COMPILING = '.st-key-metric_compile:has-text("just now")'

pytestmark = pytest.mark.browser


def test_the_warm_up_finds_the_server_where_rnnviz_app_starts_it():
    assert served_at(["--server.address=127.0.0.1", "--server.port=8501"]) == "http://127.0.0.1:8501/"
    assert served_at(["--server.address=0.0.0.0", "--server.port=80", "--server.baseUrlPath=/rnnviz/"]) == (
        "http://127.0.0.1:80/rnnviz/"
    )
    assert served_at([]) == "http://127.0.0.1:8501/"
    ok, what = warm("http://127.0.0.1:9/", start_within_s=0.3)
    assert not ok and "did not answer" in what


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _open(browser, url: str) -> bool:
    """Open ``url`` until its chart is drawn and the page idle; whether it showed a compile box."""
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    page.goto(url)
    page.wait_for_selector(CHART, timeout=120_000)
    page.wait_for_selector(IDLE, timeout=120_000)
    compiled = page.locator(COMPILING).count() > 0
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()
    return compiled


@pytest.mark.slow
def test_rnnviz_app_runs_its_page_once_before_the_first_visitor(tmp_path):
    if not Path(CHROMIUM).exists():
        if os.environ.get("RNNVIZ_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser required (RNNVIZ_REQUIRE_BROWSER=1) but {CHROMIUM} is not installed")
        pytest.skip(f"{CHROMIUM} is not installed (make test installs it)")
    from playwright.sync_api import sync_playwright

    port = _port()
    env = {
        **os.environ,
        "RNNVIZ_JAX_CACHE": str(tmp_path / "jax"),  # cold: the warm-up is what compiles
        "RNNVIZ_WORKERS": "2",
        "RNNVIZ_TRAINED_DIR": str(tmp_path / "trained"),
    }
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rnnviz", "app", f"--port={port}"],
        cwd=tmp_path,  # not the checkout: the packaged settings turn the health check on
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        # the launcher's warm-up says when it is done, on the server's stderr
        deadline, said = time.monotonic() + 240, []
        while time.monotonic() < deadline and not said:
            time.sleep(0.5)
            said = [line for line in (tmp_path / "server.log").read_text().splitlines() if "warm-up:" in line]
        assert said and "the page ran" in said[0], (tmp_path / "server.log").read_text()[-3000:]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                assert not _open(browser, url), "the first visitor compiled: the page was not warm"
                assert _open(browser, url + "?hidden_size=24"), "a new shape showed no compile box"
            finally:
                browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()

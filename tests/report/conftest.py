"""The reports' shared browser: Debian's chromium through Playwright, once per module.

A browser test skips where /usr/bin/chromium or playwright is missing, unless
RNNVIZ_REQUIRE_BROWSER=1 (then that is a failure), as tests/ui/test_browser.py does.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, FLAGS


def _unavailable(reason: str):
    if os.environ.get("RNNVIZ_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser required (RNNVIZ_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} is not installed (make test installs it with apt-get when run as root)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()

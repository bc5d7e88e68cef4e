"""Every tab on a 1366×768 projector (#33): its main picture lies wholly inside the viewport
without scrolling, with no exception and no error box. The check is the screenshot script's
(``scripts/screenshots.py``, which also writes ``docs/images/``), run here at the default
configuration in Debian's chromium against ``streamlit run app.py``.

Skips where no browser can be had, unless RNNVIZ_REQUIRE_BROWSER=1 (as .ci/run sets).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_helpers import load_script

from rnnviz.ui.tabs import TABS

ROOT = Path(__file__).resolve().parents[2]
#: One xdist group, "browser", with test_browser.py: one after another (see there).
pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]


def test_every_tab_shows_its_main_picture_above_the_fold(tmp_path_factory):
    shots = load_script("screenshots")
    if not Path(shots.CHROMIUM).exists():
        if os.environ.get("RNNVIZ_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser required (RNNVIZ_REQUIRE_BROWSER=1) but {shots.CHROMIUM} is not installed")
        pytest.skip(f"{shots.CHROMIUM} is not installed (make test installs it)")
    from apptest_helpers import start_server

    env = {
        **os.environ,
        "RNNVIZ_JAX_CACHE": str(tmp_path_factory.mktemp("jaxcache")),
        "RNNVIZ_WORKERS": "2",
        "RNNVIZ_TRAINED_DIR": str(tmp_path_factory.mktemp("trained")),
    }
    proc, url = start_server(env, tmp_path_factory.mktemp("server") / "streamlit.log")
    try:
        out = tmp_path_factory.mktemp("shots")
        taken = shots.check_tabs(url, [t.TITLE for t in TABS], ["default"], out)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lines = "\n".join(shots.describe(s) for s in taken)
    print(lines)
    assert [s.tab for s in taken] == [t.TITLE for t in TABS]
    assert all(s.ok for s in taken), lines
    assert all(Path(s.path).stat().st_size > 10_000 for s in taken)  # a picture, not a blank page

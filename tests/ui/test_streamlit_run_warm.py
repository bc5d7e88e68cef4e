"""``streamlit run app.py`` warms its page before anyone asks, as ``rnnviz app`` does: app.py is
an ``st.App`` whose lifespan (:mod:`rnnviz.ui.lifespan`) has the server run its page once as it
starts. No browser and no request here: whatever ran the page was the server itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Seconds the warm-up may take on a loaded machine (imports, a worker, one compile: 5–10 s alone).
WARM_WITHIN_S = 150
#: Port 0 and a base path: the warm-up must find the port the server bound, under its path.
FLAGS = ("--server.port=0", "--server.baseUrlPath=rnnviz")


@pytest.mark.slow
def test_streamlit_run_app_py_runs_its_page_before_the_first_visitor(tmp_path):
    jax_cache = tmp_path / "jax"
    env = {
        **os.environ,
        "RNNVIZ_JAX_CACHE": str(jax_cache),  # empty: only a run of the page compiles into it
        "RNNVIZ_WORKERS": "1",
        "RNNVIZ_TRAINED_DIR": str(tmp_path / "trained"),
    }
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", *FLAGS],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline, said = time.monotonic() + WARM_WITHIN_S, []
        while time.monotonic() < deadline and not said and proc.poll() is None:
            time.sleep(0.5)
            said = [line for line in log_path.read_text().splitlines() if "warm-up:" in line]
        text = log_path.read_text()
        assert said and "the page ran" in said[0], text[-3000:]
        # what the page's run left behind: the default analysis compiled (into the empty cache
        # folder), by worker processes the server started
        assert any(p.name.endswith("-cache") for p in jax_cache.iterdir()), sorted(jax_cache.iterdir())
        workers = [c for c in psutil.Process(proc.pid).children() if "rnnviz.serve.worker" in c.cmdline()]
        assert workers, text[-3000:]
    finally:
        proc.terminate()
        proc.wait(timeout=30)

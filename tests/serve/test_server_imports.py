"""The server process plans and draws without JAX: the page runs with worker processes, every
tab is opened, and the process that ran it has imported neither JAX nor Flax (the workers
compute; the answers' records and the jobs' names are JAX-free)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import sys
from streamlit.testing.v1 import AppTest
from rnnviz.ui.tabs import TABS

charts = 0
for tab in TABS:  # each tab drawn (the others' requests planned for idle time)
    at = AppTest.from_file(sys.argv[1], default_timeout=240)
    for name, value in {"seq_len": "12", "hidden_size": "4", "tab": tab.TITLE}.items():
        at.query_params[name] = value
    at.run()
    assert not at.exception, (tab.TITLE, [e.value for e in at.exception])
    assert not at.error, (tab.TITLE, [e.value for e in at.error])
    charts += len(at.get("plotly_chart"))
heavy = sorted(m for m in ("jax", "jaxlib", "flax", "optax") if m in sys.modules)
print("charts", charts, "heavy", ",".join(heavy) or "none")
"""


def test_the_server_draws_every_tab_without_importing_jax(tmp_path):
    env = {
        **os.environ,
        "RNNVIZ_WORKERS": "1",
        "RNNVIZ_JAX_CACHE": "off",
        "RNNVIZ_TRAINED_DIR": str(tmp_path / "trained"),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT / "rnnviz" / "ui" / "entry.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1].split()
    assert last[0] == "charts" and int(last[1]) > 0, done.stdout
    assert last[3] == "none", f"the server imported {last[3]}"

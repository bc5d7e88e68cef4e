"""Helpers to read Plotly figures out of Streamlit's AppTest."""

import base64
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
#: What ``streamlit run`` serves (an ``st.App``, warming its page as the server starts).
APP = str(ROOT / "app.py")
#: The page's script, which AppTest runs (it runs scripts, not an ``st.App``).
ENTRY = str(ROOT / "rnnviz" / "ui" / "entry.py")


def start_server(env: dict, log_path: Path) -> tuple[subprocess.Popen, str]:
    """``streamlit run app.py`` on a free localhost port with ``env``; ``(process, url)``
    once it accepts connections (the process is killed and RuntimeError raised after 60 s)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            APP,
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
        ],
        cwd=ROOT,
        env=env,
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("streamlit did not start within 60 s")


def run_app(query: dict | None = None, timeout: float = 120) -> AppTest:
    at = AppTest.from_file(ENTRY, default_timeout=timeout)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    return at.run()


def decode(value):
    """Plotly 7 encodes arrays as {"dtype", "bdata", "shape"}; return a float array."""
    if isinstance(value, dict) and "bdata" in value:
        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        if "shape" in value:
            shape = value["shape"]
            arr = arr.reshape([int(s) for s in str(shape).split(",")] if isinstance(shape, str) else shape)
        return arr.astype(np.float64)
    return (
        np.asarray([np.nan if v is None else v for v in value], dtype=np.float64)
        if isinstance(value, list)
        else value
    )


def figures(at: AppTest) -> list[dict]:
    """Every chart the page drew (not the sidebar's hidden empty one that loads Plotly early)."""
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart") if "chart_preload" not in el.proto.id]


def figure_by_title(at: AppTest, start: str) -> dict:
    for fig in figures(at):
        title = fig["layout"].get("title", {}).get("text", "")
        if title.startswith(start):
            return fig
    raise AssertionError(
        f"no figure titled {start!r}; have {[f['layout'].get('title', {}).get('text') for f in figures(at)]}"
    )


def trace(fig: dict, name: str) -> dict:
    for t in fig["data"]:
        if t.get("name") == name:
            return t
    raise AssertionError(f"no trace {name!r}; have {[t.get('name') for t in fig['data']]}")


def total_gradient(at: AppTest) -> np.ndarray:
    """The drawn total: log₁₀ ‖∂L/∂carry_t‖ (the chart's y is log₁₀ on a powers-of-ten axis)."""
    return decode(trace(figure_by_title(at, "‖∂L/∂carry_t‖"), "total")["y"])


def _unexpected(name: str):
    def call(*args, **kwargs):
        raise AssertionError(f"the tab called {name}{args} and the test gave it no fake")

    return call


def fake_context(
    analysis, *, config=None, gpus=(), data_source=None, pins=(), state=None, recorded=None, **jobs
):
    """A :class:`~rnnviz.ui.tabs.context.TabContext` for calling a tab's ``render`` without
    worker processes: each request is answered by the fake named as its job
    (``devices_live=…``, ``phase=…``, ``quiet_run_s=…``), called with the request's
    arguments (a job key first, where the job takes one); any other raises AssertionError.

    ``analysis`` is the session's analysis (anything with the attributes the tab reads);
    ``config`` defaults to its config; ``pins`` are pinned analyses; ``state`` the widget
    values (default: Streamlit's session state of the run)."""
    import streamlit as st

    from rnnviz.engine.environment import environment
    from rnnviz.serve.requests import job_key
    from rnnviz.ui.tabs.context import Pins, TabContext, TrainingCalls

    def get(request):
        return jobs.get(request.job.__name__, _unexpected(request.job.__name__))(*request.args)

    config = analysis.config if config is None else config
    overlays = tuple(p for p in pins if p.config != config)
    keys = tuple(job_key(p.config) for p in pins)
    pinned = Pins(keys, tuple(pins), overlays, add=lambda: None, remove=lambda i: None, clear=lambda: None)
    env = environment()._replace(gpus=tuple(gpus), strategies=("accumulate",), hidden={})
    training = TrainingCalls(**{f: _unexpected(f) for f in TrainingCalls._fields})
    return TabContext(
        config,
        analysis,
        pinned,
        env,
        data_source,
        None,
        st.session_state if state is None else state,
        get,
        lambda request: False,
        training,
        recorded or _unexpected("recorded"),
    )

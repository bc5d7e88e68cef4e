"""What every browser test and script shares: Debian's chromium, its flags, and a script of
``scripts/`` loaded as a module. Plain Python (no Playwright, no Streamlit): the scripts put
``tests/`` on their path and import it too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
#: Debian's chromium (never ``playwright install``: this machine reaches no download site).
CHROMIUM = "/usr/bin/chromium"
#: In a container as root (no sandbox), without a GPU, and quiet on the network.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

#: An init script that counts the script runs a page has seen start (each change of the app
#: root's ``data-test-script-state`` into "running") in ``window.__runs.runs``: a run that
#: started and ended between two looks is still seen, and a fresh page that reads
#: "notRunning" before its first run has begun is not taken for a finished one.
RUN_COUNTER = """(() => {
  const s = (window.__runs = { runs: 0, state: null });
  new MutationObserver((ms) => ms.forEach((m) => {
    const v = m.target.getAttribute && m.target.getAttribute("data-test-script-state");
    if (v && v !== s.state) { s.state = v; if (v === "running") s.runs += 1; }
  })).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-test-script-state"] });
})();"""
#: JavaScript: the runs counted so far (0 before the counter runs).
RUNS = "() => (window.__runs ? window.__runs.runs : 0)"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module (``scripts/`` is no package); registered under its
    name first, so the dataclasses in it can look their module up."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module

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


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module (``scripts/`` is no package); registered under its
    name first, so the dataclasses in it can look their module up."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module

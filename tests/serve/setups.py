"""Setups for the pool's tests: each leaves a file named for the kind of worker and its pid."""

import os
from pathlib import Path


def _mark(kind: str) -> None:
    (Path(os.environ["RNNVIZ_TEST_SETUP_DIR"]) / f"{kind}-{os.getpid()}").touch()


def visitors() -> None:
    _mark("visitors")


def idle() -> None:
    _mark("idle")

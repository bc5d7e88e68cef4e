"""A fingerprint of the compiled analysis of every (cell, strategy) pair: the optimised HLO,
hashed without its source locations (file names and line numbers), so two checkouts can be
compared for "the same programs run" after a refactoring.

    PYTHONPATH=OLD_CHECKOUT python scripts/hlo_fingerprint.py > /tmp/old.txt
    PYTHONPATH=NEW_CHECKOUT python scripts/hlo_fingerprint.py > /tmp/new.txt
    diff /tmp/old.txt /tmp/new.txt   # empty: identical executables

(PYTHONPATH picks the checkout: a script's own folder, not the working directory, heads
``sys.path``, so without it an editable install's rnnviz is measured both times.) Blank
lines and the source tables (file and function names, locations, Python stack frames) are
dropped before hashing, so only the computations count.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path

import numpy as np

import rnnviz
from rnnviz import ConfigError, RunConfig, fit_to_data, load_dataset
from rnnviz.analysis import executables

if (Path(rnnviz.__file__).parent / "engine").is_dir():
    from rnnviz.engine.prepare import data_on, resolve_device, static_config
else:  # a 0.2 checkout (flat layout), to fingerprint the code from before the house move
    from rnnviz.analysis import data_on, resolve_device, static_config

#: The blocks of the optimised HLO text that say where in the Python source each op came from.
SOURCE_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
CELLS = ("simple", "lstm", "gru", "mingru", "lru")
STRATEGIES = ("accumulate", "per_step", "fused", "checkpoint", "parallel")


def fingerprint(cfg: RunConfig, data=None) -> tuple[str, int]:
    device = resolve_device(cfg)
    spec = None if data is None else data_on(cfg, device, data)[1]
    exe = executables(static_config(cfg), device, spec)
    text = exe.analysis.fn.as_text()
    text = re.sub(r", metadata=\{[^}]*\}", "", text)  # op metadata: source file and line
    keep, skipping = [], False
    for line in text.splitlines():
        if line.strip() in SOURCE_TABLES:  # the source tables: file and function names, their
            skipping = True  # locations and the Python stack frames (one block each, to a blank line)
        elif not line.strip():
            skipping = False
        elif not skipping and not line.startswith("HloModule "):
            keep.append(line)
    text = "\n".join(keep)
    return hashlib.sha256(text.encode()).hexdigest()[:16], len(text)


def main() -> None:
    for cell in CELLS:
        for strategy in STRATEGIES:
            try:
                cfg = RunConfig(cell=cell, strategy=strategy, hidden_size=16, seq_len=20)
            except ConfigError:  # the cell cannot use this strategy
                continue
            digest, size = fingerprint(cfg)
            print(f"{cell:8s} {strategy:11s} {digest} {size}")
    # on data: each kind's loss (classification, next-step, regression with padding, unlabelled)
    for name, ds in _data_sets().items():
        for cell in ("lstm", "gru"):
            cfg = fit_to_data(RunConfig(cell=cell, hidden_size=16, batch_size=4), ds)
            digest, size = fingerprint(cfg, ds)
            print(f"{cell:8s} {name:11s} {digest} {size}")


def _data_sets() -> dict:
    """A set of each kind, the regression and unlabelled ones ragged (written here, seeded)."""
    rng = np.random.default_rng(0)
    folder = tempfile.mkdtemp(prefix="rnnviz-hlo-")
    x = rng.normal(size=(12, 9, 3)).astype(np.float32)
    lengths = rng.integers(3, 10, size=12)
    np.savez(f"{folder}/r.npz", inputs=x, targets=x[..., :2] * 0.5, lengths=lengths)
    np.savez(f"{folder}/u.npz", inputs=x, lengths=lengths)
    return {
        "digits": load_dataset("digits", order="rows"),
        "text": load_dataset("text"),
        "regression": load_dataset(f"{folder}/r.npz"),
        "unlabelled": load_dataset(f"{folder}/u.npz"),
    }


if __name__ == "__main__":
    main()

"""A fingerprint of the compiled analysis of every (cell, strategy) pair: the optimised HLO,
hashed without its source locations (file names and line numbers), so two checkouts can be
compared for "the same programs run" after a refactoring.

    cd OLD_CHECKOUT && python /path/to/scripts/hlo_fingerprint.py > /tmp/old.txt
    cd NEW_CHECKOUT && python scripts/hlo_fingerprint.py > /tmp/new.txt
    diff /tmp/old.txt /tmp/new.txt   # empty: identical executables
"""

from __future__ import annotations

import hashlib
import re

from rnnviz import ConfigError, RunConfig
from rnnviz.analysis import executables, resolve_device, static_config

CELLS = ("simple", "lstm", "gru", "mingru", "lru")
STRATEGIES = ("accumulate", "per_step", "fused", "checkpoint", "parallel")


def fingerprint(cfg: RunConfig) -> tuple[str, int]:
    exe = executables(static_config(cfg), resolve_device(cfg))
    text = exe.analysis.fn.as_text()
    text = re.sub(r", metadata=\{[^}]*\}", "", text)  # op metadata: source file and line
    text = re.sub(r'(?m)^\d+ "[^"]*"$', "", text)  # the table of source-file paths
    text = re.sub(r"(?m)^HloModule [^\n]*", "", text)
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


if __name__ == "__main__":
    main()

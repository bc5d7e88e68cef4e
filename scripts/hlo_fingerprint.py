"""A fingerprint of the compiled analysis of every (cell, strategy) pair: the optimised HLO,
hashed without its source locations (file names and line numbers), so two checkouts can be
compared for "the same programs run" after a refactoring.

    PYTHONPATH=OLD_CHECKOUT python scripts/hlo_fingerprint.py > /tmp/old.txt
    PYTHONPATH=NEW_CHECKOUT python scripts/hlo_fingerprint.py > /tmp/new.txt
    diff /tmp/old.txt /tmp/new.txt   # empty: identical executables

(PYTHONPATH picks the checkout: a script's own folder, not the working directory, heads
``sys.path``, so without it an editable install's rnnviz is measured both times.) Blank
lines and the source tables are dropped before hashing, so only the computations count.
"""

from __future__ import annotations

import hashlib
import re

from rnnviz import ConfigError, RunConfig
from rnnviz.analysis import executables
from rnnviz.engine.prepare import resolve_device, static_config

CELLS = ("simple", "lstm", "gru", "mingru", "lru")
STRATEGIES = ("accumulate", "per_step", "fused", "checkpoint", "parallel")


def fingerprint(cfg: RunConfig) -> tuple[str, int]:
    exe = executables(static_config(cfg), resolve_device(cfg))
    text = exe.analysis.fn.as_text()
    text = re.sub(r", metadata=\{[^}]*\}", "", text)  # op metadata: source file and line
    source_table = re.compile(r'^\d+ ("[^"]*"|\{file_name_id=[^}]*\})$')  # source files and locations
    keep = [line for line in text.splitlines() if line.strip() and not source_table.match(line)]
    text = "\n".join(line for line in keep if not line.startswith("HloModule "))
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

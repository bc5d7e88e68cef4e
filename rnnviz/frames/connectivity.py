"""Connectivity frames: how strongly each output depends on each earlier input, per run, and
the sequence's gates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rnnviz.base.connectivity import Connectivity
from rnnviz.frames.gradients import gates_frame


def connectivity_frame(runs: list[tuple[str, Connectivity]]) -> pd.DataFrame:
    """``label, t, lag, log10, shade``: each labelled connectivity up to its output step
    (``shade``: the opacity the charts give it, 1 at the maximum, over three decades)."""
    parts = []
    for label, c in runs:
        t = np.arange(1, c.step + 1)
        logs = c.log10[: c.step]
        parts.append(
            pd.DataFrame(
                {
                    "label": label,
                    "t": t,
                    "lag": c.step - t,
                    "log10": logs,
                    "relative": c.relative()[: c.step],
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=["label", "t", "lag", "log10", "relative"])
    return pd.concat(parts, ignore_index=True)


def sequence_gates_frame(c: Connectivity) -> pd.DataFrame:
    """``t, series, value``: the mean gate activations along the connectivity's sequence."""
    return gates_frame(c)  # the record has what gate_means reads: config, params, carries, inputs

"""Trained weights as plain data: the :class:`Weights` record every view accepts as
``params=`` (NumPy only; :mod:`rnnviz.engine.prepare` puts them on the device).

A training run (:mod:`rnnviz.studies.training`) keeps its weights at every logged step; one of
them, e.g. ``run.weights(step=1000)``, is a :class:`Weights`. The analysis then runs the
trained cell instead of the one its seed would initialise:

* the recurrent kernels are the trained ones times ``cfg.recurrent_gain / weights.gain``
  (so the run's own config gives the trained network exactly, and a gain sweep scales the
  trained recurrence);
* the forget bias is the trained one (``cfg.forget_bias`` initialised it; it is not
  applied again);
* a learned initial carry is the trained one; a configured one comes from the seed as in
  training;
* on a data set whose kind matches the run's task, the loss reads the outputs through the
  trained readout instead of one drawn by the seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class Weights:
    """A network's trained parameters at one step of a run.

    Attributes:
        cell: the cell's Flax params tree (NumPy leaves), as ``cell.init(...)["params"]``.
        readout: ``{"kernel": [O, F], "bias": [F]}``, the run's readout, or None.
        carry: the learned initial carry (a tree of ``[H]`` leaves, Flax's carry order), or
            None when the carry is configured.
        gain: the recurrent gain the run was initialised with (the trained kernels are
            taken as having gain 1 relative to it).
        step: the optimisation step the weights are from (0: the initialisation).
        label: where they come from, in words (``lstm on text prose T=100, step 1000``).
    """

    cell: dict[str, Any]
    readout: dict[str, np.ndarray] | None
    carry: Any | None
    gain: float
    step: int
    label: str

    def tree(self) -> dict[str, Any]:
        """``{"cell": …, "readout": …, "carry": …}`` (absent parts left out): the arrays."""
        out: dict[str, Any] = {"cell": self.cell}
        if self.readout is not None:
            out["readout"] = self.readout
        if self.carry is not None:
            out["carry"] = self.carry
        return out

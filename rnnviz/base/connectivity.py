"""The :class:`Connectivity` record: what :func:`rnnviz.connectivity` returns (NumPy, no JAX),
so that a process that only draws it (the dashboard's server) never imports JAX."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rnnviz.config import RunConfig

#: What the connectivity differentiates (see the module docstring).
MEASURES = ("target", "output")


@dataclass(frozen=True, eq=False)
class Connectivity:
    """The connectivity of one output step to every input of one sequence.

    Attributes:
        config: the configuration (unbatched: one sequence).
        index: the sequence's index in the data set (all N sequences).
        step: τ, the output step (1 … T).
        measure: ``target`` or ``output``.
        log10: ``[T]`` log₁₀ c_t (exact; −inf for a true zero, e.g. every t > τ).
        inputs: ``[T, I]`` the sequence.
        mask: ``[T]`` its real steps.
        target: the class or next token the ``target`` measure reads, else None.
        log_prob: log p(target) at τ under the trained readout, else None.
        carries: ``{component: [T+1, H]}`` the trajectory.
        params: the cell's params (for the gates: :func:`rnnviz.frames.verdicts.gate_means`).
        text: the sequence's characters for a text (``vocab``), else None.
        image: ``[8, 8]`` the digit for the digits, else None.
        pixel_steps: ``[8, 8]`` the step whose input each pixel is (draw per-step values
            on the digit as ``values[pixel_steps]``), else None.
        data: the data set's label; weights: the weights' label (None: initial).
    """

    config: RunConfig
    index: int
    step: int
    measure: str
    log10: np.ndarray
    inputs: np.ndarray
    mask: np.ndarray
    target: int | None
    log_prob: float | None
    carries: dict[str, np.ndarray]
    params: Any
    text: str | None
    image: np.ndarray | None
    pixel_steps: np.ndarray | None
    data: str
    weights: str | None

    def relative(self) -> np.ndarray:
        """``[T]`` c_t / max c (0 … 1; 0 for a true zero), for shading."""
        return relative(self.log10)

    def reach(self, fraction: float = 0.01) -> int:
        """How far back (τ − t, in steps) the furthest input whose connectivity is at least
        ``fraction`` of the strongest lies; 0 when only x_τ is (:func:`reach`)."""
        return reach(self.log10, self.step, fraction)


def relative(log10: np.ndarray) -> np.ndarray:
    """``[T]`` c_t / max c of log₁₀ c ``[T]`` (0 … 1; 0 for a true zero)."""
    top = np.max(log10[np.isfinite(log10)], initial=-np.inf)
    return np.where(np.isfinite(log10), 10.0 ** (log10 - top), 0.0)


def reach(log10: np.ndarray, step: int, fraction: float = 0.01) -> int:
    """How far back (τ − t, in steps) from output step τ = ``step`` (1 … T) the furthest input
    whose connectivity c_t (log₁₀ ``[T]``) is at least ``fraction`` of the strongest lies.

    >>> reach(np.log10([0.001, 0.02, 0.5, 1.0, 1e-30]), step=4)
    2
    """
    above = np.flatnonzero(relative(log10)[:step] >= fraction)
    return int(step - 1 - above[0]) if above.size else 0


__all__ = ["MEASURES", "Connectivity", "reach", "relative"]

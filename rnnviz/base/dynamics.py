"""The records of the step Jacobians and Lyapunov exponents (NumPy, no JAX): what
:func:`rnnviz.jacobians` and :func:`rnnviz.lyapunov` return, and how the Jacobians' method is
chosen for a carry of D scalars (:func:`choose_method`), so that a process that plans and
draws them (the dashboard's server) never imports JAX.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rnnviz.base.readings import DecayFit
from rnnviz.config import RunConfig

#: Largest carry size D for which ``method="auto"`` builds each J_t and takes its SVD.
EXACT_MAX_DIM = 256
JACOBIAN_METHODS = ("auto", "exact", "subspace")


def choose_method(dim: int, method: str = "auto") -> str:
    """``"auto"`` → exact for D ≤ :data:`EXACT_MAX_DIM`, subspace above; others unchanged."""
    if method == "auto":
        return "exact" if dim <= EXACT_MAX_DIM else "subspace"
    return method


@dataclass(frozen=True, eq=False)
class Jacobians:
    """Top-k singular values of the step Jacobians of one example.

    Attributes:
        config: the configuration.
        example: which example of the batch.
        method: ``"exact"`` (jacfwd + SVD) or ``"subspace"`` (matrix-free power iteration).
        stride: J_t was taken at every ``stride``-th step.
        steps: ``[S]`` the steps t (1..T) at which J_t = ∂carry_t/∂carry_{t−1} was taken.
        singular_values: ``[S, k]`` largest first.
        compile_s, run_s: seconds to compile, seconds to run.
    """

    config: RunConfig
    example: int
    method: str
    stride: int
    steps: np.ndarray
    singular_values: np.ndarray
    compile_s: float
    run_s: float


@dataclass(frozen=True, eq=False)
class Lyapunov:
    """The k leading Lyapunov exponents of one configuration's trajectories (natural log
    per step; > 0 stretches, < 0 shrinks).

    Attributes:
        config: the configuration.
        k, warmup, qr_every: the options used (:func:`rnnviz.lyapunov`).
        exponents: ``[k]`` mean over examples, largest first (``lambda1`` is the first).
        exponents_spread: ``[k]`` their standard deviation over examples.
        example_exponents: ``[B, k]`` per example.
        running: ``[T, B, k]`` the running estimate after each step (NaN until the first
            QR after the warm-up), so convergence can be seen.
        decay: the measured slope of ln‖∂L/∂carry_{T−k}‖ per step
            (:func:`~rnnviz.base.readings.decay_fit`) on the same config, or None when not asked for
            or not fittable.
        compile_s, run_s: seconds to compile, median seconds per run.
    """

    config: RunConfig
    k: int
    warmup: int
    qr_every: int
    exponents: np.ndarray
    exponents_spread: np.ndarray
    example_exponents: np.ndarray
    running: np.ndarray
    decay: DecayFit | None
    compile_s: float
    run_s: float

    @property
    def lambda1(self) -> float:
        """λ₁, the largest exponent (natural log per step): < 0 ordered, ≈ 0 the edge, > 0 chaotic."""
        return float(self.exponents[0])


__all__ = ["EXACT_MAX_DIM", "JACOBIAN_METHODS", "Jacobians", "Lyapunov", "choose_method"]

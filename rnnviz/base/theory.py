"""Closed forms of ‖∂L/∂carry_t‖ drawn next to the measured curve (NumPy, float64).

A cell's :class:`~rnnviz.tables.cells.CellSpec` names its curve in ``display.theory``: the simple
cell's Pascanu bound (:func:`pascanu_curve`), or for cells whose step Jacobian is diagonal
the exact product (:func:`diagonal_theory` of the cell's ``*_jacobians``). Each reads an
:class:`~rnnviz.base.analysis.Analysis` (params, inputs, trajectory) and needs no JAX.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from rnnviz.base.readings import log10_combine
from rnnviz.tables.cells import cell_spec

if TYPE_CHECKING:
    from rnnviz.base.analysis import Analysis

#: max |φ'| of the simple cell's activation (Pascanu et al. 2013's γ).
GAMMA = {"tanh": 1.0, "relu": 1.0, "identity": 1.0}


class Theory(NamedTuple):
    """Pascanu et al. (2013) for the simple cell: h_t = φ(W_h h_{t−1} + …).

    ∂h_t/∂h_{t−1} = diag(φ′)·W_hᵀ, so ‖∂L/∂h_t‖ ≤ (σ₁·γ)^{T−t}·‖∂L/∂h_T‖ for ``loss="last"``:
    σ₁·γ < 1 is sufficient for vanishing; σ₁·γ > 1 is necessary for exploding.
    log10_bound ``[T+1]`` is log₁₀ of that curve anchored at t = T (exact far below
    float64's range); bound is the same in linear units (0 below ~1e-308). Both None for
    other losses.
    """

    sigma1: float
    gamma: float
    log10_bound: np.ndarray | None

    @property
    def product(self) -> float:
        """``σ₁·γ``: below 1 the gradient surely vanishes; above 1 it may explode."""
        return self.sigma1 * self.gamma

    @property
    def bound(self) -> np.ndarray | None:
        """``[T+1]`` ``10**log10_bound`` in linear units (0 where it underflows float64), or None."""
        if self.log10_bound is None:
            return None
        with np.errstate(over="ignore", under="ignore"):
            return 10.0**self.log10_bound


def simple_cell_theory(a: Analysis) -> Theory | None:
    """Pascanu's numbers, for the simple cell only (None otherwise)."""
    cfg = a.config
    if cfg.cell != "simple":
        return None
    w = np.asarray(a.params["h"]["kernel"], dtype=np.float64)
    sigma1 = float(np.linalg.svd(w, compute_uv=False)[0])
    gamma = GAMMA[cfg.activation]
    log_bound = None
    end = float(a.log10_grad_norms[-1])
    if cfg.loss == "last" and math.isfinite(end) and sigma1 * gamma > 0:
        lags = np.arange(cfg.seq_len, -1, -1, dtype=np.float64)
        log_bound = end + lags * math.log10(sigma1 * gamma)
    return Theory(sigma1, gamma, log_bound)


class Overlay(NamedTuple):
    """A closed-form curve drawn next to the measured ‖∂L/∂carry_t‖: ``log10 [T+1]``."""

    label: str
    log10: np.ndarray


def pascanu_curve(a: Analysis) -> Overlay | None:
    """Simple cell: the bound (σ₁·γ)^{T−t}·‖∂L/∂h_T‖ (loss last)."""
    th = simple_cell_theory(a)
    if th is None or th.log10_bound is None:
        return None
    return Overlay(f"bound (σ₁·γ)^(T−t)·‖∂L/∂h_T‖, σ₁·γ = {th.product:.3f}", th.log10_bound)


def time_major(a: Analysis, x: np.ndarray) -> np.ndarray:
    """``x`` as ``[T, (B,) …]``: batched ``[B, T, …]`` has its first two axes swapped, unbatched is as is."""
    return x if a.config.batch_size is None else np.swapaxes(x, 0, 1)


def dense(p: dict, name: str, inp: np.ndarray) -> np.ndarray:
    """``inp @ kernel + bias`` in float64 with the Dense layer ``p[name]`` (no bias when it has none)."""
    out = inp @ np.asarray(p[name]["kernel"], np.float64)
    return out + np.asarray(p[name]["bias"], np.float64) if "bias" in p[name] else out


def sigmoid(z: np.ndarray) -> np.ndarray:
    """σ(z) = 1 / (1 + e^{−z}) elementwise (large negative z overflow quietly to 0)."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-z))


# Per-cell step Jacobians D_t = ∂h_t/∂h_{t−1} ``[T, (B,) H]`` for cells where it is diagonal
# (float64, from params, inputs and the trajectory). Each cell's spec points its theory hook
# at its own function here (``rnnviz.tables.builtin_cells``), so there is no dispatch on the cell's name.


def indrnn_jacobians(a: Analysis) -> np.ndarray:
    """u ⊙ φ′(pre-activation), φ′ read off h_t (relu: h_t > 0; tanh: 1 − h_t²; identity: 1)."""
    h = np.asarray(a.carries["h"][1:], np.float64)
    slope = {"relu": (h > 0).astype(np.float64), "tanh": 1.0 - h**2, "identity": np.ones_like(h)}[
        a.config.activation
    ]
    return np.asarray(a.params["u"], np.float64) * slope


def mingru_jacobians(a: Analysis) -> np.ndarray:
    """a·(1 − z_t)."""
    x = time_major(a, np.asarray(a.inputs, np.float64))
    return float(np.asarray(a.params["a"])) * (1.0 - sigmoid(dense(a.params, "iz", x)))


def minlstm_jacobians(a: Analysis) -> np.ndarray:
    """a·f_t / (f_t + i_t)."""
    x = time_major(a, np.asarray(a.inputs, np.float64))
    f, i = sigmoid(dense(a.params, "if", x)), sigmoid(dense(a.params, "ii", x))
    return float(np.asarray(a.params["a"])) * f / (f + i)


def lru_jacobians(a: Analysis) -> np.ndarray:
    """|λ| = a·exp(−exp(ν)) per unit: each unit's (re, im) Jacobian is |λ| times a rotation,
    and a rotation keeps norms."""
    modulus = float(np.asarray(a.params["a"])) * np.exp(-np.exp(np.asarray(a.params["nu_log"], np.float64)))
    return np.broadcast_to(modulus, (a.config.seq_len,) + np.shape(a.carries["re"])[1:])


def output_cotangent(a: Analysis) -> np.ndarray:
    """|∂L/∂h_T| per unit for loss last ``[(B,) H]``: |h_T| (the output leaf)."""
    return np.abs(np.asarray(a.carries[cell_spec(a.config.cell).carry.output][-1], np.float64))


def lru_cotangent(a: Analysis) -> np.ndarray:
    """The LRU's |∂L/∂h_T| per unit: the complex magnitude of (y_T C_reᵀ, −y_T C_imᵀ) with
    y_T = Re(C h_T) + D x_T."""
    p = {k: np.asarray(a.params[k], np.float64) for k in ("C_re", "C_im", "D")}
    re, im = (np.asarray(a.carries[c][-1], np.float64) for c in ("re", "im"))
    x_last = time_major(a, np.asarray(a.inputs, np.float64))[-1]
    y = re @ p["C_re"] - im @ p["C_im"] + x_last @ p["D"]
    return np.hypot(y @ p["C_re"].T, y @ p["C_im"].T)


def diagonal_curve(
    a: Analysis,
    jacobians: Callable[[Analysis], np.ndarray],
    end: Callable[[Analysis], np.ndarray] = output_cotangent,
) -> Overlay | None:
    """Exact ‖∂L/∂h_t‖ for a diagonal-Jacobian cell with loss last: δ_t = (Π_{s>t} D_s) ⊙ δ_T
    with D = ``jacobians(a)`` and |δ_T| = ``end(a)``, summed in log space (so it reaches far
    below float64 too). None for other losses, where every step also feeds the loss."""
    if a.config.loss != "last":
        return None
    with np.errstate(divide="ignore"):
        log_d = np.log10(np.abs(jacobians(a)))  # [T, (B,) H]
        log_end = np.log10(end(a))
    # cumulative from the end: step t needs Σ_{s=t+1..T} log|D_s|
    suffix = np.concatenate([np.cumsum(log_d[::-1], axis=0)[::-1], np.zeros((1,) + log_d.shape[1:])], axis=0)
    with np.errstate(invalid="ignore"):
        per_unit = suffix + log_end  # [T+1, (B,) H]
    curve = log10_combine(per_unit.reshape(per_unit.shape[0], -1), 1)
    return Overlay("closed form: ‖(Π_{s>t} ∂h_s/∂h_{s−1}) ∂L/∂h_T‖ (diagonal Jacobians)", curve)


def diagonal_theory(
    jacobians: Callable[[Analysis], np.ndarray],
    end: Callable[[Analysis], np.ndarray] = output_cotangent,
) -> Callable[[Analysis], Overlay | None]:
    """A ``CellSpec.display.theory`` hook: :func:`diagonal_curve` with this cell's Jacobians and
    final cotangent."""

    def hook(a: Analysis) -> Overlay | None:
        """The closed form of ‖∂L/∂carry_t‖ for the analysis ``a``."""
        return diagonal_curve(a, jacobians, end)

    return hook


#: The diagonal-Jacobian cells' ``Display.theory`` hooks (named by their rows of the cell table).
indrnn_curve = diagonal_theory(indrnn_jacobians)
mingru_curve = diagonal_theory(mingru_jacobians)
minlstm_curve = diagonal_theory(minlstm_jacobians)
lru_curve = diagonal_theory(lru_jacobians, lru_cotangent)


def theory_overlay(a: Analysis) -> Overlay | None:
    """The cell's closed form of ‖∂L/∂carry_t‖ (its spec's ``theory`` hook), or None."""
    hook = cell_spec(a.config.cell).display.theory
    return None if hook is None else hook(a)

"""Post-hoc diagnostics of an :class:`Analysis` in NumPy: theory, verdict, gates, PCA."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from rnnviz.analysis import Analysis

#: max |φ'| of the simple cell's activation (Pascanu et al. 2013's γ).
GAMMA = {"tanh": 1.0, "relu": 1.0, "identity": 1.0}


class Theory(NamedTuple):
    """Pascanu et al. (2013) for the simple cell: h_t = φ(W_h h_{t−1} + …).

    ∂h_t/∂h_{t−1} = diag(φ′)·W_hᵀ, so ‖∂L/∂h_t‖ ≤ (σ₁·γ)^{T−t}·‖∂L/∂h_T‖ for ``loss="last"``:
    σ₁·γ < 1 is sufficient for vanishing; σ₁·γ > 1 is necessary for exploding.
    bound ``[T+1]`` is that curve anchored at t = T (None for other losses).
    """

    sigma1: float
    gamma: float
    bound: np.ndarray | None

    @property
    def product(self) -> float:
        return self.sigma1 * self.gamma


def simple_cell_theory(a: Analysis) -> Theory | None:
    """The theory overlay, for the simple cell only (None otherwise)."""
    cfg = a.config
    if cfg.cell != "simple":
        return None
    w = np.asarray(a.params["h"]["kernel"], dtype=np.float64)
    sigma1 = float(np.linalg.svd(w, compute_uv=False)[0])
    gamma = GAMMA[cfg.activation]
    bound = None
    end = float(a.grad_norms[-1])
    if cfg.loss == "last" and math.isfinite(end):
        lags = np.arange(cfg.seq_len, -1, -1, dtype=np.float64)
        with np.errstate(over="ignore"):
            bound = end * (sigma1 * gamma) ** lags
    return Theory(sigma1, gamma, bound)


class Verdict(NamedTuple):
    kind: str  # "vanishing" | "exploding" | "stable" | "overflow"
    log10_ratio: float  # log10 ‖∂L/∂carry_0‖ / ‖∂L/∂carry_T‖
    text: str


def verdict(a: Analysis) -> Verdict:
    """One line on what the gradient does over the sequence."""
    t_len = a.config.seq_len
    if a.nonfinite_carry_step is not None or a.nonfinite_grad_step is not None:
        where = a.nonfinite_carry_step if a.nonfinite_carry_step is not None else a.nonfinite_grad_step
        what = "the carry" if a.nonfinite_carry_step is not None else "the gradient"
        return Verdict("overflow", math.inf, f"{what} overflows to NaN/Inf at step {where} ({a.config.dtype}): exploding beyond range")
    g0, gt = float(a.grad_norms[0]), float(a.grad_norms[-1])
    if gt <= 0:
        return Verdict("stable", 0.0, "the loss does not depend on the final carry: no gradient to follow")
    if g0 <= 0:
        return Verdict("vanishing", -math.inf, f"gradient is exactly 0 at t=0 after {t_len} steps (underflow): vanishing")
    r = math.log10(g0 / gt)
    kind = "vanishing" if r < -2 else "exploding" if r > 2 else "stable"
    move = "shrinks" if r < 0 else "grows"
    return Verdict(kind, r, f"gradient {move} by a factor 10{_superscript(round(r))} over {t_len} steps back: {kind}")


def _superscript(n: int) -> str:
    return str(n).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


def gate_means(a: Analysis) -> dict[str, np.ndarray]:
    """Mean gate activation per step ``{gate: [T]}`` (over batch and units), recomputed
    from params, carries and inputs: LSTM i, f, o; GRU r, z; MGU f. Empty for simple."""
    cfg = a.config
    gates = {"lstm": ("i", "f", "o"), "gru": ("r", "z"), "mgu": ("f",)}.get(cfg.cell, ())
    if not gates:
        return {}
    p = a.params
    h_prev = np.asarray(a.carries["h"][:-1], dtype=np.float32)  # [T, (B,) H]
    x = np.asarray(a.inputs, dtype=np.float32)
    x = x if cfg.batch_size is None else np.swapaxes(x, 0, 1)  # [T, (B,) I]

    def dense(name: str, inp: np.ndarray) -> np.ndarray:
        out = inp @ np.asarray(p[name]["kernel"], np.float32)
        return out + np.asarray(p[name]["bias"], np.float32) if "bias" in p[name] else out

    out = {}
    for g in gates:
        z = dense(f"i{g}", x) + dense(f"h{g}", h_prev)
        with np.errstate(over="ignore"):
            act = 1.0 / (1.0 + np.exp(-z))
        out[g] = act.reshape(cfg.seq_len, -1).mean(axis=1)
    return out


class Projection(NamedTuple):
    """The carry path projected on its top two principal components.

    coords ``[T+1, 2]``; explained: fraction of variance in each of the two.
    """

    coords: np.ndarray
    explained: np.ndarray


def pca_path(a: Analysis, component: str = "h", example: int = 0) -> Projection:
    """PCA (via SVD of the centred path) of one example's carry component over time."""
    path = np.asarray(a.carries[component], dtype=np.float64)
    if a.config.batch_size is not None:
        path = path[:, example]
    path = np.where(np.isfinite(path), path, 0.0)
    centred = path - path.mean(axis=0, keepdims=True)
    u, s, _ = np.linalg.svd(centred, full_matrices=False)
    k = min(2, s.size)
    coords = np.zeros((path.shape[0], 2))
    coords[:, :k] = u[:, :k] * s[:k]
    total = float(np.sum(s**2))
    explained = np.zeros(2)
    if total > 0:
        explained[:k] = s[:k] ** 2 / total
    return Projection(coords, explained)

"""Post-hoc diagnostics of an :class:`Analysis` in NumPy: theory, verdict, gates, PCA."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from rnnviz.analysis import Analysis
from rnnviz.cells import cell_spec
from rnnviz.norms import log10_combine
from rnnviz.text import superscript

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
        return self.sigma1 * self.gamma

    @property
    def bound(self) -> np.ndarray | None:
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


def theory_overlay(a: Analysis) -> Overlay | None:
    """The cell's closed form of ‖∂L/∂carry_t‖ (its spec's ``theory`` hook), or None."""
    hook = cell_spec(a.config.cell).theory
    return None if hook is None else hook(a)


def pascanu_curve(a: Analysis) -> Overlay | None:
    """Simple cell: the bound (σ₁·γ)^{T−t}·‖∂L/∂h_T‖ (loss last)."""
    th = simple_cell_theory(a)
    if th is None or th.log10_bound is None:
        return None
    return Overlay(f"bound (σ₁·γ)^(T−t)·‖∂L/∂h_T‖, σ₁·γ = {th.product:.3f}", th.log10_bound)


def _time_major(a: Analysis, x: np.ndarray) -> np.ndarray:
    return x if a.config.batch_size is None else np.swapaxes(x, 0, 1)


def _dense(p: dict, name: str, inp: np.ndarray) -> np.ndarray:
    out = inp @ np.asarray(p[name]["kernel"], np.float64)
    return out + np.asarray(p[name]["bias"], np.float64) if "bias" in p[name] else out


def _sigmoid(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-z))


# Per-cell step Jacobians D_t = ∂h_t/∂h_{t−1} ``[T, (B,) H]`` for cells where it is diagonal
# (float64, from params, inputs and the trajectory). Each cell's spec points its theory hook
# at its own function here (``rnnviz.cells``), so there is no dispatch on the cell's name.


def indrnn_jacobians(a: Analysis) -> np.ndarray:
    """u ⊙ φ′(pre-activation), φ′ read off h_t (relu: h_t > 0; tanh: 1 − h_t²; identity: 1)."""
    h = np.asarray(a.carries["h"][1:], np.float64)
    slope = {"relu": (h > 0).astype(np.float64), "tanh": 1.0 - h**2, "identity": np.ones_like(h)}[
        a.config.activation
    ]
    return np.asarray(a.params["u"], np.float64) * slope


def mingru_jacobians(a: Analysis) -> np.ndarray:
    """a·(1 − z_t)."""
    x = _time_major(a, np.asarray(a.inputs, np.float64))
    return float(np.asarray(a.params["a"])) * (1.0 - _sigmoid(_dense(a.params, "iz", x)))


def minlstm_jacobians(a: Analysis) -> np.ndarray:
    """a·f_t / (f_t + i_t)."""
    x = _time_major(a, np.asarray(a.inputs, np.float64))
    f, i = _sigmoid(_dense(a.params, "if", x)), _sigmoid(_dense(a.params, "ii", x))
    return float(np.asarray(a.params["a"])) * f / (f + i)


def lru_jacobians(a: Analysis) -> np.ndarray:
    """|λ| = a·exp(−exp(ν)) per unit: each unit's (re, im) Jacobian is |λ| times a rotation,
    and a rotation keeps norms."""
    modulus = float(np.asarray(a.params["a"])) * np.exp(-np.exp(np.asarray(a.params["nu_log"], np.float64)))
    return np.broadcast_to(modulus, (a.config.seq_len,) + np.shape(a.carries["re"])[1:])


def output_cotangent(a: Analysis) -> np.ndarray:
    """|∂L/∂h_T| per unit for loss last ``[(B,) H]``: |h_T| (the output leaf)."""
    return np.abs(np.asarray(a.carries[cell_spec(a.config.cell).output][-1], np.float64))


def lru_cotangent(a: Analysis) -> np.ndarray:
    """The LRU's |∂L/∂h_T| per unit: the complex magnitude of (y_T C_reᵀ, −y_T C_imᵀ) with
    y_T = Re(C h_T) + D x_T."""
    p = {k: np.asarray(a.params[k], np.float64) for k in ("C_re", "C_im", "D")}
    re, im = (np.asarray(a.carries[c][-1], np.float64) for c in ("re", "im"))
    x_last = _time_major(a, np.asarray(a.inputs, np.float64))[-1]
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


class Verdict(NamedTuple):
    kind: str  # "vanishing" | "exploding" | "stable" | "overflow"
    log10_ratio: float  # log10 ‖∂L/∂carry_0‖ / ‖∂L/∂carry_T‖ (exact magnitudes)
    text: str


def verdict(a: Analysis) -> Verdict:
    """One line on what the gradient does over the sequence, from the exact magnitudes
    (:attr:`Analysis.log10_grad_norms`); it speaks of float32 underflow or overflow only
    as a fact about the float32 values, never as the size of the gradient."""
    cfg = a.config
    t_len = cfg.seq_len
    l0, lt = float(a.log10_grad_norms[0]), float(a.log10_grad_norms[-1])
    if a.nonfinite_carry_step is not None or math.isnan(l0) or l0 == math.inf:
        where = a.nonfinite_carry_step if a.nonfinite_carry_step is not None else a.nonfinite_grad_step
        what = "the carry" if a.nonfinite_carry_step is not None else "the gradient"
        return Verdict(
            "overflow",
            math.inf,
            f"{what} overflows to NaN/Inf at step {where} ({cfg.dtype}): exploding beyond range",
        )
    if lt == -math.inf:
        return Verdict("stable", 0.0, "the loss does not depend on the final carry: no gradient to follow")
    if l0 == -math.inf:
        return Verdict(
            "vanishing",
            -math.inf,
            f"gradient is exactly 0 at t=0: the loss does not depend on the initial carry (no path back through {t_len} steps)",
        )
    r = l0 - lt
    kind = "vanishing" if r < -2 else "exploding" if r > 2 else "stable"
    move = "shrinks" if r < 0 else "grows"
    text = f"gradient {move} by a factor 10{superscript(round(r))} over {t_len} steps back: {kind}"
    return Verdict(kind, r, text + _float_range_note(a))


def _float_range_note(a: Analysis) -> str:
    """What the float32 values (``grad_norms``) could not hold, if anything."""
    g, logs = a.grad_norms, a.log10_grad_norms
    under = np.flatnonzero((g == 0) & np.isfinite(logs))
    over = np.flatnonzero(~np.isfinite(g) & np.isfinite(logs))
    notes = []
    if under.size:
        notes.append(f"underflow to 0 at {under.size} steps, t ≤ {under.max()}")
    if over.size:
        notes.append(f"overflow at {over.size} steps, t ≤ {over.max()}")
    return (
        f" (the {a.config.dtype} values " + "; ".join(notes) + "; the magnitudes are exact)" if notes else ""
    )


def gate_means(a: Analysis) -> dict[str, np.ndarray]:
    """Mean gate activation per step ``{gate: [T]}`` (over batch and units), recomputed
    from params, carries and inputs for the gates the cell spec names (LSTM i, f, o; GRU r,
    z; MGU f; minGRU z; minLSTM f, i): σ of module ``i<g>`` on x_t plus ``h<g>`` on h_{t−1}
    when the cell has one. Empty for cells without gates."""
    cfg = a.config
    gates = cell_spec(cfg.cell).gates
    if not gates:
        return {}
    p = a.params
    h_prev = np.asarray(a.carries[cell_spec(cfg.cell).output][:-1], dtype=np.float64)  # [T, (B,) H]
    x = _time_major(a, np.asarray(a.inputs, dtype=np.float64))  # [T, (B,) I]
    out = {}
    for g in gates:
        z = _dense(p, f"i{g}", x) + (_dense(p, f"h{g}", h_prev) if f"h{g}" in p else 0.0)
        out[g] = _sigmoid(z).reshape(cfg.seq_len, -1).mean(axis=1)
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

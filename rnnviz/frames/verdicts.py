"""Post-hoc diagnostics of an :class:`~rnnviz.analysis.Analysis` in NumPy: the verdict,
gate activations, the PCA path. (The closed forms drawn beside the measured curve are the
cells' own: :mod:`rnnviz.base.theory`; fits of measured curves: :mod:`rnnviz.base.readings`.)"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from rnnviz.base.analysis import Analysis
from rnnviz.base.formatting import superscript
from rnnviz.base.theory import dense, sigmoid, time_major
from rnnviz.tables.cells import cell_spec


class Verdict(NamedTuple):
    """What the gradient does over the sequence: ``kind``, the exact ``log10_ratio`` of the
    first step's gradient to the last's, and the one-line ``text`` shown above the chart."""

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
            "gradient is exactly 0 at t=0: the loss does not depend on the initial carry (no path back "
            f"through {t_len} steps)",
        )
    r = l0 - lt
    kind = "vanishing" if r < -2 else "exploding" if r > 2 else "stable"
    move = "shrinks" if r < 0 else "grows"
    # within two decades (a stable gradient) a rounded power, 10⁰ or 10⁻¹, would hide the change:
    # the factor itself, to two digits
    factor = f"{10**r:.2g}" if abs(r) < 2 else f"10{superscript(round(r))}"
    text = f"gradient {move} by a factor {factor} over {t_len} steps back: {kind}"
    if factor == "1":
        text = f"gradient keeps its size over {t_len} steps back: {kind}"
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
    gates = cell_spec(cfg.cell).display.gates
    if not gates:
        return {}
    p = a.params
    h_prev = np.asarray(a.carries[cell_spec(cfg.cell).carry.output][:-1], dtype=np.float64)  # [T, (B,) H]
    x = time_major(a, np.asarray(a.inputs, dtype=np.float64))  # [T, (B,) I]
    out = {}
    for g in gates:
        z = dense(p, f"i{g}", x) + (dense(p, f"h{g}", h_prev) if f"h{g}" in p else 0.0)
        out[g] = sigmoid(z).reshape(cfg.seq_len, -1).mean(axis=1)
    return out


class Projection(NamedTuple):
    """The carry path projected on its top two principal components.

    coords ``[T+1, 2]``; explained: fraction of variance in each of the two.
    """

    coords: np.ndarray
    explained: np.ndarray


#: Above this many units a path's top singular vectors come from a randomized range finder
#: (a matrix memory at H = 128 has 16 384 entries: the full SVD of a [1001, 16384] path takes
#: seconds in the server, the range finder a fraction of one).
FULL_SVD_MAX_UNITS = 2048


def _leading_singular(centred: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """``(u [T, ≤k'], s [≤k'])``, the leading left singular vectors and values of ``centred``
    ``[T, D]``: the full SVD up to :data:`FULL_SVD_MAX_UNITS` columns, above it a seeded
    randomized range finder (Halko, Martinsson & Tropp 2011: k + 8 directions, 4 power
    iterations), whose leading values agree with the SVD's to float64 rounding on the
    trajectories' fast-decaying spectra."""
    if centred.shape[1] <= FULL_SVD_MAX_UNITS:
        u, s, _ = np.linalg.svd(centred, full_matrices=False)
        return u, s
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(centred @ rng.standard_normal((centred.shape[1], min(k + 8, centred.shape[0]))))
    for _ in range(4):
        q, _ = np.linalg.qr(centred @ (centred.T @ q))
    u_small, s, _ = np.linalg.svd(q.T @ centred, full_matrices=False)
    return q @ u_small, s


def pca_path(a: Analysis, component: str = "h", example: int = 0) -> Projection:
    """PCA (via SVD of the centred path) of one example's carry component over time."""
    path = np.asarray(a.carries[component], dtype=np.float64)
    if a.config.batch_size is not None:
        path = path[:, example]
    path = path.reshape(path.shape[0], -1)  # a matrix memory's entries as one vector per step
    path = np.where(np.isfinite(path), path, 0.0)
    centred = path - path.mean(axis=0, keepdims=True)
    u, s = _leading_singular(centred)
    k = min(2, s.size)
    coords = np.zeros((path.shape[0], 2))
    coords[:, :k] = u[:, :k] * s[:k]
    total = float(np.sum(centred**2))  # ‖C‖_F² = Σ s² over all singular values, not only those found
    explained = np.zeros(2)
    if total > 0:
        explained[:k] = s[:k] ** 2 / total
    return Projection(coords, explained)

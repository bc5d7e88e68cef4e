"""Why gradients vanish or explode: the Lyapunov exponents of a trajectory.

By the chain rule ∂L/∂carry_t = J_{t+1}ᵀ ⋯ J_Tᵀ ∂L/∂carry_T with the step Jacobians
J_t = ∂carry_t/∂carry_{t−1} ``[D, D]`` (D = C·H: every carry component, packed in the
cell spec's order, LSTM ``(c, h)``). How fast that product shrinks or stretches is
measured two ways: the singular values of each J_t (:mod:`rnnviz.studies.jacobians`) and

* :func:`lyapunov`: the k leading Lyapunov exponents by the QR method (Benettin et al.
  1980): k orthonormal tangent directions Q ``[(B,) D, k]`` are pushed through each step
  with ``jax.linearize`` inside the forward ``lax.scan`` (W = J_t·Q) and re-orthonormalised,
  W = Q'R; λ_i = (1/T') Σ_t log|R_ii| over the T' steps after ``warmup``. Every
  ``qr_every`` steps instead of every step is allowed (the QR of a product equals the
  product of the QRs, so the exponents are the same) when the growth over that many
  steps stays inside float32's range; 1 (every step) is the safe default.

A gradient flowing back over k steps is a product of k transposed Jacobians, so its norm
changes by about e^{λ₁k}: λ₁ < 0 means vanishing, λ₁ > 0 exploding.
:func:`decay_fit` measures the slope of ln‖∂L/∂carry_{T−k}‖ over k to set next to λ₁.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rnnviz.analysis import analyze
from rnnviz.base.dynamics import Lyapunov
from rnnviz.base.readings import EDGE_TOLERANCE, DecayFit, decay_fit, regime, zero_crossing
from rnnviz.base.weights import Weights
from rnnviz.config import (
    FLOP_BUDGET,
    REFERENCE_FLOPS_PER_S,
    BudgetError,
    ConfigError,
    RunConfig,
    check_number,
)
from rnnviz.dataset import Dataset
from rnnviz.engine.cells import cell_spec, make_cell
from rnnviz.engine.compile import compile_cache, compile_for
from rnnviz.engine.gradients import full_carry0, time_major
from rnnviz.engine.linalg import tall_qr
from rnnviz.engine.prepare import prepare_executables, prepared_inputs, resolve_device, static_config
from rnnviz.engine.timing import time_within
from rnnviz.studies.jacobians import carry_dim, flat_step, initial_directions, pack, unit_shapes, unpacker
from rnnviz.studies.sweep import compile_points, evaluate_points, grid_points


class LyapunovOptions(NamedTuple):
    """The static choices of a Lyapunov computation (part of the compile key):
    ``k`` exponents, ``warmup`` steps left out of the average, QR every ``qr_every`` steps."""

    k: int
    warmup: int
    qr_every: int = 1

    def point(self, static: RunConfig, key_data: jax.Array, params, carry0, xs, objective=None):
        """One sweep point: the k exponents per example ``[(B,) k]`` (see :mod:`rnnviz.studies.sweep`)."""
        running, covered = qr_pass(static, self, params, carry0, xs, key_data)
        return running[-1] / covered[-1].astype(running.dtype)


def qr_pass(cfg: RunConfig, opts: LyapunovOptions, params, carry0, xs, key_data):
    """The QR method over the configured trajectory.

    ``xs`` batch-first ``[(B,) T, I]``. Returns ``(running [T, (B,) k], covered [T])``:
    ``running[t]`` the float32 sum of log|R_ii| from step ``warmup`` up to the last QR at or
    before t, ``covered[t]`` the number of steps that sum spans (0 before it starts), so
    ``running[t] / covered[t]`` is the running estimate and ``running[-1] / covered[-1]``
    the exponents. The tangents are in the cell's dtype through the step and float32 in
    the QR.
    """
    cell = make_cell(cfg)
    xs_tm = time_major(cfg, xs)
    c0 = full_carry0(cfg, carry0)
    shapes = unit_shapes(cfg)
    v0 = pack(c0, shapes)
    step = flat_step(cell, params, unpacker(c0, shapes))
    dim, k, every, warm = v0.shape[-1], opts.k, opts.qr_every, opts.warmup
    q0 = jnp.broadcast_to(initial_directions(key_data, dim, k), v0.shape + (k,))
    n_steps = xs_tm.shape[0]

    def orthonormalise(w):
        q, r = tall_qr(w)  # LAPACK's is slow for a tall w (engine/linalg.py)
        return q, jnp.log(jnp.abs(jnp.diagonal(r, axis1=-2, axis2=-1)))

    def body(state, inp):
        v, q, total, covered = state
        x, t = inp
        v_next, tangent = jax.linearize(lambda u: step(u, x), v)
        w = jax.vmap(tangent, in_axes=-1, out_axes=-1)(q.astype(v.dtype)).astype(jnp.float32)
        if every == 1:
            do_qr = jnp.bool_(True)
            q_next, logs = orthonormalise(w)
        else:
            do_qr = ((t + 1) % every == 0) | (t == n_steps - 1)
            q_next, logs = jax.lax.cond(
                do_qr, orthonormalise, lambda m: (m, jnp.zeros(m.shape[:-2] + (k,), m.dtype)), w
            )
        counted = do_qr & (t >= warm)
        total = total + jnp.where(counted, logs, 0.0)
        covered = jnp.where(counted, t + 1 - warm, covered)
        return (v_next, q_next, total, covered), (total, covered)

    init = (v0, q0, jnp.zeros(v0.shape[:-1] + (k,), jnp.float32), jnp.int32(0))
    _, (running, covered) = jax.lax.scan(body, init, (xs_tm, jnp.arange(n_steps)))
    return running, covered


@compile_cache(maxsize=32)
def lyapunov_executable(static: RunConfig, opts: LyapunovOptions, device: jax.Device):
    """``(params, carry0, xs, key_data) -> (running [T, (B,) k], covered [T])`` for one shape."""
    params, _ = prepare_executables(static, device)  # not the analysis: only the shapes of (params, carry0)
    xs = jax.ShapeDtypeStruct(static.input_shape, jnp.dtype(static.dtype))
    key = jax.ShapeDtypeStruct((2,), jnp.uint32)
    return compile_for(functools.partial(qr_pass, static, opts), (*params.fn.out_info, xs, key), device)


def lyapunov_flops(cfg: RunConfig, k: int) -> float:
    """FLOPs of the QR method: the forward step plus k tangents through its matmuls
    (``2·B·T·(I + (1 + k)·H)·G·H``, G the spec's matmuls) and a ``[D, k]`` QR per step
    (``4·B·T·D·k²``)."""
    b, t, h, g = cfg.batch_size or 1, cfg.seq_len, cfg.hidden_size, cell_spec(cfg.cell).cost.matmuls
    return 2.0 * b * t * (cfg.input_size + (1 + k) * h) * g * h + 4.0 * b * t * carry_dim(cfg) * k * k


def check_options(cfg: RunConfig, k: int, warmup: int | None, qr_every: int) -> LyapunovOptions:
    """Validated options (``warmup=None``: the first tenth of T, rounded down to a multiple
    of ``qr_every``); a bad value or an over-budget k is a :class:`ConfigError`."""
    dim = carry_dim(cfg)
    k = check_number("k", k, 1, dim, integer=True, note=f"the carry has D = {dim} dimensions")
    qr_every = check_number("qr_every", qr_every, 1, max(1, cfg.seq_len), integer=True, note="T")
    if warmup is None:
        warmup = (cfg.seq_len // 10) // qr_every * qr_every
    warmup = check_number(
        "warmup", warmup, 0, cfg.seq_len - 1, integer=True, note=f"fewer steps than T = {cfg.seq_len}"
    )
    if warmup % qr_every:
        raise ConfigError(
            "warmup",
            warmup,
            f"a multiple of qr_every={qr_every}, so every averaged QR covers only steps after the warm-up",
        )
    flops = lyapunov_flops(cfg, int(k))
    if flops > FLOP_BUDGET:
        fit_k = max((j for j in range(1, int(k)) if lyapunov_flops(cfg, j) <= FLOP_BUDGET), default=0)
        per_step = lyapunov_flops(cfg.replace(seq_len=1), int(k))
        fit_t = int(FLOP_BUDGET // per_step)
        what = f"the largest k that fits is {fit_k}" if fit_k else "not even k = 1 fits"
        raise BudgetError(
            "k",
            k,
            f"{int(k)} tangents need about {flops / 1e12:.1f} TFLOP "
            f"(≈ {flops / REFERENCE_FLOPS_PER_S:.0f} s on a 2-core CPU), over the "
            f"{FLOP_BUDGET / 1e12:g} TFLOP budget; {what}, or seq_len ≤ {fit_t} with k = {int(k)}",
        )
    return LyapunovOptions(int(k), int(warmup), int(qr_every))


def lyapunov(
    cfg: RunConfig,
    k: int = 8,
    warmup: int | None = None,
    qr_every: int = 1,
    *,
    measure_decay: bool = True,
    repeats: int = 1,
    device: jax.Device | None = None,
    data: Dataset | None = None,
    params: Weights | None = None,
) -> Lyapunov:
    r"""The k leading Lyapunov exponents of ``cfg``'s trajectories, by the QR method.

    k orthonormal tangent directions Q are pushed through every step inside the forward
    ``lax.scan`` and re-orthonormalised (Benettin et al. 1980):

    .. math::

        J_t Q_{t-1} = Q_t R^{(t)}, \qquad
        \lambda_i = \frac{1}{T'} \sum_{t > \text{warmup}} \log \big|R^{(t)}_{ii}\big|

    Args:
        cfg: the configuration; every example of its batch is a trajectory.
        k: how many exponents, 1 ≤ k ≤ D (the carry's size).
        warmup: steps that rotate the directions onto the leading ones before the average
            starts (default T/10, a multiple of ``qr_every``).
        qr_every: re-orthonormalise every this many steps (1, every step, is the safe
            default; more is exact while the growth stays inside float32's range).
        measure_decay: also run :func:`rnnviz.analyze` (with the exact log pass) and fit the
            gradient's decay per step, for "predicted (λ₁) vs measured".
        repeats: timed runs.
        device: a concrete JAX device, overriding ``cfg.device``.
        data: drive the trajectories with a batch of this data set drawn by the seed (and
            measure the decay of its task loss's gradient), as :func:`rnnviz.analyze`.
        params: trained weights (``run.weights(step)``), as :func:`rnnviz.analyze`.

    Returns:
        A :class:`Lyapunov`.

    Raises:
        ConfigError: a bad ``k``, ``warmup`` or ``qr_every`` (``BudgetError`` when k
            tangents are over the FLOP budget, naming the largest k that fits).

    Example:
        >>> from rnnviz import RunConfig, lyapunov
        >>> ly = lyapunov(RunConfig(hidden_size=16, seq_len=200, recurrent_gain=0.5), k=2,
        ...               measure_decay=False)
        >>> ly.exponents.shape, bool(ly.lambda1 < 0)  # gain 0.5: ordered, gradients vanish
        ((2,), True)
    """
    opts = check_options(cfg, k, warmup, qr_every)
    device = device or resolve_device(cfg)
    exe = lyapunov_executable(static_config(cfg), opts, device)
    weights = params
    params, carry0, xs = prepared_inputs(cfg, device, data, weights)
    key = jax.device_put(jax.random.key_data(jax.random.key(cfg.seed)), device)
    # no warm-up run: the executable is compiled ahead of time, and a run here can take seconds
    (running, covered), run = time_within(exe.fn, (params, carry0, xs, key), math.inf, repeats)
    running, covered = np.asarray(running, np.float64), np.asarray(covered)
    if cfg.batch_size is None:
        running = running[:, None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(
            covered[:, None, None] > 0, running / np.maximum(covered, 1)[:, None, None], np.nan
        )
    final = estimate[-1]  # [B, k]
    order = np.argsort(-np.nan_to_num(final.mean(0), nan=-np.inf), kind="stable")  # largest first
    decay = None
    if measure_decay:
        decay = decay_fit(
            analyze(cfg, repeats=1, device=device, data=data, params=weights).log10_grad_norms
        )  # exact either way (log pass when needed)
    return Lyapunov(
        cfg,
        opts.k,
        opts.warmup,
        opts.qr_every,
        final.mean(0)[order],
        final.std(0)[order],
        final[:, order],
        estimate[:, :, order],
        decay,
        exe.compile_s,
        run.median_s,
    )


#: |λ₁| below this (per step) reads as "at the edge": e^{±0.001·1000} stays within ×e over 1000 steps.
def lyapunov_sweep(
    cfg: RunConfig,
    over: Mapping[str, Sequence[Any]],
    k: int = 1,
    warmup: int | None = None,
    qr_every: int = 1,
    *,
    data: Dataset | None = None,
    params: Weights | None = None,
) -> pd.DataFrame:
    """The k leading exponents at every combination of ``over``.

    Value fields are evaluated in one vmapped, compiled call per shape (the sweep machinery
    of :mod:`rnnviz.studies.sweep`).

    Args:
        cfg: the base configuration.
        over: ``{field: values}`` as for :func:`rnnviz.sweep`.
        k, warmup, qr_every: as for :func:`lyapunov`.
        data: each point's trajectories on a batch of this data set drawn by its seed.
        params: trained weights at every point (a swept gain scales their recurrence).

    Returns:
        A tidy frame: one column per swept field, then ``exponent`` (1 = λ₁), ``lyapunov``
        (mean over examples) and ``spread`` (standard deviation over examples).

    Raises:
        ConfigError: as :func:`rnnviz.sweep` and :func:`lyapunov`.
    """
    parts = []
    for base, shape_point, points in grid_points(cfg, over):
        opts = check_options(base, k, warmup, qr_every)
        exps = np.asarray(evaluate_points(base, points, opts, data, params), np.float64)  # [N, (B,) k]
        if base.batch_size is None:
            exps = exps[:, None, :]
        exps = -np.sort(-exps, axis=-1)
        for p, e in zip(points, exps):
            row = pd.DataFrame(
                {"exponent": np.arange(1, opts.k + 1), "lyapunov": e.mean(0), "spread": e.std(0)}
            )
            for name, v in reversed(list({**shape_point, **p}.items())):
                row.insert(0, name, v)
            parts.append(row)
    return pd.concat(parts, ignore_index=True)


def compile_lyapunov(
    cfg: RunConfig, k: int = 8, warmup: int | None = None, qr_every: int = 1, device: jax.Device | None = None
) -> bool:
    """Compile what :func:`lyapunov` runs with these arguments, without running it; whether
    it compiled (False: it already was). A server's idle time prepares the Jacobians tab so.

    Example:
        >>> from rnnviz import RunConfig
        >>> cfg = RunConfig(hidden_size=4, seq_len=6)
        >>> compile_lyapunov(cfg, 2), compile_lyapunov(cfg.replace(seed=3), 2)
        (True, False)
    """
    opts = check_options(cfg, k, warmup, qr_every)
    return lyapunov_executable.ensure(static_config(cfg), opts, device or resolve_device(cfg))


def compile_lyapunov_phase(
    cfg: RunConfig, n_points: int, *, data: Dataset | None = None, params: Weights | None = None
) -> bool:
    """Compile what :func:`lyapunov_phase` runs for ``n_points`` gains × seeds, without running
    it; whether it compiled (False: it already was).

    Example:
        >>> from rnnviz import RunConfig
        >>> cfg = RunConfig(hidden_size=4, seq_len=6)
        >>> compile_lyapunov_phase(cfg, 4), compile_lyapunov_phase(cfg, 4)
        (True, False)
    """
    return compile_points(cfg, n_points, check_options(cfg, 1, None, 1), data, params)


def lyapunov_phase(
    cfg: RunConfig,
    gains: Sequence[float],
    seeds: Sequence[int],
    warmup: int | None = None,
    *,
    data: Dataset | None = None,
    params: Weights | None = None,
) -> tuple[pd.DataFrame, float | None]:
    """λ₁ against the recurrent gain (all gains × seeds in one compiled call).

    Returns ``(frame, edge)``: per gain ``lyapunov`` (mean over seeds and examples),
    ``lo``/``hi`` (range over seeds), and the gain where the mean λ₁ crosses 0 (the
    edge of chaos), or None when it does not within the range. ``data``: trajectories on
    batches of this data set (each seed draws its own); ``params``: trained weights, the
    gains then scaling their recurrence (``gain / params.gain``).
    """
    over = {"recurrent_gain": list(gains), "seed": list(seeds)}
    df = lyapunov_sweep(cfg, over, k=1, warmup=warmup, data=data, params=params)
    per = df.groupby("recurrent_gain")["lyapunov"].agg(lyapunov="mean", lo="min", hi="max").reset_index()
    return per, zero_crossing(per["recurrent_gain"], per["lyapunov"])


__all__ = [
    "EDGE_TOLERANCE",
    "compile_lyapunov",
    "compile_lyapunov_phase",
    "initial_directions",
    "DecayFit",
    "Lyapunov",
    "LyapunovOptions",
    "decay_fit",
    "lyapunov",
    "lyapunov_phase",
    "lyapunov_sweep",
    "regime",
    "zero_crossing",
]

"""Why gradients vanish or explode: step Jacobians and the Lyapunov exponents of a trajectory.

By the chain rule ∂L/∂carry_t = J_{t+1}ᵀ ⋯ J_Tᵀ ∂L/∂carry_T with the step Jacobians
J_t = ∂carry_t/∂carry_{t−1} ``[D, D]`` (D = C·H: every carry component, packed in the
cell spec's order, LSTM ``(c, h)``). How fast that product shrinks or stretches is
measured two ways:

* :func:`jacobians`: the top-k singular values σ_i(J_t) of each step, for one example.
  ``method="exact"`` builds J_t with ``jax.jacfwd`` (D forward tangents) and takes its
  SVD; ``"subspace"`` never builds J_t: block power iteration on J_tᵀJ_t with
  Jacobian-vector and vector-Jacobian products (``m = min(D, 2k)`` columns,
  ``iterations`` rounds, then the SVD of the small ``[D, m]`` J_t·V). ``"auto"`` picks
  exact for D ≤ :data:`EXACT_MAX_DIM` (an SVD of a 256×256 matrix costs about as much
  as 256 tangents) and subspace above.
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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from rnnviz.analysis import prepare_executables, prepared_inputs, resolve_device, static_config
from rnnviz.cells import cell_spec, make_cell
from rnnviz.config import FLOP_BUDGET, REFERENCE_FLOPS_PER_S, BudgetError, ConfigError, RunConfig
from rnnviz.gradients import full_carry0, time_major
from rnnviz.linalg import householder_q
from rnnviz.rollout import rollout
from rnnviz.timing import compile_cache, compile_for, time_runs

#: Largest carry size D for which ``method="auto"`` builds each J_t and takes its SVD.
EXACT_MAX_DIM = 256
JACOBIAN_METHODS = ("auto", "exact", "subspace")
#: Salt folded into the seed's key for the initial tangent directions (independent of
#: the params, carry and input keys).
_TANGENT_SALT = 0x1A9


# ---- the carry as one vector ------------------------------------------------------------


def carry_dim(cfg: RunConfig) -> int:
    """D = C·H: the size of the packed carry (LSTM and LRU: 2H, the others H)."""
    return len(cfg.carry_components) * cfg.hidden_size


def pack(carry: Any) -> jax.Array:
    """Carry components ``[(B,) H]`` each → one vector ``[(B,) C·H]``, in the spec's order."""
    return jnp.concatenate(jax.tree.leaves(carry), axis=-1)


def unpacker(carry0: Any) -> Callable[[jax.Array], Any]:
    """The inverse of :func:`pack` for carries shaped like ``carry0``."""
    leaves, treedef = jax.tree.flatten(carry0)
    cuts = list(np.cumsum([leaf.shape[-1] for leaf in leaves])[:-1])
    return lambda v: jax.tree.unflatten(treedef, jnp.split(v, cuts, axis=-1))


def flat_step(cell, params, unpack: Callable) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``(v [(B,) D], x [(B,) I]) -> v'``: one step of ``cell`` on the packed carry."""

    def step(v, x):
        new, _ = cell.apply({"params": params}, unpack(v), x)
        return pack(new).astype(v.dtype)

    return step


def step_jacobian(cfg: RunConfig, params, carry: Any, x: jax.Array) -> jax.Array:
    """J = ∂carry'/∂carry ``[D, D]`` of one step of ``cfg``'s cell at one example's
    ``carry`` (components ``[H]``) and input ``x`` ``[I]`` (rows: outputs, columns: inputs)."""
    step = flat_step(make_cell(cfg), params, unpacker(carry))
    return jax.jacfwd(step)(pack(carry), x)


# ---- Lyapunov exponents: the QR method inside the forward scan --------------------------


class LyapunovOptions(NamedTuple):
    """The static choices of a Lyapunov computation (part of the compile key):
    ``k`` exponents, ``warmup`` steps left out of the average, QR every ``qr_every`` steps."""

    k: int
    warmup: int
    qr_every: int = 1

    def point(self, static: RunConfig, key_data: jax.Array, params, carry0, xs):
        """One sweep point: the k exponents per example ``[(B,) k]`` (see :mod:`rnnviz.sweeps`)."""
        running, covered = qr_pass(static, self, params, carry0, xs, key_data)
        return running[-1] / covered[-1].astype(running.dtype)


def initial_directions(key_data: jax.Array, dim: int, k: int) -> jax.Array:
    """k orthonormal directions ``[D, k]`` drawn from the seed's key (a generic start: not
    aligned with any unit, so every exponent is reached)."""
    key = jax.random.fold_in(jax.random.wrap_key_data(key_data), _TANGENT_SALT)
    # No LAPACK here: this QR would sit beside the scan's with no order between them.
    return householder_q(jax.random.normal(key, (dim, k), jnp.float32))


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
    v0 = pack(c0)
    step = flat_step(cell, params, unpacker(c0))
    dim, k, every, warm = v0.shape[-1], opts.k, opts.qr_every, opts.warmup
    q0 = jnp.broadcast_to(initial_directions(key_data, dim, k), v0.shape + (k,))
    n_steps = xs_tm.shape[0]

    def orthonormalise(w):
        q, r = jnp.linalg.qr(w)
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
    b, t, h, g = cfg.batch_size or 1, cfg.seq_len, cfg.hidden_size, cell_spec(cfg.cell).matmuls
    return 2.0 * b * t * (cfg.input_size + (1 + k) * h) * g * h + 4.0 * b * t * carry_dim(cfg) * k * k


def check_options(cfg: RunConfig, k: int, warmup: int | None, qr_every: int) -> LyapunovOptions:
    """Validated options (``warmup=None``: the first tenth of T, rounded down to a multiple
    of ``qr_every``); a bad value or an over-budget k is a :class:`ConfigError`."""
    dim = carry_dim(cfg)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= dim:
        raise ConfigError("k", k, f"an integer in [1, {dim}] (the carry has D = {dim} dimensions)")
    if (
        isinstance(qr_every, bool)
        or not isinstance(qr_every, (int, np.integer))
        or not 1 <= qr_every <= max(1, cfg.seq_len)
    ):
        raise ConfigError("qr_every", qr_every, f"an integer in [1, {cfg.seq_len}] (T)")
    if warmup is None:
        warmup = (cfg.seq_len // 10) // qr_every * qr_every
    if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or not 0 <= warmup < cfg.seq_len:
        raise ConfigError(
            "warmup", warmup, f"an integer in [0, {cfg.seq_len - 1}] (fewer steps than T = {cfg.seq_len})"
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
            f"{int(k)} tangents need about {flops / 1e12:.1f} TFLOP (≈ {flops / REFERENCE_FLOPS_PER_S:.0f} s on "
            f"a 2-core CPU), over the {FLOP_BUDGET / 1e12:g} TFLOP budget; {what}, or seq_len ≤ {fit_t} with k = {int(k)}",
        )
    return LyapunovOptions(int(k), int(warmup), int(qr_every))


class DecayFit(NamedTuple):
    """The measured side of "predicted vs measured": ``slope`` of ln‖∂L/∂carry_{T−k}‖ per
    step of lag k (least squares over lags ``lag_lo..lag_hi``), ``intercept`` its value at
    k = 0, ``points`` how many lags were fitted."""

    slope: float
    intercept: float
    lag_lo: int
    lag_hi: int
    points: int


def decay_fit(log10_grad_norms: np.ndarray, trim: float = 0.1) -> DecayFit | None:
    """Fit ln‖∂L/∂carry_{T−k}‖ ≈ a + s·k over the lags between ``trim·T`` and ``(1 − trim)·T``.

    ``log10_grad_norms`` ``[T+1]`` (index t, so lag k = T − t; exact, e.g.
    ``Analysis.log10_grad_norms``). The first steps back from T (the loss's own direction
    settling onto the dominant one) and the last (the initial carry's transient) are left
    out. None when fewer than 3 finite points remain.
    """
    logs = np.asarray(log10_grad_norms, np.float64)[::-1] * math.log(10.0)  # index = lag
    t_len = logs.size - 1
    lo, hi = max(1, int(round(trim * t_len))), min(t_len - 1, int(round((1 - trim) * t_len)))
    lags = np.arange(lo, hi + 1)
    y = logs[lo : hi + 1]
    ok = np.isfinite(y)
    if ok.sum() < 3:
        return None
    slope, intercept = np.polyfit(lags[ok], y[ok], 1)
    return DecayFit(float(slope), float(intercept), int(lo), int(hi), int(ok.sum()))


@dataclass(frozen=True, eq=False)
class Lyapunov:
    """The k leading Lyapunov exponents of one configuration's trajectories (natural log
    per step; > 0 stretches, < 0 shrinks).

    exponents ``[k]``: mean over examples, largest first; exponents_spread ``[k]``: their
    standard deviation over examples; example_exponents ``[B, k]``.
    running ``[T, B, k]``: the running estimate after each step (NaN until the first QR
    after the warm-up), so convergence can be seen.
    decay: the measured slope of ln‖∂L/∂carry_{T−k}‖ (:func:`decay_fit`) on the same
    config, or None when not asked for or not fittable.
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
        return float(self.exponents[0])


def lyapunov(
    cfg: RunConfig,
    k: int = 8,
    warmup: int | None = None,
    qr_every: int = 1,
    *,
    measure_decay: bool = True,
    repeats: int = 1,
    device: jax.Device | None = None,
) -> Lyapunov:
    """The k leading Lyapunov exponents of ``cfg``'s trajectories (every example of the
    batch), by the QR method; see the module docstring.

    ``warmup`` steps (default T/10) rotate the directions onto the leading ones before the
    average starts. ``measure_decay`` also runs :func:`rnnviz.analyze` (with the exact
    log pass) and fits the gradient's decay per step, for "predicted (λ₁) vs measured".
    """
    opts = check_options(cfg, k, warmup, qr_every)
    device = device or resolve_device(cfg)
    exe = lyapunov_executable(static_config(cfg), opts, device)
    params, carry0, xs = prepared_inputs(cfg, device)
    key = jax.device_put(jax.random.key_data(jax.random.key(cfg.seed)), device)
    (running, covered), run = time_runs(exe.fn, (params, carry0, xs, key), repeats)
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
        from rnnviz.analysis import analyze

        decay = decay_fit(
            analyze(cfg, repeats=1, device=device).log10_grad_norms
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
EDGE_TOLERANCE = 1e-3


def regime(lambda1: float) -> str:
    """The dynamical regime λ₁ says the trajectory is in, in words."""
    if lambda1 < -EDGE_TOLERANCE:
        return "ordered (λ₁ < 0): every direction shrinks, gradients vanish"
    if lambda1 > EDGE_TOLERANCE:
        return "chaotic (λ₁ > 0): some direction grows, gradients can explode"
    return (
        f"at the edge of chaos (|λ₁| < {EDGE_TOLERANCE:g}): gradients neither vanish nor explode on average"
    )


def lyapunov_sweep(
    cfg: RunConfig,
    over: Mapping[str, Sequence[Any]],
    k: int = 1,
    warmup: int | None = None,
    qr_every: int = 1,
) -> pd.DataFrame:
    """The k leading exponents at every combination of ``over`` (value fields in one
    vmapped, compiled call per shape: the sweep machinery of :mod:`rnnviz.sweeps`).

    Tidy frame: one column per swept field, then ``exponent`` (1 = λ₁), ``lyapunov``
    (mean over examples), ``spread`` (std over examples).
    """
    from rnnviz.sweeps import evaluate_points, grid_points

    parts = []
    for base, shape_point, points in grid_points(cfg, over):
        opts = check_options(base, k, warmup, qr_every)
        exps = np.asarray(evaluate_points(base, points, opts), np.float64)  # [N, (B,) k]
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


def zero_crossing(x: np.ndarray, y: np.ndarray) -> float | None:
    """The first x where y changes sign (linear interpolation), or None."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    for i in range(len(x) - 1):
        if np.isfinite(y[i]) and np.isfinite(y[i + 1]) and (y[i] < 0) != (y[i + 1] < 0):
            return float(x[i] + (x[i + 1] - x[i]) * (-y[i]) / (y[i + 1] - y[i]))
    return None


def lyapunov_phase(
    cfg: RunConfig, gains: Sequence[float], seeds: Sequence[int], warmup: int | None = None
) -> tuple[pd.DataFrame, float | None]:
    """λ₁ against the recurrent gain (all gains × seeds in one compiled call).

    Returns ``(frame, edge)``: per gain ``lyapunov`` (mean over seeds and examples),
    ``lo``/``hi`` (range over seeds), and the gain where the mean λ₁ crosses 0 (the
    edge of chaos), or None when it does not within the range.
    """
    df = lyapunov_sweep(cfg, {"recurrent_gain": list(gains), "seed": list(seeds)}, k=1, warmup=warmup)
    per = df.groupby("recurrent_gain")["lyapunov"].agg(lyapunov="mean", lo="min", hi="max").reset_index()
    return per, zero_crossing(per["recurrent_gain"], per["lyapunov"])


# ---- singular values of each step's Jacobian ----------------------------------------------


@dataclass(frozen=True, eq=False)
class Jacobians:
    """Top-k singular values of the step Jacobians of one example.

    steps ``[S]``: the steps t (1..T) at which J_t = ∂carry_t/∂carry_{t−1} was taken
    (every step, or every ``stride``-th); singular_values ``[S, k]``, largest first.
    method: ``"exact"`` (jacfwd + SVD) or ``"subspace"`` (matrix-free power iteration).
    """

    config: RunConfig
    example: int
    method: str
    stride: int
    steps: np.ndarray
    singular_values: np.ndarray
    compile_s: float
    run_s: float


def _top_singular_exact(step, v, x, k: int):
    return jnp.linalg.svd(jax.jacfwd(step)(v, x), compute_uv=False)[:k]


def _top_singular_subspace(step, v, x, k: int, iterations: int, v0):
    """Block power iteration on JᵀJ with JVPs and VJPs only: J is never formed."""
    _, tangent = jax.linearize(lambda u: step(u, x), v)
    transpose = jax.linear_transpose(tangent, v)
    apply = jax.vmap(tangent, in_axes=-1, out_axes=-1)
    apply_t = jax.vmap(lambda w: transpose(w)[0], in_axes=-1, out_axes=-1)

    def round_(q, _):
        q, _ = jnp.linalg.qr(apply_t(apply(q.astype(v.dtype))).astype(jnp.float32))
        return q, None

    q, _ = jax.lax.scan(round_, v0, None, length=iterations)
    return jnp.linalg.svd(apply(q.astype(v.dtype)).astype(jnp.float32), compute_uv=False)[:k]


def jacobian_pass(
    cfg: RunConfig,
    method: str,
    k: int,
    iterations: int,
    stride: int,
    example: int,
    params,
    carry0,
    xs,
    key_data,
) -> jax.Array:
    """``[S, k]`` top singular values of J_t at t = stride, 2·stride, … ≤ T for one example."""
    cell = make_cell(cfg)
    xs_tm = time_major(cfg, xs)
    carries = rollout(cell, params, full_carry0(cfg, carry0), xs_tm)
    if cfg.batch_size is not None:
        carries = jax.tree.map(lambda c: c[:, example], carries)
        xs_tm = xs_tm[:, example]
    vs = pack(carries)  # [T+1, D]
    step = flat_step(cell, params, unpacker(jax.tree.map(lambda c: c[0], carries)))
    ts = jnp.arange(stride, cfg.seq_len + 1, stride)
    if method == "exact":
        one = lambda t: _top_singular_exact(step, vs[t - 1], xs_tm[t - 1], k)  # noqa: E731
    else:
        m = min(vs.shape[-1], 2 * k)
        v0 = initial_directions(key_data, vs.shape[-1], m)
        one = lambda t: _top_singular_subspace(step, vs[t - 1], xs_tm[t - 1], k, iterations, v0)  # noqa: E731
    # Whole batches of 8 only: lax.map would do a remainder in a separate call beside the
    # loop, two factorisations with no order between them (see rnnviz.hlo); the few padded
    # steps repeat the last one and are dropped.
    n = ts.shape[0]
    padded = jnp.concatenate([ts, jnp.full((-n % 8,), ts[-1], ts.dtype)])
    return jax.lax.map(one, padded, batch_size=8)[:n]


@compile_cache(maxsize=32)
def jacobian_executable(
    static: RunConfig, method: str, k: int, iterations: int, stride: int, example: int, device: jax.Device
):
    params, _ = prepare_executables(static, device)
    xs = jax.ShapeDtypeStruct(static.input_shape, jnp.dtype(static.dtype))
    key = jax.ShapeDtypeStruct((2,), jnp.uint32)
    fn = functools.partial(jacobian_pass, static, method, k, iterations, stride, example)
    return compile_for(fn, (*params.fn.out_info, xs, key), device)


def jacobian_flops(cfg: RunConfig, method: str, k: int, iterations: int, n_steps: int) -> float:
    """Per analysed step: exact ≈ D tangents + a D×D SVD (≈ 10·D³); subspace ≈
    (2·iterations + 1)·2k tangents + their QRs."""
    d, h, g = carry_dim(cfg), cfg.hidden_size, cell_spec(cfg.cell).matmuls
    tangent = 2.0 * (cfg.input_size + h) * g * h
    if method == "exact":
        per = d * tangent + 10.0 * d**3
    else:
        m = min(d, 2 * k)
        per = (2 * iterations + 1) * m * tangent + iterations * 4.0 * d * m * m
    return per * n_steps


def choose_method(dim: int, method: str = "auto") -> str:
    """``"auto"`` → exact for D ≤ :data:`EXACT_MAX_DIM`, subspace above; others unchanged."""
    if method == "auto":
        return "exact" if dim <= EXACT_MAX_DIM else "subspace"
    return method


def jacobians(
    cfg: RunConfig,
    k: int = 8,
    *,
    example: int = 0,
    method: str = "auto",
    iterations: int = 12,
    max_steps: int | None = None,
    device: jax.Device | None = None,
) -> Jacobians:
    """Top-k singular values of each step Jacobian J_t for example ``example``.

    ``method``: ``"exact"`` (``jax.jacfwd`` + SVD), ``"subspace"`` (matrix-free power
    iteration, ``iterations`` rounds) or ``"auto"`` (exact when D ≤ 256). ``max_steps``
    takes J_t at every ``ceil(T / max_steps)``-th step only (the dashboard's cap);
    None: every step.
    """
    dim = carry_dim(cfg)
    if method not in JACOBIAN_METHODS:
        raise ConfigError("method", method, "one of " + ", ".join(JACOBIAN_METHODS))
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= dim:
        raise ConfigError("k", k, f"an integer in [1, {dim}] (the carry has D = {dim} dimensions)")
    n_examples = cfg.batch_size or 1
    if (
        isinstance(example, bool)
        or not isinstance(example, (int, np.integer))
        or not 0 <= example < n_examples
    ):
        raise ConfigError("example", example, f"an integer in [0, {n_examples - 1}]")
    if not isinstance(iterations, (int, np.integer)) or not 1 <= iterations <= 100:
        raise ConfigError("iterations", iterations, "an integer in [1, 100]")
    if max_steps is not None and (not isinstance(max_steps, (int, np.integer)) or max_steps < 1):
        raise ConfigError("max_steps", max_steps, "a positive integer or None")
    method = choose_method(dim, method)
    stride = 1 if max_steps is None else max(1, -(-cfg.seq_len // max_steps))
    n_steps = cfg.seq_len // stride
    flops = jacobian_flops(cfg, method, int(k), int(iterations), n_steps)
    if flops > FLOP_BUDGET:
        per = flops / n_steps
        raise BudgetError(
            "max_steps",
            max_steps,
            f"J_t at {n_steps} steps ({method}) needs about {flops / 1e12:.1f} TFLOP, over the "
            f"{FLOP_BUDGET / 1e12:g} TFLOP budget; at most {int(FLOP_BUDGET // per)} steps fit",
        )
    device = device or resolve_device(cfg)
    exe = jacobian_executable(
        static_config(cfg), method, int(k), int(iterations), stride, int(example), device
    )
    params, carry0, xs = prepared_inputs(cfg, device)
    key = jax.device_put(jax.random.key_data(jax.random.key(cfg.seed)), device)
    start = time.perf_counter()
    sv = np.asarray(jax.block_until_ready(exe.fn(params, carry0, xs, key)), np.float64)
    return Jacobians(
        cfg,
        int(example),
        method,
        stride,
        np.arange(stride, cfg.seq_len + 1, stride),
        sv,
        exe.compile_s,
        time.perf_counter() - start,
    )


__all__ = [
    "DecayFit",
    "Jacobians",
    "Lyapunov",
    "LyapunovOptions",
    "decay_fit",
    "jacobians",
    "lyapunov",
    "lyapunov_phase",
    "lyapunov_sweep",
    "step_jacobian",
]

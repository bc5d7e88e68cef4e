"""The step Jacobians of a trajectory and their singular values.

By the chain rule ∂L/∂carry_t = J_{t+1}ᵀ ⋯ J_Tᵀ ∂L/∂carry_T with the step Jacobians
J_t = ∂carry_t/∂carry_{t−1} ``[D, D]`` (D = C·H: every carry component, packed in the
cell spec's order, LSTM ``(c, h)``).

* :func:`jacobians`: the top-k singular values σ_i(J_t) of each step, for one example.
  ``method="exact"`` builds J_t with ``jax.jacfwd`` (D forward tangents) and takes its
  SVD; ``"subspace"`` never builds J_t: block power iteration on J_tᵀJ_t with
  Jacobian-vector and vector-Jacobian products (``m = min(D, 2k)`` columns,
  ``iterations`` rounds, then the SVD of the small ``[D, m]`` J_t·V). ``"auto"`` picks
  exact for D ≤ :data:`EXACT_MAX_DIM` (an SVD of a 256×256 matrix costs about as much
  as 256 tangents) and subspace above.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.dynamics import EXACT_MAX_DIM, JACOBIAN_METHODS, Jacobians, choose_method
from rnnviz.base.weights import Weights
from rnnviz.config import (
    FLOP_BUDGET,
    MAX_SEQ_LEN,
    BudgetError,
    ConfigError,
    RunConfig,
    check_number,
)
from rnnviz.dataset import Dataset
from rnnviz.engine.cells import cell_spec, make_cell
from rnnviz.engine.compile import compile_cache, compile_for
from rnnviz.engine.gradients import full_carry0, time_major
from rnnviz.engine.linalg import householder_q, tall_qr
from rnnviz.engine.prepare import prepare_executables, prepared_inputs, resolve_device, static_config
from rnnviz.engine.rollout import rollout

#: Salt folded into the seed's key for the initial tangent directions (independent of
#: the params, carry and input keys).
_TANGENT_SALT = 0x1A9
# ---- the carry as one vector ------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def unit_shapes(cfg: RunConfig) -> tuple[tuple[int, ...], ...]:
    """Each carry leaf's shape for one example (no batch axis), in the spec's order:
    ``(H,)`` per component for most cells, a matrix memory's ``(heads, d, d)``, Mamba's
    ``(H, N)``. Read from the cell's ``initialize_carry`` abstractly (nothing is computed)."""
    cell = make_cell(cfg)
    shapes = jax.eval_shape(lambda key: cell.initialize_carry(key, (cfg.input_size,)), jax.random.key(0))
    return tuple(tuple(leaf.shape) for leaf in jax.tree.leaves(shapes))


def carry_dim(cfg: RunConfig) -> int:
    """D: the size of the packed carry, every unit of every component (LSTM and LRU 2H, the
    others H; a matrix memory all its entries: mLSTM heads·d² + heads·d + heads), read from the
    traced cell. :func:`rnnviz.config.carry_size` gives the same D from the cell's spec, without JAX."""
    return sum(int(np.prod(shape)) for shape in unit_shapes(cfg))


def pack(carry: Any, shapes: tuple[tuple[int, ...], ...] | None = None) -> jax.Array:
    """Carry components → one vector ``[…, D]``, in the spec's order: each leaf's unit axes
    (its trailing ``shapes[i]``, default one axis of H) flattened, leading axes (batch, time)
    kept."""
    leaves = jax.tree.leaves(carry)
    if shapes is None:
        return jnp.concatenate(leaves, axis=-1)
    flat = [leaf.reshape(leaf.shape[: leaf.ndim - len(shape)] + (-1,)) for leaf, shape in zip(leaves, shapes)]
    return jnp.concatenate(flat, axis=-1)


class Unpacker:
    """The inverse of :func:`pack` for carries shaped like ``carry0`` with the leaves' unit
    shapes ``shapes`` (default: one axis of units each); ``shapes`` is kept for the packing."""

    def __init__(self, carry0: Any, shapes: tuple[tuple[int, ...], ...] | None = None):
        leaves, self.treedef = jax.tree.flatten(carry0)
        self.shapes = shapes
        units = shapes if shapes is not None else tuple(leaf.shape[-1:] for leaf in leaves)
        self._units = units
        self._cuts = [int(c) for c in np.cumsum([int(np.prod(u)) for u in units])[:-1]]

    def __call__(self, v: jax.Array) -> Any:
        parts = jnp.split(v, self._cuts, axis=-1)
        return jax.tree.unflatten(
            self.treedef, [p.reshape(p.shape[:-1] + tuple(u)) for p, u in zip(parts, self._units)]
        )


def unpacker(carry0: Any, shapes: tuple[tuple[int, ...], ...] | None = None) -> Unpacker:
    """The inverse of :func:`pack` for carries shaped like ``carry0`` (see :class:`Unpacker`)."""
    return Unpacker(carry0, shapes)


def flat_step(cell, params, unpack: Callable) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """``(v [(B,) D], x [(B,) I]) -> v'``: one step of ``cell`` on the packed carry."""
    shapes = getattr(unpack, "shapes", None)

    def step(v, x):
        new, _ = cell.apply({"params": params}, unpack(v), x)
        return pack(new, shapes).astype(v.dtype)

    return step


def step_jacobian(cfg: RunConfig, params, carry: Any, x: jax.Array) -> jax.Array:
    """J = ∂carry'/∂carry ``[D, D]`` of one step of ``cfg``'s cell at one example's
    ``carry`` (components ``[H]``) and input ``x`` ``[I]`` (rows: outputs, columns: inputs)."""
    shapes = unit_shapes(cfg)
    step = flat_step(make_cell(cfg), params, unpacker(carry, shapes))
    return jax.jacfwd(step)(pack(carry, shapes), x)


# ---- Lyapunov exponents: the QR method inside the forward scan --------------------------


def initial_directions(key_data: jax.Array, dim: int, k: int) -> jax.Array:
    """k orthonormal directions ``[D, k]`` drawn from the seed's key (a generic start: not
    aligned with any unit, so every exponent is reached)."""
    key = jax.random.fold_in(jax.random.wrap_key_data(key_data), _TANGENT_SALT)
    # No LAPACK here: this QR would sit beside the scan's with no order between them.
    return householder_q(jax.random.normal(key, (dim, k), jnp.float32))


def _top_singular_exact(step, v, x, k: int):
    # the Jacobian in the cell's dtype, its SVD in float32: LAPACK has none in bfloat16 or float16
    return jnp.linalg.svd(jax.jacfwd(step)(v, x).astype(jnp.float32), compute_uv=False)[:k]


def _top_singular_subspace(step, v, x, k: int, iterations: int, v0):
    """Block power iteration on JᵀJ with JVPs and VJPs only: J is never formed."""
    _, tangent = jax.linearize(lambda u: step(u, x), v)
    transpose = jax.linear_transpose(tangent, v)
    apply = jax.vmap(tangent, in_axes=-1, out_axes=-1)
    apply_t = jax.vmap(lambda w: transpose(w)[0], in_axes=-1, out_axes=-1)

    def round_(q, _):
        q, _ = tall_qr(apply_t(apply(q.astype(v.dtype))).astype(jnp.float32))
        return q, None

    q, _ = jax.lax.scan(round_, v0, None, length=iterations)
    # σ(JQ) = σ(R) for JQ = Q'R: the SVD of a small [m, m] factor, not of the tall [D, m] one
    _, r = tall_qr(apply(q.astype(v.dtype)).astype(jnp.float32))
    return jnp.linalg.svd(r, compute_uv=False)[:k]


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
    ts = jnp.arange(stride, cfg.seq_len + 1, stride)
    return jacobian_pass_at(cfg, method, k, iterations, example, params, carry0, xs, key_data, ts)


def jacobian_pass_at(
    cfg: RunConfig,
    method: str,
    k: int,
    iterations: int,
    example: int,
    params,
    carry0,
    xs,
    key_data,
    ts: jax.Array,
) -> jax.Array:
    """``[S, k]`` top singular values of J_t at the steps ``ts`` ``[S]`` (1 ≤ t ≤ T) for one
    example: :func:`jacobian_pass` at any steps, so that one executable serves every part of
    an interleaved pass (:func:`jacobians`' ``part``)."""
    cell = make_cell(cfg)
    xs_tm = time_major(cfg, xs)
    carries = rollout(cell, params, full_carry0(cfg, carry0), xs_tm)
    if cfg.batch_size is not None:
        carries = jax.tree.map(lambda c: c[:, example], carries)
        xs_tm = xs_tm[:, example]
    shapes = unit_shapes(cfg)
    vs = pack(carries, shapes)  # [T+1, D]
    step = flat_step(cell, params, unpacker(jax.tree.map(lambda c: c[0], carries), shapes))
    if method == "exact":
        one = lambda t: _top_singular_exact(step, vs[t - 1], xs_tm[t - 1], k)  # noqa: E731
    else:
        m = min(vs.shape[-1], 2 * k)
        v0 = initial_directions(key_data, vs.shape[-1], m)
        one = lambda t: _top_singular_subspace(step, vs[t - 1], xs_tm[t - 1], k, iterations, v0)  # noqa: E731
    # Whole batches of 8 only: lax.map would do a remainder in a separate call beside the
    # loop, two factorisations with no order between them (see rnnviz.base.hlo); the few padded
    # steps repeat the last one and are dropped.
    n = ts.shape[0]
    padded = jnp.concatenate([ts, jnp.full((-n % 8,), ts[-1], ts.dtype)])
    return jax.lax.map(one, padded, batch_size=8)[:n]


@compile_cache(maxsize=32)
def jacobian_executable(
    static: RunConfig, method: str, k: int, iterations: int, n_steps: int, example: int, device: jax.Device
):
    """The compiled :func:`jacobian_pass_at` for one shape (cached per argument tuple, 32 kept).

    Args:
        static: the shape-deciding config (:func:`~rnnviz.engine.prepare.static_config`).
        method: ``"exact"`` or ``"subspace"`` (already chosen, not ``"auto"``).
        k: how many singular values per step.
        iterations: power-iteration rounds (subspace only).
        n_steps: how many steps one call takes J_t at (an argument ``ts``).
        example: which example of the batch.
        device: where it runs.

    Returns:
        A :class:`~rnnviz.engine.compile.Compiled` ``(params, carry0, xs, key data [2] uint32,
        ts [n_steps] int32) -> [n_steps, k]``.
    """
    params, _ = prepare_executables(static, device)
    xs = jax.ShapeDtypeStruct(static.input_shape, jnp.dtype(static.dtype))
    key = jax.ShapeDtypeStruct((2,), jnp.uint32)
    ts = jax.ShapeDtypeStruct((n_steps,), jnp.int32)
    fn = functools.partial(jacobian_pass_at, static, method, k, iterations, example)
    return compile_for(fn, (*params.fn.out_info, xs, key, ts), device)


def jacobian_flops(cfg: RunConfig, method: str, k: int, iterations: int, n_steps: int) -> float:
    """Per analysed step: exact ≈ D tangents + a D×D SVD (≈ 10·D³); subspace ≈
    (2·iterations + 1)·2k tangents + their QRs."""
    d, h, g = carry_dim(cfg), cfg.hidden_size, cell_spec(cfg.cell).cost.matmuls
    tangent = 2.0 * (cfg.input_size + h) * g * h
    if method == "exact":
        per = d * tangent + 10.0 * d**3
    else:
        m = min(d, 2 * k)
        per = (2 * iterations + 1) * m * tangent + iterations * 4.0 * d * m * m
    return per * n_steps


def _executable_key(
    cfg: RunConfig,
    k: int,
    example: int,
    method: str,
    iterations: int,
    max_steps: int | None,
    device: jax.Device | None,
    parts: int = 1,
) -> tuple[tuple, int]:
    """``(key, stride)``: the checked arguments of :func:`jacobian_executable` for
    :func:`jacobians`' arguments, and the stride (its validation and FLOP budget: the one
    place both it and :func:`compile_jacobians` read)."""
    dim = carry_dim(cfg)
    if method not in JACOBIAN_METHODS:
        raise ConfigError("method", method, "one of " + ", ".join(JACOBIAN_METHODS))
    k = check_number("k", k, 1, dim, integer=True, note=f"the carry has D = {dim} dimensions")
    n_examples = cfg.batch_size or 1
    example = check_number("example", example, 0, n_examples - 1, integer=True)
    iterations = check_number("iterations", iterations, 1, 100, integer=True)
    max_steps = check_number("max_steps", max_steps, 1, MAX_SEQ_LEN, integer=True, optional=True)
    method = choose_method(dim, method)
    stride = 1 if max_steps is None else max(1, -(-cfg.seq_len // max_steps))
    n_steps = cfg.seq_len // stride
    parts = check_number("parts", parts, 1, n_steps, integer=True, note=f"J_t is taken at {n_steps} steps")
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
    per_call = -(-n_steps // int(parts))  # every part the same size: one executable for all
    return (static_config(cfg), method, int(k), int(iterations), per_call, int(example), device), stride


def part_steps(seq_len: int, stride: int, part: int, parts: int) -> np.ndarray:
    """The steps t one part of an interleaved pass takes J_t at: every ``parts``-th of
    stride, 2·stride, … ≤ T, from the ``part``-th on.

    Example:
        >>> part_steps(10, 1, 0, 3).tolist(), part_steps(10, 1, 2, 3).tolist()
        ([1, 4, 7, 10], [3, 6, 9])
    """
    return np.arange(stride * (1 + part), seq_len + 1, stride * parts)


def compile_jacobians(
    cfg: RunConfig,
    k: int = 8,
    *,
    example: int = 0,
    method: str = "auto",
    iterations: int = 12,
    max_steps: int | None = None,
    device: jax.Device | None = None,
    parts: int = 1,
) -> bool:
    """Compile what :func:`jacobians` runs with these arguments, without running it; whether
    it compiled (False: it already was). A server's idle time prepares the Jacobians tab so.

    Example:
        >>> from rnnviz import RunConfig
        >>> cfg = RunConfig(hidden_size=4, seq_len=6)
        >>> compile_jacobians(cfg, 2), compile_jacobians(cfg.replace(seed=3), 2)
        (True, False)
    """
    key, _ = _executable_key(cfg, k, example, method, iterations, max_steps, device, parts)
    return jacobian_executable.ensure(*key)


def jacobians(
    cfg: RunConfig,
    k: int = 8,
    *,
    example: int = 0,
    method: str = "auto",
    iterations: int = 12,
    max_steps: int | None = None,
    device: jax.Device | None = None,
    data: Dataset | None = None,
    params: Weights | None = None,
    part: int = 0,
    parts: int = 1,
) -> Jacobians:
    """Top-k singular values σ_i(J_t) of each step Jacobian J_t = ∂carry_t/∂carry_{t−1}.

    Args:
        cfg: the configuration.
        k: how many singular values per step, 1 ≤ k ≤ D (the carry's size).
        example: which example of the batch.
        method: ``"exact"`` (``jax.jacfwd`` + SVD), ``"subspace"`` (matrix-free block
            power iteration, ``iterations`` rounds) or ``"auto"`` (exact when D ≤ 256).
        iterations: power-iteration rounds of ``"subspace"`` (1..100).
        max_steps: take J_t at every ``ceil(T / max_steps)``-th step only (the
            dashboard's cap); None: every step.
        device: a concrete JAX device, overriding ``cfg.device``.
        data: along the trajectory of a batch of this data set drawn by the seed
            (:func:`rnnviz.analyze`).
        params: trained weights (``run.weights(step)``), as :func:`rnnviz.analyze`.
        part, parts: one part of the pass in ``parts`` interleaved ones: J_t at every
            ``parts``-th of its steps, from the ``part``-th on (:func:`part_steps`), so that
            a first picture of the whole sequence arrives before the steps between; every
            part runs one executable. Default: the whole pass.

    Returns:
        A :class:`Jacobians` (of the part's steps).

    Raises:
        ConfigError: a bad argument (``BudgetError`` when the steps are over the FLOP
            budget, naming how many fit).

    Example:
        >>> from rnnviz import RunConfig, jacobians
        >>> j = jacobians(RunConfig(cell="lstm", hidden_size=8, seq_len=12), k=3)
        >>> j.method, j.singular_values.shape  # D = 16 (c and h): exact; [T, k]
        ('exact', (12, 3))
    """
    key, stride = _executable_key(cfg, k, example, method, iterations, max_steps, device, parts)
    part = check_number("part", part, 0, int(parts) - 1, integer=True, note=f"one of {parts} parts")
    exe = jacobian_executable(*key)
    _, method, k, _, per_call, example, device = key
    steps = part_steps(cfg.seq_len, stride, int(part), int(parts))
    ts = np.concatenate([steps, np.full(per_call - steps.size, steps[-1])]).astype(np.int32)
    params, carry0, xs = prepared_inputs(cfg, device, data, params)
    key = jax.device_put(jax.random.key_data(jax.random.key(cfg.seed)), device)
    start = time.perf_counter()
    sv = jax.block_until_ready(exe.fn(params, carry0, xs, key, jax.device_put(ts, device)))
    return Jacobians(
        cfg,
        int(example),
        method,
        stride,
        steps,
        np.asarray(sv, np.float64)[: steps.size],  # a shorter part repeats its last step
        exe.compile_s,
        time.perf_counter() - start,
    )


__all__ = [
    "EXACT_MAX_DIM",
    "JACOBIAN_METHODS",
    "Jacobians",
    "carry_dim",
    "choose_method",
    "compile_jacobians",
    "flat_step",
    "initial_directions",
    "jacobian_pass_at",
    "jacobians",
    "pack",
    "part_steps",
    "unit_shapes",
    "Unpacker",
    "step_jacobian",
    "unpacker",
]

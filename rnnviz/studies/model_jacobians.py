r"""The step Jacobians of every recurrent layer of a loaded model, and their top singular values.

For recurrent layer l, with its state s^{(l)} flattened over all its leaves in the family's
order (Mamba's h ``[I·N]``, Mamba-2's h ``[heads·P·N]``, the RG-LRU's h ``[W]``, the mLSTM's
``(C, m, n)``, an LSTM's ``(c, h)``, a GRU's h), the step Jacobian holding the layer's input fixed is

.. math::
    J_t^{(l)} = \frac{∂ s_t^{(l)}}{∂ s_{t−1}^{(l)}}
    = \frac{∂\,\mathrm{layer\_step}(s, \mathrm{inputs}_t^{(l)})}{∂ s}\Big|_{s = s_{t−1}^{(l)}}
    \in ℝ^{D×D},

taken at the trajectory one forward pass runs
(:class:`~rnnviz.engine.blocks.Trajectory`, each family's ``layer_step``). The gradient
reaching s_{t−k} through the state alone is J_{t−k+1}ᵀ ⋯ J_tᵀ times the one at s_t, so
σ₁(J_t) > 1 can grow it and σ₁(J_t) < 1 must shrink it.

Why the family's step and not the state probes: a probe added to the LSTM's c_t reaches h_t
too (h_t reads c_t after the probe), so ∂s_t/∂probe_{t−1} is J_t times a non-identity matrix
there; the step function gives J_t itself for every family, and its cost does not grow with T.

Three ways to the top-k singular values (``method="auto"``: diagonal where the family's
``STATE_IS_DIAGONAL`` says J_t is, else exact up to
:data:`~rnnviz.studies.jacobians.EXACT_MAX_DIM`, as :func:`rnnviz.studies.jacobians.jacobians`
chooses, else krylov):

* ``"diagonal"`` (Mamba, Mamba-2, the RG-LRU: their decays read the layer's input, never its
  state): J_t = diag(d_t) with d_t = J_t 1, one JVP of the step; the singular values are the
  largest |d_t|, exactly, at any D. A crowd of values just below 1 (a Mamba layer's) is no
  harder than any other.
* ``"exact"``: J_t built with ``jax.jacfwd`` (D tangents of one step) and its singular values.
* ``"krylov"`` (larger D: Mamba-130M's D = 1536·16 = 24 576): J_t is never formed. From a
  random orthonormal block Q₀ ``[D, k]``, ``iterations`` products with J_tᵀJ_t (JVPs and VJPs
  of the step) build an orthonormal basis K of the block Krylov space
  span{Q₀, J_tᵀJ_t Q₀, …, (J_tᵀJ_t)^{iterations} Q₀}, one column at a time by Gram–Schmidt
  against all of K, twice, a column dropped where the second pass keeps less than half of
  what the first left (the direction is in K already). The singular values of J_t K, the
  square roots of the eigenvalues of (J_t K)ᵀ(J_t K), are the Ritz values: never above the
  true σ_i, and equal to them once K holds their singular vectors; a J_t with few distinct
  singular values (Mamba-2's, one per head; the mLSTM's) gets there in a few products.
  The whole Krylov space rather than the last block of a power iteration (the bare cells'
  ``"subspace"``): where the top σ's crowd together, as a Mamba layer's do just below 1, the
  power iteration's (σ_{k+1}/σ_i)^{2·iterations} barely moves in 12 rounds, while the Krylov
  space's Chebyshev polynomials separate them far sooner. Even so, a Ritz value then sits
  below σ_i by a part of the crowd's width: more ``iterations`` bring it closer.

Every step's work is ``jax.vmap``\ ped over the chosen steps; one executable per model shape.
The start block's QR is Householder's in plain JAX (:func:`rnnviz.engine.linalg.householder_q`),
and all layers' last factorisations are one stacked SVD: the executable holds a single LAPACK
call, so no two can run at once (:mod:`rnnviz.base.hlo`).

Cost per layer and step: exact, D tangents of one step and a D×D SVD; krylov,
k·(3·iterations + 1) tangents or cotangents of one step and about 4·D·M² multiply-adds of
Gram–Schmidt, M = k·(iterations + 1). Plus one forward pass for the trajectories.
"""

from __future__ import annotations

import functools
import time
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.models import ModelJacobians
from rnnviz.engine.blocks.dispatch import family_of, module_of
from rnnviz.engine.compile import Compiled, compile_cache, compile_for
from rnnviz.engine.linalg import householder_q
from rnnviz.studies.jacobians import EXACT_MAX_DIM, pack, unpacker
from rnnviz.studies.models import Model, check_inputs

#: Steps taken by default, evenly spaced over 1 … T − 1: beyond the one forward pass, the
#: cost does not grow with T.
DEFAULT_STEPS = 16
#: The methods: ``"auto"`` chooses by the family and D (:func:`choose_method`).
METHODS = ("auto", "diagonal", "exact", "krylov")
#: Seed of the Krylov method's start block (a generic start, fixed so that a result can be
#: reproduced).
_START_SEED = 0x1A9
#: A Krylov direction is new where Gram–Schmidt's second pass leaves more than this part of
#: what its first left: it is then orthogonal to the basis to about 2ε (the DGKS test's
#: η = 1/√2 made a little laxer: a lost direction only slows the convergence).
_KEPT = 0.5


def recurrent_layers(module: ModuleType, spec: Any) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """``(layers, unit_shapes)``: the layers with a recurrent state, and each state leaf's shape
    for one example (no batch or time axis), in the leaves' order; every recurrent layer of a
    family has the same state shape."""
    shapes = module.state_shapes(spec, 1, 1)
    layers = tuple(i for i, s in enumerate(shapes) if s is not None)
    units = tuple(leaf.shape[2:] for leaf in jax.tree.leaves(shapes[layers[0]])) if layers else ()
    return layers, units


def chosen_steps(seq_len: int, steps: int | Any | None = None) -> np.ndarray:
    """The positions t at which J_t is taken, each in 1 … T − 1.

    Args:
        seq_len: T.
        steps: None (:data:`DEFAULT_STEPS`), a count n (n evenly spaced positions, fewer when
            T − 1 < n), or the positions themselves.

    Returns:
        ``<int64>[S]``.

    Raises:
        ValueError: a count below 1, or a position outside 1 … T − 1.

    Example:
        >>> chosen_steps(10, 4).tolist(), chosen_steps(100).size, chosen_steps(5, [4, 1]).tolist()
        ([1, 4, 6, 9], 16, [4, 1])
    """
    if seq_len < 2:
        raise ValueError(f"a step Jacobian needs T ≥ 2 positions; got T = {seq_len}")
    if steps is None or isinstance(steps, (int, np.integer)):
        n = DEFAULT_STEPS if steps is None else int(steps)
        if n < 1:
            raise ValueError(f"steps = {n}: at least 1")
        # floor(x + ½) of points at least 1 apart: distinct, where round-half-even may not be
        return np.floor(np.linspace(1, seq_len - 1, min(n, seq_len - 1)) + 0.5).astype(np.int64)
    chosen = np.asarray(steps, np.int64).reshape(-1)
    if chosen.size == 0 or chosen.min() < 1 or chosen.max() > seq_len - 1:
        raise ValueError(f"steps must be positions in 1 … {seq_len - 1}; got {chosen.tolist()}")
    return chosen


def _flat_step(module: ModuleType, spec: Any, params: Any, layer: int, template: Any, units: tuple) -> Any:
    """``(s [D], inputs_t) -> s_t [D]``: layer ``layer``'s step on one example's flattened
    state (``inputs_t`` leaves keep a batch axis of 1)."""
    unpack = unpacker(template, units)

    def step(v: jax.Array, inputs: Any) -> jax.Array:
        state = jax.tree.map(lambda a: a[None], unpack(v))
        new = module.layer_step(spec, params, layer, state, inputs)
        return pack(jax.tree.map(lambda a: a[0], new), units)

    return step


def _add_directions(basis: jax.Array, y: jax.Array, start: jax.Array) -> jax.Array:
    """``basis`` ``[D, M]`` (orthonormal columns before ``start``, zeros from it) with the
    directions of the block y ``[D, m]`` new to it written, orthonormal, into columns
    ``start … start + m − 1``: a zero column for each that adds none."""

    def add(j: jax.Array, basis: jax.Array) -> jax.Array:
        col = jax.lax.dynamic_index_in_dim(y, j, axis=1, keepdims=False)
        # Gram–Schmidt twice: where the second pass keeps most of what the first left, what it
        # keeps is orthogonal to the basis to working precision ("twice is enough", Giraud et
        # al. 2005). Where it keeps little, the first left mostly its own rounding, inside the
        # basis's span (J has fewer distinct singular values than the basis has columns): no
        # new direction, and the rest of this one's Krylov sequence is in the space already.
        col = col - basis @ (basis.T @ col)
        first = jnp.sqrt(jnp.sum(col * col))
        col = col - basis @ (basis.T @ col)
        second = jnp.sqrt(jnp.sum(col * col))
        new = second > _KEPT * first
        col = jnp.where(new, col / jnp.where(new, second, 1), jnp.zeros((), col.dtype))
        return jax.lax.dynamic_update_slice_in_dim(basis, col[:, None], start + j, axis=1)

    return jax.lax.fori_loop(0, y.shape[1], add, basis)


def _krylov_gram(step: Any, v: jax.Array, inputs: Any, iterations: int, q0: jax.Array) -> jax.Array:
    """G = (J K)ᵀ(J K) ``[M, M]``, M = m·(iterations + 1), for J = ∂step/∂v at v and K ``[D, M]``
    an orthonormal basis (zero columns allowed) of span{Q₀, JᵀJ Q₀, …, (JᵀJ)^iterations Q₀}, Q₀ = q0
    ``[D, m]``: JVPs and VJPs only, J never formed. √eig(G) are the Ritz values of J."""
    _, tangent = jax.linearize(lambda u: step(u, inputs), v)
    transpose = jax.linear_transpose(tangent, v)
    apply = jax.vmap(tangent, in_axes=-1, out_axes=-1)
    apply_t = jax.vmap(lambda w: transpose(w)[0], in_axes=-1, out_axes=-1)
    dim, m = q0.shape
    basis = jnp.zeros((dim, m * (iterations + 1)), q0.dtype).at[:, :m].set(q0)

    def grow(i: jax.Array, basis: jax.Array) -> jax.Array:
        block = jax.lax.dynamic_slice_in_dim(basis, i * m, m, axis=1)  # the newest directions
        return _add_directions(basis, apply_t(apply(block)), (i + 1) * m)

    w = apply(jax.lax.fori_loop(0, iterations, grow, basis))
    return w.T @ w


def step_spectra(
    module: ModuleType,
    spec: Any,
    method: str,
    k: int,
    iterations: int,
    params: Any,
    inputs: jax.Array,
    ts: jax.Array,
) -> jax.Array:
    """Top-k singular values ``[R, S, k]`` of every recurrent layer's J_t at the positions ``ts``.

    Args:
        module: the block family (:data:`~rnnviz.engine.blocks.registry.BLOCKS`).
        spec: its sizes (static).
        method: ``"diagonal"``, ``"exact"`` or ``"krylov"`` (static).
        k: singular values per step, at most D (static).
        iterations: products with J_tᵀJ_t of ``"krylov"`` (static).
        params: ``{name: array}``.
        inputs: one example: ``<int32>[1, T]`` tokens or ``<float32>[1, T, I]``.
        ts: ``<int32>[S]`` positions, 1 ≤ t ≤ T − 1.

    Returns:
        ``[R, S, k]``, largest first.
    """
    layers, units = recurrent_layers(module, spec)
    _, trajectories = module.forward(spec, params, inputs, with_states=True)
    factors = []
    for layer in layers:
        states, step_inputs = trajectories[layer]
        step = _flat_step(module, spec, params, layer, states, units)
        prev = pack(jax.tree.map(lambda a: a[0, ts - 1], states), units)  # [S, D]
        xs = jax.tree.map(lambda a: a[0, ts][:, None], step_inputs)  # leaves [S, 1, …]
        if method == "diagonal":
            diagonal = jax.vmap(lambda v, x, f=step: jax.jvp(lambda u: f(u, x), (v,), (jnp.ones_like(v),))[1])
            factors.append(jax.lax.top_k(jnp.abs(diagonal(prev, xs)), k)[0])  # [S, k]
        elif method == "exact":
            factors.append(jax.vmap(jax.jacfwd(step))(prev, xs))  # [S, D, D]
        else:
            q0 = householder_q(
                jax.random.normal(jax.random.key(_START_SEED), (prev.shape[-1], k), prev.dtype)
            )
            gram = functools.partial(_krylov_gram, step, iterations=iterations, q0=q0)
            factors.append(jax.vmap(gram)(prev, xs))  # [S, M, M]
    if method == "diagonal":  # no factorisation: no LAPACK call at all
        return jnp.stack(factors)
    # one stacked SVD: a single LAPACK call in the executable (see the module docstring)
    values = jnp.linalg.svd(jnp.stack(factors), compute_uv=False)[..., :k]
    return values if method == "exact" else jnp.sqrt(values)  # G's eigenvalues are σ²


def _shape_key(model: Model, inputs: np.ndarray, method: str, k: int, iterations: int, n_steps: int) -> tuple:
    """What the executable depends on: the family, sizes, shapes, dtypes, choices and device."""
    params = tuple(sorted((name, v.shape, str(v.dtype)) for name, v in model.params.items()))
    device = next(iter(model.params.values())).devices().pop()
    shape = (inputs.shape, str(inputs.dtype))
    return model.model_type, model.spec, params, shape, method, k, iterations, n_steps, device


@compile_cache(maxsize=8, key=_shape_key)
def _executable(model_type, spec, params, shape, method, k, iterations, n_steps, device) -> Compiled:
    """:func:`step_spectra` compiled for one model shape and choice (:func:`_shape_key`)."""
    fn = functools.partial(step_spectra, module_of(model_type, spec), spec, method, k, iterations)
    stand_ins = {name: jax.ShapeDtypeStruct(s, jnp.dtype(d)) for name, s, d in params}
    args = (
        stand_ins,
        jax.ShapeDtypeStruct(shape[0], jnp.dtype(shape[1])),
        jax.ShapeDtypeStruct((n_steps,), jnp.int32),
    )
    return compile_for(fn, args, device)


def _checked(model: Model, inputs: Any, k: int, example: int, method: str, iterations: int) -> tuple:
    """``(one example [1, T, …], D, method)`` after checking every argument."""
    batch = check_inputs(model, np.atleast_2d(np.asarray(inputs)) if model.vocab_size else np.asarray(inputs))
    if not 0 <= example < batch.shape[0]:
        raise ValueError(f"example {example}; allowed: 0 … {batch.shape[0] - 1}")
    if method not in METHODS:
        raise ValueError(f"method {method!r}; allowed: {', '.join(METHODS)}")
    if iterations < 1:
        raise ValueError(f"iterations = {iterations}: at least 1")
    _, units = recurrent_layers(module_of(model.model_type, model.spec), model.spec)
    dim = sum(int(np.prod(u)) for u in units)
    if units and not 1 <= k <= dim:
        raise ValueError(f"k = {k}; allowed: 1 … {dim} (a layer's state has D = {dim} numbers)")
    module = family_of(model.model_type, model.spec)
    if method == "diagonal" and not module.STATE_IS_DIAGONAL:
        raise ValueError(f"method 'diagonal': a {model.model_type} layer's step Jacobian is not diagonal")
    return batch[example : example + 1], dim, choose_method(dim, method, module.STATE_IS_DIAGONAL)


def choose_method(dim: int, method: str = "auto", diagonal: bool = False) -> str:
    """``"auto"`` → ``"diagonal"`` for a family whose J_t is diagonal, else ``"exact"`` for
    D ≤ :data:`~rnnviz.studies.jacobians.EXACT_MAX_DIM` (its SVD costs about as much as D
    tangents), ``"krylov"`` above; others unchanged."""
    if method == "auto":
        return "diagonal" if diagonal else "exact" if dim <= EXACT_MAX_DIM else "krylov"
    return method


def model_jacobians(
    model: Model,
    inputs: Any,
    k: int = 4,
    steps: int | Any | None = None,
    *,
    example: int = 0,
    method: str = "auto",
    iterations: int = 12,
) -> ModelJacobians:
    """Top-k singular values of each recurrent layer's step Jacobian J_t = ∂s_t/∂s_{t−1}
    (input held fixed) at a few steps of one example, in one compiled pass.

    Args:
        model: from :func:`~rnnviz.studies.models.load_model`.
        inputs: ``<int>[B, T]`` token ids (``[T]`` for one sequence), or for a stack without a
            vocabulary ``<float>[B, T, I]``, as :func:`~rnnviz.studies.models.analyze_model`.
        k: singular values per step, 1 ≤ k ≤ D.
        steps: where J_t is taken (:func:`chosen_steps`): None for 16 evenly spaced positions
            in 1 … T − 1, a count, or the positions.
        example: which sequence of the batch.
        method: ``"diagonal"``, ``"exact"``, ``"krylov"`` or ``"auto"`` (diagonal where the family's
            J_t is, else exact when D ≤ 256): module docstring.
        iterations: products with J_tᵀJ_t of ``"krylov"``: its Krylov space's depth.

    Returns:
        :class:`ModelJacobians`.

    Raises:
        ValueError: inputs of the wrong shape or type, or an argument out of its range.

    Example:
        >>> import numpy as np, rnnviz, torch, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> torch.save(torch.nn.GRU(3, 8, num_layers=2, batch_first=True).state_dict(), f"{folder}/gru.pt")
        >>> j = model_jacobians(rnnviz.load_model(f"{folder}/gru.pt"), np.ones((1, 20, 3), np.float32), k=2)
        >>> j.method, j.layers, j.singular_values.shape  # D = 8: exact; [R, S, k]
        ('exact', (0, 1), (2, 16, 2))
    """
    one, dim, method = _checked(model, inputs, k, example, method, iterations)
    chosen = chosen_steps(one.shape[1], steps)
    layers, _ = recurrent_layers(module_of(model.model_type, model.spec), model.spec)
    if not layers:  # a model of attention layers only: nothing to take
        empty = np.zeros((0, chosen.size, k))
        return ModelJacobians(
            model.model_type, model.source, example, method, 0, (), chosen, empty, np.zeros(0), 0.0, 0.0
        )
    # only the krylov method reads iterations: one executable for any
    key = (model, one, method, int(k), int(iterations) if method == "krylov" else 0, chosen.size)
    fresh = key not in _executable
    compiled = _executable(*key)
    start = time.perf_counter()
    sv = jax.block_until_ready(compiled.fn(model.params, one, chosen.astype(np.int32)))
    run_s = time.perf_counter() - start
    sv = np.asarray(sv, np.float64)
    with np.errstate(divide="ignore"):
        mean_log = np.log(sv[..., 0]).mean(axis=1)
    return ModelJacobians(
        model.model_type,
        model.source,
        int(example),
        method,
        dim,
        layers,
        chosen,
        sv,
        mean_log,
        compiled.compile_s if fresh else 0.0,
        run_s,
    )


__all__ = ["ModelJacobians", "model_jacobians"]

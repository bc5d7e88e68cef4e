"""The log-magnitude reverse pass: ‖∂L/∂carry_t‖ exactly, however far below float32 it is.

An explicit reverse recursion over the trajectory (the same ∂L/∂carry_t as the
zero-perturbation pass of :mod:`rnnviz.engine.gradients`, taken at the carry as handed on)::

    δ_T     = d_T
    δ_{t−1} = J_tᵀ δ_t + d_{t−1}         J_t = ∂carry_t/∂carry_{t−1},  d_t = ∂L/∂carry_t (direct)

``J_tᵀ δ_t`` is applied by the step's VJP inside a reverse ``lax.scan``. δ_t is held as
``δ̂_t · 2^{e_t}``: per example and carry component, δ̂ is rescaled to ``max|δ̂| ∈ [0.5, 1)``
every step and the int32 exponent e carried alongside. Powers of two scale exactly, so
after 5000 steps at gain 0.9 the exponent holds 2⁻⁷⁵⁹ ≈ 10⁻²²⁸ with no rounding of its
own; the float32 rounding is that of one step, not of the whole product. The direct terms
(``loss="all"``) are added at a common exponent, so a term 2¹⁵⁰ times smaller than the
other vanishes as in any float32 sum. A true zero (e.g. ∂L/∂c_T with ``loss="last"``)
keeps exponent :data:`rnnviz.engine.norms.ZERO_EXPONENT`: log₁₀ −∞, told apart from "too small
for float32".

Each step recomputes the cell's forward at ``carry_{t−1}`` for its VJP (the trajectory is
an input), so the pass costs about one cell forward and one carry-only VJP per step.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from rnnviz.engine.cells import Params, outputs
from rnnviz.engine.gradients import loss_from_outputs
from rnnviz.engine.losses import Objective
from rnnviz.engine.norms import ZERO_EXPONENT, Scaled, combine, normalise, pow2_scale, scaled_norm
from rnnviz.engine.rollout import Carry

if TYPE_CHECKING:
    from rnnviz.config import RunConfig


def _units(leaf: jax.Array, batch_dims: int) -> tuple[int, ...]:
    """The axes of one step's leaf that are not the batch's: a component's every unit, so a
    matrix memory ``[(B,) heads, d, d]`` is normalised (and its norm taken, Frobenius) as a
    whole, per example."""
    return tuple(range(batch_dims, leaf.ndim))


def _expand(e: jax.Array, leaf: jax.Array) -> jax.Array:
    """A per-example exponent ``[(B,)]`` broadcastable against ``leaf``."""
    return e.reshape(e.shape + (1,) * (leaf.ndim - e.ndim))


def direct_terms(
    cfg: RunConfig, params: Params, carries: Carry, xs_tm: jax.Array, objective: Objective | None = None
) -> Carry:
    """d_t = ∂L/∂carry_t holding every other carry fixed, each ``[T+1, (B,) H]``: for an
    output leaf h, ``h_T`` at t = T with ``loss="last"``, ``h_t / T`` for t ≥ 1 with
    ``loss="all"``, 0 for the other leaves; through the readout when the cell has one (and
    a data set's readout and loss with ``objective``)."""
    return jax.grad(lambda cs: loss_from_outputs(cfg, outputs(cfg, params, cs, xs_tm), objective))(carries)


def _add_scaled(a_hat, ea, b_hat, eb, batch_dims: int):
    """``a_hat·2^ea + b_hat·2^eb`` renormalised: ``(v̂, e)``; exponents ``[(B,)]``."""
    top = jnp.maximum(ea, eb)
    v = pow2_scale(a_hat, _expand(ea - top, a_hat)) + pow2_scale(b_hat, _expand(eb - top, b_hat))
    v_hat, ev = normalise(v, _units(v, batch_dims))
    return v_hat, jnp.where(ev == ZERO_EXPONENT, ZERO_EXPONENT, top + ev)


def _step_back(cell, params: Params, treedef, state, prev, x_t, d_prev, with_input: bool = False):
    """One step of the reverse recursion: ``((δ̂_{t−1}, e_{t−1}), top, g_x)`` from
    ``state = (δ̂_t, e_t)`` per carry leaf: δ_{t−1} = J_tᵀ δ_t + d_{t−1}, by the step's VJP at
    ``carry_{t−1}`` (``prev``) and x_t, at one exponent ``top`` (J_tᵀ mixes the components);
    with ``with_input`` also x_t's cotangent (∂carry_t/∂x_t)ᵀ δ̂_t, at that exponent."""
    hats, exps = state
    batch_dims = x_t.ndim - 1  # x_t is [(B,) I]
    top = functools.reduce(jnp.maximum, exps)
    u = jax.tree.unflatten(treedef, [pow2_scale(h, _expand(e - top, h)) for h, e in zip(hats, exps)])
    carry_prev = jax.tree.unflatten(treedef, prev)
    if with_input:
        _, vjp = jax.vjp(lambda c, x: cell.apply({"params": params}, c, x)[0], carry_prev, x_t)
        a, gx = vjp(u)
    else:
        _, vjp = jax.vjp(lambda c: cell.apply({"params": params}, c, x_t)[0], carry_prev)
        (a,), gx = vjp(u), None
    new_hats, new_exps = [], []
    for a_leaf, d_leaf in zip(jax.tree.leaves(a), d_prev):
        a_hat, ea = normalise(a_leaf, _units(a_leaf, batch_dims))
        ea = jnp.where(ea == ZERO_EXPONENT, ZERO_EXPONENT, ea + top)
        v_hat, ev = _add_scaled(a_hat, ea, *normalise(d_leaf, _units(d_leaf, batch_dims)), batch_dims)
        new_hats.append(v_hat)
        new_exps.append(ev)
    return (new_hats, new_exps), top, gx


def log_carry_gradients(
    cfg: RunConfig,
    cell,
    params: Params,
    carries: Carry,
    xs_tm: jax.Array,
    direct: Carry | None = None,
    objective: Objective | None = None,
) -> Scaled:
    """‖∂L/∂carry_t‖ per component and example as :class:`Scaled` ``[C, T+1, B]``
    (B = 1 unbatched), from the trajectory ``carries`` (each ``[T+1, (B,) H]``, index 0 the
    initial carry, full batch) and time-major inputs ``xs_tm`` ``[T, (B,) I]``.

    ``direct``: the direct terms d_t of another loss (carry-shaped, e.g. a training task's),
    instead of ``cfg.loss``'s (:func:`direct_terms`); ``objective``: a data set's loss terms.
    Components follow the carry's leaves (Flax order: ``(c, h)`` for the LSTM)."""
    leaves, treedef = jax.tree.flatten(carries)
    d = jax.tree.leaves(direct_terms(cfg, params, carries, xs_tm, objective) if direct is None else direct)
    batch_dims = xs_tm.ndim - 2  # xs_tm is [T, (B,) I]
    start = [normalise(v[-1], _units(v[-1], batch_dims)) for v in d]

    def back(state, inp):
        prev, x_t, d_prev = inp
        new, _, _ = _step_back(cell, params, treedef, state, prev, x_t, d_prev)
        return new, _norms(*new)

    def _norms(hats, exps):
        return [scaled_norm(h, e, _units(h, batch_dims)) for h, e in zip(hats, exps)]

    init = ([s[0] for s in start], [s[1] for s in start])
    inputs = ([c[:-1] for c in leaves], xs_tm, [v[:-1] for v in d])
    _, steps = jax.lax.scan(back, init, inputs, reverse=True)
    last = _norms(*init)
    t1 = xs_tm.shape[0] + 1
    return Scaled(
        *(
            jnp.stack(
                [jnp.concatenate([s[i], end[i][None]], axis=0).reshape(t1, -1) for s, end in zip(steps, last)]
            )
            for i in range(2)
        )
    )


def log_input_gradients(
    cell, params: Params, carries: Carry, xs_tm: jax.Array, direct: Carry, direct_x: jax.Array
) -> Scaled:
    """‖∂s/∂x_t‖ per step and example as :class:`Scaled` ``[T, B]`` (B = 1 unbatched) for a
    scalar s whose direct terms are ``direct`` (carry-shaped ``[T+1, …]``, ∂s/∂carry_t
    holding the others fixed) and ``direct_x`` (``[T, (B,) I]``, ∂s/∂x_t through the outputs
    alone): the recursion of :func:`log_carry_gradients`, where step t's VJP also gives
    x_t's cotangent (∂carry_t/∂x_t)ᵀ δ_t at δ_t's exponent. Exact however small."""
    leaves, treedef = jax.tree.flatten(carries)
    d = jax.tree.leaves(direct)
    batch_dims = xs_tm.ndim - 2  # xs_tm is [T, (B,) I]
    start = [normalise(v[-1], _units(v[-1], batch_dims)) for v in d]
    x_units = (-1,)  # x_t is [(B,) I]

    def back(state, inp):
        prev, x_t, d_prev, dx_t = inp
        new, top, gx = _step_back(cell, params, treedef, state, prev, x_t, d_prev, with_input=True)
        gx_hat, egx = normalise(gx, x_units)
        egx = jnp.where(egx == ZERO_EXPONENT, ZERO_EXPONENT, egx + top)
        x_hat, ex = _add_scaled(gx_hat, egx, *normalise(dx_t, x_units), batch_dims)
        return new, scaled_norm(x_hat, ex, x_units)

    init = ([s[0] for s in start], [s[1] for s in start])
    inputs = ([c[:-1] for c in leaves], xs_tm, [v[:-1] for v in d], direct_x)
    _, norms = jax.lax.scan(back, init, inputs, reverse=True)
    t = xs_tm.shape[0]
    return Scaled(norms.mantissa.reshape(t, -1), norms.exponent.reshape(t, -1))


def reduce_log_norms(per: Scaled) -> tuple[Scaled, Scaled, Scaled]:
    """From ``[C, T+1, B]``: ``(per component [C, T+1], per example [T+1, B], total [T+1])``."""
    comp = combine(per, 2)
    example = combine(per, 0)
    total = combine(comp, 0)
    return comp, example, total

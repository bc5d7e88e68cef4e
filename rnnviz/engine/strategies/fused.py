"""The ``fused`` strategy: what cuDNN and oneDNN do for an RNN, written as a ``jax.custom_vjp``.

A cell with a :class:`~rnnviz.tables.cells.FusedForm` computes each step as::

    z^x_t = x_t W_x + b_x            [(B,) G·H]   all T steps in one GEMM, before the scan
    z^h_t = h_{t−1} W_h + b_h        [(B,) G·H]   the only matrix product inside the scan
    carry_t = pointwise(carry_{t−1}, z^x_t, z^h_t)  (gates, element-wise)

with G gates (LSTM i, f, g, o; GRU r, z, n; MGU f, n; simple 1). The reverse scan only
propagates the carry cotangent — per step one element-wise VJP and one product
``dz^h_t W_hᵀ`` — and stores the gate cotangents ``dz^h, dz^x`` ``[T, (B,) G·H]``. The weight
gradients are then one GEMM each::

    ∂L/∂W_h = Σ_t h_{t−1}ᵀ dz^h_t   as  [T·B, H]ᵀ · [T·B, G·H]

and ``∂L/∂W_x``, ``∂L/∂x`` are the autodiff of the input GEMM — also one GEMM each. Autodiff
of a scan instead does four small products per step (the carry cotangent, and the
accumulation of ∂L/∂W_h, ∂L/∂W_x and ∂L/∂x_t), each too small to use the machine well.

Per-step contributions: with ``dz`` stored, step t's contribution to ∂L/∂W_h is
``A_tᵀ D_t`` (A_t = h_{t−1} ``[B, H]``, D_t = dz^h_t ``[B, G·H]``), whose Frobenius norm is
``sqrt(Σ_{b,b'} (a_b·a_b')(d_b·d_b'))`` — O(T·B²) work and memory instead of the
``[T, P]`` tangents of ``per_step`` (:func:`outer_norms`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.engine.cells import ACTIVATIONS, Params, cell_spec
from rnnviz.engine.norms import pow2_scale, robust_norm
from rnnviz.engine.rollout import Carry, perturbed, split_eps, tree_add, with_first

if TYPE_CHECKING:
    from rnnviz.config import RunConfig


def block_diagonal(blocks: jax.Array) -> jax.Array:
    """``[k·d, k·d]``: the block-diagonal matrix of ``blocks`` ``[k, d, d]`` (zeros elsewhere);
    its VJP reads the diagonal blocks of the cotangent, the gradient of the blocks."""
    k, d, _ = blocks.shape
    eye = jnp.eye(k, dtype=blocks.dtype)
    return jnp.einsum("gab,gh->gahb", blocks, eye).reshape(k * d, k * d)


def weights(
    params: Params, side: str, gates: tuple[str, ...], has_bias: tuple[bool, ...], units: int
) -> tuple[jax.Array, jax.Array]:
    """``(W [in, G·H], b [G·H])``: the kernels of modules ``<side><gate>`` side by side (the
    layout Flax's ``OptimizedLSTMCell`` uses; a kernel stored as diagonal blocks
    ``[k, d, d]`` as its block-diagonal matrix), and their biases (zeros where a module has none)."""
    kernels = [params[side + g]["kernel"] for g in gates]
    kernels = [block_diagonal(w) if w.ndim == 3 else w for w in kernels]
    biases = [
        params[side + g]["bias"] if b else jnp.zeros((units,), kernels[0].dtype)
        for g, b in zip(gates, has_bias)
    ]
    return jnp.concatenate(kernels, axis=-1), jnp.concatenate(biases, axis=-1)


class _Static(NamedTuple):
    """What the custom VJP closes over (hashable): the cell's step maths and its reverse."""

    pointwise: Callable
    step: Callable | None
    backward: Callable | None
    activation: str
    hidden_leaf: int
    additive: tuple[bool, ...]


def _add_bias(z: jax.Array, b: jax.Array) -> jax.Array:
    return z + b.reshape((1,) * (z.ndim - 1) + (-1,))  # as Flax's Dense: explicit rank


def _split(z: jax.Array, gates: int) -> tuple[jax.Array, ...]:
    return tuple(jnp.split(z, gates, axis=-1))


def _with_hidden(carry: Carry, idx: int, fn: Callable[[jax.Array], jax.Array]) -> Carry:
    leaves, tree = jax.tree.flatten(carry)
    leaves[idx] = fn(leaves[idx])
    return jax.tree.unflatten(tree, leaves)


def _cell_step(st: _Static, carry, zx_t, zh, act):
    """``(new carry, residuals)``: the form's own step, or ``pointwise`` keeping ``z^h``."""
    if st.step is not None:
        return st.step(carry, zx_t, zh, act)
    return st.pointwise(carry, zx_t, zh, act), zh


def _cell_backward(st: _Static, res, c_prev, zx_t, g, act):
    """``(∂L/∂carry_{t−1} except through W_h, dz^x, dz^h)`` from the cotangent ``g`` of
    carry_t: the form's hand-written reverse (its saved gate activations, a handful of
    element-wise products: on CPU the reverse loop's cost is its operation count), or the
    VJP of ``pointwise`` recomputed from the saved ``z^h``."""
    if st.backward is not None:
        return st.backward(res, c_prev, g, act)
    _, vjp = jax.vjp(lambda c, a, b: st.pointwise(c, a, b, act), c_prev, zx_t, res)
    return vjp(g)


def _forward(st: _Static, w_h, b_h, zx, first, eps, ezh):
    gates = len(zx)
    act = ACTIVATIONS[st.activation]

    def step(carry, inp):
        zx_t, e_t, ezh_t = inp
        h = jax.tree.leaves(carry)[st.hidden_leaf]
        zh = _split(_add_bias(jnp.dot(h, w_h), b_h), gates)
        if ezh_t is not None:  # None when nobody asks for dz^h (training, plain gradients)
            zh = tuple(z + e for z, e in zip(zh, ezh_t))
        new, res = _cell_step(st, carry, zx_t, zh, act)
        new = perturbed(new, e_t)
        return new, (new, res)

    _, (carries, res) = jax.lax.scan(step, first, (zx, eps, ezh))
    return carries, res


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def fused_scan(st: _Static, w_h, b_h, zx, first, eps, ezh):
    """carries ``[T, (B,) H]`` per leaf (after each step, ``eps[t]`` added) from the
    projected inputs ``zx`` (G arrays ``[T, (B,) H]``, one per gate); ``ezh`` (G zero arrays
    of the same shape) is added to ``z^h_t`` so that its cotangent is the gate cotangent ``dz^h_t``.
    ``eps`` and ``ezh`` may be None: nothing added, no cotangent computed.

    The gates travel as separate arrays, not one ``[…, G·H]`` block: XLA on CPU runs the
    element-wise step slower when it slices the gates out of a scanned block."""
    return _forward(st, w_h, b_h, zx, first, eps, ezh)[0]


def _fused_fwd(st, w_h, b_h, zx, first, eps, ezh):
    carries, res = _forward(st, w_h, b_h, zx, first, eps, ezh)
    # eps and ezh travel only as "present or not" (an empty tuple or None: pytree structure,
    # no data); their values are never needed again.
    present = (None if eps is None else (), None if ezh is None else ())
    return carries, (w_h, first, carries, zx if st.backward is None else None, res, present)


def _fused_bwd(st, res_all, g_carries):
    w_h, first, carries, zx, res, (has_eps, has_ezh) = res_all
    prev = jax.tree.map(lambda c0, cs: jnp.concatenate([c0[None], cs[:-1]], axis=0), first, carries)
    act = ACTIVATIONS[st.activation]
    w_ht = w_h.T

    def step(g_next, inp):
        g_t, c_prev, zx_t, res_t = inp
        g = tree_add(g_t, g_next)  # the whole cotangent of carry_t (also ∂L/∂eps_t)
        d_prev, dzx, dzh = _cell_backward(st, res_t, c_prev, zx_t, g, act)
        d_prev = _with_hidden(
            d_prev, st.hidden_leaf, lambda d: d + jnp.dot(jnp.concatenate(dzh, -1), w_ht).astype(d.dtype)
        )
        return d_prev, (g if keep_g else None, tuple(d for d, same in zip(dzx, st.additive) if not same), dzh)

    keep_g = has_eps is not None  # ∂L/∂eps_t = g_t: only written out when there are eps
    zeros = jax.tree.map(jnp.zeros_like, first)
    g_first, (g_eps, own, dzh) = jax.lax.scan(step, zeros, (g_carries, prev, zx, res), reverse=True)
    rest = iter(own)
    dzx = tuple(dh if same else next(rest) for dh, same in zip(dzh, st.additive))
    h_prev = jax.tree.leaves(prev)[st.hidden_leaf]
    # The deferred weight gradient: one [T·B, H]ᵀ·[T·B, H] GEMM per gate, accumulated in float32.
    a = h_prev.reshape(-1, h_prev.shape[-1]).T
    g_w = jnp.concatenate(
        [jnp.dot(a, d.reshape(-1, d.shape[-1]), preferred_element_type=jnp.float32) for d in dzh], -1
    )
    g_b = jnp.concatenate([jnp.sum(d.reshape(-1, d.shape[-1]), axis=0, dtype=jnp.float32) for d in dzh])
    return (
        g_w.astype(w_h.dtype),
        g_b.astype(w_h.dtype),
        dzx,
        g_first,
        g_eps,
        dzh if has_ezh is not None else None,
    )


fused_scan.defvjp(_fused_fwd, _fused_bwd)


class Taps(NamedTuple):
    """Zero perturbations of the gate pre-activations, G arrays ``[T, (B,) H]`` per side:
    their cotangents are ``dz^x`` and ``dz^h``, what the per-step contribution norms are made of."""

    zx: tuple[jax.Array, ...]
    zh: tuple[jax.Array, ...]


def taps(cfg: RunConfig, xs: jax.Array) -> Taps:
    """Zeros shaped like the gate pre-activations of time-major ``xs`` ``[T, (B,) I]``."""
    form = cell_spec(cfg.cell).forms.fused
    z = jnp.zeros(xs.shape[:-1] + (cfg.hidden_size,), xs.dtype)
    return Taps((z,) * len(form.gates), (z,) * len(form.gates))


def fused_rollout(
    cfg: RunConfig,
    params: Params,
    carry0: Carry,
    xs: jax.Array,
    eps: Carry | None = None,
    tap: Taps | None = None,
) -> Carry:
    """Like :func:`rnnviz.engine.rollout.rollout` (carries ``[T+1, (B,) H]`` per leaf, ``eps`` added to
    the carry handed on at every step), with the input GEMM hoisted and the custom VJP."""
    form = cell_spec(cfg.cell).forms.fused
    h = cfg.hidden_size
    w_x, b_x = weights(params, "i", form.names, form.input_bias, h)
    w_h, b_h = weights(params, "h", form.names, form.hidden_bias, h)
    zx = _split(_add_bias(jnp.dot(xs, w_x), b_x), len(form.gates))
    if tap is not None:
        zx = tuple(z + e for z, e in zip(zx, tap.zx))
    first, rest = split_eps(carry0, eps)
    st = _Static(
        form.pointwise,
        form.step,
        form.backward,
        cfg.activation,
        cfg.carry_components.index(form.hidden),
        form.additive,
    )
    carries = fused_scan(st, w_h, b_h, zx, first, rest, None if tap is None else tap.zh)
    return with_first(first, carries)


def outer_norms(a: jax.Array, d: jax.Array, blocks: int = 1) -> jax.Array:
    """``[T]``: ‖A_tᵀ D_t‖_F for A ``[T, (B,) m]``, D ``[T, (B,) n]`` without forming the
    ``[m, n]`` products: ``sqrt(Σ_{b,b'} (a_b·a_b')(d_b·d_b'))`` (unbatched: ‖a_t‖·‖d_t‖).

    With ``blocks`` = k > 1, the norm of the block-diagonal part only (the gradient of
    block-diagonal kernels): A's m columns are k heads, D's n columns are gates of k heads
    each (gate-major), and the sum above runs per head, ``Σ_g Σ_{b,b'} (a_bg·a_b'g)(d_bg·d_b'g)``.

    Each factor is scaled by a power of two near its max first, so gradients of 1e-30
    neither underflow in the squares nor lose the scale."""
    a = a.astype(jnp.float32)
    d = d.astype(jnp.float32)
    lead = a.shape[:-1]
    a = a.reshape(lead + (blocks, a.shape[-1] // blocks))  # [T, (B,) k, m/k]
    if blocks == 1:
        d = d[..., None, :]
    else:  # gate-major columns [G, k, m/k] → per head [k, G·m/k]
        gates = d.shape[-1] // a.shape[-2] // a.shape[-1]
        d = jnp.moveaxis(d.reshape(lead + (gates, blocks, a.shape[-1])), -3, -2).reshape(lead + (blocks, -1))
    if len(lead) == 1:  # unbatched: Σ_g ‖a_g‖²‖d_g‖²
        return robust_norm(robust_norm(a, 2) * robust_norm(d, 2), 1)
    ea = _exponent(a)
    ed = _exponent(d)
    a_hat = pow2_scale(a, -ea[:, None, None, None])
    d_hat = pow2_scale(d, -ed[:, None, None, None])
    ga = jnp.einsum("tbgm,tcgm->tgbc", a_hat, a_hat)
    gd = jnp.einsum("tbgn,tcgn->tgbc", d_hat, d_hat)
    s = jnp.sqrt(jnp.maximum(jnp.sum(ga * gd, axis=(1, 2, 3)), 0.0))
    return pow2_scale(s, ea + ed)


def _exponent(x: jax.Array) -> jax.Array:
    m = jnp.max(jnp.abs(x), axis=tuple(range(1, x.ndim)))
    return jnp.where((m > 0) & jnp.isfinite(m), jnp.frexp(m)[1], 0)


def group_norms(
    cfg: RunConfig, carries: Carry, xs: jax.Array, dzx: tuple[jax.Array, ...], dzh: tuple[jax.Array, ...]
) -> jax.Array:
    """``[T, 3]``: the norm of step t's contribution to the recurrent kernels (W_h), the input
    kernels (W_x) and the biases — the columns of :data:`rnnviz.engine.cells.PARAM_GROUPS` —
    from the gate cotangents the fused reverse pass stored."""
    form = cell_spec(cfg.cell).forms.fused
    h_prev = jax.tree.leaves(carries)[cfg.carry_components.index(form.hidden)][:-1]
    blocks = form.hidden_blocks(cfg.hidden_size) if form.hidden_blocks is not None else 1
    rec = outer_norms(h_prev, jnp.concatenate(dzh, -1), blocks)
    inp = outer_norms(xs, jnp.concatenate(dzx, -1))
    batch_axes = tuple(range(1, dzx[0].ndim - 1))
    with_bias = [d for d, b in zip(dzx, form.input_bias) if b] + [
        d for d, b in zip(dzh, form.hidden_bias) if b
    ]
    bias = robust_norm(
        jnp.concatenate([jnp.sum(d.astype(jnp.float32), axis=batch_axes) for d in with_bias], -1), 1
    )
    return jnp.stack([rec, inp, bias], axis=1)

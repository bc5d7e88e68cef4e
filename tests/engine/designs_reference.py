"""Independent references for the modern cells of rnnviz.engine.cells.{rglru, xlstm, mamba, deltanet}:
plain per-step functions written from each paper's equations, in float32, taking the cells' own
params dicts (structure read from the shapes). They import nothing from rnnviz.

Each ``<cell>(params, carry, x) -> (carry, y)`` is one step; :func:`loop` runs one over a
sequence in a Python loop. Where a cell computes something in a rearranged form, the reference
writes the paper's form (DeltaNet's S (I − β k kᵀ) with the identity matrix; the xLSTM cells one
head at a time; Mamba's einsums as selective_scan_ref's).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

F32 = jnp.float32


def _f32(tree):
    return jax.tree.map(lambda a: jnp.asarray(a, F32), tree)


def _lin(p, x):
    """x @ W (+ b), with b broadcast explicitly (the tests run with rank promotion off)."""
    y = jnp.einsum("...i,ij->...j", x, p["kernel"])
    return y + jnp.broadcast_to(p["bias"], y.shape) if "bias" in p else y


def _sigmoid(z):
    return 1.0 / (1.0 + jnp.exp(-z))


def _softplus(z):
    return jnp.logaddexp(z, 0.0)


def _log_sigmoid(z):
    return -jnp.logaddexp(0.0, -z)


#: LLVM at -O0 for the tests' executables: compiling, not running, is what these tests spend
#: their time on (-O0 halves it); the HLO, and so the arithmetic, is the same.
FAST_COMPILE = {"xla_backend_optimization_level": 0}


def jit(fun):
    """``jax.jit`` with :data:`FAST_COMPILE`."""
    return jax.jit(fun, compiler_options=FAST_COMPILE)


_jitted = functools.cache(jit)


def loop(step, params, carry, xs):
    """Run ``step`` over ``xs`` ``[T, ...]`` in a Python loop: (every carry stacked ``[T, ...]``, ys).

    Each step is jitted (compiled once per step function and shapes, called T times): the loop
    stays Python's, without eager dispatch of every op.
    """
    step = _jitted(step)
    carries, ys = [], []
    for t in range(xs.shape[0]):
        carry, y = step(params, carry, xs[t])
        carries.append(carry)
        ys.append(y)
    return jax.tree.map(lambda *c: np.stack(c), *carries), np.stack(ys)


def loop_gradients(step, params, carry, xs, w_y, w_c):
    """The loop of :func:`loop` and the gradient of L = Σ_t ⟨w_y[t], y_t⟩ + ⟨w_c, carry_T⟩ through it,
    by backpropagation through time written out: a forward Python loop, then the backward one,

        (∂L/∂θ)_t, ∂L/∂carry_{t−1} = VJP of step_t at (∂L/∂carry_t, w_y[t]),   ∂L/∂θ = Σ_t (∂L/∂θ)_t,

    each step's vector-Jacobian product from ``jax.vjp`` of the reference step, summed in NumPy.
    One compiled function (the step, its outputs and its VJP) serves both loops.
    Returns (carries ``[T, …]``, ys ``[T, …]``, ∂L/∂params, ∂L/∂carry_0), NumPy.
    """
    both = _step_and_vjp(step)
    zero_carry = jax.tree.map(np.zeros_like, carry)
    carries, ys = [carry], []
    for t in range(xs.shape[0]):
        new, y, _ = both(params, carries[-1], xs[t], (zero_carry, np.zeros_like(w_y[t])))
        carries.append(new)
        ys.append(y)
    grad_params = jax.tree.map(lambda p: np.zeros(np.shape(p)), params)
    grad_carry = w_c
    for t in reversed(range(xs.shape[0])):
        _, _, (g_params, grad_carry) = both(params, carries[t], xs[t], (grad_carry, w_y[t]))
        grad_params = jax.tree.map(lambda a, g: a + np.asarray(g), grad_params, g_params)
    stacked = jax.tree.map(lambda *c: np.stack(c), *carries[1:])
    return stacked, np.stack(ys), grad_params, jax.tree.map(np.asarray, grad_carry)


@functools.cache
def _step_and_vjp(step):
    def both(params, carry, x, cotangent):
        (new, y), vjp = jax.vjp(step, params, carry, x)
        return new, y, vjp(cotangent)[:2]

    return jit(both)


# ---- RG-LRU (De et al. 2024, eqs. 1–4) -------------------------------------------------------


def _sqrt_with_bounded_vjp(max_gradient):
    """√u with its VJP taken at max(u, 1/(4M²)): recurrentgemma's sqrt_bound_derivative, as a custom_vjp."""

    @jax.custom_vjp
    def f(u):
        return jnp.sqrt(u)

    def fwd(u):
        return jnp.sqrt(u), u

    def bwd(u, g):
        return (g * 0.5 / jnp.sqrt(jnp.maximum(u, 1.0 / (4.0 * max_gradient**2))),)

    f.defvjp(fwd, bwd)
    return f


def rglru(params, h, x, c=8.0, bounded=True, max_gradient=1000.0):
    """h_t = a_t h + √(1 − a_t²)(i_t x̃), ln a_t = −c r_t softplus(Λ); x̃ = in_proj(x); y = h."""
    p, h, x = _f32(params), jnp.asarray(h, F32), jnp.asarray(x, F32)
    xt = _lin(p["in_proj"], x)
    r = _sigmoid(_lin(p["a_gate"], xt))
    i = _sigmoid(_lin(p["input_gate"], xt))
    log_a = -c * r * jnp.broadcast_to(_softplus(p["a_param"]), r.shape)
    u = 1.0 - jnp.exp(2.0 * log_a)
    root = _sqrt_with_bounded_vjp(max_gradient)(u) if bounded else jnp.sqrt(u)
    h = jnp.exp(log_a) * h + root * (i * xt)
    return h, h


def rglru_log_a(params, x, c=8.0):
    p, x = _f32(params), jnp.asarray(x, F32)
    r = _sigmoid(_lin(p["a_gate"], _lin(p["in_proj"], x)))
    return -c * r * jnp.broadcast_to(_softplus(p["a_param"]), r.shape)


# ---- sLSTM (Beck et al. 2024, eqs. 8–17, stabilised by eqs. 15–17) ---------------------------


def _slstm_preacts(p, h, x):
    heads, d, _ = p["hi"]["kernel"].shape
    out = {}
    for g in "ifzo":
        blocks = [h[..., j * d : (j + 1) * d] @ p["h" + g]["kernel"][j] for j in range(heads)]
        out[g] = _lin(p["i" + g], x) + jnp.concatenate(blocks, axis=-1)
    return out


def slstm(params, carry, x, exponential_forget=False):
    """The stabilised sLSTM step, carry (c, n, m, h); y = h."""
    p, (c, n, m, h), x = _f32(params), _f32(carry), jnp.asarray(x, F32)
    g = _slstm_preacts(p, h, x)
    log_f = g["f"] if exponential_forget else _log_sigmoid(g["f"])
    m_new = jnp.maximum(log_f + m, g["i"])
    i_p, f_p = jnp.exp(g["i"] - m_new), jnp.exp(log_f + m - m_new)
    c = f_p * c + i_p * jnp.tanh(g["z"])
    n = f_p * n + i_p
    h = _sigmoid(g["o"]) * c / n
    return (c, n, m_new, h), h


def slstm_unstabilised(params, carry, x, exponential_forget=False):
    """The paper's sLSTM without a stabiliser: carry (c, n, h), i = exp(ĩ), f = σ(f̃) or exp(f̃)."""
    p, (c, n, h), x = _f32(params), _f32(carry), jnp.asarray(x, F32)
    g = _slstm_preacts(p, h, x)
    f = jnp.exp(g["f"]) if exponential_forget else _sigmoid(g["f"])
    i = jnp.exp(g["i"])
    c = f * c + i * jnp.tanh(g["z"])
    n = f * n + i
    h = _sigmoid(g["o"]) * c / n
    return (c, n, h), h


# ---- mLSTM (Beck et al. 2024, eqs. 19–27) ---------------------------------------------------


def _mlstm_inputs(p, x):
    heads = p["igate"]["kernel"].shape[-1]
    d = p["q"]["kernel"].shape[-1] // heads
    q, k, v = (_lin(p[name], x) for name in "qkv")
    split = [slice(j * d, (j + 1) * d) for j in range(heads)]
    qs = [q[..., s] for s in split]
    ks = [k[..., s] / math.sqrt(d) for s in split]
    vs = [v[..., s] for s in split]
    return heads, qs, ks, vs, _lin(p["igate"], x), _lin(p["fgate"], x)


def mlstm(params, carry, x, eps=0.0):
    """The stabilised mLSTM step, one head at a time; C [.., heads, d_v, d_k] = Σ v kᵀ."""
    p, (C, n, m), x = _f32(params), _f32(carry), jnp.asarray(x, F32)
    heads, qs, ks, vs, i_raw, f_raw = _mlstm_inputs(p, x)
    Cs, ns, ms, hs = [], [], [], []
    for j in range(heads):
        log_f, i_j, m_j = _log_sigmoid(f_raw[..., j]), i_raw[..., j], m[..., j]
        m_new = jnp.maximum(log_f + m_j, i_j)
        f_p, i_p = jnp.exp(log_f + m_j - m_new), jnp.exp(i_j - m_new)
        C_j = f_p[..., None, None] * C[..., j, :, :] + i_p[..., None, None] * jnp.einsum(
            "...a,...b->...ab", vs[j], ks[j]
        )
        n_j = f_p[..., None] * n[..., j, :] + i_p[..., None] * ks[j]
        den = jnp.maximum(jnp.abs(jnp.sum(n_j * qs[j], axis=-1)), jnp.exp(-m_new)) + eps
        hs.append(jnp.einsum("...ab,...b->...a", C_j, qs[j]) / den[..., None])
        Cs.append(C_j)
        ns.append(n_j)
        ms.append(m_new)
    y = jnp.concatenate(hs, axis=-1)
    if "ogate" in p:
        y = _sigmoid(_lin(p["ogate"], x)) * y
    return (jnp.stack(Cs, axis=-3), jnp.stack(ns, axis=-2), jnp.stack(ms, axis=-1)), y


def mlstm_unstabilised(params, carry, x):
    """The paper's mLSTM without a stabiliser (eqs. 19–27): carry (C, n), h̃ = C q / max(|nᵀq|, 1)."""
    p, (C, n), x = _f32(params), _f32(carry), jnp.asarray(x, F32)
    heads, qs, ks, vs, i_raw, f_raw = _mlstm_inputs(p, x)
    Cs, ns, hs = [], [], []
    for j in range(heads):
        f, i = _sigmoid(f_raw[..., j]), jnp.exp(i_raw[..., j])
        C_j = f[..., None, None] * C[..., j, :, :] + i[..., None, None] * jnp.einsum(
            "...a,...b->...ab", vs[j], ks[j]
        )
        n_j = f[..., None] * n[..., j, :] + i[..., None] * ks[j]
        den = jnp.maximum(jnp.abs(jnp.sum(n_j * qs[j], axis=-1)), 1.0)
        hs.append(jnp.einsum("...ab,...b->...a", C_j, qs[j]) / den[..., None])
        Cs.append(C_j)
        ns.append(n_j)
    y = jnp.concatenate(hs, axis=-1)
    if "ogate" in p:
        y = _sigmoid(_lin(p["ogate"], x)) * y
    return (jnp.stack(Cs, axis=-3), jnp.stack(ns, axis=-2)), y


# ---- Mamba's selective SSM (Gu & Dao 2023, Algorithm 2; selective_scan_ref) -----------------


def _selection(p, x):
    u = _lin(p["in_proj"], x)
    n_state = p["A_log"].shape[-1]
    x_dbl = _lin(p["x_proj"], u)
    rank = x_dbl.shape[-1] - 2 * n_state
    B, C = x_dbl[..., rank : rank + n_state], x_dbl[..., rank + n_state :]
    delta = _softplus(_lin(p["dt_proj"], x_dbl[..., :rank] if rank else u))
    return u, delta, B, C


def selective_ssm(params, h, x):
    """h_t = exp(Δ A) h + Δ B u (per channel d, state n), y = C·h + D u."""
    p, h, x = _f32(params), jnp.asarray(h, F32), jnp.asarray(x, F32)
    u, delta, B, C = _selection(p, x)
    A = -jnp.exp(p["A_log"])
    dA = jnp.exp(jnp.einsum("...d,dn->...dn", delta, A))
    dBu = jnp.einsum("...d,...n,...d->...dn", delta, B, u)
    h = dA * h + dBu
    y = jnp.einsum("...dn,...n->...d", h, C) + jnp.broadcast_to(p["D"], u.shape) * u
    return h, y


def selective_ssm_log_decay(params, x):
    p, x = _f32(params), jnp.asarray(x, F32)
    _, delta, _, _ = _selection(p, x)
    return jnp.einsum("...d,dn->...dn", delta, -jnp.exp(p["A_log"]))


# ---- (Gated) DeltaNet (Yang et al. 2024, eq. 10) ---------------------------------------------


def deltanet_gates(params, x):
    """(α [.., heads], β [.., heads], q, k, v [.., heads, d]) with q, k L2-normalised (ε = 1e-6)."""
    p, x = _f32(params), jnp.asarray(x, F32)
    heads = p["b"]["kernel"].shape[-1]

    def head_split(z):
        return z.reshape(z.shape[:-1] + (heads, z.shape[-1] // heads))

    q, k, v = (head_split(jax.nn.silu(_lin(p[name], x))) for name in "qkv")
    q = q / jnp.sqrt(jnp.sum(q**2, axis=-1, keepdims=True) + 1e-6)
    k = k / jnp.sqrt(jnp.sum(k**2, axis=-1, keepdims=True) + 1e-6)
    beta = _sigmoid(_lin(p["b"], x))
    if "A_log" in p:
        raw = _lin(p["a"], x)
        alpha = jnp.exp(
            -jnp.broadcast_to(jnp.exp(p["A_log"]), raw.shape)
            * _softplus(raw + jnp.broadcast_to(p["dt_bias"], raw.shape))
        )
    else:
        alpha = jnp.ones_like(beta)
    return alpha, beta, q, k, v


def gated_deltanet(params, S, x):
    """S_t = α S (I − β k kᵀ) + β v kᵀ, written with the identity; o = S q / √d_k."""
    S = jnp.asarray(S, F32)
    alpha, beta, q, k, v = deltanet_gates(params, x)
    d = k.shape[-1]
    kkT = jnp.einsum("...a,...b->...ab", k, k)
    M = jnp.broadcast_to(jnp.eye(d, dtype=F32), kkT.shape) - beta[..., None, None] * kkT
    S = alpha[..., None, None] * (S @ M) + beta[..., None, None] * jnp.einsum("...a,...b->...ab", v, k)
    o = jnp.einsum("...ab,...b->...a", S, q) / math.sqrt(d)
    return S, o.reshape(o.shape[:-2] + (-1,))


#: The steps with their options bound, made once: a step's compilations are cached by identity.
STEPS = {
    "slstm_exp": functools.partial(slstm, exponential_forget=True),
    "slstm_unstabilised": slstm_unstabilised,
    "slstm_exp_unstabilised": functools.partial(slstm_unstabilised, exponential_forget=True),
    "mlstm_eps": functools.partial(mlstm, eps=1e-6),
}

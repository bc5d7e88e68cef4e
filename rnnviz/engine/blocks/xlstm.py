r"""transformers' ``xLSTMForCausalLM`` (``transformers/models/xlstm/modeling_xlstm.py``: the
xLSTM-7B stack of mLSTM blocks) as a pure JAX function of its state dict.

Per block l (``xLSTMBlock``), with RMSNorm(x) = w ⊙ x / √(mean x² + ε) (+ b):

.. math::
    x ← x + \mathrm{out\_proj}\big(σ(o) ⊙ \mathrm{MHLN}(\mathrm{mLSTM}(q, k, v, ĩ, f̃))\big),\quad
    [q, k, v, o, ĩ, f̃] = \text{projections of } \mathrm{RMSNorm}_{mlstm}(x),

    x ← x + W_{down}\big(\mathrm{SiLU}(W_{gate} u) ⊙ W_{up} u\big),\quad u = \mathrm{RMSNorm}_{ffn}(x)

then logits = cap · tanh(W_{lm} RMSNorm_{out}(x) / cap). The input and forget pre-activations
are soft-capped the same way (``gate_soft_cap``); the output gate is not, and multiplies
*after* the per-head layer norm MHLN (mean and biased variance over each head's d_v values, one
weight and bias over all v_dim). Per head, from m₀ = 0, C₀ = 0, n₀ = 0 (``xLSTMLayer``,
``mlstm_recurrent_step_native``):

.. math::
    m_t = \max(\log σ(f̃_t) + m_{t−1},\ ĩ_t),\quad
    f'_t = e^{\log σ(f̃_t) + m_{t−1} − m_t},\quad i'_t = e^{ĩ_t − m_t},

    C_t = f'_t C_{t−1} + i'_t\, k_t v_t^⊤,\quad n_t = f'_t n_{t−1} + i'_t k_t,\quad
    h_t = \frac{C_t^⊤ q̂_t}{\max(|q̂_t^⊤ n_t|,\ e^{−m_t}) + ε},\quad q̂_t = q_t / \sqrt{d_{qk}}

with the raw key (the 1/√d_qk scales the query). transformers computes this with a chunkwise
kernel where T allows (mode ``"train"``, or the whole chunks of mode ``"inference"``) and with
this step loop for the rest; both give this recurrence, which here is one ``lax.scan`` so every
step's state can be probed. Training asks for the chunkwise form (``chunked=True``,
:func:`chunked_mlstm`): the same sums in another order, which builds no step's state.

The recurrent state of a layer, as :func:`state_shapes` names it: ``C [B, T, heads, d_qk, d_v]``
(key index first, transformers' ``matC``), ``n [B, T, heads, d_qk]`` and ``m [B, T, heads]``, the
stabilised state (the true C and n times e^{−m_t}).

Two gradients are small by construction, not by training. The readout's denominator is one
scale per head and step, which the per-head layer norm divides out but for its ε: n (which
reaches the output only through that denominator) has a gradient of the order of ε, round-off
at the default ε = 10⁻⁶. And the input gate's bias moves every step's ĩ alike, which scales a
head's whole history (C, n from zero) by one factor that the readout or the norm divides out:
but for the soft cap and the ε, its gradient is zero.

Dtypes: the projections, norms' scaling and residual stream run in the parameters' dtype; the
norms reduce in float32 when ``norm_reduction_force_float32``; the recurrence runs in float32,
as transformers' step kernel keeps its state (``inference_state_dtype``), its output cast back;
the logits are float32 before their cap. In bfloat16 the chunkwise kernels round differently,
so only float32 matches transformers to float32's error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from rnnviz.checkpoints.families.xlstm import XLSTMInit, tensors
from rnnviz.engine.blocks import Trajectory, embedded, init, probed

if TYPE_CHECKING:
    from rnnviz.checkpoints.families.xlstm import XLSTMSpec
    from rnnviz.engine.blocks import Probes

#: Whether a step's Jacobian in the state is diagonal: the stabiliser m_t = max(log f_t + m_{t−1}, ĩ_t)
#: rescales C and n by the state's own m.
STATE_IS_DIAGONAL = False

#: The chunkwise form's chunk length (:func:`chunked_mlstm`), transformers' default ``chunk_size``.
CHUNK = 64


Params = dict[str, jax.Array]
#: A layer's recurrent state: ``{"C": [..., heads, d_qk, d_v], "n": [..., heads, d_qk], "m": [..., heads]}``.
State = dict[str, jax.Array]


def state_shapes(spec: XLSTMSpec, batch: int, seq_len: int) -> tuple[State, ...]:
    """Each block's recurrent state over a sequence, as :class:`~rnnviz.engine.blocks.Probes` holds it.

    Args:
        spec: the model.
        batch: B.
        seq_len: T.

    Returns:
        L dicts of float32 ``jax.ShapeDtypeStruct``: ``C [B, T, heads, d_qk, d_v]``,
        ``n [B, T, heads, d_qk]``, ``m [B, T, heads]``.

    >>> from rnnviz.checkpoints.families.xlstm import parse
    >>> spec = parse({"vocab_size": 8, "hidden_size": 32, "num_blocks": 1, "num_heads": 2}, "c")
    >>> {k: v.shape for k, v in state_shapes(spec, 3, 5)[0].items()}
    {'C': (3, 5, 2, 8, 16), 'n': (3, 5, 2, 8), 'm': (3, 5, 2)}
    """
    lead = (batch, seq_len, spec.num_heads)
    state = {
        "C": jax.ShapeDtypeStruct((*lead, spec.qk_head_dim, spec.v_head_dim), jnp.float32),
        "n": jax.ShapeDtypeStruct((*lead, spec.qk_head_dim), jnp.float32),
        "m": jax.ShapeDtypeStruct(lead, jnp.float32),
    }
    return tuple(dict(state) for _ in range(spec.num_blocks))


def _bias(b: jax.Array, ndim: int) -> jax.Array:
    """A vector ``[n]`` as ``[1, …, 1, n]`` of rank ``ndim``, to add without rank promotion."""
    return b.reshape((1,) * (ndim - 1) + b.shape)


def _linear(params: Params, name: str, x: jax.Array) -> jax.Array:
    """``nn.Linear`` ``name``: x Wᵀ (+ b), ``[..., in] -> [..., out]``."""
    y = jnp.einsum("...i,oi->...o", x, params[name + ".weight"].astype(x.dtype))
    bias = params.get(name + ".bias")
    return y if bias is None else y + _bias(bias.astype(x.dtype), y.ndim)


def _affine(params: Params, name: str, x: jax.Array) -> jax.Array:
    """A norm's w ⊙ x (+ b) over the last axis."""
    y = x * _bias(params[name + ".weight"].astype(x.dtype), x.ndim)
    bias = params.get(name + ".bias")
    return y if bias is None else y + _bias(bias.astype(x.dtype), x.ndim)


def _reduce_dtype(force_float32: bool, x: jax.Array) -> Any:
    return jnp.float32 if force_float32 else x.dtype


def rms_norm(spec: XLSTMSpec, params: Params, name: str, x: jax.Array, force_float32: bool) -> jax.Array:
    """``xLSTMRMSNorm``: w ⊙ x / √(mean_D x² + ε) (+ b), reduced in float32 when forced.

    Args:
        spec: the model (ε).
        params: the state dict.
        name: the norm's prefix (``backbone.blocks.0.norm_mlstm``).
        x: ``[B, T, D]``.
        force_float32: reduce in float32 whatever x's dtype.

    Returns:
        ``[B, T, D]`` in x's dtype.
    """
    xr = x.astype(_reduce_dtype(force_float32, x))
    y = xr * jax.lax.rsqrt(jnp.mean(xr * xr, axis=-1, keepdims=True) + spec.norm_eps)
    return _affine(params, name, y.astype(x.dtype))


def head_layer_norm(spec: XLSTMSpec, params: Params, name: str, h: jax.Array) -> jax.Array:
    """``xLSTMMultiHeadLayerNorm``: each head's vector centred and scaled by its biased
    variance, (h − mean) / √(var + ε), then one w ⊙ · (+ b) over all heads.

    Args:
        spec: the model.
        params: the state dict.
        name: the norm's prefix.
        h: ``[B, T, heads, d_v]``.

    Returns:
        ``[B, T, heads · d_v]`` in h's dtype.
    """
    hr = h.astype(_reduce_dtype(spec.norm_reduction_force_float32, h))
    mean = jnp.mean(hr, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(hr - mean), axis=-1, keepdims=True)
    y = ((hr - mean) * jax.lax.rsqrt(var + spec.norm_eps)).astype(h.dtype)
    return _affine(params, name, y.reshape(*h.shape[:2], -1))


def soft_cap(x: jax.Array, cap: float | None) -> jax.Array:
    """cap · tanh(x / cap), or x when ``cap`` is None."""
    return x if cap is None else cap * jnp.tanh(x / cap)


def mlstm_update(state: State, k: jax.Array, v: jax.Array, i_pre: jax.Array, f_pre: jax.Array) -> State:
    """The new stabilised state ``(C, n, m)`` of one step, every head (module docstring).

    Args:
        state: ``C [B, heads, d_qk, d_v]``, ``n [B, heads, d_qk]``, ``m [B, heads]``.
        k: ``[B, heads, d_qk]``.
        v: ``[B, heads, d_v]``.
        i_pre: ĩ ``[B, heads]``, soft-capped.
        f_pre: f̃ ``[B, heads]``, soft-capped.

    Returns:
        The state after the step, before the probe.
    """
    log_f = jax.nn.log_sigmoid(f_pre)
    m = jnp.maximum(log_f + state["m"], i_pre)
    f_act = jnp.exp(log_f + state["m"] - m)
    i_act = jnp.exp(i_pre - m)
    kv = k[..., :, None] * v[..., None, :]  # [B, heads, d_qk, d_v]: key index first, as matC
    return {
        "C": f_act[..., None, None] * state["C"] + i_act[..., None, None] * kv,
        "n": f_act[..., None] * state["n"] + i_act[..., None] * k,
        "m": m,
    }


def mlstm_step(
    state: State, inputs: tuple[jax.Array, ...], probe: State | None, eps: float
) -> tuple[State, jax.Array]:
    """One step of the stabilised mLSTM recurrence for every head (module docstring).

    Args:
        state: ``C [B, heads, d_qk, d_v]``, ``n [B, heads, d_qk]``, ``m [B, heads]``.
        inputs: ``(q, k, v, ĩ, f̃)``: ``[B, heads, d_qk]`` twice, ``[B, heads, d_v]``,
            ``[B, heads]`` twice (the gates soft-capped).
        probe: added to the new state before the readout (leaves like the state's, or norm
            probes ``[B]``: :func:`~rnnviz.engine.blocks.probed`), or None.
        eps: ε of the readout's denominator.

    Returns:
        The new state and h_t ``[B, heads, d_v]``.
    """
    q, k, v, i_pre, f_pre = inputs
    new = mlstm_update(state, k, v, i_pre, f_pre)
    if probe is not None:
        new = {name: probed(new[name], probe[name]) for name in new}
    q_hat = q * q.shape[-1] ** -0.5
    numerator = jnp.einsum("bhd,bhde->bhe", q_hat, new["C"])
    qn = jnp.einsum("bhd,bhd->bh", q_hat, new["n"])
    denominator = jnp.maximum(jnp.abs(qn), jnp.exp(-new["m"])) + eps
    return new, numerator / denominator[..., None]


def mlstm(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    i_pre: jax.Array,
    f_pre: jax.Array,
    eps: float,
    probe: State | None = None,
) -> tuple[jax.Array, Trajectory]:
    """The mLSTM recurrence over a sequence from zero state, one ``lax.scan`` over time.

    Args:
        q: ``[B, T, heads, d_qk]``.
        k: ``[B, T, heads, d_qk]``.
        v: ``[B, T, heads, d_v]``.
        i_pre: ``[B, T, heads]``, the soft-capped input-gate pre-activation ĩ.
        f_pre: ``[B, T, heads]``, the soft-capped forget-gate pre-activation f̃.
        eps: ε of the readout.
        probe: the layer's state probe (leaves ``[B, T, ...]``, :func:`state_shapes`), or None.

    Returns:
        h ``[B, T, heads, d_v]``, float32 (float64 for float64 inputs), and the
        :class:`~rnnviz.engine.blocks.Trajectory`: states as :func:`state_shapes`, inputs
        ``{"k", "v", "i", "f"}`` in the recurrence's dtype (:func:`layer_step`).
    """
    b, _, heads, d_qk = q.shape
    dtype = q.dtype if jnp.finfo(q.dtype).bits >= 32 else jnp.dtype(jnp.float32)  # float64 stays
    state = {
        "C": jnp.zeros((b, heads, d_qk, v.shape[-1]), dtype),
        "n": jnp.zeros((b, heads, d_qk), dtype),
        "m": jnp.zeros((b, heads), dtype),
    }

    def time_major(a: jax.Array) -> jax.Array:
        return jnp.swapaxes(a.astype(dtype), 0, 1)

    xs = tuple(time_major(a) for a in (q, k, v, i_pre, f_pre))
    probes_t = None if probe is None else {name: time_major(p) for name, p in probe.items()}

    def step(carry: State, x: tuple[Any, State | None]) -> tuple[State, tuple[jax.Array, State]]:
        new, h = mlstm_step(carry, x[0], x[1], eps)
        return new, (h, new)

    _, (h, states) = jax.lax.scan(step, state, (xs, probes_t))

    def batch_major(tree: Any) -> Any:
        return jax.tree.map(lambda a: jnp.swapaxes(a, 0, 1), tree)

    inputs = batch_major(dict(zip(("k", "v", "i", "f"), xs[1:])))
    return jnp.swapaxes(h, 0, 1), Trajectory(batch_major(states), inputs)


def chunked_mlstm(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    i_pre: jax.Array,
    f_pre: jax.Array,
    eps: float,
    chunk: int = CHUNK,
) -> jax.Array:
    r""":func:`mlstm`'s h, the states unread: the chunkwise form, as transformers'
    ``mlstm_chunkwise_native_autograd`` (mode ``"train"``) computes it.

    In a chunk of c steps, with b_t = Σ_{s≤t} log σ(f̃_s) from the chunk's start, the state
    (C, n, m) it starts from and the stabiliser the steps would reach,

    .. math::
        M_t = \max\big(b_t + m,\ \max_{j≤t} (b_t − b_j + ĩ_j)\big),\quad
        D_{tj} = e^{b_t − b_j + ĩ_j − M_t}\ (j ≤ t),

        h_t = \frac{e^{b_t + m − M_t}\, C^⊤ q̂_t + Σ_{j≤t} D_{tj} (q̂_t^⊤ k_j)\, v_j}
                   {\max\big(|e^{b_t + m − M_t}\, q̂_t^⊤ n + Σ_{j≤t} D_{tj}\, q̂_t^⊤ k_j|,\ e^{−M_t}\big) + ε}

    and then the state at the chunk's end, m ← max(b_c + m, max_j (b_c − b_j + ĩ_j)),
    C ← e^{b_c + m_{old} − m} C + Σ_j e^{b_c − b_j + ĩ_j − m} k_j v_j^⊤ (n likewise with k_j):
    the same sums as the steps in another order, with the same stabiliser M_t = m_t, so that the
    denominator's e^{−m_t} is the step-by-step one. T is padded behind to a multiple of c (the
    real steps never read the padding).

    Args:
        q, k, v, i_pre, f_pre, eps: as :func:`mlstm` reads them.
        chunk: c.

    Returns:
        h ``[B, T, heads, d_v]``, as :func:`mlstm`'s.

    >>> key = jax.random.split(jax.random.key(0), 5)
    >>> q, k = (jax.random.normal(a, (2, 7, 3, 4)) for a in key[:2])
    >>> v = jax.random.normal(key[2], (2, 7, 3, 5))
    >>> i_pre, f_pre = (3 * jax.random.normal(a, (2, 7, 3)) for a in key[3:])
    >>> h, _ = mlstm(q, k, v, i_pre, f_pre, 1e-6)
    >>> bool(jnp.allclose(chunked_mlstm(q, k, v, i_pre, f_pre, 1e-6, chunk=4), h, atol=1e-5))
    True
    """
    batch, steps, heads, d_qk = q.shape
    dtype = q.dtype if jnp.finfo(q.dtype).bits >= 32 else jnp.dtype(jnp.float32)  # as mlstm
    pad = -steps % chunk
    n = (steps + pad) // chunk

    def chunks(a: jax.Array) -> jax.Array:  # [B, T, h, ...] -> [n, B, h, c, ...]
        a = jnp.pad(a.astype(dtype), ((0, 0), (0, pad)) + ((0, 0),) * (a.ndim - 2))
        a = a.reshape((batch, n, chunk) + a.shape[2:])
        return jnp.moveaxis(jnp.moveaxis(a, 3, 2), 1, 0)

    q, k, v, i_pre, f_pre = (chunks(a) for a in (q, k, v, i_pre, f_pre))
    q = q * d_qk**-0.5
    b = jnp.cumsum(jax.nn.log_sigmoid(f_pre), axis=-1)  # [n, B, h, c]
    square = (1,) * (b.ndim - 1) + (chunk, chunk)
    causal = jnp.tril(jnp.ones((chunk, chunk), bool)).reshape(square)
    log_d = jnp.where(causal, b[..., :, None] - b[..., None, :] + i_pre[..., None, :], -jnp.inf)
    within = jnp.max(log_d, axis=-1)  # [n, B, h, c]: the stabiliser the chunk's own writes need
    score = q @ jnp.swapaxes(k, -1, -2)  # [n, B, h, c, c]
    write = b[..., -1:] - b + i_pre  # log weight of write j in the chunk's end state

    def step(state: State, xs: tuple) -> tuple[State, jax.Array]:
        q_i, k_i, v_i, b_i, log_d_i, within_i, score_i, write_i = xs
        m_t = jnp.maximum(b_i + state["m"][..., None], within_i)  # [B, h, c]
        carried = jnp.exp(b_i + state["m"][..., None] - m_t)[..., None]
        mixed = score_i * jnp.exp(log_d_i - m_t[..., None])
        numerator = (q_i * carried) @ state["C"] + mixed @ v_i
        qn = jnp.sum(q_i * carried * state["n"][..., None, :], axis=-1) + jnp.sum(mixed, axis=-1)
        h = numerator / (jnp.maximum(jnp.abs(qn), jnp.exp(-m_t)) + eps)[..., None]
        m = jnp.maximum(b_i[..., -1] + state["m"], jnp.max(write_i, axis=-1))
        k_w = k_i * jnp.exp(write_i - m[..., None])[..., None]
        decay = jnp.exp(b_i[..., -1] + state["m"] - m)
        new = {
            "C": decay[..., None, None] * state["C"] + jnp.swapaxes(k_w, -1, -2) @ v_i,
            "n": decay[..., None] * state["n"] + jnp.sum(k_w, axis=-2),
            "m": m,
        }
        return new, h

    state = {
        "C": jnp.zeros((batch, heads, d_qk, v.shape[-1]), dtype),
        "n": jnp.zeros((batch, heads, d_qk), dtype),
        "m": jnp.zeros((batch, heads), dtype),
    }
    _, h = jax.lax.scan(step, state, (q, k, v, b, log_d, within, score, write))  # [n, B, h, c, d_v]
    return jnp.moveaxis(h, 0, 1).swapaxes(2, 3).reshape((batch, n * chunk, heads, h.shape[-1]))[:, :steps]


def _projections(spec: XLSTMSpec, params: Params, prefix: str, x: jax.Array) -> tuple[jax.Array, ...]:
    """``(q, k, v, o, ĩ, f̃)`` of ``xLSTMLayer`` from its normed input ``[B, T, D]``: the first four
    ``[B, T, width]``, the gates ``[B, T, heads]`` soft-capped."""
    if spec.weight_mode == "single":
        q, k, v, o = (_linear(params, prefix + n, x) for n in ("q", "k", "v", "ogate_preact"))
        i_pre = _linear(params, prefix + "igate_preact", x)
        f_pre = _linear(params, prefix + "fgate_preact", x)
    else:
        qkvo = _linear(params, prefix + "qkv_opreact", x)
        q, k, v, o = jnp.split(qkvo, [spec.qk_dim, 2 * spec.qk_dim, 2 * spec.qk_dim + spec.v_dim], axis=-1)
        i_pre, f_pre = jnp.split(_linear(params, prefix + "ifgate_preact", x), [spec.num_heads], axis=-1)
    cap = spec.gate_soft_cap
    return q, k, v, o, soft_cap(i_pre, cap), soft_cap(f_pre, cap)


def mlstm_layer(
    spec: XLSTMSpec,
    params: Params,
    prefix: str,
    x: jax.Array,
    probe: State | None = None,
    chunked: bool = False,
) -> tuple[jax.Array, Trajectory | None]:
    """``xLSTMLayer``: projections, the mLSTM recurrence, per-head layer norm, output gate, out_proj.

    Args:
        spec: the model.
        params: the state dict.
        prefix: ``backbone.blocks.{l}.mlstm_layer.``.
        x: the normed stream ``[B, T, D]``.
        probe: the layer's state probe, or None.
        chunked: the chunkwise form (:func:`chunked_mlstm`), with no probe and no trajectory.

    Returns:
        ``[B, T, D]``, the block's first residual update, and the mLSTM's trajectory (None in
        the chunkwise form).
    """
    b, t, _ = x.shape
    q, k, v, o, i_pre, f_pre = _projections(spec, params, prefix, x)
    q, k, v = (a.reshape(b, t, spec.num_heads, -1) for a in (q, k, v))
    if chunked:
        if probe is not None:
            raise ValueError("the chunkwise form has no step's state to probe: chunked=False with a probe")
        h, trajectory = chunked_mlstm(q, k, v, i_pre, f_pre, spec.eps), None
    else:
        h, trajectory = mlstm(q, k, v, i_pre, f_pre, spec.eps, probe)
    h = head_layer_norm(spec, params, prefix + "multihead_norm", h.astype(x.dtype))
    return _linear(params, prefix + "out_proj", jax.nn.sigmoid(o) * h), trajectory


def feed_forward(spec: XLSTMSpec, params: Params, prefix: str, x: jax.Array) -> jax.Array:
    """``xLSTMFeedForward``: W_down(SiLU(W_gate x) ⊙ W_up x), ``[B, T, D] -> [B, T, D]``."""
    if spec.weight_mode == "single":
        gate, up = _linear(params, prefix + "proj_up_gate", x), _linear(params, prefix + "proj_up", x)
    else:
        gate, up = jnp.split(_linear(params, prefix + "proj_up_gate_z", x), [spec.ffn_dim], axis=-1)
    return _linear(params, prefix + "proj_down", jax.nn.silu(gate) * up)


def block(
    spec: XLSTMSpec,
    params: Params,
    layer: int,
    x: jax.Array,
    probe: State | None = None,
    chunked: bool = False,
) -> tuple[jax.Array, Trajectory | None]:
    """``xLSTMBlock`` ``layer``: x + mLSTM(RMSNorm x), then + FFN(RMSNorm ·); ``[B, T, D]``, and
    the mLSTM's trajectory (:func:`mlstm_layer`)."""
    prefix, force = f"backbone.blocks.{layer}.", spec.norm_reduction_force_float32
    x_mlstm = rms_norm(spec, params, prefix + "norm_mlstm", x, force)
    update, trajectory = mlstm_layer(spec, params, prefix + "mlstm_layer.", x_mlstm, probe, chunked)
    x = x + update
    x_ffn = rms_norm(spec, params, prefix + "norm_ffn", x, force)
    return x + feed_forward(spec, params, prefix + "ffn.", x_ffn), trajectory


def forward(
    spec: XLSTMSpec,
    params: Params,
    inputs: jax.Array,
    probes: Probes | None = None,
    *,
    with_states: bool = False,
    head: bool = True,
    chunked: bool = False,
) -> jax.Array | tuple[jax.Array, tuple[Trajectory | None, ...]]:
    """The logits of ``xLSTMForCausalLM`` (``use_cache=False``: every sequence from zero state).

    Args:
        spec: the model.
        params: ``{state-dict name: array}`` (:func:`~rnnviz.checkpoints.families.xlstm.tensors`,
            tied ones filled in), float32 or bfloat16.
        inputs: token ids ``<int>[B, T]``, or the embeddings ``<float>[B, T, D]`` (``inputs_embeds``).
        probes: zeros to differentiate: ``stream`` L + 1 arrays ``[B, T, D]`` (row l enters block l,
            row L the final norm), ``states`` L dicts as :func:`state_shapes`; or None.
        with_states: also return each block's :class:`~rnnviz.engine.blocks.Trajectory`.
        head: False: the final norm's output ``[B, T, D]`` in place of the logits (what
            :mod:`~rnnviz.engine.blocks.vectors` reads out).
        chunked: the mLSTM layers in their chunkwise form (:func:`chunked_mlstm`; no probes, no
            trajectories).

    Returns:
        ``<float32>[B, T, V]``, soft-capped by ``output_logit_soft_cap``; with ``with_states``,
        ``(logits, trajectories)``: L trajectories, states as :func:`state_shapes` and inputs as
        :func:`layer_step` reads them.

    >>> import jax.numpy as jnp
    >>> from rnnviz.checkpoints.families.xlstm import parse, tensors
    >>> spec = parse({"vocab_size": 8, "hidden_size": 32, "num_blocks": 1, "num_heads": 2}, "c")
    >>> params = {n: jnp.full(s, 0.01, jnp.float32) for n, s in tensors(spec).items()}
    >>> forward(spec, params, jnp.zeros((2, 5), jnp.int32)).shape
    (2, 5, 8)
    """
    x = embedded(params, "backbone.embeddings.weight", inputs)
    trajectories = []
    for layer in range(spec.num_blocks):
        if probes is not None:
            x = x + probes.stream[layer].astype(x.dtype)
        x, trajectory = block(
            spec, params, layer, x, None if probes is None else probes.states[layer], chunked
        )
        trajectories.append(trajectory)
    if probes is not None:
        x = x + probes.stream[spec.num_blocks].astype(x.dtype)
    # out_norm is built with xLSTMRMSNorm's defaults: it reduces in float32 whatever the config says
    x = rms_norm(spec, params, "backbone.out_norm", x, force_float32=True)
    if not head:
        return (x, tuple(trajectories)) if with_states else x
    logits = soft_cap(_linear(params, "lm_head", x).astype(jnp.float32), spec.output_logit_soft_cap)
    return (logits, tuple(trajectories)) if with_states else logits


def layer_step(spec: XLSTMSpec, params: Params, layer: int, state: State, inputs: dict) -> State:
    """One step of block ``layer``'s mLSTM state, every head (:func:`mlstm_update`).

    Args:
        spec: the model.
        params: every tensor (unused: the step's inputs hold all it reads).
        layer: l.
        state: ``C [B, heads, d_qk, d_v]``, ``n [B, heads, d_qk]``, ``m [B, heads]``.
        inputs: step t's ``{"k": [B, heads, d_qk], "v": [B, heads, d_v], "i": [B, heads],
            "f": [B, heads]}``, the gates soft-capped (a
            :class:`~rnnviz.engine.blocks.Trajectory`'s inputs at t).

    Returns:
        The state after step t, before the probe.
    """
    return mlstm_update(state, inputs["k"], inputs["v"], inputs["i"], inputs["f"])


#: The fused layers and the separate ones whose rows they stack, in order (``weight_mode``).
FUSED = {
    "mlstm_layer.qkv_opreact": (
        "mlstm_layer.q",
        "mlstm_layer.k",
        "mlstm_layer.v",
        "mlstm_layer.ogate_preact",
    ),
    "mlstm_layer.ifgate_preact": ("mlstm_layer.igate_preact", "mlstm_layer.fgate_preact"),
    "ffn.proj_up_gate_z": ("ffn.proj_up_gate", "ffn.proj_up"),
}


def _initialiser(spec: XLSTMSpec, settings: XLSTMInit, name: str) -> init.Initialiser:
    """How ``xLSTMPreTrainedModel._init_weights`` leaves tensor ``name`` of a single-weight model."""
    small = init.normal(math.sqrt(2 / (5 * spec.hidden_size)))  # "small init"
    n = settings.num_hidden_layers
    module, kind = name.rsplit(".", 1)
    if "norm" in module.rsplit(".", 1)[-1]:
        return init.constant(1.0 if kind == "weight" else 0.0)
    if module.endswith("igate_preact"):
        return init.constant(0.0 if kind == "weight" else -10.0)
    if module.endswith("fgate_preact"):
        return (
            init.constant(0.0)
            if kind == "weight"
            else init.fixed(lambda shape: jnp.linspace(3.0, 6.0, shape[0]))
        )
    if kind == "bias" or "gate" in module:  # the output gate and the FFN's gate start at zero
        return init.constant(0.0)
    if module.endswith("out_proj"):
        return init.normal(2 / n / math.sqrt(spec.hidden_size))  # Wang's init
    if module.endswith("proj_down"):
        return init.normal(2 / n / math.sqrt(spec.ffn_dim))
    return small


def _fused(spec: XLSTMSpec, single: Params) -> Params:
    """The fused model's tensors: each fused layer's rows the separate layers' rows, stacked."""
    out = {}
    for name in tensors(spec):
        module, kind = name.rsplit(".", 1)
        fused = next((f for f in FUSED if module.endswith(f)), None)
        if fused is None:
            out[name] = single[name]
        else:
            stem = module.removesuffix(fused)
            out[name] = jnp.concatenate([single[f"{stem}{part}.{kind}"] for part in FUSED[fused]], axis=0)
    return out


def init_params(
    spec: XLSTMSpec, key: jax.Array, *, dtype: str = "float32", settings: XLSTMInit | None = None
) -> Params:
    r"""A fresh xLSTM, drawn as transformers' ``xLSTMForCausalLM(config)`` draws it.

    The embeddings, q, k, v, ``proj_up`` and the head N(0, 2/(5D)) ("small init"); ``out_proj``
    and ``proj_down`` N(0, (2/(n√width))²) (Wang's init, n the config's ``num_hidden_layers``,
    width D and the FFN's); the output gate and the FFN's gate all zero; the input and forget
    gates' weights zero, their biases −10 and ``linspace(3, 6, heads)``; norms 1, other biases 0.

    transformers cannot draw a fused model (``weight_mode="fused"``: its ``_init_weights`` mixes
    the shapes of the i and f halves): a fused model here is the single-weight one of the same
    key, its layers' rows stacked, so both compute the same function. The head is drawn on its
    own even when ``tie_word_embeddings``, as transformers' xLSTM ties nothing and saves it.

    Args:
        spec: the sizes.
        key: the PRNG key; each tensor draws with its own key folded in from its name.
        dtype: ``"float32"`` or ``"bfloat16"`` (drawn in float32, then cast).
        settings: the config's initialisation fields (default: transformers' defaults).

    Returns:
        ``{name: array}``, the names and shapes of :func:`~rnnviz.checkpoints.families.xlstm.tensors`.

    Example:
        >>> from rnnviz.checkpoints.families.xlstm import parse
        >>> spec = parse({"vocab_size": 32, "hidden_size": 16, "num_blocks": 1, "num_heads": 2}, "demo")
        >>> init_params(spec, jax.random.key(0))["backbone.blocks.0.mlstm_layer.fgate_preact.bias"].tolist()
        [3.0, 6.0]
    """
    single = dataclasses.replace(spec, weight_mode="single")
    rule = functools.partial(_initialiser, single, settings or XLSTMInit())
    params = init.draw(tensors(single), rule, key, dtype)
    return params if spec.weight_mode == "single" else _fused(spec, params)

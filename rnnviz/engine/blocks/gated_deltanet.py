r"""The Gated DeltaNet layer as transformers' ``Qwen3NextGatedDeltaNet`` builds it, as a pure JAX
function of that module's own tensors (``in_proj_qkvz.weight``, ``in_proj_ba.weight``,
``conv1d.weight``, ``dt_bias``, ``A_log``, ``norm.weight``, ``out_proj.weight``), step by step.

Follows ``models/qwen3_next/modeling_qwen3_next.py``: ``Qwen3NextGatedDeltaNet.forward``, its
torch fallbacks ``causal_conv1d_fn`` and ``torch_chunk_gated_delta_rule`` /
``torch_recurrent_gated_delta_rule`` (with ``use_qk_l2norm_in_kernel=True``, as the layer calls
them), and ``Qwen3NextRMSNormGated``. With n_k query/key heads of d_k channels, n_v value heads
of d_v, r = n_v / n_k, and x ``[B, T, D]`` the normed stream:

.. math::
    [\hat q; \hat k; \hat v; z] = W_{qkvz} x,\quad [b; a] = W_{ba} x
    \quad(\text{grouped per key head: } [q, k, v_{1..r}, z_{1..r}],\ [b_{1..r}, a_{1..r}]),

    [q; k; v] = \mathrm{SiLU}(\mathrm{conv}_c([\hat q; \hat k; \hat v])),\quad
    β_t = σ(b_t),\quad α_t = \exp(−e^{A_{log}}\, \mathrm{softplus}(a_t + b_{dt})),

    q_t ← \frac{q_t}{\sqrt{‖q_t‖^2 + ε}\,\sqrt{d_k}},\quad k_t ← \frac{k_t}{\sqrt{‖k_t‖^2 + ε}},

    S_t = α_t S_{t−1} + k_t\, \big(β_t (v_t − (α_t S_{t−1})^\top k_t)\big)^\top,\qquad o_t = S_t^\top q_t,

    \mathrm{out} = W_{out}\, \big(w ⊙ \mathrm{RMSNorm}(o_t) ⊙ \mathrm{SiLU}(z_t)\big)

per value head j: S_t ``[d_k, d_v]``, read through query/key head ⌊j / r⌋ (transformers'
``repeat_interleave``); ε = 10⁻⁶; conv_c is causal and depthwise over the 2 n_k d_k + n_v d_v
channels of [q̂; k̂; v̂], without bias; the gated norm (normed, then gated) runs over each value
head's d_v channels. As a function of the state,
∂S_t/∂S_{t−1} = α_t (I − β_t k_t k_tᵀ) on the d_k axis, for every column: not diagonal.

Subtleties kept from the reference:

* transformers runs the chunked form (``torch_chunk_gated_delta_rule``, chunks of 64, the
  sequence padded behind) for a whole sequence; here the rule runs step by step, as
  ``torch_recurrent_gated_delta_rule`` writes it (the same sums in another order), so that
  every step's state can be probed; the analysis and its plain ``jax.grad`` baseline run it so.
  Training asks for the chunked form (``chunked=True``, :func:`chunked_delta_rule`, chunks of
  :data:`CHUNK`): its reverse pass is a few matrix products a chunk instead of a sweep over T
  states. The q scaling multiplies by d_k^{−1/2}, as the chunked form.
* dtypes: the projections, the convolution with its SiLU and β give the weights' dtype; the
  decay is computed in float32 (``A_log.float()``), and the rule runs in float32 whatever the
  weights (its output cast back); the gated norm normalises in float32, casts back before the
  weight multiplies, and gates in float32 before the last cast. Where torch's bfloat16 kernels
  sum or apply a function in float32 and round once (GEMMs, the convolution, SiLU, σ), so does
  this. Float64 weights compute in float64 throughout.

The state probe, ``[B, T, n_v, d_k, d_v]`` (or a norm probe ``[B, T]``), is added to S_t
after step t: o_t and step t + 1 read it.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from rnnviz.engine.blocks import Trajectory, chunked_scan, probed, promoted, wide_dtype
from rnnviz.engine.blocks.backbone import linear, row

Params = dict[str, jax.Array]

#: The chunked form's chunk length, the reference's: near the fastest of 8, 16, 32 and 64 for the
#: reverse pass at the learning table's sizes (scripts/chunked_training.py; docs/dev/benchmarks.md).
CHUNK = 64

#: Inside the L2 norm's square root, x / √(Σx² + ε), as transformers' (and fla's) ``l2norm``.
L2_EPS = 1e-6


def _pointwise(fn: Any, x: jax.Array) -> jax.Array:
    """``fn(x)`` computed in float32 and rounded once to x's dtype, as torch's bfloat16 kernels do."""
    return fn(x.astype(wide_dtype(x.dtype))).astype(x.dtype)


def l2_normalised(x: jax.Array) -> jax.Array:
    r""":math:`x / \sqrt{\sum x^2 + ε}` over the last axis (ε = :data:`L2_EPS`).

    >>> [round(float(v), 4) for v in l2_normalised(jnp.array([3.0, 4.0]))]
    [0.6, 0.8]
    """
    return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + L2_EPS)


def short_conv(x: jax.Array, weight: jax.Array) -> jax.Array:
    r"""SiLU of the causal depthwise convolution without bias, torch's
    ``silu(conv1d(padding=c − 1)[..., :T])``: :math:`\mathrm{SiLU}(\sum_{i<c} w_i ⊙ x_{t+i−c+1})`,
    x = 0 before t = 0.

    Args:
        x: ``[B, T, C]``.
        weight: ``[C, 1, c]`` (torch's depthwise layout).

    Returns:
        ``[B, T, C]`` in the weight's dtype: summed in float32 and rounded once, then the SiLU
        likewise.
    """
    taps, steps, wide = weight.shape[-1], x.shape[1], wide_dtype(weight.dtype)
    padded = jnp.pad(x.astype(wide), ((0, 0), (taps - 1, 0), (0, 0)))
    w = weight[:, 0, :].astype(wide)
    out = sum(padded[:, i : i + steps, :] * row(w[:, i], 3) for i in range(taps))
    return _pointwise(jax.nn.silu, out.astype(weight.dtype))


def split_projections(spec: Any, qkvz: jax.Array, ba: jax.Array) -> dict[str, jax.Array]:
    """The two input projections regrouped as the reference's ``fix_query_key_value_ordering``
    does: each of the n_k key heads holds its q, its k, then its r value heads' v and z; and its
    r heads' b, then their a.

    Args:
        spec: the sizes (``linear_num_key_heads``, ``linear_num_value_heads``,
            ``linear_key_head_dim``, ``linear_value_head_dim``).
        qkvz: ``W_qkvz x`` ``[B, T, 2 n_k d_k + 2 n_v d_v]``.
        ba: ``W_ba x`` ``[B, T, 2 n_v]``.

    Returns:
        ``{"q", "k": [B, T, n_k d_k], "v": [B, T, n_v d_v], "z": [B, T, n_v, d_v],
        "b", "a": [B, T, n_v]}``, value heads numbered key head by key head.
    """
    batch, steps = qkvz.shape[:2]
    n_k, n_v = spec.linear_num_key_heads, spec.linear_num_value_heads
    d_k, d_v, r = spec.linear_key_head_dim, spec.linear_value_head_dim, n_v // n_k
    grouped = qkvz.reshape(batch, steps, n_k, 2 * d_k + 2 * r * d_v)
    q, k, v, z = jnp.split(grouped, [d_k, 2 * d_k, 2 * d_k + r * d_v], axis=-1)
    b, a = jnp.split(ba.reshape(batch, steps, n_k, 2 * r), [r], axis=-1)
    return {
        "q": q.reshape(batch, steps, n_k * d_k),
        "k": k.reshape(batch, steps, n_k * d_k),
        "v": v.reshape(batch, steps, n_v * d_v),
        "z": z.reshape(batch, steps, n_v, d_v),
        "b": b.reshape(batch, steps, n_v),
        "a": a.reshape(batch, steps, n_v),
    }


def decays(a: jax.Array, a_log: jax.Array, dt_bias: jax.Array) -> jax.Array:
    """α = exp(g), g = −exp(A_log) · softplus(a + b_dt) ``[B, T, n_v]``, in float32 (float64
    for float64 weights) whatever a's dtype, as the reference's ``A_log.float()``."""
    wide = promoted(wide_dtype(a.dtype), wide_dtype(a_log.dtype))
    raw = a.astype(wide) + row(dt_bias.astype(wide), 3)
    return jnp.exp(-row(jnp.exp(a_log.astype(wide)), 3) * jax.nn.softplus(raw))


def state_update(
    state: jax.Array, alpha: jax.Array, beta: jax.Array, k: jax.Array, v: jax.Array
) -> jax.Array:
    r"""One step of the gated delta rule, every value head, before the probe:
    :math:`S ← α S;\ S ← S + k\,(β (v − S^\top k))^\top`.

    Args:
        state: S_{t−1} ``[B, n_v, d_k, d_v]``.
        alpha: α_t ``[B, n_v]``.
        beta: β_t ``[B, n_v]``.
        k: k_t ``[B, n_v, d_k]``, L2-normalised, repeated from key heads to value heads.
        v: v_t ``[B, n_v, d_v]``.

    Returns:
        S_t ``[B, n_v, d_k, d_v]``.
    """
    decayed = state * alpha[:, :, None, None]
    delta = (v - jnp.einsum("bhkv,bhk->bhv", decayed, k)) * beta[:, :, None]
    return decayed + k[:, :, :, None] * delta[:, :, None, :]


def delta_rule(
    inputs: dict[str, jax.Array], q: jax.Array, probe: jax.Array | None
) -> tuple[jax.Array, jax.Array]:
    """The gated delta rule step by step from S₋₁ = 0, read out at every step: ``o_t = S_tᵀ q_t``.

    The steps run in checkpointed chunks (:func:`~rnnviz.engine.blocks.chunked_scan`): a step's
    state is n_v d_k d_v numbers (524 288 at Qwen3-Next-80B's shape), and a plain scan's
    reverse pass would keep two of them a step.

    Args:
        inputs: ``{"alpha", "beta": [B, T, n_v], "k": [B, T, n_v, d_k], "v": [B, T, n_v, d_v]}``.
        q: ``[B, T, n_v, d_k]``, normalised and scaled.
        probe: ``[B, T, n_v, d_k, d_v]`` added to S_t after step t, a norm probe ``[B, T]``
            (:func:`~rnnviz.engine.blocks.probed`), or None.

    Returns:
        o ``[B, T, n_v, d_v]`` and S ``[B, T, n_v, d_k, d_v]``.
    """

    def step(state: jax.Array, xs: tuple) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        alpha, beta, k, v, q_t, p_t = xs
        state = state_update(state, alpha, beta, k, v)
        state = state if p_t is None else probed(state, p_t)
        return state, (jnp.einsum("bhkv,bhk->bhv", state, q_t), state)

    batch, _, heads, d_k = inputs["k"].shape
    s0 = jnp.zeros((batch, heads, d_k, inputs["v"].shape[-1]), inputs["v"].dtype)
    xs = (inputs["alpha"], inputs["beta"], inputs["k"], inputs["v"], q, probe)
    _, (o, states) = chunked_scan(step, s0, tuple(None if a is None else a.swapaxes(0, 1) for a in xs))
    return o.swapaxes(0, 1), states.swapaxes(0, 1)


@jax.custom_vjp
def unit_lower_inverse(m: jax.Array) -> jax.Array:
    r"""The inverse of unit lower-triangular matrices ``[..., n, n]``, n a power of 2, by
    halves: :math:`\begin{pmatrix}A&0\\C&D\end{pmatrix}^{-1} =
    \begin{pmatrix}A^{-1}&0\\-D^{-1}CA^{-1}&D^{-1}\end{pmatrix}`, all diagonal blocks of a
    size at once: matrix products only (a triangular solve is a LAPACK call on the CPU, and
    two at once in one executable deadlock jaxlib 0.10.2), as stable as substitution. Its
    reverse pass is :math:`\bar M = −\mathrm{strict\_lower}(M^{−\top} \bar R M^{−\top})` for the
    inverse's cotangent :math:`\bar R` (d M⁻¹ = −M⁻¹ dM M⁻¹), two matrix products instead of the
    transpose of every halving.

    Args:
        m: ``[..., n, n]``, ones on the diagonal, zeros above it (neither is read).

    Returns:
        ``[..., n, n]``, m⁻¹.

    >>> m = jnp.array([[1.0, 0.0], [3.0, 1.0]])
    >>> unit_lower_inverse(m).tolist()
    [[1.0, 0.0], [-3.0, 1.0]]
    """
    return _inverse_by_halves(m)


def _inverse_by_halves(m: jax.Array) -> jax.Array:
    n = m.shape[-1]
    lead = m.shape[:-2]
    inv = jnp.ones(lead + (n, 1, 1), m.dtype)  # the n diagonal blocks of size 1
    size = 1
    while size < n:
        pairs = n // (2 * size)
        blocks = inv.reshape(lead + (pairs, 2, size, size))
        a_inv, d_inv = blocks[..., 0, :, :], blocks[..., 1, :, :]
        rows = m.reshape(lead + (pairs, 2 * size, pairs, 2 * size))
        c = jnp.diagonal(rows, axis1=-4, axis2=-2)  # [..., 2s, 2s, pairs]: each pair's own block
        c = jnp.moveaxis(c, -1, -3)[..., size:, :size]
        lower = -d_inv @ c @ a_inv
        zero = jnp.zeros_like(lower)
        inv = jnp.concatenate(
            [jnp.concatenate([a_inv, zero], axis=-1), jnp.concatenate([lower, d_inv], axis=-1)], axis=-2
        )
        size *= 2
    return inv[..., 0, :, :]


def _inverse_forward(m: jax.Array) -> tuple[jax.Array, jax.Array]:
    inverse = _inverse_by_halves(m)
    return inverse, inverse


def _inverse_backward(inverse: jax.Array, g: jax.Array) -> tuple[jax.Array]:
    # only M's strict lower triangle is read: the diagonal and above get no gradient
    transposed = jnp.swapaxes(inverse, -1, -2)
    return (jnp.tril(-(transposed @ g @ transposed), -1),)


unit_lower_inverse.defvjp(_inverse_forward, _inverse_backward)


def chunked_delta_rule(inputs: dict[str, jax.Array], q: jax.Array, chunk: int = CHUNK) -> jax.Array:
    r""":func:`delta_rule`'s outputs o, the states unread: the chunked form, as transformers'
    ``torch_chunk_gated_delta_rule`` (and fla's ``chunk_gated_delta_rule``) computes it.

    In a chunk of c steps from the state S it starts from, with γ_i = Π_{s≤i} α_s (from the
    chunk's start), Γ_ij = γ_i / γ_j for i ≥ j (0 above) and the WY form of the c rank-one
    updates,

    .. math::
        M = I + \mathrm{strict\_lower}\big((β ⊙ K) K^\top ⊙ Γ\big),\quad
        U = M^{-1} (β ⊙ V),\quad W = M^{-1} (β γ ⊙ K),

        V' = U − W S,\quad O = (γ ⊙ Q) S + \big(Q K^\top ⊙ Γ\big) V',\quad
        S ← γ_c S + \big((γ_c / γ) ⊙ K\big)^\top V'

    (rows i of K, V, Q are k_i, v_i, q_i): the same sums as the steps in another order.
    :func:`unit_lower_inverse` inverts M. T is padded behind to a multiple of c (α = 1,
    β = k = v = q = 0 there: the real steps never read the padding).

    Args:
        inputs, q: as :func:`delta_rule` reads them.
        chunk: c, a power of 2.

    Returns:
        o ``[B, T, n_v, d_v]``.

    >>> key = jax.random.split(jax.random.key(0), 5)
    >>> shape = (2, 7, 3)
    >>> inputs = {"alpha": jax.nn.sigmoid(jax.random.normal(key[0], shape)),
    ...           "beta": jax.nn.sigmoid(jax.random.normal(key[1], shape)),
    ...           "k": l2_normalised(jax.random.normal(key[2], shape + (4,))),
    ...           "v": jax.random.normal(key[3], shape + (5,))}
    >>> q = l2_normalised(jax.random.normal(key[4], shape + (4,))) / 2
    >>> bool(jnp.allclose(chunked_delta_rule(inputs, q, chunk=4), delta_rule(inputs, q, None)[0], atol=1e-6))
    True
    """
    batch, steps, heads, _ = inputs["k"].shape
    pad = -steps % chunk
    n = (steps + pad) // chunk

    def chunks(a: jax.Array, fill: float = 0.0) -> jax.Array:  # [B, T, h, ...] -> [n, B, h, c, ...]
        a = jnp.pad(a, ((0, 0), (0, pad)) + ((0, 0),) * (a.ndim - 2), constant_values=fill)
        a = a.reshape((batch, n, chunk) + a.shape[2:])
        return jnp.moveaxis(jnp.moveaxis(a, 3, 2), 1, 0)

    alpha = chunks(inputs["alpha"], 1.0)
    # α may underflow to 0 (a state wiped at once): log 0 would make γ_i / γ_j 0 / 0; the
    # smallest normal number wipes it as well (γ ≤ 1e-38) and keeps the ratios finite.
    log_gamma = jnp.cumsum(jnp.log(jnp.maximum(alpha, jnp.finfo(alpha.dtype).tiny)), axis=-1)  # [n, B, h, c]
    beta, k, v, q = chunks(inputs["beta"]), chunks(inputs["k"]), chunks(inputs["v"]), chunks(q)
    square = (1,) * (log_gamma.ndim - 1) + (chunk, chunk)  # a [c, c] mask at the blocks' rank
    causal = jnp.tril(jnp.ones((chunk, chunk), bool)).reshape(square)
    decay = jnp.exp(jnp.where(causal, log_gamma[..., :, None] - log_gamma[..., None, :], -jnp.inf))
    k_beta = k * beta[..., None]
    below = jnp.where(jnp.tril(causal, -1), k_beta @ jnp.swapaxes(k, -1, -2) * decay, 0.0)
    m = below + jnp.eye(chunk, dtype=k.dtype).reshape(square)
    m_inv = unit_lower_inverse(m)
    gamma = jnp.exp(log_gamma)[..., None]
    u, w = m_inv @ (v * beta[..., None]), m_inv @ (k_beta * gamma)
    attention = q @ jnp.swapaxes(k, -1, -2) * decay
    q_read = q * gamma
    k_write = jnp.swapaxes(k * jnp.exp(log_gamma[..., -1:] - log_gamma)[..., None], -1, -2)
    last = jnp.exp(log_gamma[..., -1])[..., None, None]

    def step(state: jax.Array, xs: tuple) -> tuple[jax.Array, jax.Array]:
        u_i, w_i, q_i, att_i, k_i, last_i = xs
        new = u_i - w_i @ state
        return state * last_i + k_i @ new, q_i @ state + att_i @ new

    s0 = jnp.zeros((batch, heads) + (inputs["k"].shape[-1], inputs["v"].shape[-1]), inputs["v"].dtype)
    _, o = jax.lax.scan(step, s0, (u, w, q_read, attention, k_write, last))  # [n, B, h, c, d_v]
    o = jnp.moveaxis(o, 0, 1).swapaxes(2, 3).reshape((batch, n * chunk, heads, o.shape[-1]))
    return o[:, :steps]


def gated_rms_norm(o: jax.Array, z: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    r"""``Qwen3NextRMSNormGated``: :math:`w ⊙ o / \sqrt{\mathrm{mean}(o^2) + ε} ⊙ \mathrm{SiLU}(z)`
    over each head's last axis, normed before it is gated.

    Args:
        o: the rule's output ``[B, T, n_v, d_v]``.
        z: the gate ``[B, T, n_v, d_v]``.
        weight: w ``[d_v]``.
        eps: ε.

    Returns:
        ``[B, T, n_v, d_v]`` in o's dtype.
    """
    wide = wide_dtype(o.dtype)
    of = o.astype(wide)
    normed = (of * jax.lax.rsqrt(jnp.mean(of * of, axis=-1, keepdims=True) + eps)).astype(o.dtype)
    dtype = promoted(weight.dtype, o.dtype)
    scaled = row(weight.astype(dtype), 4) * normed.astype(dtype)
    return (scaled.astype(promoted(dtype, wide)) * jax.nn.silu(z.astype(wide))).astype(o.dtype)


def layer(
    spec: Any, p: Params, x: jax.Array, probe: jax.Array | None, chunked: bool = False
) -> tuple[jax.Array, Trajectory | None]:
    """``Qwen3NextGatedDeltaNet`` over a whole sequence from an empty state.

    Args:
        spec: the sizes (``linear_num_key_heads``, ``linear_num_value_heads``,
            ``linear_key_head_dim``, ``linear_value_head_dim``, ``rms_norm_eps``).
        p: the layer's tensors, named as the module's ``state_dict`` names them.
        x: ``[B, T, D]``, the normed stream.
        probe: ``[B, T, n_v, d_k, d_v]`` added to S_t after step t, a norm probe ``[B, T]``,
            or None.
        chunked: the chunked form (:func:`chunked_delta_rule`), with no probe and no
            trajectory: what training runs.

    Returns:
        ``[B, T, D]`` in x's dtype, and the rule's :class:`~rnnviz.engine.blocks.Trajectory`:
        states ``{"S": [B, T, n_v, d_k, d_v]}``, inputs as :func:`layer_step` reads them
        (None in the chunked form).

    Example:
        >>> from types import SimpleNamespace
        >>> spec = SimpleNamespace(linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=4,
        ...                        linear_value_head_dim=3, rms_norm_eps=1e-6)
        >>> shapes = {"in_proj_qkvz.weight": (20, 8), "in_proj_ba.weight": (4, 8),
        ...           "conv1d.weight": (14, 1, 4), "dt_bias": (2,), "A_log": (2,), "norm.weight": (3,),
        ...           "out_proj.weight": (8, 6)}
        >>> p = {name: jnp.full(shape, 0.1) for name, shape in shapes.items()}
        >>> out, trajectory = layer(spec, p, jnp.ones((2, 5, 8)), None)
        >>> out.shape, trajectory.states["S"].shape
        ((2, 5, 8), (2, 5, 2, 4, 3))
    """
    batch, steps, _ = x.shape
    n_k, n_v = spec.linear_num_key_heads, spec.linear_num_value_heads
    d_k, d_v = spec.linear_key_head_dim, spec.linear_value_head_dim
    parts = split_projections(spec, linear(x, p["in_proj_qkvz.weight"]), linear(x, p["in_proj_ba.weight"]))
    mixed = short_conv(jnp.concatenate([parts["q"], parts["k"], parts["v"]], axis=-1), p["conv1d.weight"])
    q, k, v = jnp.split(mixed.astype(x.dtype), [n_k * d_k, 2 * n_k * d_k], axis=-1)
    wide = promoted(wide_dtype(x.dtype), wide_dtype(p["A_log"].dtype))
    heads = lambda a: jnp.repeat(a.reshape(batch, steps, n_k, d_k).astype(wide), n_v // n_k, axis=2)  # noqa: E731
    inputs = {
        "alpha": decays(parts["a"], p["A_log"], p["dt_bias"]).astype(wide),
        "beta": _pointwise(jax.nn.sigmoid, parts["b"]).astype(wide),
        "k": l2_normalised(heads(k)),
        "v": v.reshape(batch, steps, n_v, d_v).astype(wide),
    }
    q = l2_normalised(heads(q)) * d_k**-0.5
    if chunked:
        if probe is not None:
            raise ValueError("the chunked form has no step's state to probe: chunked=False with a probe")
        o, trajectory = chunked_delta_rule(inputs, q), None
    else:
        o, states = delta_rule(inputs, q, None if probe is None else probe.astype(wide))
        trajectory = Trajectory({"S": states}, inputs)
    normed = gated_rms_norm(o.astype(x.dtype), parts["z"], p["norm.weight"], spec.rms_norm_eps)
    out = linear(normed.reshape(batch, steps, n_v * d_v).astype(x.dtype), p["out_proj.weight"])
    return out, trajectory


def layer_step(state: dict, inputs: dict) -> dict:
    r"""One step of the rule, every value head:
    :math:`S_t = α_t (I − β_t k_t k_t^\top) S_{t−1} + β_t k_t v_t^\top`.

    Args:
        state: ``{"S": [B, n_v, d_k, d_v]}``, S_{t−1}.
        inputs: step t's ``{"alpha", "beta": [B, n_v], "k": [B, n_v, d_k], "v": [B, n_v, d_v]}``
            (a :class:`~rnnviz.engine.blocks.Trajectory`'s inputs at t).

    Returns:
        ``{"S": [B, n_v, d_k, d_v]}``, S_t before the probe.
    """
    return {"S": state_update(state["S"], inputs["alpha"], inputs["beta"], inputs["k"], inputs["v"])}

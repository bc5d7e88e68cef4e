r"""RecurrentGemma (Griffin) as a pure JAX function of its checkpoint's tensors.

Follows transformers' ``models/recurrent_gemma/modeling_recurrent_gemma.py``
(``RecurrentGemmaForCausalLM``, ``RecurrentGemmaDecoderLayer``, ``RecurrentGemmaRecurrentBlock``,
``RecurrentGemmaRglru``, ``RecurrentGemmaAttention``, ``RecurrentGemmaMlp``) in its forward pass
over a whole sequence from position 0. With x the residual stream ``[B, T, D]``:

.. math::
    x^{(0)} = E[\text{ids}] \cdot \text{bf16}(\sqrt{D}),\qquad
    r = x + \text{temporal}(\text{norm}(x)),\qquad x' = r + \text{mlp}(\text{norm}(r)),\\
    \text{norm}(x) = (1 + w) ⊙ x / \sqrt{\text{mean}(x^2) + ε},\qquad
    \text{logits} = c \tanh(\text{norm}(x^{(L)}) E^⊤ / c)

The recurrent block: ``y = gelu(W_y x)``, ``u = conv(W_x x)`` (causal depthwise, K taps, bias),
then the RG-LRU over u, whose gates multiply u by block-diagonal weights ``[H, b, b]`` (u @ W,
per block):

.. math::
    i_t = σ(u_t W_i + b_i),\quad r_t = σ(u_t W_r + b_r),\quad
    \log a_t = −8\, r_t ⊙ \text{softplus}(Λ),\\
    h_t = a_t ⊙ h_{t−1} + \sqrt{1 − a_t^2} ⊙ (i_t ⊙ u_t),\qquad
    \text{out} = W_o (y ⊙ h)

reset at t = 0 (a_0 = 0, multiplier 1: h_0 = i_0 ⊙ u_0). The square root's derivative is
clipped at 1000 as transformers' ``SqrtBoundDerivative`` does, so gradients match where a_t → 1.

The attention block: multi-query/grouped attention, the first ``rotary_dim`` features of each
head rotated (rotate-half convention), scaled by d^{−1/2}, each query seeing itself and the
``attention_window_size − 1`` keys before it (``create_sliding_window_causal_mask``:
``q − window < k ≤ q``). The MLP: ``down(gelu(gate(x)) ⊙ up(x))``, all with biases.

Subtleties kept: the embedding scale is √D rounded to bfloat16 (transformers keeps it as a
bfloat16 buffer) before it is cast to the compute dtype; the norms compute in float32 and
multiply by (1 + w) before casting back; the RG-LRU's state accumulates in float32 whatever the
weights' dtype. Weights in bfloat16 compute in bfloat16 as transformers does (its residual
stream stays in the weights' dtype). One difference: torch's ``nn.Embedding(padding_idx=0)``
leaves the pad token's row out of the lookup's gradient; here the gradient is the full
derivative, so the two agree on every row only when the pad token is not among the inputs.

The probes: ``stream[l]`` ``[B, T, D]`` is added to the residual stream entering layer l (row 0
after the embedding scale, row L before the final norm); ``states[l]`` ``{"h": [B, T, W]}``
is added to the RG-LRU's h_t (after the reset, before the block reads it), None for attention.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from rnnviz.checkpoints.families.recurrent_gemma import RecurrentGemmaInit, tensors, tied
from rnnviz.engine.blocks import Probes, Trajectory, embedded, init, probed, wide_dtype

if TYPE_CHECKING:
    from rnnviz.checkpoints.families.recurrent_gemma import RecurrentGemmaSpec

#: Whether a step's Jacobian in the state is diagonal: ∂h_t/∂h_{t−1} = diag(a_t): the RG-LRU's gates read
#: the layer's input, never its state.
STATE_IS_DIAGONAL = True


Params = dict[str, jax.Array]

#: transformers' bound on the derivative of √x in the RG-LRU (``_MAX_SQRT_GRADIENT``).
MAX_SQRT_GRADIENT = 1000.0

#: The RG-LRU's constant c in ``log a = −c · r · softplus(Λ)``.
GATE_C = 8.0


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """``(1 + w) ⊙ x / √(mean(x²) + ε)`` over the last axis, in float32, cast back to x's dtype.

    Args:
        x: ``[B, T, D]``.
        weight: w ``[D]`` (Gemma's norms store the offset from 1).
        eps: ε.

    Returns:
        ``[B, T, D]`` in x's dtype.
    """
    xf = x.astype(wide_dtype(x.dtype))
    scaled = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (scaled * (1.0 + weight.astype(xf.dtype))[None, None]).astype(x.dtype)


def linear(params: Params, prefix: str, x: jax.Array) -> jax.Array:
    """torch's ``nn.Linear``: ``x W^⊤ + b`` ``[B, T, O]`` for x ``[B, T, I]``, W ``[O, I]``, and b
    ``[O]`` where the file has one."""
    out = jnp.einsum("bti,oi->bto", x, params[prefix + ".weight"])
    bias = params.get(prefix + ".bias")
    return out if bias is None else out + bias[None, None]


def activation(spec: RecurrentGemmaSpec, x: jax.Array) -> jax.Array:
    """The config's GELU: tanh-approximated (``gelu_pytorch_tanh``) or exact (``gelu``)."""
    return jax.nn.gelu(x, approximate=spec.hidden_activation == "gelu_pytorch_tanh")


def embed(params: Params, ids: jax.Array) -> jax.Array:
    """``E[ids] · bf16(√D)`` ``[B, T, D]`` in the embeddings' dtype, from ids ``[B, T]``; float
    inputs ``[B, T, D]`` are ``E[ids]`` themselves, scaled alike (``inputs_embeds``)."""
    x = embedded(params, "model.embed_tokens.weight", ids)
    scale = jnp.asarray(math.sqrt(x.shape[-1]), jnp.bfloat16).astype(x.dtype)
    return x * scale


def causal_conv(x: jax.Array, weight: jax.Array, bias: jax.Array) -> jax.Array:
    """torch's depthwise ``Conv1d(padding=K − 1)`` cut to its first T outputs:
    ``out_t = b + Σ_k w_k ⊙ x_{t − K + 1 + k}`` (zero before the start).

    Args:
        x: ``[B, T, C]``.
        weight: ``[C, 1, K]``, torch's layout.
        bias: ``[C]``.

    Returns:
        ``[B, T, C]``.
    """
    taps, seq_len = weight.shape[-1], x.shape[1]
    padded = jnp.pad(x, ((0, 0), (taps - 1, 0), (0, 0)))
    out = sum(padded[:, k : k + seq_len] * weight[None, None, :, 0, k] for k in range(taps))
    return out + bias[None, None]


def block_diagonal(x: jax.Array, weight: jax.Array, bias: jax.Array) -> jax.Array:
    """``x W + b`` with W block-diagonal, stored as its H blocks: block h maps
    ``x[..., h·b:(h+1)·b]`` by ``W[h]`` (x on the left, as ``torch.baddbmm`` applies it).

    Args:
        x: ``[B, T, H·b]``.
        weight: ``[H, b, b]``.
        bias: ``[H, b]``.

    Returns:
        ``[B, T, H·b]``.
    """
    batch, seq_len, width = x.shape
    blocks = x.reshape(batch, seq_len, weight.shape[0], weight.shape[1])
    out = jnp.einsum("bthi,hij->bthj", blocks, weight) + bias[None, None]
    return out.reshape(batch, seq_len, width)


@jax.custom_jvp
def sqrt_bounded(x: jax.Array) -> jax.Array:
    """√x whose derivative is ``1 / √max(4x, 1/1000²)``: at most 1000 (transformers'
    ``SqrtBoundDerivative``, so that 1 − a² → 0 gives no infinite gradient)."""
    return jnp.sqrt(x)


@sqrt_bounded.defjvp
def _sqrt_bounded_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
    (x,), (dx,) = primals, tangents
    return jnp.sqrt(x), dx / jnp.sqrt(jnp.maximum(4.0 * x, 1.0 / MAX_SQRT_GRADIENT**2))


def linear_scan(a: jax.Array, x: jax.Array, probe: jax.Array | None = None) -> jax.Array:
    """``h_t = a_t ⊙ h_{t−1} + x_t (+ p_t)`` from h_{−1} = 0, sequentially, in float32.

    Args:
        a: ``[B, T, W]``, the decay (a_0 = 0 at the reset).
        x: ``[B, T, W]``, the normalised inputs.
        probe: ``[B, T, W]`` float32 added to h_t, a norm probe ``[B, T]``
            (:func:`~rnnviz.engine.blocks.probed`), or None.

    Returns:
        h ``[B, T, W]`` float32.
    """
    a_t, x_t = (jnp.swapaxes(v.astype(wide_dtype(x.dtype)), 0, 1) for v in (a, x))
    p_t = None if probe is None else jnp.swapaxes(probe, 0, 1)

    def step(h: jax.Array, inputs: tuple[jax.Array, jax.Array, jax.Array | None]):
        a_s, x_s, p_s = inputs
        h = a_s * h + x_s
        h = h if p_s is None else probed(h, p_s)
        return h, h

    _, hs = jax.lax.scan(step, jnp.zeros_like(x_t[0]), (a_t, x_t, p_t))
    return jnp.swapaxes(hs, 0, 1)


def rg_lru(params: Params, prefix: str, u: jax.Array, probe: dict | None) -> tuple[jax.Array, Trajectory]:
    """The RG-LRU over a whole sequence from position 0 (the reset at t = 0).

    Args:
        params: the tensors.
        prefix: ``"model.layers.{l}.temporal_block.rg_lru."``.
        u: ``[B, T, W]``, the convolution's output.
        probe: ``{"h": [B, T, W]}`` added to h_t (or a norm probe ``[B, T]``), or None.

    Returns:
        h ``[B, T, W]`` cast to u's dtype, and the scan's
        :class:`~rnnviz.engine.blocks.Trajectory`: states ``{"h"}`` float32, inputs
        ``{"a", "x"}`` ``[B, T, W]`` float32 (:func:`layer_step`).
    """
    gate_i = jax.nn.sigmoid(
        block_diagonal(u, params[prefix + "input_gate_weight"], params[prefix + "input_gate_bias"])
    )
    gate_r = jax.nn.sigmoid(
        block_diagonal(u, params[prefix + "recurrent_gate_weight"], params[prefix + "recurrent_gate_bias"])
    )
    log_a = -GATE_C * gate_r * jax.nn.softplus(params[prefix + "recurrent_param"])[None, None]
    reset = (jnp.arange(u.shape[1]) == 0)[None, :, None]
    multiplier = jnp.where(reset, jnp.ones_like(log_a), sqrt_bounded(1 - jnp.exp(2 * log_a)))
    a = jnp.where(reset, jnp.zeros_like(log_a), jnp.exp(log_a))
    state = wide_dtype(u.dtype)
    inputs = {"a": a.astype(state), "x": (u * gate_i * multiplier).astype(state)}
    h = linear_scan(inputs["a"], inputs["x"], None if probe is None else probe["h"])
    return h.astype(u.dtype), Trajectory({"h": h}, inputs)


def recurrent_block(
    spec: RecurrentGemmaSpec, params: Params, i: int, x: jax.Array, probe: dict | None
) -> tuple[jax.Array, Trajectory]:
    """Griffin's recurrent block: ``linear_out(gelu(linear_y x) ⊙ rg_lru(conv(linear_x x)))``
    ``[B, T, D]`` for normed x ``[B, T, D]``, ``probe`` as :func:`rg_lru` takes it; and the
    RG-LRU's trajectory."""
    p = spec.name(i, "temporal_block.")
    y = activation(spec, linear(params, p + "linear_y", x))
    u = causal_conv(
        linear(params, p + "linear_x", x), params[p + "conv_1d.weight"], params[p + "conv_1d.bias"]
    )
    h, trajectory = rg_lru(params, p + "rg_lru.", u, probe)
    return linear(params, p + "linear_out", y * h), trajectory


def rotary(spec: RecurrentGemmaSpec, seq_len: int, dtype: jnp.dtype) -> tuple[jax.Array, jax.Array]:
    """``(cos, sin)`` ``[T, rotary_dim]`` at positions 0 … T − 1: angles ``t · θ^{−2j/rotary_dim}``,
    the j's twice (rotate-half convention), computed in float32 and cast to ``dtype``."""
    dim = spec.rotary_dim
    inv_freq = 1.0 / spec.rope_theta ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
    angles = jnp.arange(seq_len, dtype=jnp.float32)[:, None] * inv_freq[None]
    angles = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype)


def apply_rotary(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotates the first ``rotary_dim`` features of each head: ``x cos + rotate_half(x) sin``,
    ``rotate_half([x₁, x₂]) = [−x₂, x₁]``; the rest pass. x ``[B, T, heads, d]``, cos and sin
    ``[T, rotary_dim]``."""
    dim = cos.shape[-1]
    rot, rest = x[..., :dim], x[..., dim:]
    half = dim // 2
    turned = jnp.concatenate([-rot[..., half:], rot[..., :half]], axis=-1)
    rot = rot * cos[None, :, None] + turned * sin[None, :, None]
    return jnp.concatenate([rot, rest], axis=-1)


def window_mask(seq_len: int, window: int) -> jax.Array:
    """Which keys each query sees ``[T_q, T_k]``: ``q − window < k ≤ q``."""
    q = jnp.arange(seq_len)[:, None]
    k = jnp.arange(seq_len)[None, :]
    return (k <= q) & (k > q - window)


def attention_block(spec: RecurrentGemmaSpec, params: Params, i: int, x: jax.Array) -> jax.Array:
    """Local grouped-query attention with partial rotary embeddings, ``o_proj`` of the heads ``[B, T, D]``.

    Args:
        spec: the model's sizes.
        params: the tensors.
        i: the layer index.
        x: ``[B, T, D]``, normed.

    Returns:
        ``[B, T, D]``: ``o_proj(softmax(q k^⊤ / √d + mask) v)``, each key/value head shared by
        H / H_kv consecutive query heads; the softmax in float32.
    """
    p = spec.name(i, "temporal_block.")
    batch, seq_len, _ = x.shape
    d = spec.head_dim
    q = linear(params, p + "q_proj", x).reshape(batch, seq_len, -1, d)
    k = linear(params, p + "k_proj", x).reshape(batch, seq_len, -1, d)
    v = linear(params, p + "v_proj", x).reshape(batch, seq_len, -1, d)
    cos, sin = rotary(spec, seq_len, x.dtype)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    groups = spec.num_attention_heads // spec.num_key_value_heads
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * d**-0.5
    mask = window_mask(seq_len, spec.attention_window_size)[None, None]
    scores = jnp.where(mask, scores.astype(wide_dtype(scores.dtype)), -jnp.inf)
    weights = jax.nn.softmax(scores, axis=-1).astype(x.dtype)
    heads = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, seq_len, -1)
    return linear(params, p + "o_proj", heads)


def mlp(spec: RecurrentGemmaSpec, params: Params, i: int, x: jax.Array) -> jax.Array:
    """``down(gelu(gate(x)) ⊙ up(x))`` ``[B, T, D]``, F = intermediate_size / 2 wide inside."""
    p = spec.name(i, "mlp_block.")
    return linear(
        params,
        p + "down_proj",
        activation(spec, linear(params, p + "gate_proj", x)) * linear(params, p + "up_proj", x),
    )


def layer(
    spec: RecurrentGemmaSpec, params: Params, i: int, x: jax.Array, probe: dict | None
) -> tuple[jax.Array, Trajectory | None]:
    """One residual layer: ``r = x + temporal(norm(x))``, then ``r + mlp(norm(r))`` ``[B, T, D]``;
    and the RG-LRU's trajectory (None for an attention layer)."""
    eps = spec.rms_norm_eps
    normed = rms_norm(x, params[spec.name(i, "temporal_pre_norm.weight")], eps)
    trajectory = None
    if spec.layer_kinds[i] == "recurrent":
        mixed, trajectory = recurrent_block(spec, params, i, normed, probe)
    else:
        mixed = attention_block(spec, params, i, normed)
    residual = mixed + x
    out = mlp(spec, params, i, rms_norm(residual, params[spec.name(i, "channel_pre_norm.weight")], eps))
    return out + residual, trajectory


def forward(
    spec: RecurrentGemmaSpec,
    params: Params,
    inputs: jax.Array,
    probes: Probes | None = None,
    *,
    with_states: bool = False,
    head: bool = True,
) -> jax.Array | tuple[jax.Array, tuple[Trajectory | None, ...]]:
    """The soft-capped logits ``[B, T, V]`` float32 of token ids ``[B, T]``, from position 0.

    Args:
        spec: the model's sizes (:class:`~rnnviz.checkpoints.families.recurrent_gemma.RecurrentGemmaSpec`).
        params: ``{name: array}`` as :func:`~rnnviz.checkpoints.families.recurrent_gemma.tensors`
            names them, tied ones filled in; their dtype (float32 or bfloat16) is the compute dtype.
        inputs: ``[B, T]`` int token ids, or the embeddings ``<float>[B, T, D]`` (``inputs_embeds``).
        probes: optional :class:`~rnnviz.engine.blocks.Probes`: ``stream`` L + 1 arrays
            ``[B, T, D]``, ``states`` as :func:`state_shapes`.
        with_states: also return each layer's :class:`~rnnviz.engine.blocks.Trajectory`.
        head: False: the final norm's output ``[B, T, D]`` in place of the logits (what
            :mod:`~rnnviz.engine.blocks.vectors` reads out).

    Returns:
        ``c · tanh(norm(x^{(L)}) W_head^⊤ / c)`` ``[B, T, V]`` float32; with ``with_states``,
        ``(logits, trajectories)``: L entries, a recurrent layer's states ``{"h": [B, T, W]}``
        and inputs as :func:`layer_step` reads them, None for attention.

    >>> import jax.numpy as jnp
    >>> from rnnviz.checkpoints.families.recurrent_gemma import parse, tensors
    >>> spec = parse({"num_hidden_layers": 2, "vocab_size": 11, "hidden_size": 8, "intermediate_size": 16,
    ...               "num_attention_heads": 2, "block_types": ["recurrent", "attention"]}, "model/")
    >>> params = {n: jnp.full(s, 0.1) for n, s in tensors(spec).items()}
    >>> forward(spec, params, jnp.zeros((2, 5), jnp.int32)).shape
    (2, 5, 11)
    """
    x = embed(params, inputs)
    trajectories = []
    for i in range(spec.n_layers):
        if probes is not None:
            x = x + probes.stream[i].astype(x.dtype)
        x, trajectory = layer(spec, params, i, x, None if probes is None else probes.states[i])
        trajectories.append(trajectory)
    if probes is not None:
        x = x + probes.stream[spec.n_layers].astype(x.dtype)
    x = rms_norm(x, params["model.final_norm.weight"], spec.rms_norm_eps)
    if not head:
        return (x, tuple(trajectories)) if with_states else x
    cap = spec.logits_soft_cap
    logits = jnp.einsum("btd,vd->btv", x, params["lm_head.weight"])
    logits = (jnp.tanh(logits / cap) * cap).astype(wide_dtype(logits.dtype))
    return (logits, tuple(trajectories)) if with_states else logits


def layer_step(spec: RecurrentGemmaSpec, params: Params, layer: int, state: dict, inputs: dict) -> dict:
    """One step of a recurrent layer's RG-LRU: ``h_t = a_t ⊙ h_{t−1} + x_t``.

    Args:
        spec: the model's sizes.
        params: every tensor (unused: the step's inputs hold all it reads).
        layer: l, a recurrent layer.
        state: ``{"h": [B, W]}`` float32, h_{t−1}.
        inputs: step t's ``{"a": [B, W], "x": [B, W]}``: the decay and the gated, normalised
            input √(1 − a_t²) ⊙ i_t ⊙ u_t (a :class:`~rnnviz.engine.blocks.Trajectory`'s
            inputs at t; at t = 0, the reset, a_0 = 0).

    Returns:
        ``{"h": [B, W]}``, h_t before the probe.
    """
    return {"h": inputs["a"] * state["h"] + inputs["x"]}


def state_shapes(
    spec: RecurrentGemmaSpec, batch: int, seq_len: int
) -> tuple[dict[str, jax.ShapeDtypeStruct] | None, ...]:
    """Each layer's state probe: ``{"h": [B, T, W]}`` float32 for a recurrent layer, None for attention.

    >>> from rnnviz.checkpoints.families.recurrent_gemma import parse
    >>> config = {"num_hidden_layers": 3, "hidden_size": 8, "lru_width": 12, "num_attention_heads": 2}
    >>> spec = parse(config, "model/")
    >>> [None if s is None else s["h"].shape for s in state_shapes(spec, batch=2, seq_len=5)]
    [(2, 5, 12), (2, 5, 12), None]
    """
    leaf = jax.ShapeDtypeStruct((batch, seq_len, spec.lru_width), jnp.float32)
    return tuple({"h": leaf} if kind == "recurrent" else None for kind in spec.layer_kinds)


def recurrent_param_range(min_rad: float, max_rad: float) -> init.Initialiser:
    r"""The RG-LRU's Λ drawn so that a = :math:`e^{−\mathrm{softplus}(Λ)}` starts between ``min_rad``
    and ``max_rad`` (the reference's ``rnn_param_init``): :math:`Λ = \log(u^{-1/2} − 1)`,
    u ~ U(min_rad² + 10⁻⁸, max_rad² + 10⁻⁸), a = √u.

    >>> lam = recurrent_param_range(0.5, 0.6)(jax.random.key(0), (4,))
    >>> bool(((jnp.exp(-jax.nn.softplus(lam)) > 0.49) & (jnp.exp(-jax.nn.softplus(lam)) < 0.61)).all())
    True
    """

    def draw(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        u = jax.random.uniform(key, shape, jnp.float32, min_rad**2 + 1e-8, max_rad**2 + 1e-8)
        return jnp.log(jnp.exp(-0.5 * jnp.log(u)) - 1.0)

    return draw


def recurrent_param_init(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """The RG-LRU's Λ as transformers draws it (``RecurrentGemmaRglru``): a between 0.9 and 0.999
    (:func:`recurrent_param_range`)."""
    return recurrent_param_range(0.9, 0.999)(key, shape)


def _initialiser(spec: RecurrentGemmaSpec, settings: RecurrentGemmaInit, name: str) -> init.Initialiser:
    """How ``RecurrentGemmaPreTrainedModel._init_weights`` leaves tensor ``name``."""
    d, s = spec.hidden_size, settings.w_init_variance_scale
    final = 2.0 / spec.num_hidden_layers  # transformers' final_w_init_variance_scale
    rest = init.normal(math.sqrt(s / spec.conv1d_width))  # its rule for every other layer
    if name.endswith(("bias", "norm.weight")):  # the norms scale by 1 + w
        return init.constant(0.0)
    if name == "model.embed_tokens.weight":
        return init.zero_row(rest, settings.pad_token_id)
    rules = {
        "linear_x": init.normal(math.sqrt(1 / d)),
        "linear_y": init.normal(math.sqrt(1 / d)),
        "q_proj": init.normal(math.sqrt(1 / d)),
        "k_proj": init.normal(math.sqrt(1 / d)),
        "v_proj": init.normal(math.sqrt(1 / d)),
        "linear_out": init.normal(math.sqrt(final / spec.lru_width)),
        "o_proj": init.normal(math.sqrt(final / d)),
        "recurrent_param": recurrent_param_init,
        "input_gate_weight": init.normal(math.sqrt(s / spec.block_width)),
        "recurrent_gate_weight": init.normal(math.sqrt(s / spec.block_width)),
    }
    return rules.get(name.removesuffix(".weight").rsplit(".", 1)[-1], rest)


def init_params(
    spec: RecurrentGemmaSpec,
    key: jax.Array,
    *,
    dtype: str = "float32",
    settings: RecurrentGemmaInit | None = None,
) -> Params:
    r"""A fresh RecurrentGemma, drawn as transformers' ``RecurrentGemmaForCausalLM(config)`` draws it.

    With s = ``w_init_variance_scale``, K the convolution's width and L the layers:
    ``linear_x``, ``linear_y``, q, k and v N(0, 1/D); ``linear_out`` N(0, (2/L)/W) and ``o_proj``
    N(0, (2/L)/D); the RG-LRU's gate blocks N(0, s/b) and Λ from :func:`recurrent_param_init`;
    the convolution, the MLP and the embeddings N(0, s/K) (the row ``pad_token_id`` zero); every
    bias 0, every norm's w 0 (they scale by 1 + w).

    Args:
        spec: the sizes.
        key: the PRNG key; each tensor draws with its own key folded in from its name.
        dtype: ``"float32"`` or ``"bfloat16"`` (drawn in float32, then cast).
        settings: the config's initialisation fields (default: transformers' defaults).

    Returns:
        ``{name: array}``, the names and shapes of
        :func:`~rnnviz.checkpoints.families.recurrent_gemma.tensors`, the head the embeddings'
        own array when tied.

    Example:
        >>> from rnnviz.checkpoints.families.recurrent_gemma import parse
        >>> spec = parse({"num_hidden_layers": 2, "vocab_size": 32, "hidden_size": 16,
        ...               "intermediate_size": 32, "num_attention_heads": 2}, "demo")
        >>> params = init_params(spec, jax.random.key(0))
        >>> params["model.layers.0.temporal_block.rg_lru.input_gate_weight"].shape
        (2, 8, 8)
        >>> float(abs(params["model.embed_tokens.weight"][0]).max())  # pad_token_id 0
        0.0
    """
    rule = functools.partial(_initialiser, spec, settings or RecurrentGemmaInit())
    return init.draw(tensors(spec), rule, key, dtype, tied(spec))

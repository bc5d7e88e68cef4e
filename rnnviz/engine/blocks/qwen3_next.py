r"""Qwen3-Next as a pure JAX function of its checkpoint's tensors.

Follows transformers' ``models/qwen3_next/modeling_qwen3_next.py`` (``Qwen3NextForCausalLM``,
``Qwen3NextDecoderLayer``, ``Qwen3NextGatedDeltaNet``, ``Qwen3NextAttention``,
``Qwen3NextSparseMoeBlock``, ``Qwen3NextMLP``, ``Qwen3NextRMSNorm``) in its forward pass over a
whole sequence from position 0. With x the residual stream ``[B, T, D]``:

.. math::
    r = x + \mathrm{mixer}(\mathrm{norm}(x)),\qquad x' = r + \mathrm{mlp}(\mathrm{norm}(r)),\qquad
    \mathrm{norm}(x) = (1 + w) ⊙ x / \sqrt{\mathrm{mean}(x^2) + ε},\qquad
    \mathrm{logits} = W_{head}\, \mathrm{norm}(x^{(L)})

The mixer is a Gated DeltaNet layer (:mod:`rnnviz.engine.blocks.gated_deltanet`) or gated full
attention: ``[q; gate] = W_q x`` per head, q and k RMS-normed per head (``(1 + w)``), the first
2⌈rotary_dim / 2⌉ features rotated (rotate-half convention), causal softmax attention scaled by
d^{−1/2}, each key/value head shared by H / H_kv consecutive query heads, the heads multiplied
by σ(gate) before ``o_proj``. The MLP is ``down(SiLU(gate(x)) ⊙ up(x))``, or the sparse
mixture of experts: router probabilities p = softmax(W_r x) in float32, the top k kept (and
renormalised with ``norm_topk_prob``), the chosen experts' SwiGLU outputs summed with those
weights, plus the shared expert's times σ(w_s · x).

Subtleties kept: the experts run one after the other over every token (a ``lax.scan`` over
them), each weighted by its routing weight, zero where it was not chosen: the same sums as
transformers' dispatch, E / k times its multiplications, and the gradient reaches the router
through the chosen weights only, as torch's. Norms compute in float32 and multiply by (1 + w)
before casting back (``(x · w).to(dtype)``); the softmaxes run in float32. The residual stream
stays in the weights' dtype, as transformers'. One difference: torch's ``nn.Embedding`` with a
``pad_token_id`` leaves that row out of the lookup's gradient; here the gradient is the full
derivative.

The probes: ``stream[l]`` ``[B, T, D]`` is added to the residual stream entering layer l (row L
before the final norm); ``states[l]`` ``{"S": [B, T, n_v, d_k, d_v]}`` to a Gated DeltaNet
layer's state after each step, None for attention.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from rnnviz.checkpoints.families.qwen3_next import Qwen3NextInit, tensors, tied
from rnnviz.engine.blocks import Probes, Trajectory, embedded, gated_deltanet, init, wide_dtype
from rnnviz.engine.blocks.backbone import linear, row

if TYPE_CHECKING:
    from rnnviz.checkpoints.families.qwen3_next import Qwen3NextSpec

#: Whether a step's Jacobian in the state is diagonal: ∂S_t/∂S_{t−1} = α_t (I − β_t k_t k_tᵀ) on
#: the key axis: the delta rule's correction reads the state.
STATE_IS_DIAGONAL = False

Params = dict[str, jax.Array]


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """``Qwen3NextRMSNorm``: ``(1 + w) ⊙ x / √(mean(x²) + ε)`` over the last axis, in float32,
    cast back to x's dtype.

    Args:
        x: ``[..., D]``.
        weight: w ``[D]`` (the offset from 1).
        eps: ε.

    Returns:
        ``[..., D]`` in x's dtype.
    """
    xf = x.astype(wide_dtype(x.dtype))
    normed = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (normed * (1.0 + row(weight.astype(xf.dtype), x.ndim))).astype(x.dtype)


def _pointwise(fn: Any, x: jax.Array) -> jax.Array:
    """``fn(x)`` computed in float32 and rounded once to x's dtype, as torch's bfloat16 kernels do."""
    return fn(x.astype(wide_dtype(x.dtype))).astype(x.dtype)


def _layer(params: Params, spec: Qwen3NextSpec, i: int, part: str) -> Params:
    """Layer i's tensors under ``part`` (``"linear_attn."``), named without the prefix."""
    prefix = spec.name(i, part)
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def rotary(spec: Qwen3NextSpec, seq_len: int, dtype: jnp.dtype) -> tuple[jax.Array, jax.Array]:
    """``(cos, sin)`` ``[T, 2⌈rotary_dim / 2⌉]`` at positions 0 … T − 1: angles
    ``t · θ^{−2j/rotary_dim}``, j < ⌈rotary_dim / 2⌉, the j's twice (rotate-half convention),
    computed in float32 and cast to ``dtype``."""
    dim = spec.rotary_dim
    inv_freq = 1.0 / spec.rope_theta ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim)
    angles = jnp.arange(seq_len, dtype=jnp.float32)[:, None] * inv_freq[None]
    angles = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype)


def apply_rotary(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotates the first r features of each head: ``x cos + rotate_half(x) sin``,
    ``rotate_half([x₁, x₂]) = [−x₂, x₁]``; the rest pass. x ``[B, T, heads, d]``, cos and sin
    ``[T, r]``."""
    dim = cos.shape[-1]
    rot, rest = x[..., :dim], x[..., dim:]
    turned = jnp.concatenate([-rot[..., dim // 2 :], rot[..., : dim // 2]], axis=-1)
    rot = rot * cos[None, :, None] + turned * sin[None, :, None]
    return jnp.concatenate([rot, rest], axis=-1)


def attention(spec: Qwen3NextSpec, p: Params, x: jax.Array) -> jax.Array:
    """``Qwen3NextAttention``: gated causal grouped-query attention ``[B, T, D]`` of the normed x.

    Args:
        spec: the sizes.
        p: the layer's ``self_attn.`` tensors, named without the prefix.
        x: ``[B, T, D]``.

    Returns:
        ``o_proj(σ(gate) ⊙ softmax(q kᵀ / √d + causal) v)`` ``[B, T, D]``, the softmax in float32.
    """
    batch, steps, _ = x.shape
    d = spec.head_dim
    q_gate = linear(x, p["q_proj.weight"], p.get("q_proj.bias")).reshape(batch, steps, -1, 2 * d)
    q, gate = q_gate[..., :d], q_gate[..., d:].reshape(batch, steps, -1)
    q = rms_norm(q, p["q_norm.weight"], spec.rms_norm_eps)
    k = linear(x, p["k_proj.weight"], p.get("k_proj.bias")).reshape(batch, steps, -1, d)
    k = rms_norm(k, p["k_norm.weight"], spec.rms_norm_eps)
    v = linear(x, p["v_proj.weight"], p.get("v_proj.bias")).reshape(batch, steps, -1, d)
    cos, sin = rotary(spec, steps, x.dtype)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    groups = spec.num_attention_heads // spec.num_key_value_heads
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * d**-0.5
    causal = (jnp.arange(steps)[:, None] >= jnp.arange(steps)[None, :])[None, None]
    scores = jnp.where(causal, scores.astype(wide_dtype(scores.dtype)), -jnp.inf)
    weights = jax.nn.softmax(scores, axis=-1).astype(x.dtype)
    heads = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, steps, -1)
    gated = heads * _pointwise(jax.nn.sigmoid, gate)
    return linear(gated, p["o_proj.weight"], p.get("o_proj.bias"))


def swiglu(p: Params, prefix: str, x: jax.Array) -> jax.Array:
    """``Qwen3NextMLP``: ``down(SiLU(gate(x)) ⊙ up(x))`` ``[B, T, D]``."""
    hidden = _pointwise(jax.nn.silu, linear(x, p[prefix + "gate_proj.weight"])) * linear(
        x, p[prefix + "up_proj.weight"]
    )
    return linear(hidden, p[prefix + "down_proj.weight"])


def routing(spec: Qwen3NextSpec, router: jax.Array, x: jax.Array) -> jax.Array:
    """Each expert's routing weight ``[B, T, E]`` in x's dtype: the top-k router probabilities
    (softmax in float32, renormalised with ``norm_topk_prob``), zero for the others."""
    probs = jax.nn.softmax(linear(x, router).astype(wide_dtype(x.dtype)), axis=-1)
    top, chosen = jax.lax.top_k(probs, spec.num_experts_per_tok)
    if spec.norm_topk_prob:
        top = top / jnp.sum(top, axis=-1, keepdims=True)
    # cast before the scatter, as the reference casts the k weights to the logits' dtype
    return jnp.einsum(
        "btk,btke->bte", top.astype(x.dtype), jax.nn.one_hot(chosen, spec.num_experts, dtype=x.dtype)
    )


def sparse_moe(spec: Qwen3NextSpec, p: Params, x: jax.Array) -> jax.Array:
    """``Qwen3NextSparseMoeBlock`` ``[B, T, D]``: the routed experts' weighted sum plus the
    gated shared expert. The experts run in a ``lax.scan``, one ``[B, T, F_e]`` at a time.

    Args:
        spec: the sizes.
        p: the layer's ``mlp.`` tensors, named without the prefix.
        x: ``[B, T, D]``, normed.

    Returns:
        ``[B, T, D]`` in x's dtype.
    """
    weights = routing(spec, p["gate.weight"], x)
    stacked = {
        part: jnp.stack([p[f"experts.{e}.{part}.weight"] for e in range(spec.num_experts)])
        for part in ("gate_proj", "up_proj", "down_proj")
    }

    def expert(total: jax.Array, xs: tuple) -> tuple[jax.Array, None]:
        w, gate_w, up_w, down_w = xs
        out = swiglu({"gate_proj.weight": gate_w, "up_proj.weight": up_w, "down_proj.weight": down_w}, "", x)
        return total + (out * w[..., None]).astype(total.dtype), None

    xs = (jnp.moveaxis(weights, -1, 0), stacked["gate_proj"], stacked["up_proj"], stacked["down_proj"])
    routed, _ = jax.lax.scan(expert, jnp.zeros_like(x), xs)
    shared_gate = _pointwise(jax.nn.sigmoid, linear(x, p["shared_expert_gate.weight"]))
    return routed + shared_gate * swiglu(p, "shared_expert.", x)


def decoder_layer(
    spec: Qwen3NextSpec, params: Params, i: int, x: jax.Array, probe: dict | None, chunked: bool = False
) -> tuple[jax.Array, Trajectory | None]:
    """``Qwen3NextDecoderLayer``: ``r = x + mixer(norm(x))``, then ``r + mlp(norm(r))``
    ``[B, T, D]``; and the Gated DeltaNet's trajectory (None for attention, and in the
    ``chunked`` form: :func:`~rnnviz.engine.blocks.gated_deltanet.layer`)."""
    normed = rms_norm(x, params[spec.name(i, "input_layernorm.weight")], spec.rms_norm_eps)
    trajectory = None
    if spec.layer_types[i] == "linear_attention":
        state_probe = None if probe is None else probe["S"]
        mixed, trajectory = gated_deltanet.layer(
            spec, _layer(params, spec, i, "linear_attn."), normed, state_probe, chunked
        )
    else:
        mixed = attention(spec, _layer(params, spec, i, "self_attn."), normed)
    residual = x + mixed
    normed = rms_norm(residual, params[spec.name(i, "post_attention_layernorm.weight")], spec.rms_norm_eps)
    mlp = _layer(params, spec, i, "mlp.")
    out = sparse_moe(spec, mlp, normed) if spec.has_experts(i) else swiglu(mlp, "", normed)
    return residual + out, trajectory


def forward(
    spec: Qwen3NextSpec,
    params: Params,
    inputs: jax.Array,
    probes: Probes | None = None,
    *,
    with_states: bool = False,
    head: bool = True,
    chunked: bool = False,
) -> jax.Array | tuple[jax.Array, tuple[Trajectory | None, ...]]:
    """The logits of ``Qwen3NextForCausalLM`` ``[B, T, V]`` float32 of token ids ``[B, T]``, from position 0.

    Args:
        spec: the model's sizes (:class:`~rnnviz.checkpoints.families.qwen3_next.Qwen3NextSpec`).
        params: ``{name: array}`` as :func:`~rnnviz.checkpoints.families.qwen3_next.tensors`
            names them, tied ones filled in; their dtype is the compute dtype.
        inputs: ``[B, T]`` int token ids, or the embeddings ``<float>[B, T, D]`` (``inputs_embeds``).
        probes: optional :class:`~rnnviz.engine.blocks.Probes`: ``stream`` L + 1 arrays
            ``[B, T, D]``, ``states`` as :func:`state_shapes`.
        with_states: also return each layer's :class:`~rnnviz.engine.blocks.Trajectory`.
        head: False: the final norm's output ``[B, T, D]`` in place of the logits (what
            :mod:`~rnnviz.engine.blocks.vectors` reads out).
        chunked: the Gated DeltaNet layers in their chunked form (no probes, no trajectories).

    Returns:
        ``[B, T, V]`` float32 (float64 for float64 weights); with ``with_states``,
        ``(logits, trajectories)``: L entries, a Gated DeltaNet layer's states
        ``{"S": [B, T, n_v, d_k, d_v]}`` and inputs as :func:`layer_step` reads them, None
        for attention.

    >>> import jax.numpy as jnp
    >>> from rnnviz.checkpoints.families.qwen3_next import parse, tensors
    >>> spec = parse({"num_hidden_layers": 2, "vocab_size": 11, "hidden_size": 8, "intermediate_size": 16,
    ...               "layer_types": ["linear_attention", "full_attention"], "linear_num_key_heads": 1,
    ...               "linear_num_value_heads": 2, "linear_key_head_dim": 4, "linear_value_head_dim": 4,
    ...               "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4, "num_experts": 0},
    ...              "config.json")
    >>> params = {n: jnp.full(s, 0.1) for n, s in tensors(spec).items()}
    >>> forward(spec, params, jnp.zeros((2, 5), jnp.int32)).shape
    (2, 5, 11)
    """
    x = embedded(params, "model.embed_tokens.weight", inputs)
    trajectories = []
    for i in range(spec.n_layers):
        if probes is not None:
            x = x + probes.stream[i].astype(x.dtype)
        x, trajectory = decoder_layer(
            spec, params, i, x, None if probes is None else probes.states[i], chunked
        )
        trajectories.append(trajectory)
    if probes is not None:
        x = x + probes.stream[spec.n_layers].astype(x.dtype)
    x = rms_norm(x, params["model.norm.weight"], spec.rms_norm_eps)
    if not head:
        return (x, tuple(trajectories)) if with_states else x
    weight = params["lm_head.weight"]
    logits = linear(x.astype(weight.dtype), weight).astype(wide_dtype(weight.dtype))
    return (logits, tuple(trajectories)) if with_states else logits


def layer_step(spec: Qwen3NextSpec, params: Params, layer: int, state: dict, inputs: dict) -> dict:
    r"""One step of a Gated DeltaNet layer's rule, every value head:
    :math:`S_t = α_t (I − β_t k_t k_t^\top) S_{t−1} + β_t k_t v_t^\top`
    (:func:`rnnviz.engine.blocks.gated_deltanet.layer_step`).

    Args:
        spec: the model's sizes.
        params: every tensor (unused: the step's inputs hold all it reads).
        layer: l, a ``linear_attention`` layer.
        state: ``{"S": [B, n_v, d_k, d_v]}``, S_{t−1}.
        inputs: step t's ``{"alpha", "beta": [B, n_v], "k": [B, n_v, d_k], "v": [B, n_v, d_v]}``.

    Returns:
        ``{"S": [B, n_v, d_k, d_v]}``, S_t before the probe.
    """
    return gated_deltanet.layer_step(state, inputs)


def state_shapes(
    spec: Qwen3NextSpec, batch: int, seq_len: int
) -> tuple[dict[str, jax.ShapeDtypeStruct] | None, ...]:
    """Each layer's state probe: ``{"S": [B, T, n_v, d_k, d_v]}`` float32 for a Gated DeltaNet
    layer, None for attention.

    >>> from rnnviz.checkpoints.families.qwen3_next import parse
    >>> spec = parse({"num_hidden_layers": 2, "full_attention_interval": 2, "linear_num_key_heads": 2,
    ...               "linear_num_value_heads": 4, "linear_key_head_dim": 3, "linear_value_head_dim": 5},
    ...              "config.json")
    >>> [None if s is None else s["S"].shape for s in state_shapes(spec, batch=2, seq_len=7)]
    [(2, 7, 4, 3, 5), None]
    """
    shape = (
        batch,
        seq_len,
        spec.linear_num_value_heads,
        spec.linear_key_head_dim,
        spec.linear_value_head_dim,
    )
    leaf = jax.ShapeDtypeStruct(shape, jnp.float32)
    return tuple({"S": leaf} if kind == "linear_attention" else None for kind in spec.layer_types)


def a_log_range(low: float, high: float) -> init.Initialiser:
    """A Gated DeltaNet layer's ``A_log`` drawn as log of U(low, high) (A, the rate its decay
    multiplies, in that range).

    >>> a = jnp.exp(a_log_range(1.0, 2.0)(jax.random.key(0), (4,)))
    >>> bool(((a >= 1.0) & (a <= 2.0)).all())
    True
    """
    return lambda key, shape: jnp.log(jax.random.uniform(key, shape, jnp.float32, low, high))


def a_log_init(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """A Gated DeltaNet layer's ``A_log`` as transformers draws it: log of U(0.01, 16) (the lower
    bound kept from 0 so that the log stays finite; :func:`a_log_range`)."""
    return a_log_range(0.01, 16.0)(key, shape)


def _initialiser(spec: Qwen3NextSpec, settings: Qwen3NextInit, name: str) -> init.Initialiser:
    """How ``Qwen3NextPreTrainedModel._init_weights`` leaves tensor ``name``."""
    del spec
    if name.endswith("linear_attn.dt_bias"):
        return init.constant(1.0)
    if name.endswith("linear_attn.A_log"):
        return a_log_init
    if name.endswith("linear_attn.norm.weight"):  # the gated norm scales by w itself
        return init.constant(1.0)
    if name.endswith(("norm.weight", "layernorm.weight", "bias")):  # the other norms by 1 + w
        return init.constant(0.0)
    std = init.normal(settings.initializer_range)
    return init.zero_row(std, settings.pad_token_id) if name == "model.embed_tokens.weight" else std


def init_params(
    spec: Qwen3NextSpec, key: jax.Array, *, dtype: str = "float32", settings: Qwen3NextInit | None = None
) -> Params:
    r"""A fresh Qwen3-Next, drawn as transformers' ``Qwen3NextForCausalLM(config)`` draws it.

    Every projection, expert, router, convolution, the embeddings (the row ``pad_token_id`` zero)
    and an untied head N(0, initializer_range²), biases 0; each Gated DeltaNet layer's
    ``dt_bias`` 1 and ``A_log`` = log U(0.01, 16) (:func:`a_log_init`), its gated norm's w 1;
    every other RMS norm's w 0 (they scale by 1 + w). The experts, which transformers holds
    fused, are named one by one as its ``save_pretrained`` writes them.

    Args:
        spec: the sizes.
        key: the PRNG key; each tensor draws with its own key folded in from its name.
        dtype: ``"float32"`` or ``"bfloat16"`` (drawn in float32, then cast).
        settings: the config's initialisation fields (default: transformers' defaults).

    Returns:
        ``{name: array}``, the names and shapes of :func:`~rnnviz.checkpoints.families.qwen3_next.tensors`.

    Example:
        >>> from rnnviz.checkpoints.families.qwen3_next import parse
        >>> spec = parse({"num_hidden_layers": 1, "vocab_size": 32, "hidden_size": 16,
        ...               "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 4,
        ...               "linear_value_head_dim": 4, "num_experts": 0, "intermediate_size": 32}, "demo")
        >>> params = init_params(spec, jax.random.key(0))
        >>> params["model.layers.0.linear_attn.dt_bias"].tolist()
        [1.0, 1.0, 1.0, 1.0]
    """
    rule = functools.partial(_initialiser, spec, settings or Qwen3NextInit())
    return init.draw(tensors(spec), rule, key, dtype, tied(spec))

r"""A Qwen3-Next checkpoint (model type ``qwen3_next``): transformers' ``Qwen3NextForCausalLM``,
read from its ``config.json``.

L residual layers, each a token mixer (a Gated DeltaNet layer, ``linear_attention``, or gated
full attention, ``full_attention``, by ``layer_types``) and an MLP (a sparse mixture of experts
with a shared expert, or a dense SwiGLU MLP, by ``num_experts``, ``decoder_sparse_step`` and
``mlp_only_layers``). Layer l holds (transformers' names; D = hidden_size, n_k, n_v the linear
layers' key and value heads of d_k, d_v channels, K_d = n_k d_k, V_d = n_v d_v, c the
convolution's taps, H, H_kv, d the attention's heads and head width)::

    model.layers.{l}.input_layernorm.weight  post_attention_layernorm.weight   [D]
    linear:     linear_attn.in_proj_qkvz.weight [2 K_d + 2 V_d, D]   in_proj_ba.weight [2 n_v, D]
                linear_attn.conv1d.weight [2 K_d + V_d, 1, c]   dt_bias, A_log [n_v]
                linear_attn.norm.weight [d_v]   out_proj.weight [D, V_d]
    attention:  self_attn.q_proj.weight [2 H d, D]   k_proj, v_proj .weight [H_kv d, D]
                self_attn.o_proj.weight [D, H d]   (biases [rows] with attention_bias)
                self_attn.q_norm.weight, k_norm.weight [d]
    experts:    mlp.gate.weight [E, D]   mlp.experts.{e}.gate_proj, up_proj .weight [F_e, D]
                mlp.experts.{e}.down_proj.weight [D, F_e]   mlp.shared_expert.{gate,up}_proj.weight [F_s, D]
                mlp.shared_expert.down_proj.weight [D, F_s]   mlp.shared_expert_gate.weight [1, D]
    dense:      mlp.gate_proj, up_proj .weight [F, D]   mlp.down_proj.weight [D, F]

plus ``model.embed_tokens.weight`` [V, D], ``model.norm.weight`` [D] and ``lm_head.weight``
[V, D] (absent from the file while ``tie_word_embeddings``). The experts are named one by one,
as the published checkpoints and transformers' ``save_pretrained`` write them (transformers
fuses them into ``experts.gate_up_proj`` only in memory); the multi-token-prediction head
(``mtp.*``) the published checkpoints add is not part of the causal LM and is not read.

The layer pattern: ``layer_types`` where given, else transformers' rule from
``full_attention_interval`` n (default 4): layer l is full attention when (l + 1) is a multiple
of n. ``rope_theta`` and ``partial_rotary_factor`` are read from ``rope_parameters`` first,
then from the top level, as transformers does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rnnviz.checkpoints.families.fields import Fields
from rnnviz.checkpoints.record import CheckpointError, Family

#: The token mixers rnnviz implements, by their ``layer_types`` names.
KINDS = ("linear_attention", "full_attention")

#: ``hidden_act`` values: the MLPs' and the short convolution's activation (both names are SiLU).
ACTIVATIONS = ("silu", "swish")

#: transformers' ``Qwen3NextConfig`` defaults for the fields the forward pass reads.
DEFAULTS: dict[str, Any] = {
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 48,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.25,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "decoder_sparse_step": 1,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "num_experts_per_tok": 10,
    "num_experts": 512,
    "norm_topk_prob": True,
    "full_attention_interval": 4,
}


@dataclass(frozen=True)
class Qwen3NextSpec:
    """The sizes of a ``Qwen3NextForCausalLM``, named as its config names them.

    Attributes:
        vocab_size: V, the rows of the embeddings and of ``lm_head``.
        hidden_size: D, the residual stream's width.
        num_hidden_layers: L.
        layer_types: each layer's token mixer, ``"linear_attention"`` or ``"full_attention"``.
        linear_num_key_heads: n_k, the Gated DeltaNet's query/key heads.
        linear_num_value_heads: n_v, its value heads (n_k divides n_v: each query/key head
            serves n_v / n_k consecutive value heads, and the state has n_v heads).
        linear_key_head_dim: d_k.
        linear_value_head_dim: d_v.
        linear_conv_kernel_dim: c, the short causal convolution's taps.
        num_attention_heads: H, the full attention's query heads.
        num_key_value_heads: H_kv (H_kv divides H).
        head_dim: d, each attention head's width.
        rope_theta: the rotary embedding's base.
        partial_rotary_factor: the fraction of each attention head that is rotated.
        attention_bias: whether the attention's projections have biases.
        intermediate_size: F, the dense MLP's width.
        num_experts: E (0: every MLP dense).
        num_experts_per_tok: k, the experts each token is routed to.
        moe_intermediate_size: F_e, each expert's width.
        shared_expert_intermediate_size: F_s, the shared expert's width.
        norm_topk_prob: whether the k routing weights are renormalised to sum to 1.
        decoder_sparse_step: a layer l has experts when (l + 1) is a multiple of it.
        mlp_only_layers: layers with a dense MLP whatever the step says.
        rms_norm_eps: ε of every RMS norm.
        tie_word_embeddings: whether ``lm_head.weight`` is the embeddings.
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    layer_types: tuple[str, ...]
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rope_theta: float
    partial_rotary_factor: float
    attention_bias: bool
    intermediate_size: int
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    norm_topk_prob: bool
    decoder_sparse_step: int
    mlp_only_layers: tuple[int, ...]
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False

    @property
    def n_layers(self) -> int:
        """L."""
        return self.num_hidden_layers

    @property
    def d_model(self) -> int:
        """D: the residual stream's width."""
        return self.hidden_size

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """Each layer's token mixer (``layer_types``)."""
        return self.layer_types

    @property
    def key_dim(self) -> int:
        """K_d = n_k · d_k, the width of the Gated DeltaNet's q and of its k."""
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def value_dim(self) -> int:
        """V_d = n_v · d_v, the width of its v, of its gate z and of its output."""
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def rotary_dim(self) -> int:
        """``int(d · factor)``, the rotary embedding's dimension: its frequencies are
        θ^{−2j/rotary_dim}, j < ⌈rotary_dim / 2⌉, and each head's 2⌈rotary_dim / 2⌉ leading
        features are rotated (one more than rotary_dim where it is odd, as transformers does)."""
        return int(self.head_dim * self.partial_rotary_factor)

    def has_experts(self, layer: int) -> bool:
        """Whether layer ``layer``'s MLP is the sparse mixture of experts (transformers' rule)."""
        return (
            layer not in self.mlp_only_layers
            and self.num_experts > 0
            and (layer + 1) % self.decoder_sparse_step == 0
        )

    def name(self, layer: int, rest: str) -> str:
        """The file's name of one tensor of a layer: ``name(1, "linear_attn.A_log")``."""
        return f"model.layers.{layer}.{rest}"


def _layer_types(f: Fields, layers: int) -> tuple[str, ...]:
    """``layer_types`` checked, else transformers' pattern from ``full_attention_interval``."""
    value = f.config.get("layer_types")
    if value is None:
        interval = f.positive_int("full_attention_interval")
        return tuple(
            "full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)
        )
    if isinstance(value, str) or not isinstance(value, list | tuple) or len(value) != layers:
        raise f.refuse("layer_types", value, f"a list of num_hidden_layers ({layers}) of {list(KINDS)}")
    unknown = sorted({kind for kind in value if kind not in KINDS}, key=str)
    if unknown:
        raise CheckpointError(f.source, f"layer_types holds {unknown}; allowed: {list(KINDS)}")
    return tuple(value)


def _rope(f: Fields, head_dim: int) -> tuple[float, float]:
    """``(rope_theta, partial_rotary_factor)``: ``rope_parameters`` first, then the top level;
    only the default rotary embedding (no scaling)."""
    rope = f.config.get("rope_parameters") or {}
    if not isinstance(rope, Mapping):
        raise f.refuse("rope_parameters", rope, "a mapping")
    scaling = f.config.get("rope_scaling") or {}
    for field, given in (("rope_parameters", rope), ("rope_scaling", scaling)):
        kind = given.get("rope_type", given.get("type", "default")) if isinstance(given, Mapping) else given
        if kind != "default":
            raise CheckpointError(f.source, f"{field}'s rope_type is {kind!r}; allowed: 'default'")
    merged = f._replace(config={**f.config, **{k: v for k, v in rope.items() if v is not None}})
    theta, factor = merged.number("rope_theta"), merged.number("partial_rotary_factor")
    dim = int(head_dim * factor)
    if dim + dim % 2 > head_dim:  # transformers rotates the 2⌈dim/2⌉ leading features
        raise CheckpointError(
            f.source,
            f"partial_rotary_factor is {factor!r} (head_dim {head_dim}); allowed: a factor whose "
            "rotated features, int(head_dim · factor) rounded up to even, fit in head_dim",
        )
    return theta, factor


def _divides(f: Fields, small: str, large: str) -> tuple[int, int]:
    """Two head counts, the first dividing the second."""
    a, b = f.positive_int(small), f.positive_int(large)
    if b % a:
        raise CheckpointError(f.source, f"{small} is {a}; allowed: a divisor of {large} ({b})")
    return a, b


def _experts(f: Fields, layers: int) -> dict[str, Any]:
    """The MLP fields: E may be 0 (every MLP dense); k ≤ E where there are experts."""
    experts = f.get("num_experts")
    if isinstance(experts, bool) or not isinstance(experts, int) or experts < 0:
        raise f.refuse("num_experts", experts, "an integer ≥ 0")
    top_k = f.positive_int("num_experts_per_tok")
    if experts and top_k > experts:
        raise CheckpointError(
            f.source, f"num_experts_per_tok is {top_k}; allowed: at most num_experts ({experts})"
        )
    only = f.config.get("mlp_only_layers") or []
    indices = isinstance(only, list | tuple) and all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in only
    )
    if not indices:
        raise f.refuse("mlp_only_layers", only, f"a list of layer indices 0 … {layers - 1}")
    return {
        "num_experts": experts,
        "num_experts_per_tok": top_k,
        "moe_intermediate_size": f.positive_int("moe_intermediate_size"),
        "shared_expert_intermediate_size": f.positive_int("shared_expert_intermediate_size"),
        "norm_topk_prob": f.flag("norm_topk_prob"),
        "decoder_sparse_step": f.positive_int("decoder_sparse_step"),
        "mlp_only_layers": tuple(only),
    }


def _check_supported(f: Fields) -> None:
    """Refuse what transformers' forward pass (and so rnnviz's) does not compute as read."""
    kind = f.get("model_type", "qwen3_next")
    if kind != "qwen3_next":
        raise CheckpointError(f.source, f"model_type is {kind!r}; allowed: 'qwen3_next'")
    if f.get("hidden_act") not in ACTIVATIONS:
        raise f.refuse("hidden_act", f.get("hidden_act"), "silu")
    if f.config.get("quantization_config") is not None:
        # quantized weights are stored packed, under names and shapes of their own
        raise CheckpointError(f.source, "quantization_config is set; allowed: an unquantized checkpoint")


def parse(config: Mapping[str, Any], source: str) -> Qwen3NextSpec:
    """The spec of the model described by ``config.json``, absent fields at transformers' defaults.

    Args:
        config: the ``config.json`` mapping (``model_type`` ``"qwen3_next"`` when given).
        source: the file, named by any error.

    Returns:
        The :class:`Qwen3NextSpec`.

    Raises:
        CheckpointError: a missing or unsupported value, naming the field and what is allowed.

    >>> spec = parse({"num_hidden_layers": 4, "hidden_size": 32}, "config.json")
    >>> spec.layer_kinds
    ('linear_attention', 'linear_attention', 'linear_attention', 'full_attention')
    >>> spec.linear_num_value_heads, spec.head_dim, spec.rotary_dim, spec.has_experts(0)
    (32, 256, 64, True)
    """
    f = Fields(config, source, DEFAULTS, null_is_default=True)
    _check_supported(f)
    layers = f.positive_int("num_hidden_layers")
    key_heads, value_heads = _divides(f, "linear_num_key_heads", "linear_num_value_heads")
    kv_heads, heads = _divides(f, "num_key_value_heads", "num_attention_heads")
    head_dim = f.positive_int("head_dim")
    theta, factor = _rope(f, head_dim)
    return Qwen3NextSpec(
        vocab_size=f.positive_int("vocab_size"),
        hidden_size=f.positive_int("hidden_size"),
        num_hidden_layers=layers,
        layer_types=_layer_types(f, layers),
        linear_num_key_heads=key_heads,
        linear_num_value_heads=value_heads,
        linear_key_head_dim=f.positive_int("linear_key_head_dim"),
        linear_value_head_dim=f.positive_int("linear_value_head_dim"),
        linear_conv_kernel_dim=f.positive_int("linear_conv_kernel_dim"),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rope_theta=theta,
        partial_rotary_factor=factor,
        attention_bias=f.flag("attention_bias"),
        intermediate_size=f.positive_int("intermediate_size"),
        **_experts(f, layers),
        rms_norm_eps=f.number("rms_norm_eps", zero=True),
        tie_word_embeddings=f.flag("tie_word_embeddings"),
    )


def _linear_tensors(spec: Qwen3NextSpec, i: int) -> dict[str, tuple[int, ...]]:
    d, n_v = spec.hidden_size, spec.linear_num_value_heads
    p = spec.name(i, "linear_attn.")
    return {
        p + "in_proj_qkvz.weight": (2 * spec.key_dim + 2 * spec.value_dim, d),
        p + "in_proj_ba.weight": (2 * n_v, d),
        p + "conv1d.weight": (2 * spec.key_dim + spec.value_dim, 1, spec.linear_conv_kernel_dim),
        p + "dt_bias": (n_v,),
        p + "A_log": (n_v,),
        p + "norm.weight": (spec.linear_value_head_dim,),
        p + "out_proj.weight": (d, spec.value_dim),
    }


def _attention_tensors(spec: Qwen3NextSpec, i: int) -> dict[str, tuple[int, ...]]:
    d, h = spec.hidden_size, spec.head_dim
    q, kv = spec.num_attention_heads * h, spec.num_key_value_heads * h
    p = spec.name(i, "self_attn.")
    out = {}
    for name, rows, cols in (("q_proj", 2 * q, d), ("k_proj", kv, d), ("v_proj", kv, d), ("o_proj", d, q)):
        out[f"{p}{name}.weight"] = (rows, cols)
        if spec.attention_bias:
            out[f"{p}{name}.bias"] = (rows,)
    out[p + "q_norm.weight"] = (h,)
    out[p + "k_norm.weight"] = (h,)
    return out


def _swiglu_tensors(prefix: str, d: int, width: int) -> dict[str, tuple[int, ...]]:
    return {
        prefix + "gate_proj.weight": (width, d),
        prefix + "up_proj.weight": (width, d),
        prefix + "down_proj.weight": (d, width),
    }


def _mlp_tensors(spec: Qwen3NextSpec, i: int) -> dict[str, tuple[int, ...]]:
    d, p = spec.hidden_size, spec.name(i, "mlp.")
    if not spec.has_experts(i):
        return _swiglu_tensors(p, d, spec.intermediate_size)
    out = {p + "gate.weight": (spec.num_experts, d)}
    for e in range(spec.num_experts):
        out.update(_swiglu_tensors(f"{p}experts.{e}.", d, spec.moe_intermediate_size))
    out.update(_swiglu_tensors(p + "shared_expert.", d, spec.shared_expert_intermediate_size))
    out[p + "shared_expert_gate.weight"] = (1, d)
    return out


def tensors(spec: Qwen3NextSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor of the model, named as the checkpoint's file names them, with its shape
    (``lm_head.weight`` included even when tied).

    >>> spec = parse({"num_hidden_layers": 2, "vocab_size": 64, "hidden_size": 16, "layer_types":
    ...               ["linear_attention", "full_attention"], "linear_num_key_heads": 2,
    ...               "linear_num_value_heads": 4, "linear_key_head_dim": 4, "linear_value_head_dim": 6,
    ...               "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
    ...               "num_experts": 3, "num_experts_per_tok": 2, "mlp_only_layers": [0]}, "config.json")
    >>> shapes = tensors(spec)
    >>> layer0, layer1 = "model.layers.0.", "model.layers.1."
    >>> shapes[layer0 + "linear_attn.in_proj_qkvz.weight"], shapes[layer0 + "mlp.up_proj.weight"]
    ((64, 16), (5632, 16))
    >>> shapes[layer1 + "self_attn.q_proj.weight"], shapes[layer1 + "mlp.experts.2.down_proj.weight"]
    ((32, 16), (16, 512))
    """
    d = spec.hidden_size
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (spec.vocab_size, d)}
    for i, kind in enumerate(spec.layer_types):
        out[spec.name(i, "input_layernorm.weight")] = (d,)
        out.update(_linear_tensors(spec, i) if kind == "linear_attention" else _attention_tensors(spec, i))
        out[spec.name(i, "post_attention_layernorm.weight")] = (d,)
        out.update(_mlp_tensors(spec, i))
    out["model.norm.weight"] = (d,)
    out["lm_head.weight"] = (spec.vocab_size, d)
    return out


def tied(spec: Qwen3NextSpec) -> dict[str, str]:
    """``{"lm_head.weight": "model.embed_tokens.weight"}`` while ``tie_word_embeddings``, else ``{}``."""
    return {"lm_head.weight": "model.embed_tokens.weight"} if spec.tie_word_embeddings else {}


@dataclass(frozen=True)
class Qwen3NextInit:
    """How transformers draws a fresh Qwen3-Next (``Qwen3NextPreTrainedModel._init_weights``): the
    config's initialisation fields, at its defaults.

    Attributes:
        initializer_range: σ of every projection, expert, router, convolution and embedding.
        pad_token_id: the embeddings' row set to zero (None: none).
    """

    initializer_range: float = 0.02
    pad_token_id: int | None = None


def init(config: Mapping[str, Any], source: str) -> Qwen3NextInit:
    """The :class:`Qwen3NextInit` of a ``config.json`` mapping, transformers' defaults for absent fields.

    Raises:
        CheckpointError: a non-positive range, or a ``pad_token_id`` outside the vocabulary.

    >>> init({"initializer_range": 0.05}, "demo")
    Qwen3NextInit(initializer_range=0.05, pad_token_id=None)
    """
    f = Fields(config, source, {**DEFAULTS, **dataclasses.asdict(Qwen3NextInit())})
    return Qwen3NextInit(
        initializer_range=f.number("initializer_range"),
        pad_token_id=f.row("pad_token_id", f.positive_int("vocab_size")),
    )


FAMILY = Family(model_types=("qwen3_next",), parse=parse, tensors=tensors, tied=tied, init=init)

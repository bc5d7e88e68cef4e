r"""A RecurrentGemma (Griffin) checkpoint (model type ``recurrent_gemma``): transformers'
``RecurrentGemmaForCausalLM``, read from its ``config.json``.

L residual layers, each a temporal block (an RG-LRU recurrent block or a local multi-query
attention block, by the repeating pattern ``block_types``) and a gated MLP, over tied
embeddings scaled by √hidden_size. Layer l holds (transformers' names, D = hidden_size,
W = lru_width, H = num_attention_heads, b = W / H, K = conv1d_width, F = intermediate_size / 2)::

    model.layers.{l}.temporal_pre_norm.weight              [D]
    recurrent:  temporal_block.linear_x / linear_y .weight [W, D]   .bias [W]
                temporal_block.conv_1d.weight [W, 1, K]   .bias [W]
                temporal_block.rg_lru.recurrent_param [W]
                temporal_block.rg_lru.{input,recurrent}_gate_weight [H, b, b]   _bias [H, b]
                temporal_block.linear_out.weight [D, W]   .bias [D]
    attention:  temporal_block.q_proj.weight [H·d, D]   k_proj, v_proj .weight [H_kv·d, D]
                (biases only with attention_bias)   o_proj.weight [D, H·d]   .bias [D]
    model.layers.{l}.channel_pre_norm.weight               [D]
    model.layers.{l}.mlp_block.{gate,up}_proj.weight [F, D] .bias [F]   down_proj.weight [D, F] .bias [D]

plus ``model.embed_tokens.weight`` [V, D], ``model.final_norm.weight`` [D] and
``lm_head.weight`` [V, D] (absent from the file while ``tie_word_embeddings``).

The layer pattern: transformers 5 reads ``block_types``; checkpoints written by older versions
(Google's own) spell it ``_block_types``, which transformers 5 silently ignores for its default
(recurrent, recurrent, attention). Both spellings are read here, ``block_types`` first.
Likewise ``rope_theta`` and ``partial_rotary_factor`` are read from ``rope_parameters`` first,
then from the top level, as transformers does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rnnviz.checkpoints.families.fields import Fields
from rnnviz.checkpoints.record import CheckpointError, Family

#: The temporal blocks rnnviz implements, by their ``block_types`` names.
KINDS = ("recurrent", "attention")

#: ``hidden_activation`` values: transformers' tanh-approximated GELU and the exact (erf) one.
ACTIVATIONS = ("gelu_pytorch_tanh", "gelu")

#: transformers' ``RecurrentGemmaConfig`` defaults (the 2B model's sizes).
DEFAULTS: dict[str, Any] = {
    "num_hidden_layers": 26,
    "vocab_size": 256000,
    "hidden_size": 2560,
    "intermediate_size": 3 * 2560,
    "num_attention_heads": 10,
    "attention_window_size": 2048,
    "conv1d_width": 4,
    "logits_soft_cap": 30.0,
    "rms_norm_eps": 1e-6,
    "hidden_activation": "gelu_pytorch_tanh",
    "block_types": ("recurrent", "recurrent", "attention"),
    "attention_bias": False,
    "tie_word_embeddings": True,
    "rope_theta": 10000.0,
    "partial_rotary_factor": 0.5,
}


@dataclass(frozen=True)
class RecurrentGemmaSpec:
    """The sizes of a ``RecurrentGemmaForCausalLM``, named as its config names them.

    Attributes:
        vocab_size: V, the rows of the (tied) embeddings.
        hidden_size: D, the residual stream's width.
        intermediate_size: twice the MLP's width F (transformers halves it).
        num_hidden_layers: L.
        num_attention_heads: H: the attention's query heads and the RG-LRU's gate blocks.
        num_key_value_heads: H_kv, the attention's key/value heads (H_kv divides H).
        head_dim: d, each attention head's width (hidden_size // H unless the config says).
        lru_width: W, the recurrent block's width (H divides W).
        attention_window_size: each query attends to itself and the window − 1 keys before it.
        conv1d_width: K, the causal depthwise convolution's kernel.
        block_types: the temporal blocks' pattern, repeated over the L layers.
        logits_soft_cap: c in ``c · tanh(logits / c)``.
        rms_norm_eps: ε of every RMS norm.
        hidden_activation: the GELU of the recurrent block's y branch and the MLP's gate.
        rope_theta: the rotary embedding's base.
        partial_rotary_factor: the fraction of each head's width that is rotated.
        attention_bias: whether q/k/v projections have biases (o_proj always has one).
        tie_word_embeddings: whether ``lm_head.weight`` is the embeddings.
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    lru_width: int
    attention_window_size: int
    conv1d_width: int
    block_types: tuple[str, ...]
    logits_soft_cap: float = 30.0
    rms_norm_eps: float = 1e-6
    hidden_activation: str = "gelu_pytorch_tanh"
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 0.5
    attention_bias: bool = False
    tie_word_embeddings: bool = True

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
        """Each layer's temporal block, ``block_types`` repeated to L entries."""
        pattern = self.block_types
        return tuple(pattern[i % len(pattern)] for i in range(self.num_hidden_layers))

    @property
    def block_width(self) -> int:
        """b = W / H, the width of each diagonal block of the RG-LRU's gate weights."""
        return self.lru_width // self.num_attention_heads

    @property
    def mlp_width(self) -> int:
        """F = intermediate_size // 2, the MLP's hidden width."""
        return self.intermediate_size // 2

    @property
    def rotary_dim(self) -> int:
        """The leading features of each head that are rotated: ``int(d · partial_rotary_factor)``."""
        return int(self.head_dim * self.partial_rotary_factor)

    def name(self, layer: int, rest: str) -> str:
        """The file's name of one tensor of a layer: ``name(1, "mlp_block.up_proj.bias")``."""
        return f"model.layers.{layer}.{rest}"


def _block_types(f: Fields) -> tuple[str, ...]:
    """The pattern from ``block_types``, else the older spelling ``_block_types``, else the default."""
    key = "block_types" if f.config.get("block_types") is not None else "_block_types"
    value = f.config.get(key)
    if value is None:
        return DEFAULTS["block_types"]
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise CheckpointError(f.source, f"{key} is {value!r}; allowed: a non-empty list of {list(KINDS)}")
    unknown = [kind for kind in value if kind not in KINDS]
    if unknown:
        raise CheckpointError(f.source, f"{key} holds {unknown}; allowed: {list(KINDS)}")
    return tuple(value)


def _rope(f: Fields, head_dim: int) -> tuple[float, float]:
    """``(rope_theta, partial_rotary_factor)``: ``rope_parameters`` first, then the top level."""
    rope = f.config.get("rope_parameters") or {}
    if not isinstance(rope, Mapping):
        raise f.refuse("rope_parameters", rope, "a mapping")
    if rope.get("rope_type", "default") != "default":
        raise CheckpointError(
            f.source, f"rope_parameters.rope_type is {rope['rope_type']!r}; allowed: 'default'"
        )
    # a field of rope_parameters wins over the same field at the top level
    merged = f._replace(config={**f.config, **{k: v for k, v in rope.items() if v is not None}})
    theta, factor = merged.number("rope_theta"), merged.number("partial_rotary_factor")
    if factor > 1 or int(head_dim * factor) % 2:
        raise CheckpointError(
            f.source,
            f"partial_rotary_factor is {factor!r} (head_dim {head_dim}); allowed: a factor ≤ 1 that "
            "rotates an even number int(head_dim · factor) of features",
        )
    return theta, factor


def _heads(f: Fields, hidden: int, lru: int) -> tuple[int, int, int]:
    """``(H, H_kv, d)``, checked: H divides W (the RG-LRU's blocks), H_kv divides H."""
    heads = f.positive_int("num_attention_heads")
    kv = f.positive_int("num_key_value_heads", heads)
    if lru % heads:
        raise CheckpointError(
            f.source, f"lru_width is {lru}; allowed: a multiple of num_attention_heads ({heads})"
        )
    if heads % kv:
        raise CheckpointError(
            f.source, f"num_key_value_heads is {kv}; allowed: a divisor of num_attention_heads ({heads})"
        )
    head_dim = f.positive_int("head_dim", hidden // heads)
    return heads, kv, head_dim


def parse(config: Mapping[str, Any], source: str) -> RecurrentGemmaSpec:
    """The spec of the model described by ``config.json``, absent fields at transformers' defaults.

    Args:
        config: the ``config.json`` mapping (``model_type`` ``"recurrent_gemma"`` when given).
        source: the folder, named by any error.

    Returns:
        The :class:`RecurrentGemmaSpec`.

    Raises:
        CheckpointError: a missing or unsupported value, naming the field and what is allowed.

    >>> spec = parse({"num_hidden_layers": 4, "hidden_size": 32, "num_attention_heads": 2,
    ...               "_block_types": ["recurrent", "attention"]}, "model/")
    >>> spec.layer_kinds, spec.lru_width, spec.head_dim, spec.rotary_dim
    (('recurrent', 'attention', 'recurrent', 'attention'), 32, 16, 8)
    """
    f = Fields(config, source, DEFAULTS, null_is_default=True)
    kind = f.get("model_type", "recurrent_gemma")
    if kind != "recurrent_gemma":
        raise CheckpointError(source, f"model_type is {kind!r}; allowed: 'recurrent_gemma'")
    hidden = f.positive_int("hidden_size")
    lru = f.positive_int("lru_width", hidden)
    heads, kv, head_dim = _heads(f, hidden, lru)
    activation = f.get("hidden_activation")
    if activation not in ACTIVATIONS:
        raise CheckpointError(
            source, f"hidden_activation is {activation!r}; allowed: {', '.join(ACTIVATIONS)}"
        )
    theta, factor = _rope(f, head_dim)
    window = f.get("attention_window_size", f.get("sliding_window", DEFAULTS["attention_window_size"]))
    return RecurrentGemmaSpec(
        vocab_size=f.positive_int("vocab_size"),
        hidden_size=hidden,
        intermediate_size=f.positive_int("intermediate_size"),
        num_hidden_layers=f.positive_int("num_hidden_layers"),
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=head_dim,
        lru_width=lru,
        attention_window_size=f.positive_int("attention_window_size", window),
        conv1d_width=f.positive_int("conv1d_width"),
        block_types=_block_types(f),
        logits_soft_cap=f.number("logits_soft_cap"),
        rms_norm_eps=f.number("rms_norm_eps", zero=True),
        hidden_activation=activation,
        rope_theta=theta,
        partial_rotary_factor=factor,
        attention_bias=f.flag("attention_bias"),
        tie_word_embeddings=f.flag("tie_word_embeddings"),
    )


def _recurrent_tensors(spec: RecurrentGemmaSpec, i: int) -> dict[str, tuple[int, ...]]:
    d, w, h, b, k = (
        spec.hidden_size,
        spec.lru_width,
        spec.num_attention_heads,
        spec.block_width,
        spec.conv1d_width,
    )
    out = {}
    for name in ("linear_x", "linear_y"):
        out[spec.name(i, f"temporal_block.{name}.weight")] = (w, d)
        out[spec.name(i, f"temporal_block.{name}.bias")] = (w,)
    out[spec.name(i, "temporal_block.conv_1d.weight")] = (w, 1, k)
    out[spec.name(i, "temporal_block.conv_1d.bias")] = (w,)
    out[spec.name(i, "temporal_block.rg_lru.recurrent_param")] = (w,)
    for gate in ("input", "recurrent"):
        out[spec.name(i, f"temporal_block.rg_lru.{gate}_gate_weight")] = (h, b, b)
        out[spec.name(i, f"temporal_block.rg_lru.{gate}_gate_bias")] = (h, b)
    out[spec.name(i, "temporal_block.linear_out.weight")] = (d, w)
    out[spec.name(i, "temporal_block.linear_out.bias")] = (d,)
    return out


def _attention_tensors(spec: RecurrentGemmaSpec, i: int) -> dict[str, tuple[int, ...]]:
    d, q, kv = (
        spec.hidden_size,
        spec.num_attention_heads * spec.head_dim,
        spec.num_key_value_heads * spec.head_dim,
    )
    out = {}
    for name, rows in (("q_proj", q), ("k_proj", kv), ("v_proj", kv)):
        out[spec.name(i, f"temporal_block.{name}.weight")] = (rows, d)
        if spec.attention_bias:
            out[spec.name(i, f"temporal_block.{name}.bias")] = (rows,)
    out[spec.name(i, "temporal_block.o_proj.weight")] = (d, q)
    out[spec.name(i, "temporal_block.o_proj.bias")] = (d,)
    return out


def _mlp_tensors(spec: RecurrentGemmaSpec, i: int) -> dict[str, tuple[int, ...]]:
    d, f = spec.hidden_size, spec.mlp_width
    out = {}
    for name in ("gate_proj", "up_proj"):
        out[spec.name(i, f"mlp_block.{name}.weight")] = (f, d)
        out[spec.name(i, f"mlp_block.{name}.bias")] = (f,)
    out[spec.name(i, "mlp_block.down_proj.weight")] = (d, f)
    out[spec.name(i, "mlp_block.down_proj.bias")] = (d,)
    return out


def tensors(spec: RecurrentGemmaSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor of the model, named as ``model.state_dict()`` names them, with its shape
    (``lm_head.weight`` included even when tied).

    >>> spec = parse({"num_hidden_layers": 3, "vocab_size": 64, "hidden_size": 16, "intermediate_size": 48,
    ...               "num_attention_heads": 2, "num_key_value_heads": 1}, "model/")
    >>> shapes = tensors(spec)
    >>> shapes["model.layers.0.temporal_block.rg_lru.input_gate_weight"]
    (2, 8, 8)
    >>> shapes["model.layers.2.temporal_block.k_proj.weight"], len(shapes)
    ((8, 16), 58)
    """
    d = spec.hidden_size
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (spec.vocab_size, d)}
    for i, kind in enumerate(spec.layer_kinds):
        out[spec.name(i, "temporal_pre_norm.weight")] = (d,)
        out.update(_recurrent_tensors(spec, i) if kind == "recurrent" else _attention_tensors(spec, i))
        out[spec.name(i, "channel_pre_norm.weight")] = (d,)
        out.update(_mlp_tensors(spec, i))
    out["model.final_norm.weight"] = (d,)
    out["lm_head.weight"] = (spec.vocab_size, d)
    return out


def tied(spec: RecurrentGemmaSpec) -> dict[str, str]:
    """``{"lm_head.weight": "model.embed_tokens.weight"}`` while ``tie_word_embeddings``, else ``{}``."""
    return {"lm_head.weight": "model.embed_tokens.weight"} if spec.tie_word_embeddings else {}


@dataclass(frozen=True)
class RecurrentGemmaInit:
    """How transformers draws a fresh RecurrentGemma (``RecurrentGemmaPreTrainedModel._init_weights``):
    the config's initialisation fields, at its defaults.

    Attributes:
        w_init_variance_scale: s: the convolution, the MLP and the embeddings are N(0, s / K), the
            RG-LRU's gate blocks N(0, s / b).
        pad_token_id: the embeddings' row set to zero (None: none).
    """

    w_init_variance_scale: float = 0.01
    pad_token_id: int | None = 0


def init(config: Mapping[str, Any], source: str) -> RecurrentGemmaInit:
    """The :class:`RecurrentGemmaInit` of a ``config.json`` mapping, transformers' defaults for
    absent fields.

    Raises:
        CheckpointError: a negative scale, or a ``pad_token_id`` outside the vocabulary.

    >>> init({"vocab_size": 64}, "demo")
    RecurrentGemmaInit(w_init_variance_scale=0.01, pad_token_id=0)
    """
    f = Fields(config, source, {**DEFAULTS, **dataclasses.asdict(RecurrentGemmaInit())})
    return RecurrentGemmaInit(
        w_init_variance_scale=f.number("w_init_variance_scale", zero=True),
        pad_token_id=f.row("pad_token_id", f.positive_int("vocab_size")),
    )


FAMILY = Family(model_types=("recurrent_gemma",), parse=parse, tensors=tensors, tied=tied, init=init)

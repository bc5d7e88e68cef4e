"""xLSTM language models (``model_type: "xlstm"``) as transformers builds them: the
xLSTM-7B stack of mLSTM blocks in ``transformers/models/xlstm/modeling_xlstm.py``
(``xLSTMForCausalLM``), its sizes read from ``config.json`` (``xLSTMConfig``).

Sizes as the model builds them, which are not all the config's own properties:

* the layer's query/key and value widths are ``int(hidden_size · qk_dim_factor)`` and
  ``int(hidden_size · v_dim_factor)`` (``xLSTMLayer``), *not* ``xLSTMConfig.qk_dim``/``v_dim``,
  which round up to a multiple of 64 and size only the generation cache;
* the feed-forward width is ``hidden_size · ffn_proj_factor`` rounded up to a multiple of
  ``ffn_round_up_to_multiple_of`` (``round_up_to_next_multiple_of``);
* the blocks are ``num_blocks`` (``num_hidden_layers`` when absent), the embeddings
  ``embedding_dim`` wide (``hidden_size`` when absent; any other width could not feed the blocks).

Fields that pick how transformers runs the recurrence (``mode``, ``chunkwise_kernel``,
``sequence_kernel``, ``step_kernel``, ``chunk_size``, ``return_last_states``,
``autocast_kernel_dtype``, ``inference_state_dtype``, ``max_inference_chunksize``) change no
value: every kernel computes the same recurrence. ``add_out_norm`` is read by none of
transformers' own modules (``xLSTMModel`` always applies ``out_norm``), so it changes nothing either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rnnviz.checkpoints.families.fields import Fields
from rnnviz.checkpoints.record import CheckpointError, Family

WEIGHT_MODES = ("single", "fused")
#: ``xLSTMConfig``'s defaults for the fields read here.
DEFAULTS: dict[str, Any] = {
    "vocab_size": 50304,
    "hidden_size": 4096,
    "embedding_dim": None,
    "num_hidden_layers": 32,
    "num_blocks": None,
    "num_heads": 8,
    "use_bias": False,
    "norm_reduction_force_float32": True,
    "tie_word_embeddings": False,
    "norm_eps": 1e-6,
    "qk_dim_factor": 0.5,
    "v_dim_factor": 1.0,
    "eps": 1e-6,
    "ffn_proj_factor": 2.667,
    "ffn_round_up_to_multiple_of": 64,
    "gate_soft_cap": 15.0,
    "output_logit_soft_cap": 30.0,
    "weight_mode": "single",
}


@dataclass(frozen=True)
class XLSTMSpec:
    """The sizes and switches of one xLSTM language model.

    Attributes:
        vocab_size: V, rows of the embeddings and of ``lm_head``.
        hidden_size: D, the residual stream's width.
        num_blocks: L, the mLSTM blocks.
        num_heads: heads of each mLSTM layer.
        qk_dim: width of the queries and keys, all heads together (``int(D · qk_dim_factor)``).
        v_dim: width of the values, the output gate and the cell output (``int(D · v_dim_factor)``).
        ffn_dim: width of the gated feed-forward's hidden layer.
        use_bias: biases on the projections and the norms (the gates always have theirs).
        weight_mode: ``"single"`` (q, k, v, o and i, f as separate layers) or ``"fused"``
            (one ``qkv_opreact`` and one ``ifgate_preact``, one ``proj_up_gate_z``).
        norm_eps: ε of the RMS norms and of the per-head layer norm.
        eps: ε added to the mLSTM readout's denominator.
        gate_soft_cap: c in c·tanh(x / c) on the input and forget pre-activations (None: no cap).
        output_logit_soft_cap: the same cap on the logits (None: no cap).
        norm_reduction_force_float32: the norms reduce in float32 whatever the compute dtype.
        tie_word_embeddings: a file may leave ``lm_head.weight`` out for the embeddings.
    """

    vocab_size: int
    hidden_size: int
    num_blocks: int
    num_heads: int
    qk_dim: int
    v_dim: int
    ffn_dim: int
    use_bias: bool = False
    weight_mode: str = "single"
    norm_eps: float = 1e-6
    eps: float = 1e-6
    gate_soft_cap: float | None = 15.0
    output_logit_soft_cap: float | None = 30.0
    norm_reduction_force_float32: bool = True
    tie_word_embeddings: bool = False

    @property
    def n_layers(self) -> int:
        """L, the blocks."""
        return self.num_blocks

    @property
    def d_model(self) -> int:
        """D, the residual stream's width."""
        return self.hidden_size

    @property
    def qk_head_dim(self) -> int:
        """d_qk, one head's query/key width."""
        return self.qk_dim // self.num_heads

    @property
    def v_head_dim(self) -> int:
        """d_v, one head's value width."""
        return self.v_dim // self.num_heads


def round_up(x: float, multiple: int) -> int:
    """``x`` rounded up to a multiple of ``multiple``, in float arithmetic as transformers'
    ``round_up_to_next_multiple_of`` does it (the factor 2.667 makes x a float).

    >>> round_up(32 * 2.667, 64), round_up(64 * 1.5, 32)
    (128, 96)
    """
    return int(((x + multiple - 1) // multiple) * multiple)


def _head_width(hidden: int, factor: float, heads: int, name: str, source: str) -> int:
    """``int(hidden · factor)``, checked to split into ``heads`` equal non-empty heads."""
    width = int(hidden * factor)
    if width < heads or width % heads:
        raise CheckpointError(
            source,
            f"{name} is {factor!r}: int(hidden_size · {name}) = {width} does not split into "
            f"num_heads = {heads} equal heads; allowed: a factor giving a positive multiple of {heads}",
        )
    return width


def _widths(f: Fields) -> tuple[int, int]:
    """(hidden_size, num_blocks) as ``xLSTMConfig.__post_init__`` resolves them."""
    embedding = f.get("embedding_dim")
    hidden = f.get("hidden_size")
    hidden = f.positive_int("hidden_size", embedding if hidden is None else hidden)
    if embedding is not None and embedding != hidden:
        raise CheckpointError(
            f.source, f"embedding_dim is {embedding!r}; allowed: null or hidden_size ({hidden})"
        )
    name = "num_blocks" if f.get("num_blocks") is not None else "num_hidden_layers"
    return hidden, f.positive_int(name)


def parse(config: Mapping[str, Any], source: str) -> XLSTMSpec:
    """The spec of an xLSTM ``config.json``, absent fields at ``xLSTMConfig``'s defaults.

    Args:
        config: the parsed ``config.json``.
        source: the file or folder, named in errors.

    Returns:
        The :class:`XLSTMSpec`.

    Raises:
        CheckpointError: a field is missing its kind of value, the embeddings' width differs
            from the blocks', a head width does not divide, or ``weight_mode`` is unknown.

    >>> spec = parse({"model_type": "xlstm", "vocab_size": 64, "hidden_size": 32,
    ...               "num_blocks": 2, "num_heads": 2}, "config.json")
    >>> spec.qk_dim, spec.v_dim, spec.ffn_dim, spec.n_layers
    (16, 32, 128, 2)
    """
    f = Fields(config, source, DEFAULTS)
    model_type = config.get("model_type", "xlstm")
    if model_type != "xlstm":
        raise CheckpointError(source, f"model_type is {model_type!r}; allowed: 'xlstm'")
    weight_mode = f.get("weight_mode")
    if weight_mode not in WEIGHT_MODES:
        raise CheckpointError(source, f"weight_mode is {weight_mode!r}; allowed: {', '.join(WEIGHT_MODES)}")
    hidden, blocks = _widths(f)
    heads = f.positive_int("num_heads")
    ffn_factor = f.number("ffn_proj_factor")
    return XLSTMSpec(
        vocab_size=f.positive_int("vocab_size"),
        hidden_size=hidden,
        num_blocks=blocks,
        num_heads=heads,
        qk_dim=_head_width(hidden, f.number("qk_dim_factor"), heads, "qk_dim_factor", source),
        v_dim=_head_width(hidden, f.number("v_dim_factor"), heads, "v_dim_factor", source),
        ffn_dim=round_up(hidden * ffn_factor, f.positive_int("ffn_round_up_to_multiple_of")),
        use_bias=f.flag("use_bias"),
        weight_mode=weight_mode,
        norm_eps=f.number("norm_eps"),
        eps=f.number("eps"),
        gate_soft_cap=f.number("gate_soft_cap", optional=True),
        output_logit_soft_cap=f.number("output_logit_soft_cap", optional=True),
        norm_reduction_force_float32=f.flag("norm_reduction_force_float32"),
        tie_word_embeddings=f.flag("tie_word_embeddings"),
    )


def _linear(name: str, n_out: int, n_in: int, bias: bool) -> dict[str, tuple[int, ...]]:
    """An ``nn.Linear``'s tensors: ``weight [out, in]`` and, with ``bias``, ``bias [out]``."""
    return {f"{name}.weight": (n_out, n_in)} | ({f"{name}.bias": (n_out,)} if bias else {})


def _norm(name: str, n: int, bias: bool) -> dict[str, tuple[int, ...]]:
    """A norm's ``weight [n]`` and, with ``bias``, ``bias [n]``."""
    return {f"{name}.weight": (n,)} | ({f"{name}.bias": (n,)} if bias else {})


def _block_tensors(spec: XLSTMSpec, prefix: str) -> dict[str, tuple[int, ...]]:
    """One ``xLSTMBlock``'s tensors under ``prefix`` (``backbone.blocks.{l}.``)."""
    d, b, heads = spec.hidden_size, spec.use_bias, spec.num_heads
    layer = prefix + "mlstm_layer."
    if spec.weight_mode == "single":
        projections = (
            _linear(layer + "q", spec.qk_dim, d, b)
            | _linear(layer + "k", spec.qk_dim, d, b)
            | _linear(layer + "v", spec.v_dim, d, b)
            | _linear(layer + "ogate_preact", spec.v_dim, d, b)
            | _linear(layer + "igate_preact", heads, d, True)
            | _linear(layer + "fgate_preact", heads, d, True)
        )
        ffn = _linear(prefix + "ffn.proj_up_gate", spec.ffn_dim, d, b) | _linear(
            prefix + "ffn.proj_up", spec.ffn_dim, d, b
        )
    else:
        projections = _linear(layer + "qkv_opreact", 2 * spec.qk_dim + 2 * spec.v_dim, d, b) | _linear(
            layer + "ifgate_preact", 2 * heads, d, True
        )
        ffn = _linear(prefix + "ffn.proj_up_gate_z", 2 * spec.ffn_dim, d, b)
    return (
        _norm(prefix + "norm_mlstm", d, b)
        | projections
        | _norm(layer + "multihead_norm", spec.v_dim, b)
        | _linear(layer + "out_proj", d, spec.v_dim, b)
        | _norm(prefix + "norm_ffn", d, b)
        | ffn
        | _linear(prefix + "ffn.proj_down", d, spec.ffn_dim, b)
    )


def tensors(spec: XLSTMSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor of ``xLSTMForCausalLM``, named as its state dict names it.

    >>> spec = parse({"vocab_size": 64, "hidden_size": 32, "num_blocks": 1, "num_heads": 2}, "c")
    >>> shapes = tensors(spec)
    >>> len(shapes), shapes["backbone.blocks.0.mlstm_layer.q.weight"], shapes["lm_head.weight"]
    (18, (16, 32), (64, 32))
    """
    d = spec.hidden_size
    out = {"backbone.embeddings.weight": (spec.vocab_size, d)}
    for layer in range(spec.num_blocks):
        out |= _block_tensors(spec, f"backbone.blocks.{layer}.")
    # out_norm is built with xLSTMRMSNorm's own defaults: a weight and never a bias
    return out | {"backbone.out_norm.weight": (d,), "lm_head.weight": (spec.vocab_size, d)}


def tied(spec: XLSTMSpec) -> dict[str, str]:
    """``{"lm_head.weight": "backbone.embeddings.weight"}`` when ``tie_word_embeddings``, else ``{}``.

    transformers' ``xLSTMForCausalLM`` names no tied weights: it saves ``lm_head.weight`` even
    when the config ties, and a file's own ``lm_head.weight`` is always the one used. A file
    that leaves it out under a tying config gets the embeddings, as the config asks.
    """
    return {"lm_head.weight": "backbone.embeddings.weight"} if spec.tie_word_embeddings else {}


@dataclass(frozen=True)
class XLSTMInit:
    """How transformers draws a fresh xLSTM (``xLSTMPreTrainedModel._init_weights``): the
    config's initialisation fields, at its defaults.

    Attributes:
        num_hidden_layers: the n of Wang's init, σ = 2 / (n √width), of ``out_proj`` and
            ``proj_down``: the config's ``num_hidden_layers`` (32 unless given, whatever
            ``num_blocks`` says; ``num_blocks`` where it is null), as transformers reads it.
    """

    num_hidden_layers: int = 32


def init(config: Mapping[str, Any], source: str) -> XLSTMInit:
    """The :class:`XLSTMInit` of a ``config.json`` mapping.

    >>> init({"num_blocks": 2}, "demo"), init({"num_hidden_layers": None, "num_blocks": 2}, "demo")
    (XLSTMInit(num_hidden_layers=32), XLSTMInit(num_hidden_layers=2))
    """
    f = Fields(config, source, DEFAULTS)
    layers = config.get("num_hidden_layers", DEFAULTS["num_hidden_layers"])
    if layers is None:
        return XLSTMInit(f.positive_int("num_blocks"))
    return XLSTMInit(f.positive_int("num_hidden_layers"))


FAMILY = Family(model_types=("xlstm",), parse=parse, tensors=tensors, tied=tied, init=init)

"""Mamba-2 checkpoints (``model_type`` ``"mamba2"``): the sizes ``config.json`` gives, and the
tensors transformers' ``Mamba2ForCausalLM`` saves.

The sizes and defaults follow transformers' ``Mamba2Config``
(``models/mamba2/configuration_mamba2.py``). The inner width is ``num_heads · head_dim``, which
the config class requires to equal ``expand · hidden_size``. ``in_proj`` gives exactly
[z; xBC; dt] (``I + (I + 2·G·N) + n_heads`` rows): the original ``mamba_ssm`` layer's optional
extra MLP half (``d_ssm < d_inner``) has no place in transformers' layer, so a file that has it
fails the shape check. ``chunk_size`` and the ``time_step_*`` initialisation fields change no
output (rnnviz scans step by step) and are not kept. transformers writes the infinite upper
``time_step_limit`` as ``{"__float__": "Infinity"}``; both that and a bare number are read.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rnnviz.checkpoints.families.fields import Fields
from rnnviz.checkpoints.record import CheckpointError, Family

MODEL_TYPES = ("mamba2",)
#: transformers' ``Mamba2Config`` defaults for the fields the forward pass reads.
DEFAULTS: dict[str, Any] = {
    "vocab_size": 32768,
    "hidden_size": 4096,
    "num_hidden_layers": 64,
    "num_heads": 128,
    "head_dim": 64,
    "state_size": 128,
    "n_groups": 8,
    "expand": 2,
    "conv_kernel": 4,
    "use_bias": False,
    "use_conv_bias": True,
    "hidden_act": "silu",
    "layer_norm_epsilon": 1e-5,
    "residual_in_fp32": True,
    "time_step_limit": (0.0, math.inf),
    "tie_word_embeddings": False,
}
#: the activation after the convolution (``ACT2FN[hidden_act]``: both names are SiLU); the
#: gate's SiLU in the gated norm is fixed.
ACTIVATIONS = ("silu", "swish")
#: transformers' JSON tags for the floats JSON has no literal for (``PreTrainedConfig``).
_FLOAT_TAGS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


@dataclass(frozen=True)
class Mamba2Spec:
    """The sizes of a Mamba-2 language model, read from its ``config.json``.

    Attributes:
        vocab_size: V, rows of the embeddings and of ``lm_head``.
        hidden_size: H, the residual stream's width.
        num_hidden_layers: L, the number of Mamba-2 blocks.
        num_heads: n_h, SSM heads per layer, each with its own scalar A, Δ and D.
        head_dim: P, channels per head; I = n_h · P is the inner width.
        state_size: N, the state per channel.
        n_groups: G, groups of heads sharing one B_t and one C_t (and one gated-norm group).
        conv_kernel: K, the depthwise causal convolution's width.
        use_bias: whether ``in_proj`` and ``out_proj`` have biases.
        use_conv_bias: whether ``conv1d`` has a bias.
        layer_norm_epsilon: ε of every RMS norm (block, gated and final).
        residual_in_fp32: whether the residual stream is kept in float32.
        time_step_limit: (lo, hi), Δ clamped into it after the softplus.
        tie_word_embeddings: whether ``lm_head.weight`` is the embeddings.
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_heads: int
    head_dim: int
    state_size: int
    n_groups: int
    conv_kernel: int
    use_bias: bool
    use_conv_bias: bool
    layer_norm_epsilon: float
    residual_in_fp32: bool
    time_step_limit: tuple[float, float]
    tie_word_embeddings: bool

    @property
    def n_layers(self) -> int:
        """L, the number of Mamba-2 blocks."""
        return self.num_hidden_layers

    @property
    def d_model(self) -> int:
        """H, the width of the residual stream."""
        return self.hidden_size

    @property
    def intermediate_size(self) -> int:
        """I = n_h · P, the inner (SSM) width."""
        return self.num_heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        """I + 2·G·N, the channels of xBC that the convolution mixes."""
        return self.intermediate_size + 2 * self.n_groups * self.state_size


def _number(value: Any) -> float | None:
    """A JSON number or transformers' ``{"__float__": "Infinity"}`` tag as a float, else None."""
    if isinstance(value, Mapping) and set(value) == {"__float__"}:
        return _FLOAT_TAGS.get(value["__float__"])
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _time_step_limit(f: Fields) -> tuple[float, float]:
    """(lo, hi), lo ≤ hi, the clamp on Δ (transformers' default (0, ∞) never binds)."""
    value = f.get("time_step_limit")
    bounds = [_number(v) for v in value] if isinstance(value, list | tuple) else []
    if len(bounds) != 2 or None in bounds or not bounds[0] <= bounds[1]:
        raise f.refuse("time_step_limit", value, "[lo, hi] with lo ≤ hi")
    return bounds[0], bounds[1]


def _check_supported(f: Fields) -> None:
    """Refuse what transformers' Mamba-2 forward pass (and so rnnviz's) does not compute."""
    if f.config.get("model_type") not in MODEL_TYPES:
        raise f.refuse("model_type", f.config.get("model_type"), "mamba2")
    if f.get("hidden_act") not in ACTIVATIONS:
        raise f.refuse("hidden_act", f.get("hidden_act"), "silu")
    # Fields of mamba_ssm's own configs that transformers ignores: it always gates before a
    # grouped RMS norm, so a model trained otherwise would be computed wrongly, not refused.
    if f.config.get("rms_norm", True) is not True:
        raise f.refuse("rms_norm", f.config["rms_norm"], "true")
    if f.config.get("norm_before_gate", False) is not False:
        raise f.refuse("norm_before_gate", f.config["norm_before_gate"], "false")
    if f.config.get("quantization_config") is not None:
        # quantized weights are stored packed, under names and shapes of their own
        raise CheckpointError(f.source, "quantization_config is set; allowed: an unquantized checkpoint")


def _check_heads(f: Fields, spec: Mamba2Spec) -> None:
    """I = expand · H (as ``Mamba2Config`` demands) and whole groups of heads."""
    expand = f.get("expand")
    numeric = not isinstance(expand, bool) and isinstance(expand, int | float)
    if not numeric or expand * spec.hidden_size != spec.intermediate_size:
        raise CheckpointError(
            f.source,
            f"expand · hidden_size is {expand!r} · {spec.hidden_size}; allowed: num_heads · head_dim"
            f" = {spec.intermediate_size}",
        )
    if spec.num_heads % spec.n_groups:
        raise CheckpointError(
            f.source, f"n_groups is {spec.n_groups}; allowed: a divisor of num_heads ({spec.num_heads})"
        )


def parse(config: Mapping[str, Any], source: str) -> Mamba2Spec:
    """The :class:`Mamba2Spec` of a ``config.json`` mapping, transformers' defaults for absent fields.

    Args:
        config: the parsed ``config.json``.
        source: the file or folder, named in errors.

    Returns:
        The frozen spec.

    Raises:
        CheckpointError: the model type, activation, norm or a size is not one rnnviz implements.

    Example:
        >>> spec = parse({"model_type": "mamba2", "hidden_size": 16, "num_heads": 4, "head_dim": 8,
        ...               "n_groups": 2, "time_step_limit": [0.0, {"__float__": "Infinity"}]}, "demo")
        >>> spec.intermediate_size, spec.conv_dim, spec.time_step_limit
        (32, 544, (0.0, inf))
    """
    f = Fields(config, source, DEFAULTS)
    _check_supported(f)
    spec = Mamba2Spec(
        vocab_size=f.positive_int("vocab_size"),
        hidden_size=f.positive_int("hidden_size"),
        num_hidden_layers=f.positive_int("num_hidden_layers"),
        num_heads=f.positive_int("num_heads"),
        head_dim=f.positive_int("head_dim"),
        state_size=f.positive_int("state_size"),
        n_groups=f.positive_int("n_groups"),
        conv_kernel=f.positive_int("conv_kernel"),
        use_bias=f.flag("use_bias"),
        use_conv_bias=f.flag("use_conv_bias"),
        layer_norm_epsilon=f.number("layer_norm_epsilon"),
        residual_in_fp32=f.flag("residual_in_fp32"),
        time_step_limit=_time_step_limit(f),
        tie_word_embeddings=f.flag("tie_word_embeddings"),
    )
    _check_heads(f, spec)
    return spec


def _layer_tensors(spec: Mamba2Spec, layer: int) -> dict[str, tuple[int, ...]]:
    h, i, heads, conv = spec.hidden_size, spec.intermediate_size, spec.num_heads, spec.conv_dim
    projected = i + conv + heads  # [z; xBC; dt]
    shapes = {
        "norm.weight": (h,),
        "mixer.dt_bias": (heads,),
        "mixer.A_log": (heads,),
        "mixer.D": (heads,),
        "mixer.conv1d.weight": (conv, 1, spec.conv_kernel),
        "mixer.in_proj.weight": (projected, h),
        "mixer.norm.weight": (i,),
        "mixer.out_proj.weight": (h, i),
    }
    if spec.use_conv_bias:
        shapes["mixer.conv1d.bias"] = (conv,)
    if spec.use_bias:
        shapes["mixer.in_proj.bias"] = (projected,)
        shapes["mixer.out_proj.bias"] = (h,)
    return {f"backbone.layers.{layer}.{name}": shape for name, shape in shapes.items()}


def tensors(spec: Mamba2Spec) -> dict[str, tuple[int, ...]]:
    """Every tensor the model uses, under its state-dict name, with its shape.

    Args:
        spec: the model's sizes.

    Returns:
        ``{name: shape}``: the embeddings ``[V, H]``; per layer its norm ``[H]`` and mixer
        (``in_proj`` ``[2I + 2GN + n_h, H]``, ``conv1d`` ``[I + 2GN, 1, K]``, ``dt_bias``,
        ``A_log`` and ``D`` ``[n_h]``, the gated norm ``[I]``, ``out_proj`` ``[H, I]``, biases as
        configured); ``backbone.norm_f.weight`` ``[H]`` and ``lm_head.weight`` ``[V, H]``.

    Example:
        >>> spec = parse({"model_type": "mamba2", "hidden_size": 16, "num_heads": 4, "head_dim": 8,
        ...               "n_groups": 2, "state_size": 4, "num_hidden_layers": 1}, "demo")
        >>> tensors(spec)["backbone.layers.0.mixer.in_proj.weight"]
        (84, 16)
    """
    shapes = {"backbone.embeddings.weight": (spec.vocab_size, spec.hidden_size)}
    for layer in range(spec.num_hidden_layers):
        shapes |= _layer_tensors(spec, layer)
    shapes["backbone.norm_f.weight"] = (spec.hidden_size,)
    shapes["lm_head.weight"] = (spec.vocab_size, spec.hidden_size)
    return shapes


def tied(spec: Mamba2Spec) -> dict[str, str]:
    """``{"lm_head.weight": "backbone.embeddings.weight"}`` when the embeddings are tied, else ``{}``."""
    return {"lm_head.weight": "backbone.embeddings.weight"} if spec.tie_word_embeddings else {}


@dataclass(frozen=True)
class Mamba2Init:
    """How transformers draws a fresh Mamba-2 (``Mamba2PreTrainedModel._init_weights``,
    ``Mamba2Mixer.init_mamba2_weights``): the config's initialisation fields, at its defaults.

    Attributes:
        initializer_range: σ of the embeddings, ``in_proj`` and an untied head.
        time_step_min: the smallest Δ the bias ``dt_bias`` starts at.
        time_step_max: the largest.
        time_step_floor: Δ drawn below it is raised to it.
        rescale_prenorm_residual: ``out_proj.weight`` divided by √L (GPT-2's scaling).
    """

    initializer_range: float = 0.1
    time_step_min: float = 0.001
    time_step_max: float = 0.1
    time_step_floor: float = 1e-4
    rescale_prenorm_residual: bool = False


def init(config: Mapping[str, Any], source: str) -> Mamba2Init:
    """The :class:`Mamba2Init` of a ``config.json`` mapping, transformers' defaults for absent fields.

    Raises:
        CheckpointError: a field out of its range, or ``time_step_max`` below ``time_step_min``.

    >>> init({}, "demo").initializer_range
    0.1
    """
    f = Fields(config, source, dataclasses.asdict(Mamba2Init()))
    settings = Mamba2Init(
        initializer_range=f.number("initializer_range"),
        time_step_min=f.number("time_step_min"),
        time_step_max=f.number("time_step_max"),
        time_step_floor=f.number("time_step_floor", zero=True),
        rescale_prenorm_residual=f.flag("rescale_prenorm_residual"),
    )
    if settings.time_step_max < settings.time_step_min:
        low = settings.time_step_min
        raise f.refuse("time_step_max", settings.time_step_max, f"at least time_step_min ({low})")
    return settings


FAMILY = Family(model_types=MODEL_TYPES, parse=parse, tensors=tensors, tied=tied, init=init)

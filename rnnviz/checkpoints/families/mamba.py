"""Mamba and FalconMamba checkpoints (``model_type`` ``"mamba"``, ``"falcon_mamba"``): the sizes
``config.json`` gives, and the tensors transformers' ``MambaForCausalLM`` /
``FalconMambaForCausalLM`` save.

The sizes and defaults follow transformers' ``MambaConfig`` and ``FalconMambaConfig``
(``models/mamba/configuration_mamba.py``, ``models/falcon_mamba/configuration_falcon_mamba.py``):
the inner width is ``int(expand · hidden_size)`` whatever ``intermediate_size`` the file also
records (the config class recomputes it on load), and ``time_step_rank`` ``"auto"`` is
⌈hidden_size / 16⌉. FalconMamba's three extra RMS norms (on Δ's low-rank input, B and C) carry no
weights in the file: their ``weight`` is a non-persistent buffer of ones, left out of the state
dict.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rnnviz.checkpoints.families.fields import Fields
from rnnviz.checkpoints.record import CheckpointError, Family

MODEL_TYPES = ("mamba", "falcon_mamba")
#: transformers' defaults for the fields the forward pass reads (``MambaConfig`` and
#: ``FalconMambaConfig`` share them; ``mixer_rms_eps`` is FalconMamba's alone).
DEFAULTS: dict[str, Any] = {
    "vocab_size": 50280,
    "hidden_size": 768,
    "state_size": 16,
    "num_hidden_layers": 32,
    "layer_norm_epsilon": 1e-5,
    "expand": 2,
    "conv_kernel": 4,
    "use_bias": False,
    "use_conv_bias": True,
    "hidden_act": "silu",
    "residual_in_fp32": True,
    "time_step_rank": "auto",
    "tie_word_embeddings": True,
    "mixer_rms_eps": 1e-6,
}
#: the activation after the convolution: the gate's SiLU is fixed in transformers' scan, the
#: convolution's follows ``hidden_act``, and the only one Mamba checkpoints use is SiLU.
ACTIVATIONS = ("silu",)


@dataclass(frozen=True)
class MambaSpec:
    """The sizes of a Mamba or FalconMamba language model, read from its ``config.json``.

    Attributes:
        model_type: ``"mamba"`` or ``"falcon_mamba"``.
        vocab_size: V, rows of the embeddings and of ``lm_head``.
        hidden_size: H, the residual stream's width.
        num_hidden_layers: L, the number of Mamba blocks.
        state_size: N, the SSM state per inner channel.
        intermediate_size: I = int(expand · H), the inner (SSM) width.
        conv_kernel: K, the depthwise causal convolution's width.
        time_step_rank: R, the rank of Δ's projection (``"auto"`` read as ⌈H / 16⌉).
        use_bias: whether ``in_proj`` and ``out_proj`` have biases.
        use_conv_bias: whether ``conv1d`` has a bias.
        layer_norm_epsilon: ε of the block and final RMS norms.
        residual_in_fp32: whether the residual stream is kept in float32.
        tie_word_embeddings: whether ``lm_head.weight`` is the embeddings.
        mixer_rms_eps: ε of FalconMamba's weight-free norms on Δ, B and C; None for Mamba.
    """

    model_type: str
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    state_size: int
    intermediate_size: int
    conv_kernel: int
    time_step_rank: int
    use_bias: bool
    use_conv_bias: bool
    layer_norm_epsilon: float
    residual_in_fp32: bool
    tie_word_embeddings: bool
    mixer_rms_eps: float | None

    @property
    def n_layers(self) -> int:
        """L, the number of Mamba blocks."""
        return self.num_hidden_layers

    @property
    def d_model(self) -> int:
        """H, the width of the residual stream."""
        return self.hidden_size


def _time_step_rank(f: Fields, hidden_size: int) -> int:
    """R: ``"auto"`` is ⌈H / 16⌉, as ``MambaConfig.__post_init__``."""
    if f.get("time_step_rank") == "auto":
        return math.ceil(hidden_size / 16)
    value = f.get("time_step_rank")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise f.refuse("time_step_rank", value, '"auto" or a positive integer')
    return value


def _check_supported(f: Fields) -> str:
    """The model type, after refusing what the forward pass does not implement."""
    model_type = f.config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise CheckpointError(f.source, f"model_type is {model_type!r}; allowed: {', '.join(MODEL_TYPES)}")
    if f.get("hidden_act") not in ACTIVATIONS:
        act = f.get("hidden_act")
        raise CheckpointError(f.source, f"hidden_act is {act!r}; allowed: {', '.join(ACTIVATIONS)}")
    if f.config.get("quantization_config") is not None:
        # quantized weights are stored packed, under names and shapes of their own
        raise CheckpointError(f.source, "quantization_config is set; allowed: an unquantized checkpoint")
    return model_type


def parse(config: Mapping[str, Any], source: str) -> MambaSpec:
    """The :class:`MambaSpec` of a ``config.json`` mapping, transformers' defaults for absent fields.

    Args:
        config: the parsed ``config.json``.
        source: the file or folder, named in errors.

    Returns:
        The frozen spec.

    Raises:
        CheckpointError: the model type, activation or a size is not one rnnviz implements.

    Example:
        >>> spec = parse({"model_type": "mamba", "hidden_size": 40, "state_size": 4}, "demo")
        >>> spec.intermediate_size, spec.time_step_rank, spec.mixer_rms_eps
        (80, 3, None)
    """
    f = Fields(config, source, DEFAULTS)
    model_type = _check_supported(f)
    hidden = f.positive_int("hidden_size")
    expand = f.positive_int("expand")
    falcon = model_type == "falcon_mamba"
    return MambaSpec(
        model_type=model_type,
        vocab_size=f.positive_int("vocab_size"),
        hidden_size=hidden,
        num_hidden_layers=f.positive_int("num_hidden_layers"),
        state_size=f.positive_int("state_size"),
        intermediate_size=int(expand * hidden),
        conv_kernel=f.positive_int("conv_kernel"),
        time_step_rank=_time_step_rank(f, hidden),
        use_bias=f.flag("use_bias"),
        use_conv_bias=f.flag("use_conv_bias"),
        layer_norm_epsilon=f.number("layer_norm_epsilon"),
        residual_in_fp32=f.flag("residual_in_fp32"),
        tie_word_embeddings=f.flag("tie_word_embeddings"),
        mixer_rms_eps=f.number("mixer_rms_eps") if falcon else None,
    )


def _layer_tensors(spec: MambaSpec, layer: int) -> dict[str, tuple[int, ...]]:
    h, i, n, r = spec.hidden_size, spec.intermediate_size, spec.state_size, spec.time_step_rank
    prefix = f"backbone.layers.{layer}."
    shapes = {
        "norm.weight": (h,),
        "mixer.A_log": (i, n),
        "mixer.D": (i,),
        "mixer.conv1d.weight": (i, 1, spec.conv_kernel),
        "mixer.in_proj.weight": (2 * i, h),
        "mixer.x_proj.weight": (r + 2 * n, i),
        "mixer.dt_proj.weight": (i, r),
        "mixer.dt_proj.bias": (i,),
        "mixer.out_proj.weight": (h, i),
    }
    if spec.use_conv_bias:
        shapes["mixer.conv1d.bias"] = (i,)
    if spec.use_bias:
        shapes["mixer.in_proj.bias"] = (2 * i,)
        shapes["mixer.out_proj.bias"] = (h,)
    return {prefix + name: shape for name, shape in shapes.items()}


def tensors(spec: MambaSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor the model uses, under its state-dict name, with its shape.

    Args:
        spec: the model's sizes.

    Returns:
        ``{name: shape}``: the embeddings ``[V, H]``, per layer its norm and mixer (``in_proj``
        ``[2I, H]``, ``conv1d`` ``[I, 1, K]``, ``x_proj`` ``[R + 2N, I]``, ``dt_proj``
        ``[I, R]``, ``A_log`` ``[I, N]``, ``D`` ``[I]``, ``out_proj`` ``[H, I]``, biases as
        configured), ``backbone.norm_f.weight`` ``[H]`` and ``lm_head.weight`` ``[V, H]``.

    Example:
        >>> spec = parse({"model_type": "mamba", "hidden_size": 16, "num_hidden_layers": 1}, "demo")
        >>> tensors(spec)["backbone.layers.0.mixer.x_proj.weight"]
        (33, 32)
    """
    shapes = {"backbone.embeddings.weight": (spec.vocab_size, spec.hidden_size)}
    for layer in range(spec.num_hidden_layers):
        shapes |= _layer_tensors(spec, layer)
    shapes["backbone.norm_f.weight"] = (spec.hidden_size,)
    shapes["lm_head.weight"] = (spec.vocab_size, spec.hidden_size)
    return shapes


def tied(spec: MambaSpec) -> dict[str, str]:
    """``{"lm_head.weight": "backbone.embeddings.weight"}`` when the embeddings are tied, else ``{}``."""
    return {"lm_head.weight": "backbone.embeddings.weight"} if spec.tie_word_embeddings else {}


@dataclass(frozen=True)
class MambaInit:
    """How transformers draws a fresh Mamba or FalconMamba (``MambaPreTrainedModel._init_weights``,
    ``MambaMixer.init_mamba_weights``): the config's initialisation fields, at its defaults.

    Attributes:
        initializer_range: σ of the embeddings, ``in_proj``, ``x_proj`` and an untied head.
        time_step_scale: ``dt_proj.weight`` is U(±s/√R) (``"random"``) or s/√R (``"constant"``).
        time_step_min: the smallest Δ the bias starts at.
        time_step_max: the largest.
        time_step_floor: Δ drawn below it is raised to it.
        time_step_init_scheme: ``"random"`` or ``"constant"``.
        rescale_prenorm_residual: ``out_proj.weight`` divided by √L (GPT-2's scaling).
    """

    initializer_range: float = 0.1
    time_step_scale: float = 1.0
    time_step_min: float = 0.001
    time_step_max: float = 0.1
    time_step_floor: float = 1e-4
    time_step_init_scheme: str = "random"
    rescale_prenorm_residual: bool = False


#: ``time_step_init_scheme`` values transformers draws from (any other leaves the weight as drawn).
TIME_STEP_SCHEMES = ("random", "constant")


def init(config: Mapping[str, Any], source: str) -> MambaInit:
    """The :class:`MambaInit` of a ``config.json`` mapping, transformers' defaults for absent fields.

    Raises:
        CheckpointError: a field out of its range, or ``time_step_max`` below ``time_step_min``.

    >>> init({"time_step_max": 0.2, "rescale_prenorm_residual": True}, "demo").time_step_max
    0.2
    """
    f = Fields(config, source, dataclasses.asdict(MambaInit()))
    scheme = f.get("time_step_init_scheme")
    if scheme not in TIME_STEP_SCHEMES:
        raise f.refuse("time_step_init_scheme", scheme, ", ".join(TIME_STEP_SCHEMES))
    settings = MambaInit(
        initializer_range=f.number("initializer_range"),
        time_step_scale=f.number("time_step_scale", zero=True),
        time_step_min=f.number("time_step_min"),
        time_step_max=f.number("time_step_max"),
        time_step_floor=f.number("time_step_floor", zero=True),
        time_step_init_scheme=scheme,
        rescale_prenorm_residual=f.flag("rescale_prenorm_residual"),
    )
    if settings.time_step_max < settings.time_step_min:
        low = settings.time_step_min
        raise f.refuse("time_step_max", settings.time_step_max, f"at least time_step_min ({low})")
    return settings


FAMILY = Family(model_types=MODEL_TYPES, parse=parse, tensors=tensors, tied=tied, init=init)

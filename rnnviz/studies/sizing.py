r"""A design's size as its parameter count, and a design's config at about N parameters.

:func:`param_count` counts a config's parameters from its tensors' shapes (the family's
:attr:`~rnnviz.checkpoints.record.Family.tensors`, tied ones once), drawing no weights.
:data:`TEMPLATES` holds one :class:`Template` per design: how a config of that design is built
from a width d and a depth L, its other knobs fixed. :func:`design_config` searches the legal
widths for the count nearest a target, and :func:`matched_configs` does so for several designs
at once, so that their counts lie within :data:`TOLERANCE` of the target and of their median.

Every count grows with the width (the tensors' shapes do), so the search bisects the legal
widths. JAX-free: sizes are read, never drawn.

>>> config = design_config("mamba", params="100k", layers=2)
>>> config["hidden_size"], param_count("mamba", config)
(72, 99576)
"""

from __future__ import annotations

import bisect
import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from rnnviz.base.formatting import layers_text
from rnnviz.checkpoints.record import CheckpointError
from rnnviz.checkpoints.registry import FAMILIES
from rnnviz.config import ConfigError

#: How far a count may lie from its target, and from the median of the designs matched with it.
TOLERANCE = 0.05
#: A language model's vocabulary unless one is given: a byte-level one, so the embeddings do
#: not swamp the 30 k – 2 M parameters designs are compared at (the references' 32 k – 256 k would).
VOCAB_SIZE = 256
#: A torch stack's input features unless given.
INPUT_SIZE = 16
#: The widest d the search considers.
MAX_WIDTH = 16384


class Template(NamedTuple):
    """How a config of one design is built from a width d and a depth L.

    Attributes:
        width: what d is, in the config's words (``"hidden_size"``).
        legal: the legal widths, in words.
        knobs: the fixed knobs, at their defaults; a call may set any of them.
        allows: ``(d, knobs) -> bool``: whether d is a legal width.
        build: ``(d, L, knobs) -> config``: the ``config.json`` fields (a torch stack's
            constructor arguments), ``model_type`` left out.
    """

    width: str
    legal: str
    knobs: Mapping[str, Any]
    allows: Callable[[int, Mapping[str, Any]], bool]
    build: Callable[[int, int, Mapping[str, Any]], dict[str, Any]]


def _any_width(d: int, knobs: Mapping[str, Any]) -> bool:
    return d >= 1


def _mamba(d: int, layers: int, k: Mapping[str, Any]) -> dict[str, Any]:
    """transformers' ``MambaConfig`` at width d: the inner width ``expand · d``, Δ's rank ⌈d/16⌉."""
    return {"hidden_size": d, "num_hidden_layers": layers, **k}


def _mamba2_heads(d: int, k: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(num_heads, head_dim)`` at width d, their product ``expand · d``; None where they do not divide."""
    inner = k["expand"] * d
    if k["head_dim"] is not None:
        heads, dim = divmod(inner, k["head_dim"]), k["head_dim"]
        return (heads[0], dim) if heads[1] == 0 and heads[0] % k["n_groups"] == 0 and heads[0] else None
    heads = k["num_heads"]
    return (heads, inner // heads) if inner % heads == 0 and heads % k["n_groups"] == 0 else None


def _mamba2(d: int, layers: int, k: Mapping[str, Any]) -> dict[str, Any]:
    """transformers' ``Mamba2Config`` at width d: ``num_heads · head_dim = expand · d``."""
    heads, dim = _mamba2_heads(d, k)
    rest = {name: v for name, v in k.items() if name not in ("num_heads", "head_dim")}
    return {"hidden_size": d, "num_hidden_layers": layers, "num_heads": heads, "head_dim": dim, **rest}


def _recurrent_gemma(d: int, layers: int, k: Mapping[str, Any]) -> dict[str, Any]:
    """transformers' ``RecurrentGemmaConfig`` at width d: the RG-LRU d wide (rounded to whole
    gate blocks), the MLP's ``intermediate_size`` ``mlp_factor · d``, attention heads d / H wide
    (down to a multiple of 4, so that half of each is rotated in pairs)."""
    heads = k["num_attention_heads"]
    rest = {name: v for name, v in k.items() if name != "mlp_factor"}
    return {
        "hidden_size": d,
        "num_hidden_layers": layers,
        "lru_width": heads * max(1, round(d / heads)),
        "intermediate_size": max(2, round(k["mlp_factor"] * d)),
        "head_dim": 4 * max(1, d // (4 * heads)),
        **rest,
        "block_types": list(k["block_types"]),
    }


def _xlstm_allows(d: int, k: Mapping[str, Any]) -> bool:
    return d % k["num_heads"] == 0 and int(d * k["qk_dim_factor"]) % k["num_heads"] == 0 and d >= 2


def _xlstm(d: int, layers: int, k: Mapping[str, Any]) -> dict[str, Any]:
    """transformers' ``xLSTMConfig`` at width d: ``hidden_size`` = ``embedding_dim`` = d, L blocks."""
    return {"hidden_size": d, "num_blocks": layers, "num_hidden_layers": layers, **k}


def _qwen3_next(d: int, layers: int, k: Mapping[str, Any]) -> dict[str, Any]:
    """transformers' ``Qwen3NextConfig`` at width d, in its proportions: the Gated DeltaNet's
    keys n_k heads d / n_k wide (K_d = d) and values n_v heads as wide (V_d = (n_v/n_k) d), the
    full attention's H heads d / H wide, every ``full_attention_interval``-th layer attention,
    a dense MLP ``mlp_factor · d`` wide."""
    key_heads, heads = k["linear_num_key_heads"], k["num_attention_heads"]
    rest = {name: v for name, v in k.items() if name != "mlp_factor"}
    return {
        "hidden_size": d,
        "num_hidden_layers": layers,
        "linear_key_head_dim": max(1, d // key_heads),
        "linear_value_head_dim": max(1, d // key_heads),
        "head_dim": max(1, d // heads),
        "intermediate_size": max(1, round(k["mlp_factor"] * d)),
        **rest,
    }


def _torch_rnn(d: int, layers: int, k: Mapping[str, Any]) -> dict[str, Any]:
    """``nn.LSTM`` / ``nn.GRU``'s constructor: L layers of d."""
    return {"hidden_size": d, "num_layers": layers, **k}


_MAMBA_KNOBS = {"vocab_size": VOCAB_SIZE, "state_size": 16, "expand": 2, "conv_kernel": 4}
_MAMBA = Template("hidden_size", "any d ≥ 1", _MAMBA_KNOBS, _any_width, _mamba)
_TORCH_RNN = Template("hidden_size", "any d ≥ 1", {"input_size": INPUT_SIZE}, _any_width, _torch_rnn)

#: The design templates, by ``model_type``: one entry per design. The fixed knobs follow each
#: reference's defaults and proportions, scaled to widths of tens to hundreds: few heads, so
#: that every width (or every other) is legal and a count lands within 5 % of its target.
TEMPLATES: dict[str, Template] = {
    "mamba": _MAMBA,
    "falcon_mamba": _MAMBA,
    "mamba2": Template(
        "hidden_size",
        "d with expand · d a multiple of num_heads (of head_dim where that is given instead), "
        "num_heads a multiple of n_groups",
        {**_MAMBA_KNOBS, "num_heads": 2, "head_dim": None, "n_groups": 1},
        lambda d, k: _mamba2_heads(d, k) is not None,
        _mamba2,
    ),
    "recurrent_gemma": Template(
        "hidden_size",
        "any d ≥ 1 (lru_width is d rounded to a multiple of num_attention_heads)",
        {
            "vocab_size": VOCAB_SIZE,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "mlp_factor": 3,
            "conv1d_width": 4,
            "block_types": ("recurrent",),
            "attention_window_size": 2048,
        },
        _any_width,
        _recurrent_gemma,
    ),
    "xlstm": Template(
        "hidden_size",
        "d ≥ 2 with d and int(qk_dim_factor · d) multiples of num_heads",
        {
            "vocab_size": VOCAB_SIZE,
            "num_heads": 1,
            "qk_dim_factor": 0.5,
            "v_dim_factor": 1.0,
            "ffn_proj_factor": 2.667,
            "ffn_round_up_to_multiple_of": 4,
        },
        _xlstm_allows,
        _xlstm,
    ),
    "qwen3_next": Template(
        "hidden_size",
        "any d ≥ 1 (head widths are d divided by the heads, rounded down)",
        {
            "vocab_size": VOCAB_SIZE,
            "linear_num_key_heads": 1,
            "linear_num_value_heads": 2,
            "linear_conv_kernel_dim": 4,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "full_attention_interval": 4,
            "num_experts": 0,
            "mlp_factor": 2.75,
        },
        _any_width,
        _qwen3_next,
    ),
    "torch_lstm": _TORCH_RNN,
    "torch_gru": _TORCH_RNN,
}


def target_count(value: int | str) -> int:
    """A parameter count as given: an integer, or a number with ``k`` (10³) or ``M`` (10⁶).

    Raises:
        ConfigError: anything else, or a count below 1.

    >>> target_count("100k"), target_count("1.5M"), target_count(30000)
    (100000, 1500000, 30000)
    """
    scale = {"": 1, "k": 10**3, "K": 10**3, "m": 10**6, "M": 10**6}
    found = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kKmM]?)\s*", value) if isinstance(value, str) else None
    if found is not None:
        value = round(float(found[1]) * scale[found[2]])
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("params", value, "a count ≥ 1: an integer, or a number with k or M (100k, 1.5M)")
    return value


def param_count(model_type: str, config: Mapping[str, Any]) -> int:
    """The parameters of a fresh model of ``config``, tied tensors counted once, from the
    family's tensor shapes (no weight is drawn).

    It is ``sum(p.numel() for p in model.parameters())`` of transformers' model of the same
    config (torch's ``nn.LSTM``/``nn.GRU`` for a stack), with one exception: transformers'
    ``xLSTMForCausalLM`` keeps its own head under ``tie_word_embeddings``, where rnnviz ties
    it as the config asks (V · D fewer).

    Args:
        model_type: a key of :data:`TEMPLATES` (a checkpoint family's ``model_type``).
        config: ``config.json``'s fields (a torch stack's constructor arguments).

    Returns:
        The count.

    Raises:
        CheckpointError: an unknown model type, or a config its family refuses.

    >>> param_count("torch_lstm", {"num_layers": 2, "input_size": 3, "hidden_size": 8})
    992
    """
    source = f"a {model_type} design"
    if model_type not in FAMILIES:
        raise CheckpointError(source, f"model_type is {model_type!r}; allowed: {', '.join(sorted(FAMILIES))}")
    family = FAMILIES[model_type]
    spec = family.parse({**config, "model_type": model_type}, source)
    tied = family.tied(spec)
    return sum(math.prod(shape) for name, shape in family.tensors(spec).items() if name not in tied)


def _template(model_type: str) -> Template:
    if model_type not in TEMPLATES:
        raise ConfigError("design", model_type, f"one of {', '.join(TEMPLATES)}")
    return TEMPLATES[model_type]


def _knobs(model_type: str, fixed: Mapping[str, Any]) -> dict[str, Any]:
    """The template's knobs with ``fixed`` set; a knob it does not have is refused."""
    template = _template(model_type)
    unknown = sorted(set(fixed) - set(template.knobs))
    if unknown:
        knobs = ", ".join(template.knobs)
        raise ConfigError(unknown[0], fixed[unknown[0]], f"a knob of {model_type}: {knobs}")
    return {**template.knobs, **fixed}


class _Widths(NamedTuple):
    """One design's legal widths at depth L, and the count of each (computed when asked)."""

    model_type: str
    layers: int
    knobs: dict[str, Any]
    widths: list[int]

    def config(self, d: int) -> dict[str, Any]:
        return {"model_type": self.model_type, **TEMPLATES[self.model_type].build(d, self.layers, self.knobs)}

    def count(self, d: int) -> int:
        return param_count(self.model_type, self.config(d))

    def around(self, target: int) -> tuple[int | None, int | None]:
        """The widest legal width whose count is below ``target``, and the narrowest at or above it."""
        i = bisect.bisect_left(self.widths, target, key=self.count)
        return (self.widths[i - 1] if i else None), (self.widths[i] if i < len(self.widths) else None)

    def near(self, target: int) -> list[int]:
        """The legal widths whose counts lie within :data:`TOLERANCE` of ``target``, narrowest first."""
        lo = bisect.bisect_left(self.widths, target * (1 - TOLERANCE), key=self.count)
        hi = bisect.bisect_right(self.widths, target * (1 + TOLERANCE), key=self.count)
        return self.widths[lo:hi]


def _widths(model_type: str, layers: int, fixed: Mapping[str, Any]) -> _Widths:
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ConfigError("layers", layers, "an integer ≥ 1")
    knobs = _knobs(model_type, fixed)
    allows = TEMPLATES[model_type].allows
    return _Widths(model_type, layers, knobs, [d for d in range(1, MAX_WIDTH + 1) if allows(d, knobs)])


def _impossible(w: _Widths, target: int) -> ConfigError:
    """No legal width of ``w`` within :data:`TOLERANCE` of ``target``: the nearest two counts named."""
    name = TEMPLATES[w.model_type].width
    nearest = [f"{w.count(d):,} ({name} {d})" for d in w.around(target) if d is not None]
    return ConfigError(
        "params",
        target,
        f"a count a {w.model_type} design of {layers_text(w.layers)} reaches within {TOLERANCE:.0%} "
        f"(its legal widths: {TEMPLATES[w.model_type].legal}); the nearest are {' and '.join(nearest)}",
    )


def design_config(model_type: str, *, params: int | str, layers: int, **fixed: Any) -> dict[str, Any]:
    """The config of a ``model_type`` design of ``layers`` layers whose :func:`param_count` is
    nearest ``params``, over the template's legal widths.

    Args:
        model_type: a key of :data:`TEMPLATES`.
        params: the target count (``100_000``, ``"100k"``, ``"1.5M"``: :func:`target_count`).
        layers: L, the depth.
        **fixed: knobs of the template other than their defaults (``vocab_size=1024``,
            ``num_heads=4``, ``block_types=("recurrent", "recurrent", "attention")``).

    Returns:
        The config, ``model_type`` included: what :func:`~rnnviz.studies.models.fresh_model`
        takes, and what a ``config.json`` of that model holds.

    Raises:
        ConfigError: an unknown design or knob, a depth below 1, a bad count, or no legal
            width within :data:`TOLERANCE` of the target (naming the nearest two counts).

    Example:
        >>> config = design_config("xlstm", params="400k", layers=4, vocab_size=128)
        >>> config["hidden_size"], config["num_blocks"], param_count("xlstm", config)
        (88, 4, 397504)
        >>> design_config("mamba", params="1k", layers=4)
        Traceback (most recent call last):
            ...
        rnnviz.config.ConfigError: params=1000 is not allowed: a count a mamba design of 4 layers ... \
the nearest are 741 (hidden_size 1) and 1,530 (hidden_size 2).
    """
    target = target_count(params)
    w = _widths(model_type, layers, fixed)
    found = [d for d in w.around(target) if d is not None]
    best = min(found, key=lambda d: abs(w.count(d) - target))
    if abs(w.count(best) - target) > TOLERANCE * target:
        raise _impossible(w, target)
    return w.config(best)


def _spread(counts: Sequence[int]) -> float:
    """The largest relative distance of a count from the counts' median."""
    middle = statistics.median(counts)
    return max(abs(c - middle) for c in counts) / middle


def matched_configs(
    model_types: Sequence[str], *, params: int | str, layers: int, **fixed: Any
) -> dict[str, dict[str, Any]]:
    """One config per design, every count within :data:`TOLERANCE` of ``params`` and of the
    counts' median: designs side by side at (about) equal parameters.

    Among the legal widths within the tolerance of the target, each design takes the one
    nearest a common centre; of the centres that keep every count within the tolerance of the
    median, the one whose counts lie nearest the target wins.

    Args:
        model_types: keys of :data:`TEMPLATES`, each once.
        params: the target count (:func:`target_count`).
        layers: L, every design's depth.
        **fixed: knobs, each given to the designs whose templates have it (``vocab_size`` to
            the language models, ``input_size`` to the torch stacks).

    Returns:
        ``{model_type: config}`` in the order given.

    Raises:
        ConfigError: an unknown design, a repeated one, a knob no design has, a design with no
            legal width within the tolerance of the target (naming its nearest two counts), or
            no choice that keeps every count within the tolerance of the median.

    Example:
        >>> configs = matched_configs(["mamba", "mamba2", "torch_lstm"], params="100k", layers=2)
        >>> {t: (c["hidden_size"], param_count(t, c)) for t, c in configs.items()}
        {'mamba': (72, 99576), 'mamba2': (69, 99347), 'torch_lstm': (88, 99968)}
    """
    target = target_count(params)
    if not model_types or len(set(model_types)) != len(model_types):
        raise ConfigError("design", list(model_types), "one or more designs, each once")
    unused = sorted(k for k in fixed if not any(k in _template(t).knobs for t in model_types))
    if unused:
        raise ConfigError(unused[0], fixed[unused[0]], f"a knob of one of {', '.join(model_types)}")
    own = {t: {k: v for k, v in fixed.items() if k in TEMPLATES[t].knobs} for t in model_types}
    designs = {t: _widths(t, layers, own[t]) for t in model_types}
    near = {t: [(w.count(d), d) for d in w.near(target)] for t, w in designs.items()}
    for t, options in near.items():
        if not options:
            raise _impossible(designs[t], target)
    best = None
    for centre in sorted({target} | {c for options in near.values() for c, _ in options}):
        picks = {t: min(options, key=lambda o: abs(o[0] - centre)) for t, options in near.items()}
        counts = [c for c, _ in picks.values()]
        if _spread(counts) <= TOLERANCE:
            score = (max(abs(c - target) for c in counts), _spread(counts))
            best = min(best, (score, picks)) if best else (score, picks)
    if best is None:
        ranges = "; ".join(f"{t} {o[0][0]:,} … {o[-1][0]:,}" for t, o in near.items())
        raise ConfigError(
            "params", target, f"counts within {TOLERANCE:.0%} of their median; the designs reach {ranges}"
        )
    return {t: designs[t].config(d) for t, (_, d) in best[1].items()}

r"""A ``torch.nn.LSTM`` or ``torch.nn.GRU`` state dict (model types ``torch_lstm`` and
``torch_gru``): a unidirectional stack of L layers without projection, read from its tensors'
names and shapes alone, since such a file carries no ``config.json``.

Layer k of either kind holds (torch's names, ``G`` gates stacked along the rows)::

    weight_ih_l{k}  [G·H, I_k]     I_0 = input_size, I_k = H above
    weight_hh_l{k}  [G·H, H]
    bias_ih_l{k}    [G·H]          both biases absent when the module had bias=False
    bias_hh_l{k}    [G·H]

with G = 4 for the LSTM (rows i, f, g, o) and G = 3 for the GRU (rows r, z, n). A module that
holds the stack as an attribute saves every name under one prefix (``"rnn."``); the prefix
is kept in the spec so that :func:`tensors` names what the file holds.

Refused: bidirectional stacks (``_reverse`` names), ``proj_size`` (``weight_hr_l{k}``), and
anything that is not one consistent stack (a gap in the layers, two prefixes, a shape that
disagrees with the sizes the other tensors give).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rnnviz.checkpoints.families.fields import Fields
from rnnviz.checkpoints.record import CheckpointError, Family

#: The gates per model type, in the order torch stacks their rows.
GATES = {"torch_lstm": ("i", "f", "g", "o"), "torch_gru": ("r", "z", "n")}

#: What one layer's tensors are called (before ``_l{k}``); the biases are optional.
WEIGHTS = ("weight_ih", "weight_hh")
BIASES = ("bias_ih", "bias_hh")

#: torch's name for one tensor of layer k, after any prefix; the groups a refusal reads.
_NAME = re.compile(
    r"^(?P<prefix>(?:.*\.)?)(?P<kind>weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)"
    r"_l(?P<layer>\d+)(?P<reverse>_reverse)?$"
)


@dataclass(frozen=True)
class TorchRNNSpec:
    """The sizes of a unidirectional ``torch.nn.LSTM`` / ``torch.nn.GRU`` stack.

    Attributes:
        model_type: ``"torch_lstm"`` or ``"torch_gru"``.
        num_layers: L, the layers stacked.
        input_size: I, the features of the inputs ``[B, T, I]``.
        hidden_size: H, each layer's state and output size.
        bias: whether each layer has ``bias_ih`` and ``bias_hh``.
        prefix: what precedes every tensor's name in the file (``""`` or ``"rnn."``).
    """

    model_type: str
    num_layers: int
    input_size: int
    hidden_size: int
    bias: bool = True
    prefix: str = ""

    @property
    def n_layers(self) -> int:
        """L."""
        return self.num_layers

    @property
    def d_model(self) -> int:
        """H: the width of every layer's output."""
        return self.hidden_size

    @property
    def vocab_size(self) -> int:
        """0: the stack reads float features, not tokens."""
        return 0

    @property
    def n_gates(self) -> int:
        """G: 4 for the LSTM, 3 for the GRU."""
        return len(GATES[self.model_type])

    def name(self, kind: str, layer: int) -> str:
        """The file's name of one tensor: ``name("weight_ih", 1) == prefix + "weight_ih_l1"``."""
        return f"{self.prefix}{kind}_l{layer}"


def parse(config: Mapping[str, Any], source: str) -> TorchRNNSpec:
    """The spec of a stack described by ``config``, torch's constructor arguments.

    Args:
        config: ``{"model_type": "torch_lstm" | "torch_gru", "num_layers", "input_size",
            "hidden_size"}``, optionally ``"bias"`` (torch's default True), ``"prefix"``
            (default ``""``), and ``"bidirectional"`` / ``"proj_size"`` only at torch's
            defaults (False, 0).
        source: the file, named by any error.

    Returns:
        The :class:`TorchRNNSpec`.

    Raises:
        CheckpointError: a missing or unsupported value, naming the field and what is allowed.

    >>> parse({"model_type": "torch_gru", "num_layers": 2, "input_size": 3, "hidden_size": 8}, "x.pt")
    TorchRNNSpec(model_type='torch_gru', num_layers=2, input_size=3, hidden_size=8, bias=True, prefix='')
    """
    kind = config.get("model_type")
    if kind not in GATES:
        raise CheckpointError(source, f"model_type is {kind!r}; allowed: {', '.join(GATES)}")
    if config.get("bidirectional", False):
        raise CheckpointError(source, "bidirectional is True; allowed: False (a one-way stack)")
    if config.get("proj_size", 0):
        raise CheckpointError(source, f"proj_size is {config['proj_size']!r}; allowed: 0 (no projection)")
    f = Fields(config, source, {"bias": True, "prefix": ""})
    bias, prefix = f.flag("bias"), f.get("prefix")
    if not isinstance(prefix, str) or (prefix and not prefix.endswith(".")):
        raise CheckpointError(source, f"prefix is {prefix!r}; allowed: '' or a name ending in '.'")
    sizes = (f.positive_int(k) for k in ("num_layers", "input_size", "hidden_size"))
    return TorchRNNSpec(kind, *sizes, bias=bias, prefix=prefix)


def tensors(spec: TorchRNNSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor of the stack, named as ``module.state_dict()`` names them, with its shape.

    >>> spec = TorchRNNSpec("torch_lstm", 2, 3, 8, bias=False, prefix="rnn.")
    >>> tensors(spec)["rnn.weight_ih_l1"], len(tensors(spec))
    ((32, 8), 4)
    """
    rows, h = spec.n_gates * spec.hidden_size, spec.hidden_size
    out: dict[str, tuple[int, ...]] = {}
    for k in range(spec.num_layers):
        out[spec.name("weight_ih", k)] = (rows, spec.input_size if k == 0 else h)
        out[spec.name("weight_hh", k)] = (rows, h)
        if spec.bias:
            out[spec.name("bias_ih", k)] = (rows,)
            out[spec.name("bias_hh", k)] = (rows,)
    return out


def tied(spec: TorchRNNSpec) -> dict[str, str]:
    """``{}``: no tensor of the stack shares another's values."""
    del spec
    return {}


def _names(shapes: Mapping[str, tuple[int, ...]], source: str) -> dict[str, re.Match]:
    """Each name's parts; refuses a name that is not a one-way, unprojected stack's."""
    found = {}
    for key in shapes:
        m = _NAME.match(key)
        if m is None:
            raise CheckpointError(
                source,
                f"holds {key!r}, not a torch.nn.LSTM/GRU tensor; allowed: weight_ih_l<k>, "
                "weight_hh_l<k>, bias_ih_l<k>, bias_hh_l<k>, all under one prefix",
            )
        if m["reverse"]:
            raise CheckpointError(source, f"holds {key!r}: a bidirectional stack; allowed: one-way stacks")
        if m["kind"] == "weight_hr":
            raise CheckpointError(source, f"holds {key!r}: an LSTM with proj_size; allowed: proj_size 0")
        found[key] = m
    return found


def _one_prefix(found: Mapping[str, re.Match], source: str) -> str:
    prefixes = sorted({m["prefix"] for m in found.values()})
    if len(prefixes) > 1:
        raise CheckpointError(source, f"mixes the prefixes {prefixes}; allowed: one stack under one prefix")
    return prefixes[0]


def _layer_count(found: Mapping[str, re.Match], source: str) -> int:
    layers = sorted({int(m["layer"]) for m in found.values()})
    missing = sorted(set(range(layers[-1] + 1)) - set(layers))
    if missing:
        raise CheckpointError(source, f"has layers {layers} but not {missing}; allowed: layers 0 … L−1")
    return len(layers)


def _kind(shape: tuple[int, ...], name: str, source: str) -> tuple[str, int]:
    """``(model_type, H)`` from ``weight_hh_l0``'s shape ``[G·H, H]``."""
    if len(shape) != 2 or shape[1] < 1:
        raise CheckpointError(source, f"{name} has shape {tuple(shape)}; allowed: [G·H, H]")
    rows, h = shape
    for kind, gates in GATES.items():
        if rows == len(gates) * h:
            return kind, h
    raise CheckpointError(
        source, f"{name} has {rows} rows for H = {h}; allowed: 4H = {4 * h} (LSTM) or 3H = {3 * h} (GRU)"
    )


def spec_from_shapes(shapes: Mapping[str, tuple[int, ...]], source: str) -> TorchRNNSpec:
    """The spec of the stack whose state dict has these names and shapes (headers only).

    The kind comes from ``weight_hh_l0`` ``[G·H, H]`` (G = 4: LSTM, 3: GRU), I from
    ``weight_ih_l0``, the bias from whether ``bias_ih_l0`` is present; then every tensor must
    be exactly what :func:`tensors` of that spec lists.

    Args:
        shapes: ``{name: shape}`` of every tensor in the file.
        source: the file, named by any error.

    Returns:
        The :class:`TorchRNNSpec`, its ``prefix`` the one common to all names.

    Raises:
        CheckpointError: a bidirectional or projected stack, mixed prefixes, a gap in the
            layer numbers, a name that is not a stack's, or a shape that disagrees.

    >>> shapes = {"rnn.weight_ih_l0": (24, 3), "rnn.weight_hh_l0": (24, 8)}
    >>> spec_from_shapes(shapes, "model.pt")
    TorchRNNSpec(model_type='torch_gru', num_layers=1, input_size=3, hidden_size=8, bias=False, prefix='rnn.')
    """
    if not shapes:
        raise CheckpointError(source, "holds no tensors; allowed: a torch.nn.LSTM/GRU state dict")
    found = _names(shapes, source)
    prefix, n_layers = _one_prefix(found, source), _layer_count(found, source)
    first = {m["kind"]: tuple(shapes[key]) for key, m in found.items() if m["layer"] == "0"}
    for kind in WEIGHTS:
        if kind not in first:
            raise CheckpointError(source, f"has no {prefix}{kind}_l0; allowed: a stack with its weights")
    model_type, h = _kind(first["weight_hh"], f"{prefix}weight_hh_l0", source)
    if len(first["weight_ih"]) != 2:
        raise CheckpointError(
            source, f"{prefix}weight_ih_l0 has shape {first['weight_ih']}; allowed: [G·H, I]"
        )
    spec = TorchRNNSpec(model_type, n_layers, first["weight_ih"][1], h, "bias_ih" in first, prefix)
    _check_against(spec, shapes, source)
    return spec


def _check_against(spec: TorchRNNSpec, shapes: Mapping[str, tuple[int, ...]], source: str) -> None:
    """Refuses ``shapes`` unless they are exactly ``tensors(spec)``, naming the first difference."""
    expected = tensors(spec)
    sizes = f"{spec.model_type}, H = {spec.hidden_size}, I = {spec.input_size}, bias = {spec.bias}"
    for name, shape in expected.items():
        if name not in shapes:
            raise CheckpointError(source, f"has no {name}; allowed: every layer alike ({sizes})")
        if tuple(shapes[name]) != shape:
            raise CheckpointError(
                source,
                f"{name} has shape {tuple(shapes[name])}; allowed: {shape}, as layer 0 gives ({sizes})",
            )
    extra = sorted(set(shapes) - set(expected))
    if extra:
        raise CheckpointError(
            source, f"holds {extra[0]} beside a stack without it; allowed: every layer alike ({sizes})"
        )


FAMILY = Family(
    model_types=tuple(GATES), parse=parse, tensors=tensors, tied=tied, from_shapes=spec_from_shapes
)

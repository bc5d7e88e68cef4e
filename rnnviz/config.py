"""Run configuration: one frozen, hashable dataclass, validated in one place.

Every way into rnnviz (the library, ``python -m rnnviz``, the Streamlit app and its
URL) builds a :class:`RunConfig`, so every bad value gets the same message from
:func:`RunConfig.__post_init__`: the field, the value, and what is allowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rnnviz.tables.blocks import BLOCK_DESIGNS, BLOCK_KINDS, MAX_LAYERS
from rnnviz.tables.cells import cell_names, cell_spec
from rnnviz.tables.strategies import strategy_names, strategy_rules

ACTIVATIONS = ("tanh", "relu", "identity")
DTYPES = ("float32", "bfloat16", "float16")
CARRY_INITS = ("zeros", "normal", "uniform", "constant", "learned")
RECURRENT_INITS = ("orthogonal", "normal", "identity")
INPUTS = ("normal", "uniform", "sine")
LOSSES = ("last", "all")
DEVICES = ("auto", "cpu", "gpu")

#: Upper bound on the estimated working set of one analysis (see :func:`estimate_memory_bytes`).
MEMORY_BUDGET_BYTES = 4 * 1024**3
#: Upper bound on the estimated FLOPs of one analysis (see :func:`estimate_flops`): about
#: 40 s at the ~50 GFLOP/s this project's 2-core CPU reaches, well under a second on a GPU.
FLOP_BUDGET = 2e12
REFERENCE_FLOPS_PER_S = 50e9
MAX_SEQ_LEN = 100_000
MAX_HIDDEN = 2048
MAX_INPUT = 1024
MAX_BATCH = 1024
MAX_SEED = 2**31 - 1

_ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


class ConfigError(ValueError):
    """A value the user gave is not allowed; ``str(err)`` is a complete user-facing sentence.

    Attributes:
        field: the field or argument.
        value: the value given.
        allowed: what is allowed, in words.
    """

    def __init__(self, field: str, value: Any, allowed: str):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}={value!r} is not allowed: {allowed}.")

    def __reduce__(self):
        # Rebuilt from its three parts (the dashboard's worker process sends it back pickled).
        return type(self), (self.field, self.value, self.allowed)


class BudgetError(ConfigError):
    """Every field is valid on its own, but together they are over the memory or FLOP
    budget (:func:`fit_to_budget` shrinks them to fit)."""


@dataclass(frozen=True)
class FieldSpec:
    """What one :class:`RunConfig` field accepts; drives validation, CLI flags and widgets."""

    name: str
    kind: type
    help: str
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None  # callable: looked up when needed
    lo: float | None = None
    hi: float | None = None
    optional: bool = False
    lo_open: bool = False  # the range is (lo, hi]: lo itself is not allowed
    note: str = ""  # why the range is what it is, added to the message in parentheses
    label: str = ""  # what a form calls it (the dashboard's sidebar, a teaching page's controls)
    step: float | None = None  # a number input's step

    def options(self) -> tuple[str, ...] | None:
        """The allowed values of a choice field (the cell registry's names for ``cell``)."""
        return self.choices() if callable(self.choices) else self.choices

    @property
    def title(self) -> str:
        """:attr:`label`, or the name in words (``seq len``) where it has none."""
        return self.label or self.name.replace("_", " ")

    def allowed(self) -> str:
        """What the field accepts, in words: ``one of a, b`` or ``an integer in [1, 2048]`` (+ note)."""
        if self.choices is not None:
            return "one of " + ", ".join(self.options())
        what = "an integer" if self.kind is int else "a number"
        text = f"{what} in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}]"
        text += " or None" if self.optional else ""
        return text + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class RunConfig:
    r"""Everything that defines one analysis run; validated on construction.

    Shapes: unbatched input is ``[T, I]`` (``batch_size=None``), batched is batch-first
    ``[B, T, I]``; the carry is ``[(B,) H]`` per component. Losses, with ``h_t`` the
    cell's output at step t:

    .. math::

        L_{\text{last}} = \tfrac12 \sum_{b,j} h_T[b, j]^2, \qquad
        L_{\text{all}} = \tfrac12 \cdot \tfrac1T \sum_t \sum_{b,j} h_t[b, j]^2

    Fields split in two: those that fix array shapes or code paths (:meth:`shape_key`)
    and plain values (:attr:`VALUE_FIELDS`: seed, gains, scales) that are passed to the
    compiled function as arguments, so changing them never recompiles.

    Attributes:
        cell: a registered cell (:func:`rnnviz.cell_names`).
        activation: ``tanh``, ``relu`` or ``identity`` (cells that take one).
        hidden_size: H, units in the carry.
        input_size: I, features per step.
        seq_len: T, time steps.
        batch_size: B, or None for unbatched ``[T, I]`` input.
        dtype: ``float32``, ``bfloat16`` or ``float16``: params, carry and computation.
        carry_init: ``zeros``, ``normal``, ``uniform``, ``constant`` or ``learned``.
        carry_scale: std (normal), half-width (uniform), value (constant), init std (learned).
        recurrent_init: ``orthogonal``, ``normal`` or ``identity``.
        recurrent_gain: g, multiplies the recurrent kernels after initialisation.
        forget_bias: added to the forget gate's bias (cells that have one).
        inputs: ``normal``, ``uniform`` or ``sine``.
        input_scale: multiplies the inputs.
        loss: ``last`` or ``all`` (above).
        seed: the root PRNG seed of params, carry and inputs.
        strategy: how ∂L/∂W is gathered through time (:mod:`rnnviz.engine.strategies.registry`).
        device: ``auto`` (a GPU when present), ``cpu`` or ``gpu``.
        block: ``cell`` (the bare recurrence) or ``reference``: the cell's design as its
            reference block (:data:`~rnnviz.tables.blocks.BLOCK_DESIGNS`), D = H wide, read as
            a model of vectors (an input projection, the blocks, a readout to H outputs whose
            ``½‖ŷ_T‖²`` is the loss), drawn as the reference draws it.
        layers: L, the blocks stacked (1 for a bare cell).

    Raises:
        ConfigError: on construction, naming the field, the value and what is allowed
            (``BudgetError`` when valid fields together are over the memory or FLOP budget).

    Example:
        >>> from rnnviz import ConfigError, RunConfig
        >>> RunConfig(cell="lstm", seq_len=100).input_shape
        (4, 100, 8)
        >>> try:
        ...     RunConfig(hidden_size=0)
        ... except ConfigError as err:
        ...     print(err)
        hidden_size=0 is not allowed: an integer in [1, 2048].
    """

    cell: str = "simple"
    activation: str = "tanh"
    hidden_size: int = 32
    input_size: int = 8
    seq_len: int = 50
    batch_size: int | None = 4
    dtype: str = "float32"
    carry_init: str = "zeros"
    carry_scale: float = 1.0
    recurrent_init: str = "orthogonal"
    recurrent_gain: float = 1.0
    forget_bias: float = 0.0
    inputs: str = "normal"
    input_scale: float = 1.0
    loss: str = "last"
    seed: int = 0
    strategy: str = "accumulate"
    device: str = "auto"
    block: str = "cell"
    layers: int = 1

    def __post_init__(self) -> None:
        _validate(self)

    # Fields whose values may change without changing shapes or code paths.
    VALUE_FIELDS = ("seed", "carry_scale", "recurrent_gain", "forget_bias", "input_scale")

    def shape_key(self) -> tuple:
        """The part of the config that decides array shapes and traced code: the cache key."""
        return tuple(
            (f.name, getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in self.VALUE_FIELDS
        )

    @property
    def carry_components(self) -> tuple[str, ...]:
        """Names of the carry's leaves in the cell's order (its :class:`CellSpec`): LSTM
        ``(c, h)``, the other built-ins ``(h,)``."""
        return cell_spec(self.cell).carry.components

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of the whole input, batch-first: ``[B, T, I]`` or ``[T, I]``."""
        batch = () if self.batch_size is None else (self.batch_size,)
        return batch + (self.seq_len, self.input_size)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied, validated again (ConfigError when not allowed)."""
        return dataclasses.replace(self, **changes)

    def with_cell(self, cell: str) -> RunConfig:
        """This config for another cell, as the dashboard's cell selector makes it: what
        ``cell`` cannot take falls back (its first activation, a forget bias of 0.0 when it
        has no forget gate, the ``accumulate`` strategy when it cannot use this one).

        Raises:
            ConfigError: ``cell`` is not registered, or the result is over a budget.

        Example:
            >>> from rnnviz import RunConfig
            >>> RunConfig(cell="lstm", forget_bias=1.0).with_cell("minlstm").forget_bias
            1.0
            >>> RunConfig(cell="lstm", forget_bias=1.0).with_cell("gru").forget_bias  # no forget gate
            0.0
            >>> RunConfig(activation="relu").with_cell("lstm").activation
            'tanh'
            >>> lru = RunConfig(cell="lru", strategy="parallel")  # a scan over a linear recurrence
            >>> lru.with_cell("mamba").strategy, lru.with_cell("lstm").strategy
            ('parallel', 'accumulate')
        """
        check_field(FIELD_SPECS["cell"], cell)  # an unknown cell: the one message that lists them
        spec = cell_spec(cell)
        changes: dict[str, Any] = {"cell": cell}
        if self.activation not in spec.display.activations:
            changes["activation"] = spec.display.activations[0]
        if spec.params.forget_bias is None:
            changes["forget_bias"] = 0.0
        if strategy_rules(self.strategy).cell_reason(spec) is not None:
            changes["strategy"] = "accumulate"
        return self.replace(**changes)

    def to_dict(self) -> dict[str, Any]:
        """``{field: value}`` for every field, in declaration order (:meth:`from_mapping` reads it back)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RunConfig:
        """Build from loosely typed values (CLI strings, URL params, JSON); unknown keys are errors."""
        names = {f.name for f in dataclasses.fields(cls)}
        for key in values:
            if key not in names:
                raise ConfigError(
                    key, values[key], "not a RunConfig field; fields are " + ", ".join(sorted(names))
                )
        return cls(**{k: coerce(k, v) for k, v in values.items()})


def _spec_table() -> dict[str, FieldSpec]:
    specs = [
        FieldSpec(
            "cell",
            str,
            "recurrent cell: a registered name (rnnviz.register_cell, or a plugin)",
            cell_names,
            label="Cell",
        ),
        FieldSpec(
            "activation",
            str,
            "the activation of cells that take one (simple, indrnn); gated cells use tanh",
            ACTIVATIONS,
            label="Activation",
        ),
        FieldSpec(
            "hidden_size", int, "units in the carry, H", lo=1, hi=MAX_HIDDEN, label="Hidden size H", step=1
        ),
        FieldSpec(
            "input_size", int, "features per step, I", lo=1, hi=MAX_INPUT, label="Input features I", step=1
        ),
        FieldSpec("seq_len", int, "time steps, T", lo=1, hi=MAX_SEQ_LEN, label="Sequence length T", step=10),
        FieldSpec(
            "batch_size",
            int,
            "examples B; None for unbatched [T, I] input",
            lo=1,
            hi=MAX_BATCH,
            optional=True,
            label="Batch size B",
            step=1,
        ),
        FieldSpec("dtype", str, "dtype of params, carry and computation", DTYPES, label="dtype"),
        FieldSpec("carry_init", str, "how the initial carry starts", CARRY_INITS, label="Initial carry"),
        FieldSpec(
            "carry_scale",
            float,
            "std (normal), half-width (uniform), value (constant), init std (learned)",
            lo=0.0,
            hi=100.0,
            label="Carry scale",
            step=0.1,
        ),
        FieldSpec(
            "recurrent_init",
            str,
            "initialiser of the recurrent kernels",
            RECURRENT_INITS,
            label="Recurrent init",
        ),
        FieldSpec(
            "recurrent_gain",
            float,
            "factor applied to the recurrent kernels after init",
            lo=0.0,
            hi=10.0,
            label="Recurrent gain g",
            step=0.05,
        ),
        FieldSpec(
            "forget_bias",
            float,
            "LSTM forget-gate bias (1.0 is the classic remedy)",
            lo=-20.0,
            hi=20.0,
            label="Forget bias",
            step=0.5,
        ),
        FieldSpec("inputs", str, "input sequence distribution", INPUTS, label="Input distribution"),
        FieldSpec(
            "input_scale", float, "multiplies the inputs", lo=0.0, hi=100.0, label="Input scale", step=0.1
        ),
        FieldSpec("loss", str, "last: ½Σh_T²; all: ½(1/T)Σ_tΣh_t²", LOSSES, label="Loss"),
        FieldSpec(
            "seed",
            int,
            "root PRNG seed for params, carry and inputs",
            lo=0,
            hi=MAX_SEED,
            label="Seed",
            step=1,
        ),
        FieldSpec(
            "strategy",
            str,
            "how parameter gradients are gathered through time",
            strategy_names,
            label="Strategy",
        ),
        FieldSpec("device", str, "where to run: auto picks a GPU when present", DEVICES, label="Device"),
        FieldSpec(
            "block",
            str,
            "cell: the bare recurrence; reference: its design's reference block, stacked",
            BLOCK_KINDS,
            label="Block",
        ),
        FieldSpec("layers", int, "blocks stacked, L", lo=1, hi=MAX_LAYERS, label="Layers L", step=1),
    ]
    return {s.name: s for s in specs}


FIELD_SPECS: dict[str, FieldSpec] = _spec_table()


def coerce(name: str, value: Any) -> Any:
    """Turn a loosely typed value (e.g. the string ``"32"``) into the field's type, or raise."""
    spec = FIELD_SPECS.get(name)
    if spec is None:
        raise ConfigError(name, value, "not a RunConfig field")
    if spec.optional and (
        value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null"))
    ):
        return None
    if spec.kind is str:
        if not isinstance(value, str):
            raise ConfigError(name, value, spec.allowed())
        return value.strip()
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(name, value, spec.allowed()) from None
    if spec.kind is int:
        if number != number or number in (float("inf"), float("-inf")) or number != int(number):
            raise ConfigError(name, value, spec.allowed())
        return int(number)
    return number


def check_field(spec: FieldSpec, value: Any) -> None:
    """The one validator of every value a user gives.

    Args:
        spec: what the value may be.
        value: a Python value of the spec's kind (``int`` for an integer field; ``int`` or
            ``float`` for a number; a string for a choice).

    Raises:
        ConfigError: naming the field, the value and what is allowed.
    """
    if spec.optional and value is None:
        return
    if spec.choices is not None:
        if value not in spec.options():
            raise ConfigError(spec.name, value, spec.allowed())
        return
    ok_type = isinstance(value, int) and not isinstance(value, bool)
    if spec.kind is float:
        ok_type = ok_type or isinstance(value, float)
    in_range = ok_type and (spec.lo < value if spec.lo_open else spec.lo <= value) and value <= spec.hi
    if not in_range:  # NaN fails the range test too
        raise ConfigError(spec.name, value, spec.allowed())


def check_number(
    name: str,
    value: Any,
    lo: float,
    hi: float,
    *,
    integer: bool = False,
    lo_open: bool = False,
    optional: bool = False,
    note: str = "",
) -> Any:
    """:func:`check_field` for a number given outside :class:`RunConfig` (training and
    Lyapunov options), where NumPy scalars and whole floats (``5.0`` steps) are welcome.

    Args:
        name: the argument's name, as the message shows it.
        value: the number given.
        lo, hi: the allowed range (``(lo, hi]`` with ``lo_open``).
        integer: whether it must be a whole number.
        lo_open: whether ``lo`` itself is excluded.
        optional: whether None is allowed (and returned as is).
        note: why the range is what it is (shown in the message).

    Returns:
        The value as a Python ``int`` or ``float``.

    Raises:
        ConfigError: naming the argument, the value and the range.
    """
    spec = FieldSpec(
        name, int if integer else float, "", lo=lo, hi=hi, lo_open=lo_open, optional=optional, note=note
    )
    plain = value.item() if isinstance(value, (np.integer, np.floating)) else value
    if integer and isinstance(plain, float) and plain.is_integer():
        plain = int(plain)
    try:
        check_field(spec, plain)
    except ConfigError:
        raise ConfigError(name, value, spec.allowed()) from None
    return plain


def _validate(cfg: RunConfig) -> None:
    for spec in FIELD_SPECS.values():
        check_field(spec, getattr(cfg, spec.name))
    _check_block(cfg)
    spec = cell_spec(cfg.cell)
    if cfg.activation not in spec.display.activations:
        if spec.display.activations == ("tanh",):
            allowed = f"the {cfg.cell} cell fixes its activations; use 'tanh'"
        else:
            allowed = f"the {cfg.cell} cell takes " + ", ".join(repr(a) for a in spec.display.activations)
        raise ConfigError("activation", cfg.activation, allowed)
    reason = strategy_rules(cfg.strategy).cell_reason(spec)
    if reason is not None:
        able = ", ".join(
            n for n in cell_names() if strategy_rules(cfg.strategy).cell_reason(cell_spec(n)) is None
        )
        raise ConfigError(
            "strategy", cfg.strategy, f"the {cfg.cell} cell cannot use it: {reason}; cells that can: {able}"
        )
    if spec.params.forget_bias is None and cfg.forget_bias != 0.0:
        with_bias = ", ".join(n for n in cell_names() if cell_spec(n).params.forget_bias is not None)
        raise ConfigError(
            "forget_bias",
            cfg.forget_bias,
            f"only cells with a forget gate ({with_bias}) have a forget bias; use 0.0 with the {cfg.cell} "
            "cell",
        )
    need = estimate_memory_bytes(cfg)
    if need > MEMORY_BUDGET_BYTES:
        raise BudgetError(
            "seq_len",
            cfg.seq_len,
            f"this configuration needs about {need / 2**30:.1f} GiB, over the "
            f"{MEMORY_BUDGET_BYTES / 2**30:.0f} GiB budget; "
            f"the largest seq_len that fits is {max_seq_len_within_budget(cfg)}" + _checkpoint_hint(cfg),
        )
    flops = estimate_flops(cfg)
    if flops > FLOP_BUDGET:
        raise BudgetError(
            "seq_len",
            cfg.seq_len,
            f"this configuration needs about {flops / 1e12:.1f} TFLOP per analysis (≈ "
            f"{flops / REFERENCE_FLOPS_PER_S:.0f} s on a "
            f"2-core CPU), over the {FLOP_BUDGET / 1e12:g} TFLOP budget; the largest seq_len that fits is "
            f"{max_seq_len_within_budget(cfg)}",
        )


#: What a reference block fixes, as the reference does: field → (its value, why).
BLOCK_FIXES: dict[str, tuple[Any, str]] = {
    "carry_init": ("zeros", "a reference block starts from its zero state"),
    "recurrent_init": ("orthogonal", "a reference block is drawn as its reference draws it"),
    "recurrent_gain": (1.0, "a reference block is drawn as its reference draws it"),
    "forget_bias": (0.0, "a reference block is drawn as its reference draws it"),
    "strategy": ("accumulate", "a block's per-step gradients come from one reverse pass through probes"),
    "loss": ("last", "a block's loss reads its readout at the last step"),
}


def _check_block(cfg: RunConfig) -> None:
    """The block and depth against the cell and the fields a reference block fixes."""
    if cfg.block == "cell":
        if cfg.layers != 1:
            raise ConfigError(
                "layers", cfg.layers, "a bare cell is one layer; layers > 1 needs block='reference'"
            )
        return
    if cfg.cell not in BLOCK_DESIGNS:
        raise ConfigError(
            "block",
            cfg.block,
            f"the {cfg.cell} cell has no reference block; cells that have one: {', '.join(BLOCK_DESIGNS)}",
        )
    for name, (value, why) in BLOCK_FIXES.items():
        if getattr(cfg, name) != value:
            raise ConfigError(name, getattr(cfg, name), f"{value!r} with block='reference' ({why})")
    if cfg.dtype == "float16":
        raise ConfigError(
            "dtype", cfg.dtype, "float32 or bfloat16 with block='reference' (the references' dtypes)"
        )


def require_cell(cfg: RunConfig) -> None:
    """Refuse a reference block where only a bare cell's computation exists.

    Raises:
        ConfigError: ``cfg.block`` is not ``"cell"``, naming what reads a block.

    Example:
        >>> try:
        ...     require_cell(RunConfig(cell="lstm", block="reference"))
        ... except ConfigError as err:
        ...     print(err.field, err.allowed.split(";")[0])
        block 'cell' here (this computes a bare cell's run)
    """
    if cfg.block != "cell":
        raise ConfigError(
            "block",
            cfg.block,
            "'cell' here (this computes a bare cell's run); a reference block is read by "
            "rnnviz.analyze_block(cfg) and rnnviz analyze --block reference",
        )


def _checkpoint_hint(cfg: RunConfig) -> str:
    """The memory message's pointer to ``strategy='checkpoint'`` when that would fit."""
    if cfg.strategy == "checkpoint":
        return ""
    within = estimate_memory_bytes(cfg, strategy="checkpoint") <= MEMORY_BUDGET_BYTES
    return "; strategy='checkpoint' (recompute blocks of √T steps) fits this length" if within else ""


def static_config(cfg: RunConfig) -> RunConfig:
    """``cfg`` with its plain values at their defaults: two configs share executables
    exactly when their static configs are equal.

    Example:
        >>> a, b = RunConfig(seed=1, recurrent_gain=0.5), RunConfig(seed=2)
        >>> static_config(a) == static_config(b), static_config(a).seed
        (True, 0)
    """
    return RunConfig(**dict(cfg.shape_key()))


def carry_size(cfg: RunConfig) -> int:
    """D, the scalars of one example's carry (every leaf), from the cell's spec
    (:meth:`~rnnviz.tables.cells.CostModel.carry_size`): LSTM and LRU 2H, a matrix memory
    heads·d² and more, Mamba's state H·N. The size of the packed carry whose step Jacobians
    :func:`rnnviz.jacobians` takes, known without tracing the cell.

    Example:
        >>> carry_size(RunConfig(cell="lstm", hidden_size=8)), carry_size(RunConfig(hidden_size=8))
        (16, 8)
    """
    return cell_spec(cfg.cell).cost.carry_size(cfg.hidden_size, len(cfg.carry_components))


def param_count(cfg: RunConfig) -> int:
    """Number of scalars in the cell's parameters from its spec: ``G·(H² + I·H) + V·H``
    (G matmuls, V vectors; exact for Flax's cells, an upper bound for the others); for a
    reference block, about ``L·(a·H² + b·H)`` (:class:`~rnnviz.tables.blocks.BlockDesign`) and
    the input projection and readout, ``(I + H + 2)·H``."""
    return ESTIMATES[cfg.block].params(cfg)


def _cell_params(cfg: RunConfig) -> int:
    h, i = cfg.hidden_size, cfg.input_size
    cost = cell_spec(cfg.cell).cost
    return cost.matmuls * (h * h + i * h) + cost.vectors * h


def _block_params(cfg: RunConfig) -> int:
    h = cfg.hidden_size
    return int(cfg.layers * BLOCK_DESIGNS[cfg.cell].params_per_layer(h) + (cfg.input_size + h + 2) * h)


def estimate_flops(cfg: RunConfig, seq_len: int | None = None) -> float:
    """Analytic FLOPs of one gradient evaluation: ``3 · 2·B·T·(I + H)·G·H``.

    G is the spec's ``matmuls`` (simple 1, mgu 2, gru 3, lstm 4); the forward pass does the
    matmuls once and the reverse pass about twice. XLA's own ``cost_analysis`` counts a
    ``scan`` body once, not T times, so it is not used for this. A reference block: ``3 · 2·B·T·P``
    (2 FLOPs per parameter and step forward, about twice that back).
    """
    return ESTIMATES[cfg.block].flops(cfg, cfg.batch_size or 1, seq_len or cfg.seq_len)


def _cell_flops(cfg: RunConfig, b: int, t: int) -> float:
    gates = cell_spec(cfg.cell).cost.matmuls
    return 3.0 * 2.0 * b * t * (cfg.input_size + cfg.hidden_size) * gates * cfg.hidden_size


def _block_flops(cfg: RunConfig, b: int, t: int) -> float:
    return 3.0 * 2.0 * b * t * _block_params(cfg)


def estimate_memory_bytes(cfg: RunConfig, seq_len: int | None = None, strategy: str | None = None) -> int:
    """Upper estimate of the analysis working set, in bytes.

    ``itemsize · [T·B·I + S·B·(R·H + R_c·C) + K·(T+1)·B·C + P·k]`` where C is one example's
    carry (H per component, or the cell's ``carry_scalars``: heads·d² for a matrix memory),
    R and R_c the ``[H]`` and carry-sized arrays the reverse pass keeps per step (the cell
    spec's ``residuals`` and ``residual_carries``) for S steps at once (T, or 2·⌈√T⌉ for
    ``checkpoint``), K the trajectory-sized buffers at the peak (``trajectories``, measured
    per cell), P the parameter count and k the strategy's parameter-sized buffers (3 for the
    accumulator, 2·T + 3 for per-step tangents: the O(T·P) cost of that strategy).
    ``seq_len`` and ``strategy`` override the config's. A reference block:
    ``4 · [T·B·(I + 2·A·H·L) + 3·P]``, A the floats it keeps per unit of width, step and layer
    (:class:`~rnnviz.tables.blocks.BlockDesign`), twice for two cotangents' worth.
    """
    return ESTIMATES[cfg.block].memory(cfg, cfg.batch_size or 1, seq_len or cfg.seq_len, strategy)


def _block_memory(cfg: RunConfig, b: int, t: int, strategy: str | None) -> int:
    kept = BLOCK_DESIGNS[cfg.cell].activations * cfg.hidden_size * cfg.layers
    return int(4 * (t * b * (cfg.input_size + 2 * kept) + 3 * _block_params(cfg)))


def _cell_memory(cfg: RunConfig, b: int, t: int, strategy: str | None) -> int:
    h, p = cfg.hidden_size, _cell_params(cfg)
    strat = strategy_rules(strategy or cfg.strategy)
    cost = cell_spec(cfg.cell).cost
    carry = carry_size(cfg)
    residual = strat.residual_steps(t) * b * (cost.residuals * h + cost.residual_carries * carry)
    trajectories = cost.trajectories * (t + 1) * b * carry
    scalars = t * b * cfg.input_size + residual + trajectories + p * strat.param_copies(t)
    return int(scalars * max(_ITEMSIZE[cfg.dtype], 4))


class Estimates(NamedTuple):
    """What one kind of block costs, estimated from its config: parameters, FLOPs of an
    analysis, working-set bytes (the public functions above, per ``RunConfig.block``)."""

    params: Callable[[RunConfig], int]
    flops: Callable[[RunConfig, int, int], float]
    memory: Callable[[RunConfig, int, int, str | None], int]


#: ``RunConfig.block`` → its estimates: one line per kind of block.
ESTIMATES: dict[str, Estimates] = {
    "cell": Estimates(_cell_params, _cell_flops, _cell_memory),
    "reference": Estimates(_block_params, _block_flops, _block_memory),
}


def max_seq_len_within_budget(cfg: RunConfig, strategy: str | None = None) -> int:
    """Largest ``seq_len`` (≤ MAX_SEQ_LEN) whose memory and FLOP estimates fit, 0 if none
    does (with ``strategy`` instead of the config's, when given)."""
    lo, hi = 0, MAX_SEQ_LEN
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if (
            estimate_memory_bytes(cfg, seq_len=mid, strategy=strategy) <= MEMORY_BUDGET_BYTES
            and estimate_flops(cfg, seq_len=mid) <= FLOP_BUDGET
        ):
            lo = mid
        else:
            hi = mid - 1
    return lo


#: What :func:`fit_to_budget` shrinks, in order: length first (it keeps the experiment's
#: kind), then the batch, then the width.
_SHRINK_ORDER = ("seq_len", "batch_size", "hidden_size")


def fit_to_budget(values: Mapping[str, Any]) -> tuple[RunConfig, dict[str, tuple[Any, Any]]]:
    """The config of ``values`` (each field valid on its own), shrunk to fit the budgets.

    Returns ``(config, changes)`` with ``changes[field] = (asked, used)``: seq_len becomes
    the largest that fits; when not even T = 1 fits, the batch and then the hidden size are
    halved until it does. Every other field is kept as given. Raises :class:`ConfigError`
    for a problem that is not the budget (e.g. a forget bias on a GRU).
    """
    asked = {**RunConfig().to_dict(), **values}
    fitted = dict(asked)
    while not _fits({**fitted, "seq_len": 1}):
        name = next(n for n in _SHRINK_ORDER[1:] if (fitted[n] or 1) > 1)  # B = H = 1 always fits
        fitted[name] = fitted[name] // 2
    if not _fits(fitted):
        fitted["seq_len"] = max_seq_len_within_budget(RunConfig(**{**fitted, "seq_len": 1}))
    cfg = RunConfig(**fitted)
    return cfg, {k: (asked[k], getattr(cfg, k)) for k in _SHRINK_ORDER if asked[k] != getattr(cfg, k)}


def _fits(values: Mapping[str, Any]) -> bool:
    """Whether ``values`` make a config within budget (other errors propagate)."""
    try:
        RunConfig(**values)
        return True
    except BudgetError:
        return False

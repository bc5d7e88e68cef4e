"""The cell table: one :class:`CellSpec` per cell name, built-ins and plugins alike.

Plain data (no JAX): validation reads it, the JAX layer builds cells from it. The built-in
cells' rows (:mod:`rnnviz.tables.builtin_cells`) name their Flax and JAX parts by where they
live (:class:`Lazy`), imported when first called, so reading the table never imports JAX.

A cell is any Flax module honouring ``RNNCellBase``'s contract::

    carry = cell.initialize_carry(rng, input_shape)   # the one place shapes and dtype are decided
    carry, y = cell(carry, x)                          # x: [(B,) I]; each carry leaf: [(B,) H]

and a :class:`CellSpec` says how rnnviz builds it from a :class:`~rnnviz.config.RunConfig`
and how to read it, in five small records: its :class:`CarryLayout` (the carry's leaves in
``jax.tree.leaves`` order, which is the output y), its :class:`ParamRules` (which parameters
are recurrent: the gain scales them, the Jacobian views and param groups use them; which
config fields apply), its :class:`CostModel`, its :class:`Display` (what the dashboard
shows) and its :class:`SpecialForms` (what the ``parallel`` and ``fused`` strategies need).

Register in code with :func:`register_cell`, or from an installed package through the
``rnnviz.cells`` entry-point group: the entry point names the cell and points at a
:class:`CellSpec` (or a function returning one)::

    [project.entry-points."rnnviz.cells"]
    leaky = "rnnviz_leaky:SPEC"

See ``examples/custom_cell/`` for a complete plugin.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import logging
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("rnnviz.cells")

GROUPS = ("classic", "linear-recurrent", "plugin")
ENTRY_POINT_GROUP = "rnnviz.cells"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


def hidden_kernels(path: tuple[str, ...]) -> bool:
    """Flax's convention: the hidden-to-hidden matrices are ``(<h…>, "kernel")``."""
    return path[0].startswith("h") and path[-1] == "kernel"


@dataclass(frozen=True)
class Lazy:
    """A function named by where it lives, ``"module:name"`` (the entry points' form), imported
    on its first call: how the built-in cells' rows (:mod:`rnnviz.tables.builtin_cells`) name
    their Flax and JAX parts, so that the table answers without importing JAX. Equal, and
    hashed alike, when they name the same function.

    Attributes:
        target: ``"package.module:function"``.

    Example:
        >>> hypot = Lazy("math:hypot")
        >>> hypot(3.0, 4.0), hypot == Lazy("math:hypot")
        (5.0, True)
    """

    target: str

    def __post_init__(self) -> None:
        module, sep, name = self.target.partition(":")
        if not (module and sep and name):
            raise ValueError(f"Lazy({self.target!r}): name a function as 'package.module:function'")

    @functools.cached_property
    def function(self) -> Callable[..., Any]:
        """The function itself, imported on first use."""
        module, _, name = self.target.partition(":")
        return getattr(importlib.import_module(module), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)


@dataclass(frozen=True)
class FusedGate:
    """One gate of a :class:`FusedForm`, in column order.

    Attributes:
        name: the module-name suffix: W_x holds the kernel of module ``i<name>``, W_h that of
            ``h<name>`` (Flax's naming; the simple cell's single gate is ``""``: ``i`` and ``h``).
        input_bias: whether module ``i<name>`` has a bias.
        hidden_bias: whether module ``h<name>`` has a bias.
        additive: whether ``pointwise`` reads the gate only as ``zx + zh`` (then
            ∂L/∂zx = ∂L/∂zh and the reverse pass stores it once).
    """

    name: str
    input_bias: bool
    hidden_bias: bool
    additive: bool = True


@dataclass(frozen=True)
class FusedForm:
    """How a cell factors for the ``fused`` strategy (:mod:`rnnviz.engine.strategies.fused`).

    .. math::

        z^x_t = x_t W_x + b_x, \\quad z^h_t = h_{t-1} W_h + b_h
        \\quad ([(B,)\\ G H],\\ \\text{gate-major columns}), \\qquad
        \\text{carry}_t = \\text{pointwise}(\\text{carry}_{t-1}, z^x_t, z^h_t, \\varphi)

    Attributes:
        gates: one :class:`FusedGate` per gate, in column order.
        pointwise: ``(carry, zx, zh, activation) -> carry`` with ``zx``, ``zh`` tuples of G
            arrays ``[(B,) H]``: the element-wise rest of the step.
        hidden: the carry leaf multiplied by W_h.
        step: optional ``(carry, zx, zh, activation) -> (carry, residuals)``, equal to
            ``pointwise`` and saving what the reverse needs (gate activations).
        backward: optional ``(residuals, carry_prev, g, activation) -> (∂L/∂carry_prev except
            through W_h, dzx, dzh)``; give both ``step`` and ``backward`` or neither. Without
            them the reverse recomputes pointwise's VJP from the saved z^h (slower).
        hidden_blocks: optional ``hidden_size -> k``: each stored hidden kernel is k diagonal
            blocks ``[k, H/k, H/k]`` (the sLSTM's heads), W_h their block-diagonal ``[H, H]``
            matrices side by side; None: each is a dense ``[H, H]`` kernel.

    The hidden kernels must be exactly the spec's ``params.recurrent`` parameters.
    """

    gates: tuple[FusedGate, ...]
    pointwise: Callable[..., Any]
    hidden: str = "h"
    step: Callable[..., Any] | None = None
    backward: Callable[..., Any] | None = None
    hidden_blocks: Callable[[int], int] | None = None

    def __post_init__(self) -> None:
        if (self.step is None) != (self.backward is None):
            raise ValueError("FusedForm: give both step and backward, or neither")
        if not self.gates or not all(isinstance(g, FusedGate) for g in self.gates):
            raise ValueError("FusedForm: gates must be one or more FusedGate records")

    @property
    def names(self) -> tuple[str, ...]:
        """The gates' module-name suffixes, in column order."""
        return tuple(g.name for g in self.gates)

    @property
    def input_bias(self) -> tuple[bool, ...]:
        """Per gate, in column order: whether module ``i<name>`` has a bias (b_x)."""
        return tuple(g.input_bias for g in self.gates)

    @property
    def hidden_bias(self) -> tuple[bool, ...]:
        """Per gate, in column order: whether module ``h<name>`` has a bias (b_h)."""
        return tuple(g.hidden_bias for g in self.gates)

    @property
    def additive(self) -> tuple[bool, ...]:
        """Per gate, in column order: whether ``pointwise`` reads it only as ``zx + zh``."""
        return tuple(g.additive for g in self.gates)


@dataclass(frozen=True)
class CarryLayout:
    """How to read a cell's carry: its leaves, which one is the output, and its state h.

    Attributes:
        components: the carry's leaves in ``jax.tree.leaves`` order (LSTM ``("c", "h")``).
        output: the leaf that equals the cell's output y (the losses read it), unless
            ``readout`` is given.
        readout: optional ``(params, carry_t, x_t) -> y_t`` for cells whose output is a
            function of the new carry and the input (LRU: Re(C h) + D x).
        pack: optional carry → the state h (default: the single leaf; the LRU packs
            ``(re, im)`` into a complex array); give ``unpack`` with it.
        unpack: optional h → carry, the inverse of ``pack``.
    """

    components: tuple[str, ...] = ("h",)
    output: str = "h"
    readout: Callable[[Any, Any, Any], Any] | None = None
    pack: Callable[[Any], Any] | None = None
    unpack: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        if not self.components or self.output not in self.components:
            raise ValueError(
                f"CarryLayout.output {self.output!r} must be one of its components {self.components}"
            )
        if (self.pack is None) != (self.unpack is None):
            raise ValueError("CarryLayout: give both pack and unpack, or neither")


@dataclass(frozen=True)
class ParamRules:
    """Which parameters are recurrent, and how the gain and the forget bias change them.

    Attributes:
        recurrent: ``path -> bool`` on parameter paths: the recurrent part (the Jacobian
            views and param groups read it). The gain multiplies these leaves, unless
            ``apply_gain`` says otherwise.
        apply_gain: optional ``(params, gain) -> params`` for cells whose gain is not a
            plain multiplication of the recurrent leaves (documented by the cell).
        forget_bias: optional ``(params, bias) -> params``; None: the field does not apply.
        zero_if_missing: top-level parameters whose ``bias`` came after runs were saved
            without it, zero at initialisation: a run file lacking it opens with zeros there,
            the same network (:func:`rnnviz.engine.prepare.with_missing_biases`).
    """

    recurrent: Callable[[tuple[str, ...]], bool] = hidden_kernels
    apply_gain: Callable[[Any, Any], Any] | None = None
    forget_bias: Callable[[Any, Any], Any] | None = None
    zero_if_missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class CostModel:
    """What one step costs, for the cost and memory estimates only (never for the maths).

    Attributes:
        matmuls: ``[(I+H) × H]`` products per step.
        vectors: ``[H]`` parameter vectors (biases, u).
        residuals: ``[H]`` arrays the reverse pass keeps per step.
        carry_scalars: optional ``H -> scalars of one example's carry`` (every leaf) for a
            carry that is not one ``[H]`` vector per component: a matrix memory
            ``[heads, d, d]`` holds heads·d² (d = H/heads), Mamba's state ``[H, N]`` H·N.
            None: H per component. Tested against ``initialize_carry`` for every cell.
        residual_carries: carry-sized arrays the reverse pass keeps per step besides its
            ``residuals`` (a matrix memory's step keeps matrices, e.g. S(I − β k kᵀ)).
        trajectories: trajectory-sized buffers ``[T+1, B, carry]`` the analysis holds at its
            peak (the carries, their cotangents, the log pass's scaled cotangents, the norms'
            inputs): 5.5 by default, from XLA's memory analysis of every built-in cell.

    The counts are measured, not derived: ``tests/engine/test_memory_estimate.py`` holds the
    estimate above the compiled analysis's peak for every registered cell.

    Example:
        >>> CostModel(matmuls=4).carry_size(128, components=2)  # LSTM (c, h)
        256
        >>> CostModel(carry_scalars=lambda h: 4 * (h // 4) ** 2).carry_size(128, components=1)
        4096
    """

    matmuls: int = 1
    vectors: int = 1
    residuals: int = 4
    carry_scalars: Callable[[int], int] | None = None
    residual_carries: int = 0
    trajectories: float = 5.5

    def carry_size(self, hidden_size: int, components: int) -> int:
        """Scalars one example's carry holds at width ``hidden_size`` (all its leaves)."""
        if self.carry_scalars is None:
            return hidden_size * components
        return int(self.carry_scalars(hidden_size))


@dataclass(frozen=True)
class Display:
    """What the dashboard, the CLI and validation show and offer for the cell.

    Attributes:
        group: ``classic``, ``linear-recurrent`` or ``plugin`` (how the cell list groups it).
        activations: the ``activation`` values the cell takes (the first is its default);
            ``("tanh",)`` for cells with fixed activations.
        gates: sigmoid gates whose mean activation the Carry tab plots (modules ``i<g>``
            and, when present, ``h<g>``).
        theory: optional ``Analysis -> Overlay | None``: a closed form of ‖∂L/∂carry_t‖
            drawn next to the measured one (:mod:`rnnviz.base.theory`).
        description: one line with the maths and the paper.
        gain_note: what the recurrent gain g does to this cell, for the Phase diagram tab
            (e.g. "scales the decay's time constant τ: softplus(Λ) → softplus(Λ)/g"). Empty:
            it multiplies the parameters the cell's ``ParamRules.recurrent`` names.
        state_note: which state the carry gradients are of, where the carry as stored is not
            the state the maths names (the xLSTM cells store (c, n) × e^(−m)); the Gradients
            tab shows it under its chart. Empty: the carry is the true state.
    """

    group: str = "plugin"
    activations: tuple[str, ...] = ("tanh",)
    gates: tuple[str, ...] = ()
    theory: Callable[[Any], Any] | None = None
    description: str = ""
    gain_note: str = ""
    state_note: str = ""

    def gain_meaning(self) -> str:
        """What the gain does: :attr:`gain_note`, or the default rule in words."""
        return self.gain_note or "multiplies the recurrent parameters (the cell's ParamRules.recurrent)"

    def __post_init__(self) -> None:
        if self.group not in GROUPS:
            raise ValueError(f"Display.group must be one of {GROUPS}")
        if not self.activations:
            raise ValueError("Display.activations needs at least one activation")


@dataclass(frozen=True)
class SpecialForms:
    """The shapes of recurrence a faster strategy needs; None where the cell has none.

    Attributes:
        linear_form: optional ``(params, xs [T, (B,) I]) -> (A, B)`` with A, B
            ``[T, (B,) H]`` (complex allowed) such that h_t = A_t ⊙ h_{t−1} + B_t: the
            recurrence is linear in the carry and the ``parallel`` strategy applies.
        prefix_scan: optional ``(params, carry_0, eps [T, …] or None, xs [T, (B,) I], scan)
            -> carries [T, …]`` for a cell linear in part of its carry given values that
            are themselves prefix scans (the mLSTM: linear in (C, n) given its stabiliser m,
            a (max, +) scan); ``scan(a, b)`` is the strategy's linear prefix scan
            h_t = a_t ⊙ h_{t−1} + b_t from h_{−1} = 0. The ``parallel`` strategy applies.
        fused: optional :class:`FusedForm`: the cell factors into an input GEMM, one
            recurrent matrix product and element-wise maths; the ``fused`` strategy applies.
    """

    linear_form: Callable[[Any, Any], tuple[Any, Any]] | None = None
    prefix_scan: Callable[..., Any] | None = None
    fused: FusedForm | None = None


#: The parts of a :class:`CellSpec`: its field name → the record it holds.
PARTS: dict[str, type] = {
    "carry": CarryLayout,
    "params": ParamRules,
    "cost": CostModel,
    "display": Display,
    "forms": SpecialForms,
}
#: The flat keywords of 0.2 → the part that holds each now (``components`` → ``carry``).
FLAT_NAMES: dict[str, str] = {f.name: part for part, rec in PARTS.items() for f in dataclasses.fields(rec)}


def _regroup(parts: dict[str, Any], flat: dict[str, Any]) -> dict[str, Any]:
    """Fold 0.2's flat keywords into the parts, with a DeprecationWarning naming the grouped form."""
    unknown = sorted(set(flat) - set(FLAT_NAMES))
    if unknown:
        raise TypeError(f"CellSpec() got unexpected keyword arguments: {', '.join(unknown)}")
    by_part: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        by_part.setdefault(FLAT_NAMES[name], {})[name] = value
    grouped = ", ".join(
        f"{part}={PARTS[part].__name__}({', '.join(f'{n}=…' for n in names)})"
        for part, names in by_part.items()
    )
    warnings.warn(
        f"CellSpec's flat keywords ({', '.join(flat)}) are the form of rnnviz 0.2 and deprecated: "
        f"group them, CellSpec(build, {grouped}) (records in rnnviz.tables.cells)",
        DeprecationWarning,
        stacklevel=3,
    )
    return {
        part: dataclasses.replace(parts[part], **kw) if kw else parts[part] for part, kw in by_part.items()
    }


@dataclass(frozen=True, init=False)
class CellSpec:
    """How rnnviz builds and reads one recurrent cell: a builder and five small records.

    Construct it as ``CellSpec(build, carry=CarryLayout(...), cost=CostModel(...), ...)``;
    every part has defaults (one carry leaf ``h``, Flax's recurrent kernels, tanh, a plugin).
    The flat keywords of 0.2 (``CellSpec(build, components=("c", "h"), matmuls=4, ...)``,
    the names in :data:`FLAT_NAMES`) still work, each overriding its field of the part,
    with a :class:`DeprecationWarning` that names the grouped form.

    Attributes:
        build: ``(cfg, options) -> cell``. ``options`` holds what rnnviz decides for every
            cell: ``features`` (H), ``dtype``/``param_dtype``, ``kernel_init`` (input
            kernels), ``recurrent_kernel_init`` (from ``cfg.recurrent_init``), ``carry_init``
            (from ``cfg.carry_init``/``carry_scale``: pass it to the cell so
            ``initialize_carry`` uses it) and ``activation_fn`` (from ``cfg.activation``).
            Flax's own cells take them as keywords.
        carry: the :class:`CarryLayout`: leaves, output, readout, pack/unpack.
        params: the :class:`ParamRules`: recurrent part, gain and forget-bias hooks.
        cost: the :class:`CostModel`: matmuls, vectors, residuals per step.
        display: the :class:`Display`: group, activations, gates, theory, description.
        forms: the :class:`SpecialForms`: linear form (``parallel``), fused form (``fused``).

    Example:
        >>> import flax.linen as nn
        >>> spec = CellSpec(
        ...     lambda cfg, options: nn.SimpleCell(**options),
        ...     cost=CostModel(matmuls=1, residuals=3),
        ...     display=Display(activations=("tanh", "relu"), description="Flax's SimpleCell"),
        ... )
        >>> spec.carry.components, spec.cost.matmuls, spec.display.group
        (('h',), 1, 'plugin')
    """

    build: Callable[[Any, dict[str, Any]], Any]
    carry: CarryLayout = CarryLayout()
    params: ParamRules = ParamRules()
    cost: CostModel = CostModel()
    display: Display = Display()
    forms: SpecialForms = SpecialForms()

    def __init__(
        self,
        build: Callable[[Any, dict[str, Any]], Any],
        *,
        carry: CarryLayout = CarryLayout(),
        params: ParamRules = ParamRules(),
        cost: CostModel = CostModel(),
        display: Display = Display(),
        forms: SpecialForms = SpecialForms(),
        **flat: Any,
    ) -> None:
        parts = {"carry": carry, "params": params, "cost": cost, "display": display, "forms": forms}
        if flat:
            parts.update(_regroup(parts, flat))
        object.__setattr__(self, "build", build)
        for name, value in parts.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        if not callable(self.build):
            raise TypeError("CellSpec.build must be callable: (cfg, options) -> Flax cell")
        for name, record in PARTS.items():
            if not isinstance(getattr(self, name), record):
                raise TypeError(f"CellSpec.{name} must be a {record.__name__}")

    # Read-only flat names, for callers that read them before the regrouping.
    @property
    def components(self) -> tuple[str, ...]:
        """``carry.components``: the flat name from 0.2, for plugins and older callers."""
        return self.carry.components

    @property
    def output(self) -> str:
        """``carry.output``: the flat name from 0.2, for plugins and older callers."""
        return self.carry.output

    @property
    def forget_bias(self) -> Callable[[Any, Any], Any] | None:
        """``params.forget_bias``: the flat name from 0.2, for plugins and older callers."""
        return self.params.forget_bias

    @property
    def group(self) -> str:
        """``display.group``: the flat name from 0.2, for plugins and older callers."""
        return self.display.group

    @property
    def activations(self) -> tuple[str, ...]:
        """``display.activations``: the flat name from 0.2, for plugins and older callers."""
        return self.display.activations

    @property
    def gates(self) -> tuple[str, ...]:
        """``display.gates``: the flat name from 0.2, for plugins and older callers."""
        return self.display.gates

    @property
    def description(self) -> str:
        """``display.description``: the flat name from 0.2, for plugins and older callers."""
        return self.display.description


_TABLE: dict[str, CellSpec] = {}
_plugins_loaded = False
_plugin_errors: list[tuple[str, str]] = []


def register_cell(name: str, spec: CellSpec, *, replace: bool = False) -> CellSpec:
    """Add a cell to the table: every view, the CLI and validation then offer it.

    Args:
        name: lower-case letters, digits and ``_``, starting with a letter, at most 32.
        spec: how to build and read the cell.
        replace: allow replacing a cell already registered under ``name``.

    Returns:
        ``spec``.

    Raises:
        TypeError: ``spec`` is not a :class:`CellSpec`.
        ValueError: a bad name, or a taken one without ``replace=True``.

    Example:
        >>> import flax.linen as nn
        >>> from rnnviz import CellSpec, RunConfig, analyze, register_cell
        >>> from rnnviz.tables.cells import Display, unregister_cell
        >>> spec = CellSpec(
        ...     lambda cfg, options: nn.SimpleCell(**options),
        ...     display=Display(activations=("tanh", "relu"), description="Flax's SimpleCell again"),
        ... )
        >>> _ = register_cell("elman", spec)
        >>> a = analyze(RunConfig(cell="elman", activation="relu", hidden_size=8, seq_len=5), repeats=1)
        >>> a.grad_norms.shape
        (6,)
        >>> unregister_cell("elman")
    """
    if not isinstance(spec, CellSpec):
        raise TypeError(f"register_cell({name!r}, ...) needs a CellSpec, got {type(spec).__name__}")
    if not _NAME.match(name):
        raise ValueError(
            f"cell name {name!r}: lower-case letters, digits and _, starting with a letter, at most 32"
        )
    if name in _TABLE and not replace and _TABLE[name] is not spec:
        raise ValueError(f"a cell named {name!r} is already registered (pass replace=True to override)")
    _TABLE[name] = spec
    return spec


def unregister_cell(name: str) -> None:
    """Remove a registration (tests and notebooks that register throw-away cells)."""
    _TABLE.pop(name, None)


def load_plugins() -> list[tuple[str, str]]:
    """Register the cells of installed packages (entry-point group ``rnnviz.cells``), once.

    A plugin that fails to load is skipped and reported (``(name, reason)``), never fatal."""
    global _plugins_loaded
    if _plugins_loaded:
        return list(_plugin_errors)
    _plugins_loaded = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            spec = obj() if callable(obj) and not isinstance(obj, CellSpec) else obj
            if ep.name in _TABLE and _TABLE[ep.name] is not spec:
                raise ValueError(f"the name {ep.name!r} is already taken")
            register_cell(ep.name, spec if spec.display.group == "plugin" else _as_plugin(spec))
        except Exception as err:  # a broken plugin must not take the app down
            log.warning("cell plugin %s (%s) skipped: %s", ep.name, ep.value, err)
            _plugin_errors.append((ep.name, f"{type(err).__name__}: {err}"))
    return list(_plugin_errors)


def _as_plugin(spec: CellSpec) -> CellSpec:
    return dataclasses.replace(spec, display=dataclasses.replace(spec.display, group="plugin"))


def _ensure() -> None:
    # The built-in cells are already here (rnnviz.tables imports their rows); the installed
    # plugins register on the first lookup.
    load_plugins()


def cell_names() -> tuple[str, ...]:
    """Every registered cell, built-ins and installed plugins.

    Returns:
        The names by group (classic, linear-recurrent, plugin), in registration order
        within a group.
    """
    _ensure()
    return tuple(
        sorted(_TABLE, key=lambda n: GROUPS.index(_TABLE[n].display.group))
    )  # stable: keeps insertion order


def cell_spec(name: str) -> CellSpec:
    """The spec of a registered cell; KeyError names the registered ones."""
    if name not in _TABLE:
        _ensure()
    try:
        return _TABLE[name]
    except KeyError:
        raise KeyError(f"no cell named {name!r}; registered: {', '.join(cell_names())}") from None


def plugin_errors() -> list[tuple[str, str]]:
    """Plugins that failed to load, as ``(entry-point name, reason)``."""
    _ensure()
    return list(_plugin_errors)

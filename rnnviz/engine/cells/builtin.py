"""The built-in cells, registered in the cell table (:mod:`rnnviz.tables.cells`) on import.

Each registration is one :class:`~rnnviz.tables.cells.CellSpec`: how to build the Flax
cell from the options rnnviz decides, then its parts: how to read its carry, its parameter
rules, its cost model, what the dashboard shows (with the optional theory curve), and its
special forms: linear (``parallel``) and fused (``fused``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.base.theory import (
    diagonal_theory,
    indrnn_jacobians,
    lru_cotangent,
    lru_jacobians,
    mingru_jacobians,
    minlstm_jacobians,
    pascanu_curve,
)
from rnnviz.engine.cells.fused_forms import (
    gru_backward,
    gru_pointwise,
    gru_step,
    lstm_backward,
    lstm_pointwise,
    lstm_step,
    mgu_backward,
    mgu_pointwise,
    mgu_step,
    simple_backward,
    simple_pointwise,
    simple_step,
)
from rnnviz.engine.cells.init import in_float32
from rnnviz.engine.cells.modern import (
    IndRNNCell,
    LRUCell,
    MinGRUCell,
    MinLSTMCell,
    lru_linear,
    lru_pack,
    lru_readout,
    lru_unpack,
    mingru_linear,
    minlstm_linear,
    u_init,
)
from rnnviz.tables.cells import (
    CarryLayout,
    CellSpec,
    CostModel,
    Display,
    FusedForm,
    FusedGate,
    ParamRules,
    SpecialForms,
    register_cell,
)

if TYPE_CHECKING:
    from rnnviz.config import RunConfig

Params = dict[str, Any]


def _flax_cell(cls: type, takes_activation: bool = False) -> Callable:
    """Builder for Flax's own cells: they take the options as keywords."""

    def build(cfg: RunConfig, options: dict[str, Any]) -> nn.RNNCellBase:
        kwargs = dict(options)
        if not takes_activation:
            kwargs.pop("activation_fn")
        return cls(**kwargs)

    return build


def _indrnn(cfg: RunConfig, options: dict[str, Any]) -> nn.RNNCellBase:
    kwargs = {k: v for k, v in options.items() if k != "recurrent_kernel_init"}
    return IndRNNCell(**kwargs, u_init=in_float32(u_init(cfg.recurrent_init)))


def _minimal(cls: type) -> Callable:
    def build(cfg: RunConfig, options: dict[str, Any]) -> nn.RNNCellBase:
        return cls(
            **{k: v for k, v in options.items() if k not in ("recurrent_kernel_init", "activation_fn")}
        )

    return build


def _add_to(path: tuple[str, ...]) -> Callable:
    """A forget-bias hook: add the bias to the leaf at ``path``."""

    def hook(params: Params, bias: jax.Array) -> Params:
        def add(p, leaf):
            names = tuple(k.key for k in p)
            return (leaf.astype(jnp.float32) + bias).astype(leaf.dtype) if names == path else leaf

        return jax.tree_util.tree_map_with_path(add, params)

    return hook


def _named(*names: str) -> Callable[[tuple[str, ...]], bool]:
    return lambda path: path[0] in names and len(path) == 1


register_cell(
    "simple",
    CellSpec(
        build=_flax_cell(nn.SimpleCell, takes_activation=True),
        cost=CostModel(matmuls=1, residuals=3),
        display=Display(
            gain_note="multiplies the recurrent kernel W_h",
            group="classic",
            activations=("tanh", "relu", "identity"),
            theory=pascanu_curve,
            description="h' = φ(W_i x + b + W_h h) (Elman 1990); Flax SimpleCell",
        ),
        forms=SpecialForms(
            fused=FusedForm(
                gates=(FusedGate("", input_bias=True, hidden_bias=False),),
                pointwise=simple_pointwise,
                step=simple_step,
                backward=simple_backward,
            )
        ),
    ),
)
register_cell(
    "lstm",
    CellSpec(
        build=_flax_cell(nn.OptimizedLSTMCell),
        carry=CarryLayout(components=("c", "h")),
        params=ParamRules(forget_bias=_add_to(("hf", "bias"))),
        cost=CostModel(matmuls=4, vectors=4, residuals=14, trajectories=4.5),
        display=Display(
            gain_note="multiplies the four recurrent kernels W_h",
            group="classic",
            gates=("i", "f", "o"),
            description="c' = f⊙c + i⊙g, h' = o⊙tanh(c') (Hochreiter & Schmidhuber 1997); Flax "
            "OptimizedLSTMCell, carry (c, h)",
        ),
        forms=SpecialForms(
            fused=FusedForm(
                gates=(
                    FusedGate("i", input_bias=False, hidden_bias=True),
                    FusedGate("f", input_bias=False, hidden_bias=True),
                    FusedGate("g", input_bias=False, hidden_bias=True),
                    FusedGate("o", input_bias=False, hidden_bias=True),
                ),
                pointwise=lstm_pointwise,
                step=lstm_step,
                backward=lstm_backward,
            )
        ),
    ),
)
register_cell(
    "gru",
    CellSpec(
        build=_flax_cell(nn.GRUCell),
        cost=CostModel(matmuls=3, vectors=4, residuals=9),
        display=Display(
            gain_note="multiplies the three recurrent kernels W_h",
            group="classic",
            gates=("r", "z"),
            description="h' = (1 − z)⊙n + z⊙h (Cho et al. 2014); Flax GRUCell",
        ),
        forms=SpecialForms(
            fused=FusedForm(
                gates=(
                    FusedGate("r", input_bias=True, hidden_bias=False),
                    FusedGate("z", input_bias=True, hidden_bias=False),
                    FusedGate("n", input_bias=True, hidden_bias=True, additive=False),
                ),
                pointwise=gru_pointwise,
                step=gru_step,
                backward=gru_backward,
            )
        ),
    ),
)
register_cell(
    "mgu",
    CellSpec(
        build=_flax_cell(nn.MGUCell),
        cost=CostModel(matmuls=2, vectors=3, residuals=7),
        display=Display(
            gain_note="multiplies the two recurrent kernels W_h",
            group="classic",
            gates=("f",),
            description="h' = (1 − f)⊙n + f⊙h (Zhou et al. 2016); Flax MGUCell",
        ),
        forms=SpecialForms(
            fused=FusedForm(
                gates=(
                    FusedGate("f", input_bias=True, hidden_bias=False),
                    FusedGate("n", input_bias=True, hidden_bias=True, additive=False),
                ),
                pointwise=mgu_pointwise,
                step=mgu_step,
                backward=mgu_backward,
            )
        ),
    ),
)
register_cell(
    "indrnn",
    CellSpec(
        build=_indrnn,
        params=ParamRules(recurrent=_named("u")),
        cost=CostModel(matmuls=1, vectors=2, residuals=3),
        display=Display(
            gain_note="multiplies the element-wise recurrent weights u",
            group="linear-recurrent",
            activations=("relu", "tanh", "identity"),
            theory=diagonal_theory(indrnn_jacobians),
            description="h' = φ(W x + u⊙h + b), element-wise recurrence (Li et al. 2018); gain scales u",
        ),
    ),
)
register_cell(
    "mingru",
    CellSpec(
        build=_minimal(MinGRUCell),
        params=ParamRules(recurrent=_named("a")),
        cost=CostModel(matmuls=2, vectors=3, residuals=7),
        display=Display(
            gain_note="multiplies a (1 at initialisation), the factor on h",
            group="linear-recurrent",
            gates=("z",),
            theory=diagonal_theory(mingru_jacobians),
            description="h' = a(1 − z)⊙h + z⊙h̃, gates from x only (Feng et al. 2024); gain scales a",
        ),
        forms=SpecialForms(linear_form=mingru_linear),
    ),
)
register_cell(
    "minlstm",
    CellSpec(
        build=_minimal(MinLSTMCell),
        params=ParamRules(recurrent=_named("a"), forget_bias=_add_to(("if", "bias"))),
        cost=CostModel(matmuls=3, vectors=4, residuals=13),
        display=Display(
            gain_note="multiplies a, the factor on h",
            group="linear-recurrent",
            gates=("f", "i"),
            theory=diagonal_theory(minlstm_jacobians),
            description="h' = a·f'⊙h + i'⊙h̃, f' = f/(f+i) from x only (Feng et al. 2024); gain scales a",
        ),
        forms=SpecialForms(linear_form=minlstm_linear),
    ),
)


def _lru(cfg: RunConfig, options: dict[str, Any]) -> nn.RNNCellBase:
    return LRUCell(
        **{k: v for k, v in options.items() if k not in ("recurrent_kernel_init", "activation_fn")}
    )


def _scale_leaf(name: str) -> Callable:
    """A gain hook: multiply only the scalar parameter ``name``."""

    def hook(params: Params, gain: jax.Array) -> Params:
        return {**params, name: (params[name].astype(jnp.float32) * gain).astype(params[name].dtype)}

    return hook


register_cell(
    "lru",
    CellSpec(
        build=_lru,
        carry=CarryLayout(
            components=("re", "im"), output="re", readout=lru_readout, pack=lru_pack, unpack=lru_unpack
        ),
        params=ParamRules(recurrent=_named("nu_log", "theta_log", "a"), apply_gain=_scale_leaf("a")),
        cost=CostModel(matmuls=5, vectors=3, residuals=8, trajectories=6.5),  # complex: re and im
        display=Display(
            gain_note="multiplies |λ|, the eigenvalues' modulus (g > 1 leaves the unit disc)",
            group="linear-recurrent",
            theory=diagonal_theory(lru_jacobians, lru_cotangent),
            description="h' = λ⊙h + γ⊙Bx, y = Re(Ch) + Dx, λ on a ring (Orvieto et al. 2023); carry "
            "(re, im); gain scales |λ|",
        ),
        forms=SpecialForms(linear_form=lru_linear),
    ),
)

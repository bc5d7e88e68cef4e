"""The built-in cells' rows of the cell table, in plain data (no JAX): each one
:class:`~rnnviz.tables.cells.CellSpec`, its Flax cell's builder and its JAX parts named by
where they live (:class:`~rnnviz.tables.cells.Lazy`, imported on their first call), its
carry layout, parameter rules, cost model and what the dashboard shows written out here.

So validation, the cost estimates and the dashboard's server read every built-in cell
without importing JAX, while whoever builds or runs a cell imports its parts:
:mod:`rnnviz.engine.cells.builtin` (the classic cells, IndRNN, minGRU, minLSTM, LRU; their
fused forms in :mod:`~rnnviz.engine.cells.fused_forms`, their linear forms in
:mod:`~rnnviz.engine.cells.modern`) and :mod:`rnnviz.engine.cells.designs` (RG-LRU, Mamba's
selective SSM, sLSTM, mLSTM, (Gated) DeltaNet: what their gain means, their heads), and the
closed forms drawn beside the measured gradient in :mod:`rnnviz.base.theory`.

:mod:`rnnviz.tables` imports this module, so the table holds these rows before anything
asks it. ``tests/engine/test_cells.py`` resolves every part named here.
"""

from __future__ import annotations

from collections.abc import Callable

from rnnviz.tables.cells import (
    CarryLayout,
    CellSpec,
    CostModel,
    Display,
    FusedForm,
    FusedGate,
    Lazy,
    ParamRules,
    SpecialForms,
    hidden_kernels,
    register_cell,
)

#: The projections whose biases (zero at first) came in Dec 2026: older run files open with zeros.
QKV = ("q", "k", "v")
#: The selective SSM's state size N per channel (the reference's ``d_state``).
MAMBA_STATE = 16
#: The sLSTM's gates, in the reference's order (its fused form's columns).
SLSTM_GATES = ("i", "f", "z", "o")

#: The Gradients tab's note for the exponentially gated cells (their stored state).
_STORED = (
    "The {leaves} curves are of the state as stored, the true state × e^(−m_t) (the stabiliser): "
    "∂L/∂(true) = e^(−m_t)·∂L/∂(stored), per {per}. m_t is a carry component of its own."
)


def heads_for(hidden_size: int) -> int:
    """The heads of the multi-head cells at ``hidden_size``: 4 when it divides, else 2, else 1.

    >>> heads_for(128), heads_for(6), heads_for(7)
    (4, 2, 1)
    """
    return next(h for h in (4, 2, 1) if hidden_size % h == 0)


def _matrix_memory(hidden_size: int) -> int:
    """Scalars of one example's ``S`` / ``C`` ``[heads, d, d]`` (d = H/heads)."""
    heads = heads_for(hidden_size)
    return heads * (hidden_size // heads) ** 2


def _mlstm_carry(hidden_size: int) -> int:
    """Scalars of one example's mLSTM carry: C ``[heads, d, d]``, n ``[heads, d]``, m ``[heads]``."""
    heads = heads_for(hidden_size)
    d = hidden_size // heads
    return heads * (d * d + d + 1)


def _leaf_named(*names: str) -> Callable[[tuple[str, ...]], bool]:
    """The recurrent part of a cell whose recurrence is top-level leaves (IndRNN's ``u``)."""
    return lambda path: path[0] in names and len(path) == 1


def _under(*names: str) -> Callable[[tuple[str, ...]], bool]:
    """The recurrent part of a cell whose recurrence is these parameters and what is under them."""
    return lambda path: path[0] in names


# ---- classic and linear-recurrent cells (parts: rnnviz.engine.cells.builtin) -------------------

register_cell(
    "simple",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.builtin:simple_build"),
        cost=CostModel(matmuls=1, residuals=3),
        display=Display(
            gain_note="multiplies the recurrent kernel W_h",
            group="classic",
            activations=("tanh", "relu", "identity"),
            theory=Lazy("rnnviz.base.theory:pascanu_curve"),
            description="h' = φ(W_i x + b + W_h h) (Elman 1990); Flax SimpleCell",
        ),
        forms=SpecialForms(
            fused=FusedForm(
                gates=(FusedGate("", input_bias=True, hidden_bias=False),),
                pointwise=Lazy("rnnviz.engine.cells.fused_forms:simple_pointwise"),
                step=Lazy("rnnviz.engine.cells.fused_forms:simple_step"),
                backward=Lazy("rnnviz.engine.cells.fused_forms:simple_backward"),
            )
        ),
    ),
)
register_cell(
    "lstm",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.builtin:lstm_build"),
        carry=CarryLayout(components=("c", "h")),
        params=ParamRules(forget_bias=Lazy("rnnviz.engine.cells.builtin:lstm_forget_bias")),
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
                pointwise=Lazy("rnnviz.engine.cells.fused_forms:lstm_pointwise"),
                step=Lazy("rnnviz.engine.cells.fused_forms:lstm_step"),
                backward=Lazy("rnnviz.engine.cells.fused_forms:lstm_backward"),
            )
        ),
    ),
)
register_cell(
    "gru",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.builtin:gru_build"),
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
                pointwise=Lazy("rnnviz.engine.cells.fused_forms:gru_pointwise"),
                step=Lazy("rnnviz.engine.cells.fused_forms:gru_step"),
                backward=Lazy("rnnviz.engine.cells.fused_forms:gru_backward"),
            )
        ),
    ),
)
register_cell(
    "mgu",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.builtin:mgu_build"),
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
                pointwise=Lazy("rnnviz.engine.cells.fused_forms:mgu_pointwise"),
                step=Lazy("rnnviz.engine.cells.fused_forms:mgu_step"),
                backward=Lazy("rnnviz.engine.cells.fused_forms:mgu_backward"),
            )
        ),
    ),
)
register_cell(
    "indrnn",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.builtin:indrnn_build"),
        params=ParamRules(recurrent=_leaf_named("u")),
        cost=CostModel(matmuls=1, vectors=2, residuals=3),
        display=Display(
            gain_note="multiplies the element-wise recurrent weights u",
            group="linear-recurrent",
            activations=("relu", "tanh", "identity"),
            theory=Lazy("rnnviz.base.theory:indrnn_curve"),
            description="h' = φ(W x + u⊙h + b), element-wise recurrence (Li et al. 2018); gain scales u",
        ),
    ),
)
register_cell(
    "mingru",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.builtin:mingru_build"),
        params=ParamRules(recurrent=_leaf_named("a")),
        cost=CostModel(matmuls=2, vectors=3, residuals=7),
        display=Display(
            gain_note="multiplies a (1 at initialisation), the factor on h",
            group="linear-recurrent",
            gates=("z",),
            theory=Lazy("rnnviz.base.theory:mingru_curve"),
            description="h' = a(1 − z)⊙h + z⊙h̃, gates from x only (Feng et al. 2024); gain scales a",
        ),
        forms=SpecialForms(linear_form=Lazy("rnnviz.engine.cells.modern:mingru_linear")),
    ),
)
register_cell(
    "minlstm",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.builtin:minlstm_build"),
        params=ParamRules(
            recurrent=_leaf_named("a"), forget_bias=Lazy("rnnviz.engine.cells.builtin:minlstm_forget_bias")
        ),
        cost=CostModel(matmuls=3, vectors=4, residuals=13),
        display=Display(
            gain_note="multiplies a, the factor on h",
            group="linear-recurrent",
            gates=("f", "i"),
            theory=Lazy("rnnviz.base.theory:minlstm_curve"),
            description="h' = a·f'⊙h + i'⊙h̃, f' = f/(f+i) from x only (Feng et al. 2024); gain scales a",
        ),
        forms=SpecialForms(linear_form=Lazy("rnnviz.engine.cells.modern:minlstm_linear")),
    ),
)
register_cell(
    "lru",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.builtin:lru_build"),
        carry=CarryLayout(
            components=("re", "im"),
            output="re",
            readout=Lazy("rnnviz.engine.cells.modern:lru_readout"),
            pack=Lazy("rnnviz.engine.cells.modern:lru_pack"),
            unpack=Lazy("rnnviz.engine.cells.modern:lru_unpack"),
        ),
        params=ParamRules(
            recurrent=_leaf_named("nu_log", "theta_log", "a"),
            apply_gain=Lazy("rnnviz.engine.cells.builtin:lru_gain"),
        ),
        cost=CostModel(matmuls=5, vectors=3, residuals=8, trajectories=6.5),  # complex: re and im
        display=Display(
            gain_note="multiplies |λ|, the eigenvalues' modulus (g > 1 leaves the unit disc)",
            group="linear-recurrent",
            theory=Lazy("rnnviz.base.theory:lru_curve"),
            description="h' = λ⊙h + γ⊙Bx, y = Re(Ch) + Dx, λ on a ring (Orvieto et al. 2023); carry "
            "(re, im); gain scales |λ|",
        ),
        forms=SpecialForms(linear_form=Lazy("rnnviz.engine.cells.modern:lru_linear")),
    ),
)

# ---- today's designs (parts: rnnviz.engine.cells.designs) -------------------------------------

register_cell(
    "rglru",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.designs:rglru_build"),
        params=ParamRules(
            recurrent=_under("a_param"), apply_gain=Lazy("rnnviz.engine.cells.designs:rglru_gain")
        ),
        cost=CostModel(matmuls=3, vectors=5, residuals=13),
        display=Display(
            gain_note="scales the decay's time constant: softplus(Λ) → softplus(Λ)/g (g > 1 remembers "
            "longer)",
            group="linear-recurrent",
            description="h' = a⊙h + √(1−a²)⊙(i⊙x̃), ln a = −8·r·softplus(Λ), gates from x (De et al. 2024, "
            "Griffin's RG-LRU); gain scales the decay's time constant",
        ),
        forms=SpecialForms(linear_form=Lazy("rnnviz.engine.cells.designs:rglru_linear")),
    ),
)
register_cell(
    "mamba",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.designs:mamba_build"),
        carry=CarryLayout(readout=Lazy("rnnviz.engine.cells.designs:mamba_spec_readout")),
        params=ParamRules(
            recurrent=_under("A_log"),
            apply_gain=Lazy("rnnviz.engine.cells.designs:a_log_gain"),
            zero_if_missing=("in_proj",),
        ),
        cost=CostModel(
            matmuls=3,
            vectors=2 + 2 * MAMBA_STATE,
            residuals=3 * MAMBA_STATE,
            carry_scalars=lambda h: h * MAMBA_STATE,
            residual_carries=2,
        ),
        display=Display(
            gain_note="scales the decay's time constant: A → A/g (g > 1 remembers longer)",
            group="linear-recurrent",
            description=f"h' = exp(ΔA)⊙h + Δ·B·u, y = C·h + D⊙u, Δ, B, C from x (Gu & Dao 2023, Mamba's "
            f"selective SSM); state [H, {MAMBA_STATE}]; gain scales the decay's time constant",
        ),
        forms=SpecialForms(linear_form=Lazy("rnnviz.engine.cells.designs:mamba_linear")),
    ),
)
register_cell(
    "slstm",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.designs:slstm_build"),
        carry=CarryLayout(components=("c", "n", "m", "h"), output="h"),
        params=ParamRules(
            recurrent=hidden_kernels, forget_bias=Lazy("rnnviz.engine.cells.designs:slstm_forget_bias")
        ),
        cost=CostModel(matmuls=4, vectors=4, residuals=10),
        display=Display(
            gain_note="multiplies the block-diagonal recurrent kernels, as for the LSTM",
            group="classic",
            description="c' = f⊙c + i⊙z, n' = f⊙n + i, h' = o⊙c'/n', exponential input gate with "
            "stabiliser m, block-diagonal recurrence per head (Beck et al. 2024, xLSTM); (c, n) stored "
            "×e^(−m)",
            state_note=_STORED.format(leaves="c and n", per="unit"),
        ),
        forms=SpecialForms(
            fused=FusedForm(
                gates=tuple(FusedGate(g, input_bias=True, hidden_bias=False) for g in SLSTM_GATES),
                pointwise=Lazy("rnnviz.engine.cells.xlstm:slstm_pointwise"),
                hidden_blocks=heads_for,
            )
        ),
    ),
)
register_cell(
    "mlstm",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.designs:mlstm_build"),
        carry=CarryLayout(
            components=("C", "n", "m"),
            output="C",
            readout=Lazy("rnnviz.engine.cells.designs:mlstm_spec_readout"),
        ),
        params=ParamRules(
            recurrent=_under("fgate"),
            apply_gain=Lazy("rnnviz.engine.cells.designs:mlstm_gain"),
            forget_bias=Lazy("rnnviz.engine.cells.designs:mlstm_forget_bias"),
            zero_if_missing=QKV,
        ),
        cost=CostModel(matmuls=4, vectors=4, residuals=8, carry_scalars=_mlstm_carry, residual_carries=2),
        display=Display(
            gain_note="scales the forget gate's time constant: ln σ(b_f) → ln σ(b_f)/g (g > 1 remembers "
            "longer)",
            group="linear-recurrent",
            description="C' = f'C + i'·v kᵀ, n' = f'n + i'k, y = Cq / max(|nᵀq|, e^(−m)), gates from x "
            "(Beck et al. 2024, xLSTM); matrix memory [heads, d, d]; (C, n) stored ×e^(−m); gain scales "
            "the forget gate's time constant",
            state_note=_STORED.format(leaves="C and n", per="head"),
        ),
        forms=SpecialForms(prefix_scan=Lazy("rnnviz.engine.cells.designs:mlstm_spec_prefix_scan")),
    ),
)
register_cell(
    "gated_deltanet",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.designs:gated_deltanet_build"),
        carry=CarryLayout(readout=Lazy("rnnviz.engine.cells.designs:delta_spec_readout")),
        params=ParamRules(
            recurrent=_under("A_log", "dt_bias", "a"),
            apply_gain=Lazy("rnnviz.engine.cells.designs:a_log_gain"),
            zero_if_missing=QKV,
        ),
        cost=CostModel(matmuls=5, vectors=2, residuals=6, carry_scalars=_matrix_memory, residual_carries=2),
        display=Display(
            gain_note="scales the decay's time constant: e^(A_log) → e^(A_log)/g (g > 1 remembers longer)",
            group="linear-recurrent",
            description="S' = α·S(I − β·k kᵀ) + β·v kᵀ, y = S q/√d, α, β, q, k, v from x (Yang et al. "
            "2024, Gated DeltaNet); matrix memory [heads, d, d]; gain scales the decay's time constant",
        ),
    ),
)
register_cell(
    "deltanet",
    CellSpec(
        build=Lazy("rnnviz.engine.cells.designs:deltanet_build"),
        carry=CarryLayout(readout=Lazy("rnnviz.engine.cells.designs:delta_spec_readout")),
        params=ParamRules(
            recurrent=_under("b"),
            apply_gain=Lazy("rnnviz.engine.cells.designs:deltanet_gain"),
            zero_if_missing=QKV,
        ),
        cost=CostModel(matmuls=4, vectors=1, residuals=5, carry_scalars=_matrix_memory, residual_carries=1),
        display=Display(
            gain_note="does nothing: DeltaNet has no decay (α = 1), so every gain gives the same run",
            group="linear-recurrent",
            description="S' = S(I − β·k kᵀ) + β·v kᵀ, y = S q/√d (Schlag et al. 2021, Yang et al. 2024: "
            "DeltaNet, Gated DeltaNet with α = 1); matrix memory [heads, d, d]; no decay: the gain does "
            "not apply",
        ),
    ),
)


__all__ = ["MAMBA_STATE", "QKV", "SLSTM_GATES", "heads_for"]

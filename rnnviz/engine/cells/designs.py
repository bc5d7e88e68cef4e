"""Today's designs registered in the cell table: RG-LRU (Griffin), sLSTM and mLSTM (xLSTM),
Mamba's selective SSM, Gated DeltaNet and DeltaNet. The cells and their maths are in
:mod:`~rnnviz.engine.cells.rglru`, :mod:`~rnnviz.engine.cells.xlstm`,
:mod:`~rnnviz.engine.cells.mamba` and :mod:`~rnnviz.engine.cells.deltanet`; this module
only says how rnnviz builds and reads each.

**What the gain means.** These cells (except the sLSTM) have no recurrent matrix for a
gain to multiply; their memory is a decay. The gain ``g`` scales the decay's time constant
τ (steps for the state to fall by e): g > 1 remembers longer, g < 1 forgets faster, g = 1
is the cell as initialised. Per cell:

* ``rglru``: softplus(Λ) → softplus(Λ)/g (ln a_t = −c·r_t·softplus(Λ) is divided by g);
* ``mamba``: A → A/g, i.e. A_log → A_log − ln g (ln exp(Δ_t A) divided by g);
* ``gated_deltanet``: e^{A_log} → e^{A_log}/g (ln α_t divided by g);
* ``mlstm``: the forget gate's bias b_f → b′ with ln σ(b′) = ln σ(b_f)/g (exact for the
  gate's bias; its kernel starts at zero, so at initialisation ln f_t itself is divided by g);
* ``slstm``: the recurrent block-diagonal kernels are multiplied by g, as for the LSTM;
* ``deltanet``: α_t = 1, no decay: the gain does not apply.

**Heads.** The multi-head cells (sLSTM, mLSTM, (Gated) DeltaNet) use 4 heads (the xLSTM
reference's default) when H is divisible by 4, else 2 when even, else 1 (:func:`heads_for`).

**Which state the gradient is of.** rnnviz differentiates with respect to the carry as it
is stored. For the sLSTM and mLSTM that is the stabilised state: the stored (c, n) or (C, n)
is the true one times e^{−m_t}, so ∂L/∂(true) = e^{−m_t}·∂L/∂(stored) per unit or head
(:mod:`rnnviz.engine.cells.xlstm`); the Gradients tab says so under its chart
(``Display.state_note``). The other cells store their true state.

**Strategies.** ``parallel`` applies to the cells linear in their state with a diagonal
transition: RG-LRU and the selective SSM (their :func:`rglru_linear`, :func:`mamba_linear`),
and the mLSTM: linear in (C, n) given its gates, whose stabiliser m_t = max(ln f_t + m_{t−1},
ĩ_t) is itself a prefix scan in the (max, +) semiring
(:func:`~rnnviz.engine.cells.xlstm.mlstm_prefix_scan`). (Gated) DeltaNet is linear in S
with a dense transition S ↦ α S (I − β k kᵀ): a scan would compose d×d matrices, O(T d³) work
against the sequential O(T d²), so rnnviz runs it sequentially (the chunked WY form of the
DeltaNet papers is how accelerators parallelise it).
``fused`` applies to the sLSTM: its four recurrent kernels, stored as per-head blocks
``[heads, d, d]``, are W_h as block-diagonal matrices (``FusedForm.hidden_blocks``), and
:func:`~rnnviz.engine.cells.xlstm.slstm_pointwise` is the rest of its step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.engine.cells.deltanet import GatedDeltaNetCell, delta_rule_readout
from rnnviz.engine.cells.mamba import SelectiveSSMCell, _selection, selective_ssm_readout
from rnnviz.engine.cells.rglru import RGLRUCell, bounded_sqrt, rglru_log_a
from rnnviz.engine.cells.shared import dense
from rnnviz.engine.cells.xlstm import (
    GATES,
    MLSTMCell,
    SLSTMCell,
    mlstm_prefix_scan,
    mlstm_readout,
    slstm_pointwise,
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
    hidden_kernels,
    register_cell,
)

if TYPE_CHECKING:
    from rnnviz.config import RunConfig

Params = dict[str, Any]
#: The projections whose biases (zero at first) came in Dec 2026: older run files open with zeros.
QKV = ("q", "k", "v")
#: The selective SSM's state size N per channel (the reference's ``d_state``).
MAMBA_STATE = 16


#: The Gradients tab's note for the exponentially gated cells (their stored state).
_STORED = (
    "The {leaves} curves are of the state as stored, the true state × e^(−m_t) (the stabiliser): "
    "∂L/∂(true) = e^(−m_t)·∂L/∂(stored), per {per}. m_t is a carry component of its own."
)


def _matrix_memory(hidden_size: int) -> int:
    """Scalars of one example's ``S`` / ``C`` ``[heads, d, d]`` (d = H/heads)."""
    heads = heads_for(hidden_size)
    return heads * (hidden_size // heads) ** 2


def _mlstm_carry(hidden_size: int) -> int:
    """Scalars of one example's mLSTM carry: C ``[heads, d, d]``, n ``[heads, d]``, m ``[heads]``."""
    heads = heads_for(hidden_size)
    d = hidden_size // heads
    return heads * (d * d + d + 1)


def heads_for(hidden_size: int) -> int:
    """The heads of the multi-head cells at ``hidden_size``: 4 when it divides, else 2, else 1.

    >>> heads_for(128), heads_for(6), heads_for(7)
    (4, 2, 1)
    """
    return next(h for h in (4, 2, 1) if hidden_size % h == 0)


def _build(cls: type, **fixed: Any) -> Callable[[RunConfig, dict[str, Any]], nn.RNNCellBase]:
    """A builder passing the options the cell has fields for (these cells have no
    ``recurrent_kernel_init`` or ``activation_fn`` of their own, except where they do)."""
    fields = set(cls.__dataclass_fields__)

    def build(cfg: RunConfig, options: dict[str, Any]) -> nn.RNNCellBase:
        extra = {k: (v(cfg) if callable(v) else v) for k, v in fixed.items()}
        return cls(**{k: v for k, v in options.items() if k in fields}, **extra)

    return build


def _heads(cfg: RunConfig) -> int:
    return heads_for(cfg.hidden_size)


def _in_dtype_of(leaf: jax.Array, x: jax.Array) -> jax.Array:
    """x in the parameters' dtype: the cells compute in their dtype, which rnnviz makes both
    the param and compute dtype (so a readout sees x as the step did)."""
    return x.astype(leaf.dtype)


def _inverse_softplus(y: jax.Array) -> jax.Array:
    return y + jnp.log(-jnp.expm1(-y))


def _map_leaf(params: Params, path: tuple[str, ...], fn: Callable[[jax.Array], jax.Array]) -> Params:
    def go(tree, rest):
        if not rest:
            return fn(tree.astype(jnp.float32)).astype(tree.dtype)
        return {**tree, rest[0]: go(tree[rest[0]], rest[1:])}

    return go(params, path)


def _rglru_gain(params: Params, gain: jax.Array) -> Params:
    return _map_leaf(params, ("a_param",), lambda lam: _inverse_softplus(jax.nn.softplus(lam) / gain))


def _log_rate_gain(name: str) -> Callable[[Params, jax.Array], Params]:
    """A gain hook for a decay rate e^{name}: divided by the gain."""
    return lambda params, gain: _map_leaf(params, (name,), lambda a: a - jnp.log(gain))


def _mlstm_gain(params: Params, gain: jax.Array) -> Params:
    def scale(b):
        ls = jax.nn.log_sigmoid(b) / gain  # ln σ(b′) = ln σ(b)/g
        return ls - jnp.log(-jnp.expm1(ls))

    return _map_leaf(params, ("fgate", "bias"), scale)


def _no_gain(params: Params, gain: jax.Array) -> Params:
    del gain  # DeltaNet has no decay (α = 1): nothing for the gain to scale
    return params


def _add_bias(path: tuple[str, ...]) -> Callable[[Params, jax.Array], Params]:
    return lambda params, bias: _map_leaf(params, path, lambda b: b + bias)


def _named(*names: str) -> Callable[[tuple[str, ...]], bool]:
    return lambda path: path[0] in names


def rglru_linear(params: Params, xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """RG-LRU over ``xs`` ``[T, (B,) I]``: A = a_t, B = √(1 − a_t²) ⊙ (i_t ⊙ x̃_t), each
    ``[T, (B,) H]``, in the dtypes :func:`~rnnviz.engine.cells.rglru.rglru_step` uses."""
    x = _in_dtype_of(params["a_param"], xs)
    x_tilde = dense(params["in_proj"], x)
    gate_x = jax.nn.sigmoid(dense(params["input_gate"], x_tilde))
    log_a = rglru_log_a(params, x)
    multiplier = bounded_sqrt(1.0 - jnp.exp(2.0 * log_a))
    dt = x.dtype
    return jnp.exp(log_a).astype(dt), multiplier.astype(dt) * (gate_x * x_tilde)


def mamba_linear(params: Params, xs: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The selective SSM over ``xs`` ``[T, (B,) I]``: A = exp(Δ_t A), B = (Δ_t ⊙ u_t) B_tᵀ,
    each ``[T, (B,) D, N]``, in the dtypes of
    :func:`~rnnviz.engine.cells.mamba.selective_ssm_step`."""
    x = _in_dtype_of(params["A_log"], xs)
    dt = x.dtype
    u = dense(params["in_proj"], x)
    delta, b_t, _ = _selection(params, u)
    a = -jnp.exp(params["A_log"].astype(jnp.float32))
    decay = jnp.exp(delta[..., :, None] * jnp.broadcast_to(a, delta.shape + a.shape[-1:]))
    return decay.astype(dt), (delta.astype(dt) * u)[..., :, None] * b_t[..., None, :]


def _mamba_readout(params: Params, h: jax.Array, x: jax.Array) -> jax.Array:
    return selective_ssm_readout(params, h, _in_dtype_of(params["A_log"], x))


def _mlstm_readout(params: Params, carry: Any, x: jax.Array) -> jax.Array:
    return mlstm_readout(params, carry, _in_dtype_of(params["q"]["kernel"], x))


def _mlstm_prefix_scan(params: Params, first: Any, rest: Any, xs: jax.Array, scan: Callable) -> Any:
    return mlstm_prefix_scan(params, first, rest, _in_dtype_of(params["q"]["kernel"], xs), scan)


def _delta_readout(params: Params, state: jax.Array, x: jax.Array) -> jax.Array:
    return delta_rule_readout(params, state, _in_dtype_of(params["q"]["kernel"], x))


register_cell(
    "rglru",
    CellSpec(
        build=_build(RGLRUCell),
        params=ParamRules(recurrent=_named("a_param"), apply_gain=_rglru_gain),
        cost=CostModel(matmuls=3, vectors=5, residuals=13),
        display=Display(
            gain_note="scales the decay's time constant: softplus(Λ) → softplus(Λ)/g (g > 1 remembers "
            "longer)",
            group="linear-recurrent",
            description="h' = a⊙h + √(1−a²)⊙(i⊙x̃), ln a = −8·r·softplus(Λ), gates from x (De et al. 2024, "
            "Griffin's RG-LRU); gain scales the decay's time constant",
        ),
        forms=SpecialForms(linear_form=rglru_linear),
    ),
)
register_cell(
    "mamba",
    CellSpec(
        build=_build(SelectiveSSMCell, state_size=MAMBA_STATE),
        carry=CarryLayout(readout=_mamba_readout),
        params=ParamRules(
            recurrent=_named("A_log"), apply_gain=_log_rate_gain("A_log"), zero_if_missing=("in_proj",)
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
        forms=SpecialForms(linear_form=mamba_linear),
    ),
)
register_cell(
    "slstm",
    CellSpec(
        build=_build(SLSTMCell, num_heads=_heads),
        carry=CarryLayout(components=("c", "n", "m", "h"), output="h"),
        params=ParamRules(recurrent=hidden_kernels, forget_bias=_add_bias(("if", "bias"))),
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
                gates=tuple(FusedGate(g, input_bias=True, hidden_bias=False) for g in GATES),
                pointwise=slstm_pointwise,
                hidden_blocks=heads_for,
            )
        ),
    ),
)
register_cell(
    "mlstm",
    CellSpec(
        build=_build(MLSTMCell, num_heads=_heads),
        carry=CarryLayout(components=("C", "n", "m"), output="C", readout=_mlstm_readout),
        params=ParamRules(
            recurrent=_named("fgate"),
            apply_gain=_mlstm_gain,
            forget_bias=_add_bias(("fgate", "bias")),
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
        forms=SpecialForms(prefix_scan=_mlstm_prefix_scan),
    ),
)
register_cell(
    "gated_deltanet",
    CellSpec(
        build=_build(GatedDeltaNetCell, num_heads=_heads, gated=True),
        carry=CarryLayout(readout=_delta_readout),
        params=ParamRules(
            recurrent=_named("A_log", "dt_bias", "a"), apply_gain=_log_rate_gain("A_log"), zero_if_missing=QKV
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
        build=_build(GatedDeltaNetCell, num_heads=_heads, gated=False),
        carry=CarryLayout(readout=_delta_readout),
        params=ParamRules(recurrent=_named("b"), apply_gain=_no_gain, zero_if_missing=QKV),
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

__all__ = ["MAMBA_STATE", "heads_for", "mamba_linear", "rglru_linear"]

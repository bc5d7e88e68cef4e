"""Today's designs: RG-LRU (Griffin), sLSTM and mLSTM (xLSTM), Mamba's selective SSM, Gated
DeltaNet and DeltaNet. The cells and their maths are in :mod:`~rnnviz.engine.cells.rglru`,
:mod:`~rnnviz.engine.cells.xlstm`, :mod:`~rnnviz.engine.cells.mamba` and
:mod:`~rnnviz.engine.cells.deltanet`; this module holds how rnnviz builds and reads each, the
parts that their rows of the cell table (:mod:`rnnviz.tables.builtin_cells`) name.

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
from rnnviz.engine.cells.xlstm import MLSTMCell, SLSTMCell, mlstm_prefix_scan, mlstm_readout
from rnnviz.tables.builtin_cells import MAMBA_STATE, QKV, heads_for

if TYPE_CHECKING:
    from rnnviz.config import RunConfig

Params = dict[str, Any]


def _build(cls: type, **fixed: Any) -> Callable[[RunConfig, dict[str, Any]], nn.RNNCellBase]:
    """A builder passing the options the cell has fields for (these cells have no
    ``recurrent_kernel_init`` or ``activation_fn`` of their own, except where they do)."""
    fields = set(cls.__dataclass_fields__)

    def build(cfg: RunConfig, options: dict[str, Any]) -> nn.RNNCellBase:
        """The cell with the options it has fields for, and its fixed fields."""
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


def rglru_gain(params: Params, gain: jax.Array) -> Params:
    """The RG-LRU's gain: softplus(Λ) → softplus(Λ)/g."""
    return _map_leaf(params, ("a_param",), lambda lam: _inverse_softplus(jax.nn.softplus(lam) / gain))


def _log_rate_gain(name: str) -> Callable[[Params, jax.Array], Params]:
    """A gain hook for a decay rate e^{name}: divided by the gain."""

    def hook(params: Params, gain: jax.Array) -> Params:
        """The params with the decay rate divided by ``gain``."""
        return _map_leaf(params, (name,), lambda a: a - jnp.log(gain))

    return hook


def mlstm_gain(params: Params, gain: jax.Array) -> Params:
    """The mLSTM's gain: the forget gate's bias b_f → b′ with ln σ(b′) = ln σ(b_f)/g."""

    def scale(b):
        ls = jax.nn.log_sigmoid(b) / gain  # ln σ(b′) = ln σ(b)/g
        return ls - jnp.log(-jnp.expm1(ls))

    return _map_leaf(params, ("fgate", "bias"), scale)


def deltanet_gain(params: Params, gain: jax.Array) -> Params:
    """DeltaNet's gain: none (the params unchanged)."""
    del gain  # DeltaNet has no decay (α = 1): nothing for the gain to scale
    return params


def _add_bias(path: tuple[str, ...]) -> Callable[[Params, jax.Array], Params]:
    """A forget-bias hook: add the bias to the leaf at ``path``."""

    def hook(params: Params, bias: jax.Array) -> Params:
        """The params with ``bias`` added to the forget gate's bias."""
        return _map_leaf(params, path, lambda b: b + bias)

    return hook


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


# The readouts and the prefix scan the cells' specs name: the cells' own, with x in the params' dtype.


def mamba_spec_readout(params: Params, h: jax.Array, x: jax.Array) -> jax.Array:
    """The selective SSM's output from its state ``h`` and input ``x``."""
    return selective_ssm_readout(params, h, _in_dtype_of(params["A_log"], x))


def mlstm_spec_readout(params: Params, carry: Any, x: jax.Array) -> jax.Array:
    """The mLSTM's output from its carry and input ``x``."""
    return mlstm_readout(params, carry, _in_dtype_of(params["q"]["kernel"], x))


def mlstm_spec_prefix_scan(params: Params, first: Any, rest: Any, xs: jax.Array, scan: Callable) -> Any:
    """The mLSTM's carries over ``xs`` by a prefix scan."""
    return mlstm_prefix_scan(params, first, rest, _in_dtype_of(params["q"]["kernel"], xs), scan)


def delta_spec_readout(params: Params, state: jax.Array, x: jax.Array) -> jax.Array:
    """The delta rule's output from its state and input ``x``."""
    return delta_rule_readout(params, state, _in_dtype_of(params["q"]["kernel"], x))


rglru_build = _build(RGLRUCell)
mamba_build = _build(SelectiveSSMCell, state_size=MAMBA_STATE)
slstm_build = _build(SLSTMCell, num_heads=_heads)
mlstm_build = _build(MLSTMCell, num_heads=_heads)
gated_deltanet_build = _build(GatedDeltaNetCell, num_heads=_heads, gated=True)
deltanet_build = _build(GatedDeltaNetCell, num_heads=_heads, gated=False)

#: The gain of Mamba and Gated DeltaNet: their decay rate e^{A_log} divided by g.
a_log_gain = _log_rate_gain("A_log")
#: The forget bias is added to the forget gate's bias: the sLSTM's ``if``, the mLSTM's ``fgate``.
slstm_forget_bias = _add_bias(("if", "bias"))
mlstm_forget_bias = _add_bias(("fgate", "bias"))


__all__ = [
    "MAMBA_STATE",
    "QKV",
    "a_log_gain",
    "delta_spec_readout",
    "deltanet_build",
    "deltanet_gain",
    "gated_deltanet_build",
    "heads_for",
    "mamba_build",
    "mamba_linear",
    "mamba_spec_readout",
    "mlstm_build",
    "mlstm_forget_bias",
    "mlstm_gain",
    "mlstm_spec_prefix_scan",
    "mlstm_spec_readout",
    "rglru_build",
    "rglru_gain",
    "rglru_linear",
    "slstm_build",
    "slstm_forget_bias",
]

"""Cells: a :class:`RunConfig` becomes a Flax linen cell honouring one contract, through
the registry (:mod:`rnnviz.cells.registry`, where every cell — built-in or plugin — is one
:class:`CellSpec`).

Every cell is ``cell.apply({"params": p}, carry, x) -> (carry, y)`` with the carry made
by ``cell.initialize_carry(key, input_shape)`` — the one place that decides the carry's
shape ``[(B,) H]`` and dtype, so they can never disagree with the step.

Carry layouts and step maths (x: ``[(B,) I]``, h, c: ``[(B,) H]``; σ the sigmoid):

* ``simple`` (``nn.SimpleCell``), carry ``h``: ``h' = φ(W_i x + b + W_h h)``, φ ∈ {tanh, relu, identity}.
* ``lstm`` (``nn.OptimizedLSTMCell``, same params as ``nn.LSTMCell``), carry ``(c, h)``:
  ``i, f, o = σ(W_i· x + W_h· h + b_h·)``, ``g = tanh(W_ig x + W_hg h + b_hg)``,
  ``c' = f ⊙ c + i ⊙ g``, ``h' = o ⊙ tanh(c')``. The forget bias sits in ``hf.bias``.
* ``gru`` (``nn.GRUCell``), carry ``h``: ``r, z = σ(W_i· x + b_i· + W_h· h)``,
  ``n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))``, ``h' = (1 − z) ⊙ n + z ⊙ h``.
* ``mgu`` (``nn.MGUCell``), carry ``h``: ``f = σ(W_if x + b_if + W_hf h)``,
  ``n = tanh(W_in x + b_in + f ⊙ (W_hn h + b_hn))``, ``h' = (1 − f) ⊙ n + f ⊙ h``.

* ``indrnn``, ``mingru``, ``minlstm``: see :mod:`rnnviz.cells.modern` (maths and papers).

In every built-in cell the output ``y`` equals the ``h`` part of the new carry.
Recurrent parameters are what each spec's ``recurrent`` says (Flax's cells: the kernels of
modules whose name starts with ``h``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.cells.modern import (
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
from rnnviz.cells.registry import CellSpec, FusedForm, cell_names, cell_spec, hidden_kernels, register_cell
from rnnviz.config import RunConfig
from rnnviz.linalg import orthogonal

Params = dict[str, Any]

_ACTIVATIONS: dict[str, Callable] = {"tanh": jnp.tanh, "relu": jax.nn.relu, "identity": lambda z: z}


def _in_float32(init: Callable) -> Callable:
    """Run an initialiser in float32 and cast: LAPACK has no bf16/f16 QR (orthogonal init),
    and it keeps a low-precision run equal to the float32 run rounded."""

    def wrapped(key, shape, dtype=jnp.float32):
        return init(key, shape, jnp.float32).astype(dtype)

    return wrapped


def _identity_init(key, shape, dtype=jnp.float32):
    del key
    return jnp.eye(shape[0], shape[1], dtype=dtype)


def _recurrent_init(kind: str) -> Callable:
    if kind == "orthogonal":
        # Flax's draw, factorised without LAPACK: batched QRs that XLA:CPU may run at once
        # deadlock jaxlib 0.10.2 (see rnnviz.linalg).
        return orthogonal()
    if kind == "normal":
        # Var 1/H: the spectral radius of W_hh is then about 1 (circular law).
        return nn.initializers.variance_scaling(1.0, "fan_in", "normal")
    return _identity_init


def carry_initializer(kind: str, scale: jax.Array | float) -> Callable:
    """The Flax ``carry_init`` for a ``carry_init`` kind; ``scale`` may be a tracer.

    zeros → 0; normal → N(0, scale²); uniform → U(−scale, scale); constant → scale;
    learned → N(0, scale²) as the starting value of a trainable ``[H]`` vector.
    """

    def init(key, shape, dtype=jnp.float32):
        s = jnp.asarray(scale, jnp.float32)
        if kind == "zeros":
            out = jnp.zeros(shape, jnp.float32)
        elif kind in ("normal", "learned"):
            out = s * jax.random.normal(key, shape, jnp.float32)
        elif kind == "uniform":
            out = jax.random.uniform(key, shape, jnp.float32, -1.0, 1.0) * s
        else:
            out = jnp.full(shape, s, jnp.float32)
        return out.astype(dtype)

    return init


def make_cell(cfg: RunConfig, carry_scale: jax.Array | float = 1.0) -> nn.RNNCellBase:
    """Build the cell for ``cfg`` through its :class:`CellSpec`; dtype is both param and
    compute dtype, the carry initialiser comes from ``cfg.carry_init``."""
    dtype = jnp.dtype(cfg.dtype)
    options: dict[str, Any] = dict(
        features=cfg.hidden_size,
        dtype=dtype,
        param_dtype=dtype,
        kernel_init=_in_float32(nn.initializers.lecun_normal()),
        recurrent_kernel_init=_in_float32(_recurrent_init(cfg.recurrent_init)),
        carry_init=carry_initializer(cfg.carry_init, carry_scale),
        activation_fn=_ACTIVATIONS[cfg.activation],
    )
    return cell_spec(cfg.cell).build(cfg, options)


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
    return IndRNNCell(**kwargs, u_init=_in_float32(u_init(cfg.recurrent_init)))


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


def _pascanu(a):
    from rnnviz.diagnostics import pascanu_curve

    return pascanu_curve(a)


def _diagonal(jacobians: str, end: str = "output_cotangent") -> Callable:
    """A theory hook: the exact diagonal-Jacobian curve with this cell's
    ``rnnviz.diagnostics`` functions (imported when drawn: the core does not need them)."""

    def hook(a):
        from rnnviz import diagnostics

        return diagnostics.diagonal_curve(a, getattr(diagnostics, jacobians), getattr(diagnostics, end))

    return hook


# The fused forms: each cell's step after its two projections, given per gate (zx[k], zh[k]
# ``[(B,) H]``), written to match Flax's own __call__ operation for operation.
def _simple_pointwise(carry, zx, zh, act):
    return act(zx[0] + zh[0])


def _lstm_pointwise(carry, zx, zh, act):
    c, _ = carry
    i, f, g, o = (b + a for a, b in zip(zx, zh))
    new_c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return new_c, jax.nn.sigmoid(o) * jnp.tanh(new_c)


def _gru_pointwise(h, zx, zh, act):
    r = jax.nn.sigmoid(zx[0] + zh[0])
    z = jax.nn.sigmoid(zx[1] + zh[1])
    n = jnp.tanh(zx[2] + r * zh[2])
    return (1.0 - z) * n + z * h


def _mgu_pointwise(h, zx, zh, act):
    f = jax.nn.sigmoid(zx[0] + zh[0])
    n = jnp.tanh(zx[1] + f * zh[1])
    return (1.0 - f) * n + f * h


# Their hand-written reverses (the fused strategy's custom VJP): the step saves its gate
# activations, the reverse is the chain rule written out — σ' = σ(1 − σ), tanh' = 1 − tanh².
# Each returns (∂L/∂carry_{t−1} except through W_h, dz^x per gate, dz^h per gate).
def _simple_step(carry, zx, zh, act):
    y, slope = jax.jvp(act, (zx[0] + zh[0],), (jnp.ones_like(zh[0]),))  # φ and φ' at the pre-activation
    return y, slope


def _simple_backward(slope, h, g, act):
    dz = g * slope
    return jnp.zeros_like(g), (dz,), (dz,)


def _lstm_step(carry, zx, zh, act):
    c, _ = carry
    i, f, g, o = (b + a for a, b in zip(zx, zh))
    i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
    new_c = f * c + i * g
    tc = jnp.tanh(new_c)
    return (new_c, o * tc), (i, f, g, o, tc)


def _lstm_backward(res, carry, grad, act):
    i, f, g, o, tc = res
    c, _ = carry
    gc, gh = grad
    gc = gc + gh * o * (1.0 - tc * tc)
    dz = (gc * g * i * (1.0 - i), gc * c * f * (1.0 - f), gc * i * (1.0 - g * g), gh * tc * o * (1.0 - o))
    return (gc * f, jnp.zeros_like(gh)), dz, dz


def _gru_step(h, zx, zh, act):
    r = jax.nn.sigmoid(zx[0] + zh[0])
    z = jax.nn.sigmoid(zx[1] + zh[1])
    n = jnp.tanh(zx[2] + r * zh[2])
    return (1.0 - z) * n + z * h, (r, z, n, zh[2])


def _gru_backward(res, h, g, act):
    r, z, n, hn = res
    dn = g * (1.0 - z) * (1.0 - n * n)
    dr = dn * hn * r * (1.0 - r)
    dz = g * (h - n) * z * (1.0 - z)
    return g * z, (dr, dz, dn), (dr, dz, dn * r)


def _mgu_step(h, zx, zh, act):
    f = jax.nn.sigmoid(zx[0] + zh[0])
    n = jnp.tanh(zx[1] + f * zh[1])
    return (1.0 - f) * n + f * h, (f, n, zh[1])


def _mgu_backward(res, h, g, act):
    f, n, hn = res
    dn = g * (1.0 - f) * (1.0 - n * n)
    df = (g * (h - n) + dn * hn) * f * (1.0 - f)
    return g * f, (df, dn), (df, dn * f)


register_cell(
    "simple",
    CellSpec(
        _flax_cell(nn.SimpleCell, takes_activation=True),
        activations=("tanh", "relu", "identity"),
        group="classic",
        matmuls=1,
        residuals=3,
        theory=_pascanu,
        fused=FusedForm(
            ("",), (True,), (False,), _simple_pointwise, step=_simple_step, backward=_simple_backward
        ),
        description="h' = φ(W_i x + b + W_h h) (Elman 1990); Flax SimpleCell",
    ),
)
register_cell(
    "lstm",
    CellSpec(
        _flax_cell(nn.OptimizedLSTMCell),
        components=("c", "h"),
        forget_bias=_add_to(("hf", "bias")),
        group="classic",
        matmuls=4,
        vectors=4,
        residuals=14,
        gates=("i", "f", "o"),
        fused=FusedForm(
            ("i", "f", "g", "o"),
            (False,) * 4,
            (True,) * 4,
            _lstm_pointwise,
            step=_lstm_step,
            backward=_lstm_backward,
        ),
        description="c' = f⊙c + i⊙g, h' = o⊙tanh(c') (Hochreiter & Schmidhuber 1997); Flax OptimizedLSTMCell, carry (c, h)",
    ),
)
register_cell(
    "gru",
    CellSpec(
        _flax_cell(nn.GRUCell),
        group="classic",
        matmuls=3,
        vectors=4,
        residuals=9,
        gates=("r", "z"),
        fused=FusedForm(
            ("r", "z", "n"),
            (True,) * 3,
            (False, False, True),
            _gru_pointwise,
            additive=(True, True, False),
            step=_gru_step,
            backward=_gru_backward,
        ),
        description="h' = (1 − z)⊙n + z⊙h (Cho et al. 2014); Flax GRUCell",
    ),
)
register_cell(
    "mgu",
    CellSpec(
        _flax_cell(nn.MGUCell),
        group="classic",
        matmuls=2,
        vectors=3,
        residuals=7,
        gates=("f",),
        fused=FusedForm(
            ("f", "n"),
            (True, True),
            (False, True),
            _mgu_pointwise,
            additive=(True, False),
            step=_mgu_step,
            backward=_mgu_backward,
        ),
        description="h' = (1 − f)⊙n + f⊙h (Zhou et al. 2016); Flax MGUCell",
    ),
)
register_cell(
    "indrnn",
    CellSpec(
        _indrnn,
        recurrent=_named("u"),
        activations=("relu", "tanh", "identity"),
        group="linear-recurrent",
        matmuls=1,
        vectors=2,
        residuals=3,
        theory=_diagonal("indrnn_jacobians"),
        description="h' = φ(W x + u⊙h + b), element-wise recurrence (Li et al. 2018); gain scales u",
    ),
)
register_cell(
    "mingru",
    CellSpec(
        _minimal(MinGRUCell),
        recurrent=_named("a"),
        group="linear-recurrent",
        matmuls=2,
        vectors=3,
        residuals=4,
        gates=("z",),
        theory=_diagonal("mingru_jacobians"),
        linear_form=mingru_linear,
        description="h' = a(1 − z)⊙h + z⊙h̃, gates from x only (Feng et al. 2024); gain scales a",
    ),
)
register_cell(
    "minlstm",
    CellSpec(
        _minimal(MinLSTMCell),
        recurrent=_named("a"),
        forget_bias=_add_to(("if", "bias")),
        group="linear-recurrent",
        matmuls=3,
        vectors=4,
        residuals=6,
        gates=("f", "i"),
        theory=_diagonal("minlstm_jacobians"),
        linear_form=minlstm_linear,
        description="h' = a·f'⊙h + i'⊙h̃, f' = f/(f+i) from x only (Feng et al. 2024); gain scales a",
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
        _lru,
        components=("re", "im"),
        output="re",
        readout=lru_readout,
        recurrent=_named("nu_log", "theta_log", "a"),
        apply_gain=_scale_leaf("a"),
        group="linear-recurrent",
        matmuls=5,
        vectors=3,
        residuals=6,
        theory=_diagonal("lru_jacobians", "lru_cotangent"),
        linear_form=lru_linear,
        pack=lru_pack,
        unpack=lru_unpack,
        description="h' = λ⊙h + γ⊙Bx, y = Re(Ch) + Dx, λ on a ring (Orvieto et al. 2023); carry (re, im); gain scales |λ|",
    ),
)


def is_recurrent(cfg: RunConfig, path: tuple[str, ...]) -> bool:
    """Whether the parameter at ``path`` is part of ``cfg.cell``'s recurrence."""
    return cell_spec(cfg.cell).recurrent(path)


def param_group(path: tuple[str, ...], recurrent: Callable[[tuple[str, ...]], bool] = hidden_kernels) -> str:
    """Group of a parameter leaf: ``recurrent``, ``input`` (other weights) or ``bias``."""
    if recurrent(path):
        return "recurrent"
    return "bias" if path[-1] == "bias" else "input"


PARAM_GROUPS = ("recurrent", "input", "bias")


def adjust_params(cfg: RunConfig, params: Params, gain: jax.Array, forget_bias: jax.Array) -> Params:
    """Apply the gain to the recurrent part (``spec.apply_gain``, or multiply the recurrent
    leaves) and the forget bias (``spec.forget_bias``; cells without one ignore it).

    Done after initialisation so that gain and bias are traced values, not static ones.
    """
    spec = cell_spec(cfg.cell)
    if spec.apply_gain is not None:
        params = spec.apply_gain(params, gain)
    else:

        def scale(path, leaf):
            names = tuple(k.key for k in path)
            return (leaf.astype(jnp.float32) * gain).astype(leaf.dtype) if spec.recurrent(names) else leaf

        params = jax.tree_util.tree_map_with_path(scale, params)
    if spec.forget_bias is not None:
        params = spec.forget_bias(params, forget_bias)
    return params


def carry_to_dict(cfg: RunConfig, carry: Any) -> dict[str, Any]:
    """The carry as ``{component: leaf}`` in the spec's names (LSTM ``{"c", "h"}``)."""
    return dict(zip(cfg.carry_components, jax.tree.leaves(carry)))


def output_of(cfg: RunConfig, carry: Any) -> jax.Array:
    """The carry leaf the spec names as output (y itself unless the spec has a ``readout``)."""
    return jax.tree.leaves(carry)[cfg.carry_components.index(cell_spec(cfg.cell).output)]


def outputs(
    cfg: RunConfig, params: Params, carries: Any, xs: jax.Array, *, per_step: bool = False
) -> jax.Array:
    """The outputs y_1 … y_T ``[T, (B,) O]`` of a trajectory (carries ``[T+1, …]`` with
    carry_0 at index 0, time-major xs ``[T, (B,) I]``): the output leaf, or the spec's
    ``readout`` at every step (params with a leading ``[T]`` axis when ``per_step``)."""
    readout = cell_spec(cfg.cell).readout
    if readout is None:
        return output_of(cfg, carries)[1:]
    later = jax.tree.map(lambda c: c[1:], carries)
    return jax.vmap(readout, in_axes=(0 if per_step else None, 0, 0))(params, later, xs)


def final_output(cfg: RunConfig, params: Params, carry: Any, x_last: jax.Array) -> jax.Array:
    """y_T from the final carry and the last input (for losses that read only y_T)."""
    readout = cell_spec(cfg.cell).readout
    return output_of(cfg, carry) if readout is None else readout(params, carry, x_last)


__all__ = [
    "PARAM_GROUPS",
    "CellSpec",
    "FusedForm",
    "Params",
    "adjust_params",
    "carry_initializer",
    "carry_to_dict",
    "cell_names",
    "cell_spec",
    "final_output",
    "is_recurrent",
    "make_cell",
    "output_of",
    "outputs",
    "param_group",
    "register_cell",
]

"""Cell registry: a :class:`RunConfig` becomes a Flax linen cell honouring one contract.

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

In every cell the output ``y`` equals the ``h`` part of the new carry.
Recurrent kernels are the params whose module name starts with ``h``.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.config import RunConfig

Params = dict[str, Any]

_CELL_CLASSES = {
    "simple": nn.SimpleCell,
    "lstm": nn.OptimizedLSTMCell,
    "gru": nn.GRUCell,
    "mgu": nn.MGUCell,
}
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
        return nn.initializers.orthogonal()
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
    """Build the Flax cell for ``cfg``; dtype is both param and compute dtype."""
    dtype = jnp.dtype(cfg.dtype)
    kwargs: dict[str, Any] = dict(
        features=cfg.hidden_size,
        dtype=dtype,
        param_dtype=dtype,
        kernel_init=_in_float32(nn.initializers.lecun_normal()),
        recurrent_kernel_init=_in_float32(_recurrent_init(cfg.recurrent_init)),
        carry_init=carry_initializer(cfg.carry_init, carry_scale),
    )
    if cfg.cell == "simple":
        kwargs["activation_fn"] = _ACTIVATIONS[cfg.activation]
    return _CELL_CLASSES[cfg.cell](**kwargs)


def is_recurrent_kernel(path: tuple[str, ...]) -> bool:
    """True for ``(<h…>, "kernel")``: the hidden-to-hidden matrices."""
    return path[0].startswith("h") and path[-1] == "kernel"


def param_group(path: tuple[str, ...]) -> str:
    """Group of a parameter leaf: ``recurrent`` (W_h·), ``input`` (W_i·) or ``bias``."""
    if path[-1] == "bias":
        return "bias"
    return "recurrent" if is_recurrent_kernel(path) else "input"


PARAM_GROUPS = ("recurrent", "input", "bias")


def adjust_params(cfg: RunConfig, params: Params, gain: jax.Array, forget_bias: jax.Array) -> Params:
    """Scale recurrent kernels by ``gain`` and add ``forget_bias`` to the LSTM's ``hf.bias``.

    Done after initialisation so that gain and bias are traced values, not static ones.
    """

    def adjust(path, leaf):
        names = tuple(k.key for k in path)
        if is_recurrent_kernel(names):
            return (leaf.astype(jnp.float32) * gain).astype(leaf.dtype)
        if cfg.cell == "lstm" and names == ("hf", "bias"):
            return (leaf.astype(jnp.float32) + forget_bias).astype(leaf.dtype)
        return leaf

    return jax.tree_util.tree_map_with_path(adjust, params)


def carry_to_dict(cfg: RunConfig, carry: Any) -> dict[str, Any]:
    """Flax carry → ``{"c": c, "h": h}`` (LSTM) or ``{"h": h}``."""
    parts = carry if cfg.cell == "lstm" else (carry,)
    return dict(zip(cfg.carry_components, parts))


def output_of(cfg: RunConfig, carry: Any) -> jax.Array:
    """The cell output ``y``, which equals the ``h`` part of the carry."""
    return carry[1] if cfg.cell == "lstm" else carry

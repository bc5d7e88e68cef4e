"""Cells: a :class:`RunConfig` becomes a Flax linen cell honouring one contract, through
the registry (:mod:`rnnviz.tables.cells`, where every cell — built-in or plugin — is one
:class:`CellSpec`; the built-in cells' rows are :mod:`rnnviz.tables.builtin_cells`, their parts
:mod:`~rnnviz.engine.cells.builtin` and :mod:`~rnnviz.engine.cells.designs`).

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

* ``indrnn``, ``mingru``, ``minlstm``: see :mod:`rnnviz.engine.cells.modern` (maths and papers).

In every built-in cell the output ``y`` equals the ``h`` part of the new carry.
Recurrent parameters are what each spec's ``params.recurrent`` says (Flax's cells: the kernels of
modules whose name starts with ``h``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.config import require_cell
from rnnviz.engine.cells.init import carry_initializer, in_float32, recurrent_init
from rnnviz.tables.cells import CellSpec, FusedForm, cell_names, cell_spec, hidden_kernels, register_cell

if TYPE_CHECKING:
    from rnnviz.config import RunConfig

Params = dict[str, Any]

#: ``RunConfig.activation`` → the function (cells that take an activation, the fused forms).
ACTIVATIONS: dict[str, Callable] = {"tanh": jnp.tanh, "relu": jax.nn.relu, "identity": lambda z: z}


def make_cell(cfg: RunConfig, carry_scale: jax.Array | float = 1.0) -> nn.RNNCellBase:
    """Build the cell for ``cfg`` through its :class:`CellSpec`; dtype is both param and
    compute dtype, the carry initialiser comes from ``cfg.carry_init``.

    Raises:
        ConfigError: ``cfg`` asks for a reference block (:func:`~rnnviz.config.require_cell`).
    """
    require_cell(cfg)
    dtype = jnp.dtype(cfg.dtype)
    options: dict[str, Any] = dict(
        features=cfg.hidden_size,
        dtype=dtype,
        param_dtype=dtype,
        kernel_init=in_float32(nn.initializers.lecun_normal()),
        recurrent_kernel_init=in_float32(recurrent_init(cfg.recurrent_init)),
        carry_init=carry_initializer(cfg.carry_init, carry_scale),
        activation_fn=ACTIVATIONS[cfg.activation],
    )
    return cell_spec(cfg.cell).build(cfg, options)


def is_recurrent(cfg: RunConfig, path: tuple[str, ...]) -> bool:
    """Whether the parameter at ``path`` is part of ``cfg.cell``'s recurrence."""
    return cell_spec(cfg.cell).params.recurrent(path)


def param_group(path: tuple[str, ...], recurrent: Callable[[tuple[str, ...]], bool] = hidden_kernels) -> str:
    """Group of a parameter leaf: ``recurrent``, ``input`` (other weights) or ``bias``."""
    if recurrent(path):
        return "recurrent"
    return "bias" if path[-1] == "bias" else "input"


PARAM_GROUPS = ("recurrent", "input", "bias")


def apply_gain(cfg: RunConfig, params: Params, gain: jax.Array) -> Params:
    """Multiply the recurrent part by ``gain`` (``spec.params.apply_gain``, or every recurrent
    leaf): at initialisation, or (:mod:`rnnviz.base.weights`) a trained network's recurrence."""
    rules = cell_spec(cfg.cell).params
    if rules.apply_gain is not None:
        return rules.apply_gain(params, gain)

    def scale(path, leaf):
        names = tuple(k.key for k in path)
        return (leaf.astype(jnp.float32) * gain).astype(leaf.dtype) if rules.recurrent(names) else leaf

    return jax.tree_util.tree_map_with_path(scale, params)


def adjust_params(cfg: RunConfig, params: Params, gain: jax.Array, forget_bias: jax.Array) -> Params:
    """Apply the gain to the recurrent part (:func:`apply_gain`) and the forget bias
    (``spec.params.forget_bias``; cells without one ignore it).

    Done after initialisation so that gain and bias are traced values, not static ones.
    """
    params = apply_gain(cfg, params, gain)
    rules = cell_spec(cfg.cell).params
    if rules.forget_bias is not None:
        params = rules.forget_bias(params, forget_bias)
    return params


def carry_to_dict(cfg: RunConfig, carry: Any) -> dict[str, Any]:
    """The carry as ``{component: leaf}`` in the spec's names (LSTM ``{"c", "h"}``)."""
    return dict(zip(cfg.carry_components, jax.tree.leaves(carry)))


def output_of(cfg: RunConfig, carry: Any) -> jax.Array:
    """The carry leaf the spec names as output (y itself unless the spec has a ``readout``)."""
    return jax.tree.leaves(carry)[cfg.carry_components.index(cell_spec(cfg.cell).carry.output)]


def outputs(
    cfg: RunConfig, params: Params, carries: Any, xs: jax.Array, *, per_step: bool = False
) -> jax.Array:
    """The outputs y_1 … y_T ``[T, (B,) O]`` of a trajectory (carries ``[T+1, …]`` with
    carry_0 at index 0, time-major xs ``[T, (B,) I]``): the output leaf, or the spec's
    ``carry.readout`` at every step (params with a leading ``[T]`` axis when ``per_step``)."""
    readout = cell_spec(cfg.cell).carry.readout
    if readout is None:
        return output_of(cfg, carries)[1:]
    later = jax.tree.map(lambda c: c[1:], carries)
    return jax.vmap(readout, in_axes=(0 if per_step else None, 0, 0))(params, later, xs)


def final_output(cfg: RunConfig, params: Params, carry: Any, x_last: jax.Array) -> jax.Array:
    """y_T from the final carry and the last input (for losses that read only y_T)."""
    readout = cell_spec(cfg.cell).carry.readout
    return output_of(cfg, carry) if readout is None else readout(params, carry, x_last)


__all__ = [
    "ACTIVATIONS",
    "PARAM_GROUPS",
    "CellSpec",
    "FusedForm",
    "Params",
    "adjust_params",
    "apply_gain",
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

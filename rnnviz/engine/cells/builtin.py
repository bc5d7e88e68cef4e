"""The built-in cells' Flax and JAX parts that their rows of the cell table
(:mod:`rnnviz.tables.builtin_cells`) name: how to build each Flax cell from the options
rnnviz decides, and the parameter hooks (the forget bias, the LRU's gain).

The rows themselves are plain data, so the table answers without JAX; each part named here
is imported the first time it is called (:class:`~rnnviz.tables.cells.Lazy`). The special
forms (fused steps, linear forms) are in :mod:`~rnnviz.engine.cells.fused_forms` and
:mod:`~rnnviz.engine.cells.modern`; the closed forms beside the measured gradient in
:mod:`rnnviz.base.theory`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.engine.cells.init import in_float32
from rnnviz.engine.cells.modern import IndRNNCell, LRUCell, MinGRUCell, MinLSTMCell, u_init

if TYPE_CHECKING:
    from rnnviz.config import RunConfig

Params = dict[str, Any]


def _flax_cell(cls: type, takes_activation: bool = False) -> Callable:
    """Builder for Flax's own cells: they take the options as keywords."""

    def build(cfg: RunConfig, options: dict[str, Any]) -> nn.RNNCellBase:
        """The Flax cell with the config's options as keywords."""
        kwargs = dict(options)
        if not takes_activation:
            kwargs.pop("activation_fn")
        return cls(**kwargs)

    return build


def _minimal(cls: type) -> Callable:
    """Builder for the minimal cells: the options but the recurrent init and activation."""

    def build(cfg: RunConfig, options: dict[str, Any]) -> nn.RNNCellBase:
        """The cell with the options it has fields for."""
        return cls(
            **{k: v for k, v in options.items() if k not in ("recurrent_kernel_init", "activation_fn")}
        )

    return build


def _add_to(path: tuple[str, ...]) -> Callable:
    """A forget-bias hook: add the bias to the leaf at ``path``."""

    def hook(params: Params, bias: jax.Array) -> Params:
        """The params with ``bias`` added to the forget gate's bias."""

        def add(p, leaf):
            names = tuple(k.key for k in p)
            return (leaf.astype(jnp.float32) + bias).astype(leaf.dtype) if names == path else leaf

        return jax.tree_util.tree_map_with_path(add, params)

    return hook


def _scale_leaf(name: str) -> Callable:
    """A gain hook: multiply only the scalar parameter ``name``."""

    def hook(params: Params, gain: jax.Array) -> Params:
        """The params with the one scalar leaf multiplied by ``gain``."""
        return {**params, name: (params[name].astype(jnp.float32) * gain).astype(params[name].dtype)}

    return hook


simple_build = _flax_cell(nn.SimpleCell, takes_activation=True)
lstm_build = _flax_cell(nn.OptimizedLSTMCell)
gru_build = _flax_cell(nn.GRUCell)
mgu_build = _flax_cell(nn.MGUCell)
mingru_build = _minimal(MinGRUCell)
minlstm_build = _minimal(MinLSTMCell)
lru_build = _minimal(LRUCell)


def indrnn_build(cfg: RunConfig, options: dict[str, Any]) -> nn.RNNCellBase:
    """The IndRNN with its element-wise recurrent weights u drawn by ``cfg.recurrent_init``."""
    kwargs = {k: v for k, v in options.items() if k != "recurrent_kernel_init"}
    return IndRNNCell(**kwargs, u_init=in_float32(u_init(cfg.recurrent_init)))


#: The forget bias is added to the forget gate's bias: the LSTM's ``hf``, the minLSTM's ``if``.
lstm_forget_bias = _add_to(("hf", "bias"))
minlstm_forget_bias = _add_to(("if", "bias"))
#: The LRU's gain multiplies its scalar ``a``, the eigenvalues' modulus.
lru_gain = _scale_leaf("a")


__all__ = [
    "gru_build",
    "indrnn_build",
    "lru_build",
    "lru_gain",
    "lstm_build",
    "lstm_forget_bias",
    "mgu_build",
    "mingru_build",
    "minlstm_build",
    "minlstm_forget_bias",
    "simple_build",
]

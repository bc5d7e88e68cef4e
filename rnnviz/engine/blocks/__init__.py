r"""Whole models as their reference libraries build them, as pure JAX functions of a flat
``{name: array}`` dict named as the checkpoint names its tensors.

Every family module defines::

    forward(spec, params, inputs, probes=None) -> logits      # [B, T, V] float32 (or [B, T, H])
    state_shapes(spec, batch, seq_len) -> tuple               # one entry per layer: a pytree of
                                                              # jax.ShapeDtypeStruct [B, T, ...], or None

:class:`Probes` are zeros added inside the forward pass; the gradient of the loss with
respect to them is, in one reverse pass, ∂L/∂x_t^{(l)} for the residual stream entering each
block and ∂L/∂state_t for each recurrent layer's state after each step.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax


class Probes(NamedTuple):
    """Zeros added inside a forward pass, to be differentiated.

    Attributes:
        stream: ``L + 1`` arrays ``[B, T, D_l]``: row l is added to the residual stream entering
            block l (row 0: the embeddings as the first block receives them), row L to the
            input of the final norm (for a stack without a head: the top layer's output).
        states: ``L`` entries: for a recurrent layer a pytree whose leaves are ``[B, T, ...]``,
            leaf t added to the layer's state right after step t (so it is what step t + 1
            and the readout of step t see); None for a layer without recurrent state.
    """

    stream: tuple[jax.Array, ...]
    states: tuple[Any, ...]

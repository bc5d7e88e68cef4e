r"""Whole models as their reference libraries build them, as pure JAX functions of a flat
``{name: array}`` dict named as the checkpoint names its tensors.

Every family module defines::

    forward(spec, params, inputs, probes=None, *, with_states=False)
        -> logits                                            # [B, T, V] float32 (or [B, T, H])
        -> (logits, trajectories)                            # with_states: L Trajectory or None
    state_shapes(spec, batch, seq_len) -> tuple              # one entry per layer: a pytree of
                                                             # jax.ShapeDtypeStruct [B, T, ...], or None
    layer_step(spec, params, layer, state, inputs) -> state  # one step of layer l's recurrence

:class:`Probes` are zeros added inside the forward pass; the gradient of the loss with
respect to them is, in one reverse pass, ∂L/∂x_t^{(l)} for the residual stream entering each
block and ∂L/∂state_t for each recurrent layer's state after each step.

A :class:`Trajectory` is what a recurrent layer's scan ran on: its state after every step and
what every step read besides the state, so that

.. math::
    \mathrm{state}_t = \mathrm{layer\_step}(\mathrm{state}_{t−1}, \mathrm{inputs}_t) + \mathrm{probe}_t,
    \qquad J_t = ∂\,\mathrm{layer\_step}(s, \mathrm{inputs}_t)/∂s\,\big|_{s = \mathrm{state}_{t−1}}

is layer l's step Jacobian holding its input fixed (:mod:`rnnviz.studies.model_jacobians`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


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


class Trajectory(NamedTuple):
    """One recurrent layer's run over a sequence, from ``forward(..., with_states=True)``.

    Attributes:
        states: the state after every step, probe included, a pytree shaped as
            ``state_shapes`` gives it (leaves ``[B, T, ...]``); the state before step 0 is zero
            in every family.
        inputs: what each step reads besides the state, a pytree of ``[B, T, ...]`` leaves
            (the family's ``layer_step`` names them): leaf t is step t's.
    """

    states: Any
    inputs: Any


def wide_dtype(dtype: Any) -> jnp.dtype:
    """The dtype the references' float32 steps (norms, states, softmax) run in for weights of
    ``dtype``: float32, or float64 for float64 weights (the analysis's pass below float32's range).

    >>> wide_dtype(jnp.bfloat16), wide_dtype(jnp.float32), wide_dtype(jnp.float64)
    (dtype('float32'), dtype('float32'), dtype('float64'))
    """
    return jnp.dtype(jnp.float64) if jnp.dtype(dtype) == jnp.float64 else jnp.dtype(jnp.float32)


def promoted(a: Any, b: Any) -> jnp.dtype:
    """torch's promotion of two float dtypes, spelled out: the wider, and float32 for bfloat16
    with float16 (the tests run JAX's strict promotion, which has no implicit path between them).

    >>> promoted(jnp.bfloat16, jnp.float32), promoted(jnp.bfloat16, jnp.float16)
    (dtype('float32'), dtype('float32'))
    """
    a, b = jnp.dtype(a), jnp.dtype(b)
    if a == b:
        return a
    if a.itemsize == b.itemsize:
        return jnp.dtype(jnp.float32)
    return a if a.itemsize > b.itemsize else b

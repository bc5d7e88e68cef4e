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
block and ∂L/∂state_t for each recurrent layer's state after each step. A state probe may
instead be a norm probe, one number per example and step (:func:`probed`), whose gradient is
‖∂L/∂state_t‖ itself: the analysis reads only the norms, and a whole ``[B, T, ...state]``
gradient (with the zeros it is taken with) is what a large state cannot afford at every layer.

A :class:`Trajectory` is what a recurrent layer's scan ran on: its state after every step and
what every step read besides the state, so that

.. math::
    \mathrm{state}_t = \mathrm{layer\_step}(\mathrm{state}_{t−1}, \mathrm{inputs}_t) + \mathrm{probe}_t,
    \qquad J_t = ∂\,\mathrm{layer\_step}(s, \mathrm{inputs}_t)/∂s\,\big|_{s = \mathrm{state}_{t−1}}

is layer l's step Jacobian holding its input fixed (:mod:`rnnviz.studies.model_jacobians`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.engine.norms import robust_norm


class Probes(NamedTuple):
    """Zeros added inside a forward pass, to be differentiated.

    Attributes:
        stream: ``L + 1`` arrays ``[B, T, D_l]``: row l is added to the residual stream entering
            block l (row 0: the embeddings as the first block receives them), row L to the
            input of the final norm (for a stack without a head: the top layer's output).
        states: ``L`` entries: for a recurrent layer a pytree whose leaves are ``[B, T, ...]``,
            leaf t added to the layer's state right after step t (so it is what step t + 1
            and the readout of step t see), or norm probes ``[B, T]`` at the same place
            (:func:`probed`); None for a layer without recurrent state.
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


def embedded(params: dict[str, jax.Array], table: str, inputs: jax.Array) -> jax.Array:
    """What a model's first block reads before any scaling: the rows of the embeddings
    ``params[table]`` ``[V, D]`` for token ids ``<int>[B, T]``, or float inputs ``[B, T, D]``
    as they are (transformers' ``inputs_embeds``; the table may then be absent).

    >>> table = {"E": jnp.eye(3)}
    >>> embedded(table, "E", jnp.array([[2, 0]])).tolist(), embedded({}, "E", jnp.ones((1, 1, 3))).shape
    ([[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]], (1, 1, 3))
    """
    if jnp.issubdtype(inputs.dtype, jnp.integer):
        return jnp.take(params[table], inputs, axis=0)
    return inputs


def chunked_scan(step: Callable, init: Any, xs: Any, chunk: int | None = None) -> tuple[Any, Any]:
    r"""``jax.lax.scan(step, init, xs)``, the same numbers, whose reverse pass keeps the carry
    only every ``chunk`` steps and recomputes the steps between as it reaches them.

    A plain scan's reverse pass stores what every step read, the carry included: T states. Here
    the steps run in chunks of k, each ``jax.checkpoint``-ed, so it stores T / k carries and,
    one chunk at a time, k steps' worth, at the price of running the forward steps once more;
    k = ⌈√T⌉ (the default) makes the two counts about equal. The last T mod k steps run as a
    plain scan.

    Args:
        step: ``(carry, x) -> (carry, y)``, as :func:`jax.lax.scan` takes it.
        init: the first carry.
        xs: a pytree of ``[T, ...]`` leaves (None leaves allowed, as in :func:`jax.lax.scan`).
        chunk: k, the steps between stored carries; default ⌈√T⌉.

    Returns:
        ``(last carry, ys)``, ys' leaves ``[T, ...]``, as :func:`jax.lax.scan` returns them.

    Example:
        >>> xs = jnp.arange(1.0, 8.0)
        >>> carry, ys = chunked_scan(lambda c, x: (c * x, c), 1.0, xs, chunk=3)
        >>> float(carry), ys.tolist()
        (5040.0, [1.0, 1.0, 2.0, 6.0, 24.0, 120.0, 720.0])
    """
    steps = jax.tree.leaves(xs)[0].shape[0]
    k = min(chunk or math.isqrt(steps - 1) + 1, steps)
    full = steps - steps % k
    head = jax.tree.map(lambda a: a[:full].reshape((full // k, k) + a.shape[1:]), xs)
    carry, ys = jax.lax.scan(jax.checkpoint(lambda c, x: jax.lax.scan(step, c, x)), init, head)
    ys = jax.tree.map(lambda a: a.reshape((full,) + a.shape[2:]), ys)
    if full == steps:
        return carry, ys
    carry, tail = jax.lax.scan(step, carry, jax.tree.map(lambda a: a[full:], xs))
    return carry, jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys, tail)


def probed(state: jax.Array, probe: jax.Array) -> jax.Array:
    r"""A state leaf after its step's probe: ``state + probe`` for a probe of the state's shape,
    whose gradient is ∂L/∂state_t itself; for a norm probe ``[B]`` (one number per example)
    the state unchanged, and the gradient that reaches the probe
    :math:`\lVert ∂L/∂\mathrm{state}_{t,b} \rVert` per example b, the norm of the very cotangent
    a full probe would have received. That "gradient" is a reading passed out of the reverse
    pass, not a derivative (a norm is not linear in the cotangent): it holds for the pullback
    of a loss, one cotangent at a time (``jax.vmap`` of the VJP included), and for nothing
    under a forward or second derivative.

    Args:
        state: ``[B, ...]``, the state after the step.
        probe: ``[B, ...]`` like it, or ``[B]``.

    Returns:
        ``[B, ...]``.

    Example:
        >>> h, g = jnp.ones((2, 3)), jnp.array([[3.0, 4.0, 0.0], [0.0, 0.0, 1.0]])
        >>> jax.vjp(probed, h, jnp.zeros(2))[1](g)[1]
        Array([5., 1.], dtype=float32)
    """
    return state + probe if probe.shape == state.shape else _norm_probe(state, probe)


@jax.custom_vjp
def _norm_probe(state: jax.Array, probe: jax.Array) -> jax.Array:
    return state


def _norm_probe_fwd(state: jax.Array, probe: jax.Array) -> tuple[jax.Array, jax.Array]:
    return state, probe


def _norm_probe_bwd(probe: jax.Array, g: jax.Array) -> tuple[jax.Array, jax.Array]:
    # per example: the batch's norm is then the norm of these, as of the whole gradient
    return g, robust_norm(g, axis=tuple(range(1, g.ndim))).astype(probe.dtype)


_norm_probe.defvjp(_norm_probe_fwd, _norm_probe_bwd)

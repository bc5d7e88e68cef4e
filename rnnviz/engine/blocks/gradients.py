r"""Every layer's and every recurrent state's per-step gradient of a whole model, in one
forward and one reverse pass.

The forward pass adds zeros (:class:`~rnnviz.engine.blocks.Probes`) to the residual stream
entering each block, and puts a norm probe on each recurrent layer's state after each step
(:func:`~rnnviz.engine.blocks.probed`). Differentiating the per-position losses ℓ_p with
respect to those zeros gives ∂L/∂x_t^{(l)} and ‖∂L/∂state_t‖ (per example) for every l and t
at once: the state's gradient is made whole only one step at a time, inside the reverse pass,
never as ``[B, T, ...state]`` per layer (Mamba-2's state is ``[24, 64, 128]`` a step, 400 MB
a layer at T = 512 for each copy). Two cotangents share that reverse pass (``jax.vmap`` of one VJP): the
weights of the model's loss L = Σ_p w_p ℓ_p, and a one-hot at one position p, whose gradient
over the embeddings is that prediction's connectivity to the earlier tokens.

The losses, as the reference libraries define them:

* a language model: ℓ_p = mean over the batch of −log softmax(logits_p)[token_{p+1}],
  p < T − 1, and w_p = 1 / (T − 1) (transformers' loss with ``labels=input_ids``);
* a stack without a head: ℓ_p = ½ Σ_b ‖y_{b,p}‖², w = e_{T−1} (the bare cells' ``last`` loss).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.engine.blocks import Probes
from rnnviz.engine.norms import robust_norm


class ModelGrads(NamedTuple):
    """What one reverse pass through a whole model gives.

    Attributes:
        loss: ``[]`` the model's loss L.
        stream: ``[2, L + 1, T]`` ‖∂·/∂x_t^{(l)}‖ over the batch and features, for L (row 0)
            and for the one position's loss (row 1).
        states: one entry per layer: ``{leaf: [2, T]}`` ‖∂·/∂state_t‖ per state leaf over the
            batch and the leaf's units, or None for a layer without recurrent state.
    """

    loss: jax.Array
    stream: jax.Array
    states: tuple[Any, ...]


def zero_probes(
    module: ModuleType, spec: Any, inputs: jax.Array, widths: tuple[int, ...], dtype: Any = jnp.float32
) -> Probes:
    """All-zero probes in ``dtype`` for ``inputs`` ``[B, T, …]``: the stream's ``[B, T, D_l]``
    (``widths`` the L + 1 stream widths) and a norm probe ``[B, T]`` per state leaf."""
    batch, steps = inputs.shape[:2]
    stream = tuple(jnp.zeros((batch, steps, w), dtype) for w in widths)
    shapes = module.state_shapes(spec, batch, steps)
    states = tuple(
        None if s is None else jax.tree.map(lambda a: jnp.zeros(a.shape[:2], dtype), s) for s in shapes
    )
    return Probes(stream, states)


def position_losses(module: ModuleType, spec: Any, params: Any, inputs: jax.Array, probes: Probes):
    """ℓ_p ``[P]`` and the model loss's weights w ``[P]`` (module docstring), in the probes' dtype."""
    out = module.forward(spec, params, inputs, probes).astype(probes.stream[0].dtype)
    if spec.vocab_size:
        logp = jax.nn.log_softmax(out[:, :-1], axis=-1)
        nll = -jnp.take_along_axis(logp, inputs[:, 1:, None], axis=-1)[..., 0]
        losses = jnp.mean(nll, axis=0)
        return losses, jnp.full(losses.shape, 1.0 / losses.shape[0], losses.dtype)
    losses = 0.5 * jnp.sum(out * out, axis=(0, 2))
    return losses, jax.nn.one_hot(losses.shape[0] - 1, losses.shape[0], dtype=losses.dtype)


def _norms(tree: Any) -> Any:
    """Per-step norms ``[2, T]`` of gradients ``[2, B, T, …]`` over the batch and units (of a
    norm probe's ``[2, B, T]``, the per-example norms: over the batch)."""
    return jax.tree.map(lambda g: robust_norm(jnp.moveaxis(g, 2, 1), axis=tuple(range(2, g.ndim))), tree)


def model_gradients(
    module: ModuleType,
    spec: Any,
    widths: tuple[int, ...],
    dtype: Any,
    params: Any,
    inputs: jax.Array,
    position: jax.Array,
    *,
    shared: bool = False,
) -> ModelGrads:
    """The loss and the per-step gradient norms of every layer and recurrent state.

    Args:
        module: the block family (:data:`~rnnviz.engine.blocks.registry.BLOCKS`).
        spec: its sizes (hashable: static under ``jax.jit``).
        widths: the L + 1 widths of the residual stream's rows (static).
        dtype: the probes', the loss's and the norms' dtype (static): float32, or float64 for
            the pass that reaches below float32's range (the weights cast to it as well).
        params: ``{name: array}`` as the checkpoint names them.
        inputs: ``<int32>[B, T]`` tokens, or ``<float32>[B, T, I]`` for a stack.
        position: ``[]`` int, the position p whose own loss ℓ_p is differentiated too.
        shared: (static) the caller knows that ℓ_p's weights are the model's own (a stack's
            loss reads its last position, and p is that one): one reverse pass serves both
            rows, where two would repeat the same work.

    Returns:
        :class:`ModelGrads`.
    """
    probes = zero_probes(module, spec, inputs, widths, dtype)
    losses_of = lambda p: position_losses(module, spec, params, inputs, p)  # noqa: E731
    losses, vjp, weights = jax.vjp(losses_of, probes, has_aux=True)
    if shared:
        (grads,) = vjp(weights)
        grads = jax.tree.map(lambda g: g[None], grads)  # the rows' axis, of one
        twice = lambda tree: jax.tree.map(lambda n: jnp.concatenate([n, n]), tree)  # noqa: E731
        stream, states = twice(jnp.stack(_norms(grads.stream), axis=1)), twice(_norms(grads.states))
        return ModelGrads(jnp.dot(weights, losses), stream, states)
    cotangents = jnp.stack([weights, jax.nn.one_hot(position, losses.shape[0], dtype=weights.dtype)])
    (grads,) = jax.vmap(vjp)(cotangents)
    return ModelGrads(jnp.dot(weights, losses), jnp.stack(_norms(grads.stream), axis=1), _norms(grads.states))

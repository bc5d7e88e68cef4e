r"""Every layer's and every recurrent state's per-step gradient of a whole model, in one
forward and one reverse pass.

The forward pass adds zeros (:class:`~rnnviz.engine.blocks.Probes`) to the residual stream
entering each block, and puts a norm probe on each recurrent layer's state after each step
(:func:`~rnnviz.engine.blocks.probed`). Differentiating the per-position losses ℓ_p with
respect to those zeros gives ∂L/∂x_t^{(l)} and ‖∂L/∂state_t‖ (per example) for every l and t
at once: the state's gradient is made whole only one step at a time, inside the reverse pass,
never as ``[B, T, ...state]`` per layer (Mamba-2's state is ``[24, 64, 128]`` a step, 400 MB
a layer at T = 512 for each copy). That pass pulls the weights of the model's loss
L = Σ_p w_p ℓ_p. A one-hot at one position p gives that prediction's connectivity to the
earlier tokens, its gradient over the embeddings: through the same VJP (``jax.vmap`` of two
cotangents), or, for the families in :data:`OWN_CONNECTIVITY_PASS`, through a pass of its own
without the state probes; where the loss is ℓ_p itself, the one pass gives both.

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
    """What the analysis's reverse pass gives.

    Attributes:
        loss: ``[]`` the model's loss L.
        stream: ``[L + 1, T]`` ‖∂L/∂x_t^{(l)}‖ over the batch and features.
        states: one entry per layer: ``{leaf: [T]}`` ‖∂L/∂state_t‖ per state leaf over the
            batch and the leaf's units, or None for a layer without recurrent state.
        connectivity: ``[T]`` ‖∂ℓ_p/∂x_t^{(0)}‖, the one position's loss over the embeddings.
    """

    loss: jax.Array
    stream: jax.Array
    states: tuple[Any, ...]
    connectivity: jax.Array


#: The block families (their modules' names) whose connectivity takes a pass of its own: a
#: forward and a reverse pass without the state probes, cheaper for them than a second
#: cotangent through the probed pass (docs/dev/benchmarks.md, "Whole models of each design").
OWN_CONNECTIVITY_PASS = frozenset({"mamba", "mamba2"})


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
    """Per-step norms ``[T]`` of gradients ``[B, T, …]`` over the batch and units (of a norm
    probe's ``[B, T]``, the per-example norms: over the batch)."""
    return jax.tree.map(lambda g: robust_norm(jnp.moveaxis(g, 1, 0), axis=tuple(range(1, g.ndim))), tree)


def _own_connectivity(
    module: ModuleType, spec: Any, params: Any, inputs: jax.Array, probes: Probes, p: jax.Array
) -> jax.Array:
    """∂ℓ_p/∂x^{(0)} ``[B, T, D_0]`` by a forward and a reverse pass of its own, with the stream's
    probes and none on the states."""
    unprobed = Probes(probes.stream, tuple(None for _ in probes.states))

    def own_loss(x0: jax.Array) -> jax.Array:
        losses, _ = position_losses(
            module, spec, params, inputs, unprobed._replace(stream=(x0, *probes.stream[1:]))
        )
        return jnp.dot(p, losses)

    return jax.grad(own_loss)(probes.stream[0])


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
    loss = jnp.dot(weights, losses)
    if shared:
        (grads,) = vjp(weights)
        stream = jnp.stack(_norms(grads.stream))
        return ModelGrads(loss, stream, _norms(grads.states), stream[0])
    one_hot = jax.nn.one_hot(position, losses.shape[0], dtype=weights.dtype)
    if module.__name__.rsplit(".", 1)[-1] in OWN_CONNECTIVITY_PASS:
        (grads,) = vjp(weights)
        connectivity = _norms(_own_connectivity(module, spec, params, inputs, probes, one_hot))
        return ModelGrads(loss, jnp.stack(_norms(grads.stream)), _norms(grads.states), connectivity)
    (both,) = jax.vmap(vjp)(jnp.stack([weights, one_hot]))
    grads = jax.tree.map(lambda g: g[0], both)
    connectivity = _norms(both.stream[0][1])
    return ModelGrads(loss, jnp.stack(_norms(grads.stream)), _norms(grads.states), connectivity)

"""What the Mamba families share around their mixers, as transformers' ``MambaModel`` and
``Mamba2Model`` build it: the embeddings, a stack of residual blocks
``x + Mixer(RMSNorm(x))`` (the residual kept in float32 with ``residual_in_fp32``), the final
norm and the head; and the small layers those use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from rnnviz.engine.blocks import Probes, Trajectory, embedded, promoted, wide_dtype

Params = dict[str, jax.Array]
#: ``(spec, layer's params, normed stream, state probe or None) -> (out, trajectory)``.
Mixer = Callable[[Any, Params, jax.Array, Any], tuple[jax.Array, Trajectory]]
#: ``(x, weight, eps) -> normed x``.
Norm = Callable[[jax.Array, jax.Array, float], jax.Array]


def row(vector: jax.Array, ndim: int) -> jax.Array:
    """A ``[D]`` vector as ``[1, …, 1, D]`` of rank ``ndim`` (ranks are never promoted silently)."""
    return vector.reshape((1,) * (ndim - 1) + vector.shape)


def linear(x: jax.Array, weight: jax.Array, bias: jax.Array | None = None) -> jax.Array:
    """torch's ``nn.Linear``: ``x Wᵀ + b``, x ``[B, T, in]``, W ``[out, in]`` → ``[B, T, out]``
    in x's dtype, summed and biased in float32 and rounded once (as torch's bfloat16 GEMM)."""
    wide = wide_dtype(x.dtype)
    y = jnp.einsum("bti,oi->bto", x, weight.astype(x.dtype), preferred_element_type=wide)
    return (y if bias is None else y + row(bias.astype(wide), 3)).astype(x.dtype)


def layer_params(params: Params, layer: int) -> Params:
    """Layer ``layer``'s tensors, named after ``backbone.layers.{layer}.``."""
    prefix = f"backbone.layers.{layer}."
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def add_probe(x: jax.Array, probes: Probes | None, index: int) -> jax.Array:
    """The stream ``x`` plus its probe row ``index`` (unchanged without probes)."""
    return x if probes is None else x + probes.stream[index].astype(x.dtype)


def residual_block(
    spec: Any, p: Params, x: jax.Array, state_probe: Any, mixer: Mixer, norm: Norm
) -> tuple[jax.Array, Trajectory]:
    """``x + Mixer(RMSNorm(x))`` ``[B, T, H]``, the residual in float32 if ``residual_in_fp32``
    (``MambaBlock``, ``Mamba2Block``), and the mixer's trajectory."""
    weight = p["norm.weight"]
    normed = norm(x.astype(weight.dtype), weight, spec.layer_norm_epsilon)
    residual = x.astype(wide_dtype(x.dtype)) if spec.residual_in_fp32 else x
    out, trajectory = mixer(spec, p, normed, state_probe)
    dtype = promoted(residual.dtype, out.dtype)
    return residual.astype(dtype) + out.astype(dtype), trajectory


def language_model(
    spec: Any,
    params: Params,
    inputs: jax.Array,
    probes: Probes | None,
    mixer: Mixer,
    norm: Norm,
    *,
    head: bool = True,
) -> tuple[jax.Array, tuple[Trajectory, ...]]:
    """Logits ``[B, T, V]`` (float32, float64 for float64 weights) of token ids ``[B, T]``, and
    every layer's trajectory: embeddings, the blocks, ``norm_f`` and ``lm_head``, with the
    stream probes added where :class:`~rnnviz.engine.blocks.Probes` says. Float inputs
    ``[B, T, H]`` are the embeddings themselves (:func:`~rnnviz.engine.blocks.embedded`); without
    ``head``, the final norm's output ``[B, T, H]`` instead of the logits."""
    x = add_probe(embedded(params, "backbone.embeddings.weight", inputs), probes, 0)
    trajectories = []
    for layer in range(spec.num_hidden_layers):
        state_probe = None if probes is None or probes.states[layer] is None else probes.states[layer]["h"]
        x, trajectory = residual_block(spec, layer_params(params, layer), x, state_probe, mixer, norm)
        x = add_probe(x, probes, layer + 1)
        trajectories.append(trajectory)
    normed = norm(x, params["backbone.norm_f.weight"], spec.layer_norm_epsilon)
    if not head:
        return normed, tuple(trajectories)
    weight = params["lm_head.weight"]
    logits = linear(normed.astype(weight.dtype), weight).astype(wide_dtype(weight.dtype))
    return logits, tuple(trajectories)

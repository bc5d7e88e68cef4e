"""The loss of a data set's task, for the analysis: what ∂L/∂carry_t is the gradient of
when the inputs are real sequences (:class:`rnnviz.dataset.Dataset`).

A batch of B sequences is drawn from the data's training split by the seed, inside the
compiled *prepare* (the split's arrays are an argument, so a new seed never recompiles),
with a linear readout ``ŷ_t = y_t W + b`` (W ``[O, F]`` ~ N(0, 1/O), b = 0, from the seed).
The loss per kind, on time-major outputs y ``[T, B, O]`` and the mask m ``[B, T]``:

.. math::

    \\text{classification: } L = -\\frac1B \\sum_b \\log \\operatorname{softmax}(ŷ_{b,ℓ_b})[c_b],
    \\quad ℓ_b = \\textstyle\\sum_t m_{bt} \\text{ (the last real step)}

    \\text{next-step: } L = -\\frac{\\sum_{b,t} m_{bt} \\log \\operatorname{softmax}(ŷ_{bt})[y_{bt}]}{\\sum m}
    \\qquad \\text{regression: } L = \\frac{\\sum_{b,t} m_{bt} ‖ŷ_{bt} − y_{bt}‖^2}{F \\sum m}

the same functions :mod:`rnnviz.studies.tasks.data` trains with (there the readout is learned,
and the layout batch-first): :func:`class_nll`, :func:`token_nll` and :func:`squared_error`. An
``unlabelled`` data set keeps the synthetic loss on y (``½‖y_ℓ‖²`` at each sequence's last
real step for ``loss="last"``, the masked mean of ``½‖y_t‖²`` for ``"all"``). Padding
steps never enter a loss, so their gradients are true zeros.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.dataset import LOSS_PLACEMENT, Dataset

if TYPE_CHECKING:
    from rnnviz.config import RunConfig


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["inputs", "mask", "labels", "targets"],
    meta_fields=["kind", "n_out", "ragged"],
)
@dataclass(frozen=True)
class DataArrays:
    """A data set's training split as device arrays (the compiled prepare's argument).

    Attributes:
        kind: the data's kind (static: it chooses the loss).
        n_out: the readout's size F (classes, vocabulary or target features; 0 unlabelled).
        ragged: whether any sequence is padded (static: without padding the losses read
            step T and plain means, and never gather by the mask).
        inputs: ``[N, T, I]`` float32.
        mask: ``[N, T]`` bool, True for real steps.
        labels: ``[N]`` int32 (classification), else None.
        targets: ``[N, T]`` int32 tokens (next-step) or ``[N, T, F]`` float32, else None.
    """

    kind: str
    n_out: int
    ragged: bool
    inputs: Any
    mask: Any
    labels: Any = None
    targets: Any = None


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["w", "b", "labels", "targets", "mask"],
    meta_fields=["kind", "ragged"],
)
@dataclass(frozen=True)
class Objective:
    """One drawn batch's loss terms (B = batch, 1 when unbatched).

    Attributes:
        kind: the data's kind.
        ragged: whether the data have padding (see :class:`DataArrays`).
        w: ``[O, F]`` the readout's kernel (None unlabelled).
        b: ``[F]`` its bias.
        labels: ``[B]`` int32, or None.
        targets: ``[B, T]`` int32 or ``[B, T, F]`` float32, or None.
        mask: ``[B, T]`` bool.
    """

    kind: str
    ragged: bool
    w: Any
    b: Any
    labels: Any
    targets: Any
    mask: Any = field(default=None)


class DataSpec(NamedTuple):
    """Hashable shapes of a :class:`DataArrays` (part of the executables' cache key); the
    tree definition holds its static fields (kind, readout size, whether it is ragged)."""

    leaves: tuple[tuple[tuple[int, ...], str], ...]
    treedef: Any

    def shapes(self) -> DataArrays:
        """ShapeDtypeStruct stand-ins to compile against."""
        return jax.tree.unflatten(self.treedef, [jax.ShapeDtypeStruct(s, d) for s, d in self.leaves])


def data_spec(data: DataArrays) -> DataSpec:
    """The :class:`DataSpec` of ``data``: each leaf's ``(shape, dtype name)`` and the tree definition."""
    leaves, treedef = jax.tree.flatten(data)
    return DataSpec(tuple((tuple(x.shape), str(x.dtype)) for x in leaves), treedef)


@functools.lru_cache(maxsize=4)
def data_arrays(ds: Dataset) -> DataArrays:
    """The training split of ``ds`` as :class:`DataArrays` (host arrays, cached per data set)."""
    idx = ds.train if ds.train.size else np.arange(ds.n_sequences)
    labels = None if ds.labels is None else np.asarray(ds.labels[idx], np.int32)
    targets = None
    if ds.kind == "next-step":
        targets = np.asarray(ds.targets[idx], np.int32)
    elif ds.kind == "regression":
        targets = np.asarray(ds.targets[idx], np.float32)
    n_out = {
        "classification": ds.n_classes or 0,
        "next-step": ds.n_classes or 0,
        "regression": 0 if ds.targets is None else int(ds.targets.shape[-1]),
    }.get(ds.kind, 0)
    mask = np.asarray(ds.mask[idx])
    return DataArrays(
        ds.kind,
        int(n_out),
        bool(not mask.all()),
        np.asarray(ds.inputs[idx], np.float32),
        mask,
        labels,
        targets,
    )


def draw_batch(
    cfg: RunConfig, out_size: int, key: jax.Array, data: DataArrays
) -> tuple[jax.Array, Objective]:
    """B sequences of ``data`` drawn by ``key`` (distinct when there are at least B)
    and a readout ``[out_size, F]`` from the same key: ``(xs [(B,) T, I], Objective)``."""
    k_index, k_readout = jax.random.split(key)
    n = data.inputs.shape[0]
    b = cfg.batch_size or 1
    if n >= b:
        # B distinct sequences, uniformly: the indices of the B largest of N uniform draws
        # (O(N); jax.random.choice without replacement sorts a permutation of all N: far slower).
        index = jax.lax.top_k(jax.random.uniform(k_index, (n,)), b)[1]
    else:
        index = jax.random.randint(k_index, (b,), 0, n)
    xs = data.inputs[index].astype(jnp.dtype(cfg.dtype))
    if cfg.batch_size is None:
        xs = xs[0]
    take = functools.partial(jax.tree.map, lambda a: a[index])
    w = bias = None
    if data.kind in LOSS_PLACEMENT:
        w = jax.random.normal(k_readout, (out_size, data.n_out), jnp.float32) / math.sqrt(out_size)
        bias = jnp.zeros((data.n_out,), jnp.float32)
    objective = Objective(
        data.kind, data.ragged, w, bias, take(data.labels), take(data.targets), data.mask[index]
    )
    return xs, objective


def _readout(obj: Objective, y: jax.Array) -> jax.Array:
    out = y @ obj.w
    return out + jnp.broadcast_to(obj.b, out.shape)


# ---- the losses of a data set's kind: one implementation for the analysis and for training ----
# Each takes the readout's outputs in either layout (time-major [T, B, F] here, batch-first
# [B, T, F] in rnnviz.studies.tasks.data) with the mask in the same layout.


def at_step(y: jax.Array, step: jax.Array, time_axis: int) -> jax.Array:
    """``[B, F]``: each sequence's output at its own step (``step`` ``[B]`` int), as a one-hot
    product (a gather and its transposed scatter cost more than the whole loss on CPU).

    Args:
        y: ``[T, B, F]`` (``time_axis=0``) or ``[B, T, F]`` (``time_axis=1``).
        step: ``[B]`` the step of each sequence.
        time_axis: where T sits in ``y``.
    """
    at = jax.nn.one_hot(step, y.shape[time_axis], dtype=y.dtype)  # [B, T]
    return jnp.einsum("bt,tbo->bo" if time_axis == 0 else "bt,bto->bo", at, y)


def picked(logp: jax.Array, labels: jax.Array) -> jax.Array:
    """``logp[..., labels]`` as a one-hot product: a fused multiply-add where a gather and
    its transposed scatter cost more than the whole loss on CPU."""
    return jnp.sum(logp * jax.nn.one_hot(labels, logp.shape[-1], dtype=logp.dtype), axis=-1)


def masked_mean(values: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Mean of ``values`` over the real steps (``mask`` of the same shape; None: all real)."""
    if mask is None:
        return jnp.mean(values)
    return jnp.sum(jnp.where(mask, values, 0.0)) / jnp.maximum(jnp.sum(mask, dtype=jnp.float32), 1.0)


def class_nll(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Cross-entropy of ``logits`` ``[B, C]`` against ``labels`` ``[B]``:
    L = −mean_b log softmax(ŷ_b)[c_b]."""
    return -jnp.mean(picked(jax.nn.log_softmax(logits, axis=-1), labels))


def token_nll(logits: jax.Array, tokens: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Cross-entropy of the next token at every real step, in nats:
    L = −Σ m log softmax(ŷ)[y] / Σ m (``logits`` ``[..., V]``, ``tokens`` and ``mask`` ``[...]``)."""
    return -masked_mean(picked(jax.nn.log_softmax(logits, axis=-1), tokens), mask)


def squared_error(pred: jax.Array, target: jax.Array, mask: jax.Array | None) -> jax.Array:
    """Squared error averaged over outputs, then over the real steps:
    L = Σ m ‖ŷ − y‖² / (F Σ m) (``pred``, ``target`` ``[..., F]``, ``mask`` ``[...]``)."""
    err = pred - target
    return masked_mean(jnp.mean(err * err, axis=-1), mask)


def _last_real(obj: Objective, y: jax.Array) -> jax.Array:
    """``[B, O]``: each sequence's output at its last real step (y ``[T, B, O]``)."""
    if not obj.ragged:
        return y[-1]
    return at_step(y, jnp.maximum(jnp.sum(obj.mask, axis=1) - 1, 0), time_axis=0)


def _step_mask(obj: Objective) -> jax.Array | None:
    """The mask in the outputs' time-major layout ``[T, B]``; None without padding."""
    return obj.mask.T if obj.ragged else None


def _classification(cfg: RunConfig, obj: Objective, y: jax.Array) -> jax.Array:
    return class_nll(_readout(obj, _last_real(obj, y)), obj.labels)


def _next_step(cfg: RunConfig, obj: Objective, y: jax.Array) -> jax.Array:
    return token_nll(_readout(obj, y), obj.targets.T, _step_mask(obj))


def _regression(cfg: RunConfig, obj: Objective, y: jax.Array) -> jax.Array:
    return squared_error(_readout(obj, y), jnp.swapaxes(obj.targets, 0, 1), _step_mask(obj))


def _unlabelled(cfg: RunConfig, obj: Objective, y: jax.Array) -> jax.Array:
    if cfg.loss == "last":
        h = _last_real(obj, y)
        return 0.5 * jnp.sum(h * h)
    return 0.5 * masked_mean(jnp.sum(y * y, axis=-1), _step_mask(obj)) * obj.mask.shape[0]


#: The loss of each kind, ``(cfg, objective, y [T, B, O] float32, time-major) -> L``.
LOSSES = {
    "classification": _classification,
    "next-step": _next_step,
    "regression": _regression,
    "unlabelled": _unlabelled,
}


def objective_loss(cfg: RunConfig, obj: Objective, hs: jax.Array) -> jax.Array:
    """The data's loss of the outputs ``hs`` ``[T, (B,) O]`` (time-major, every step)."""
    y = hs.astype(jnp.float32)
    return LOSSES[obj.kind](cfg, obj, y[:, None] if cfg.batch_size is None else y)

r"""A reference block trained (``RunConfig(block="reference")``), as pure functions with the
signatures of :mod:`rnnviz.studies.training.model`'s, so that the same compiled, chunked,
vmapped loop (:mod:`rnnviz.studies.training.loop`) trains it.

The model is the config's design as its reference builds it (:func:`~rnnviz.studies.block_models.block_spec`):
inputs ``[B, T, I]`` projected to D, ``layers`` of the design's blocks and its final norm,
and the readout to the task's outputs, drawn from the seed's parameter key as
:func:`~rnnviz.studies.block_models.block_model` draws it (the readout then has the task's
O outputs instead of H). The task reads the readout's last ``outputs_read`` positions, as
a bare cell's Dense readout reads its last outputs; the optimiser's step is the cells'
(:func:`~rnnviz.studies.training.model.optimise`: global-norm clipping, a run frozen at a
non-finite value).

At each log step the profile on the probe batch is

.. math::
    \big\|∂L/∂x_t\big\|, \quad t = 1 … T

over the batch and the input features: how much the task loss reads each input (a bare
cell's profile is over its T + 1 carries instead); and the ``recurrent_grad`` is
‖∂L/∂θ‖ over every tensor of the design's blocks (not the input projection or the readout).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.engine.blocks import vectors
from rnnviz.engine.norms import Scaled, robust_norm
from rnnviz.studies.block_models import block_spec
from rnnviz.studies.tasks.synthetic import Task, get_task
from rnnviz.studies.training.model import (
    PROBE_BATCH,
    PROBE_SALT,
    TRAIN_SALT,
    ChunkOut,
    Hyper,
    TrainSpec,
    TrainState,
    optimise,
    optimizer_for,
)

if TYPE_CHECKING:
    from rnnviz.config import RunConfig
    from rnnviz.engine.prepare import Values

#: The tensors around the design's blocks: the profile's ‖∂L/∂θ‖ leaves them out.
ENDS = ("input_proj.", "readout.")


def model_spec(static: RunConfig, task: Task) -> tuple[vectors.VectorSpec, Any]:
    """The trained model's spec (its readout to the task's outputs) and initialisation settings."""
    return block_spec(static, output_size=task.out_features)


def init_state(static: RunConfig, spec: TrainSpec, key_data: jax.Array, values: Values) -> TrainState:
    """The design drawn from the seed's parameter key (as :func:`~rnnviz.studies.block_models.block_model`
    draws it) and the optimiser's state. ``values`` are unused: a reference block fixes them."""
    del values
    vspec, settings = model_spec(static, get_task(spec.task))
    key = jax.random.split(jax.random.wrap_key_data(key_data), 3)[0]  # the bare cell's parameter key
    params = vectors.init_params(vspec, key, dtype=static.dtype, settings=settings)
    return TrainState(params, optimizer_for(spec.optimizer, 1.0).init(params), jnp.bool_(True))


def task_loss(static: RunConfig, task: Task, params, inputs: jax.Array, targets: Any):
    """``(L, predictions)`` of the task on one batch: the readout's last ``outputs_read``
    positions (``[B, F]`` for one, ``[B, n, F]`` for n) of inputs ``[B, T, I]``."""
    vspec, _ = model_spec(static, task)
    x = inputs.astype(jnp.dtype(static.dtype))
    out = vectors.forward(vspec, params, x, chunked=True).astype(jnp.float32)
    pred = out[:, -task.outputs_read :]
    pred = pred[:, 0] if task.outputs_read == 1 else pred
    return task.loss_fn(static.seq_len)(pred, targets), pred


def probe_profile(static: RunConfig, task: Task, params, probe) -> tuple[Scaled, jax.Array]:
    """``(‖∂L/∂x_t‖ [T], ‖∂L/∂θ_blocks‖)`` of the task loss on the probe batch, in one reverse pass."""
    inputs = probe.inputs.astype(jnp.float32)

    def loss(p, x):
        return task_loss(static, task, p, x, probe.targets)[0]

    g_params, g_inputs = jax.grad(loss, argnums=(0, 1))(params, inputs)
    per_step = robust_norm(jnp.swapaxes(g_inputs, 0, 1), axis=(1, 2))  # [T]
    blocks = [g for name, g in g_params.items() if not name.startswith(ENDS)]
    w_norm = robust_norm(jnp.concatenate([g.astype(jnp.float32).reshape(-1) for g in blocks]), 0)
    return Scaled(per_step, jnp.zeros(per_step.shape, jnp.int32)), w_norm


def held_out(static: RunConfig, task: Task, params, key_data: jax.Array):
    """``(loss, metric)`` on the task's held-out sequences with the current params."""
    data = task.held_out_batch(jax.random.wrap_key_data(key_data), 0, static.seq_len, 0)
    loss, pred = task_loss(static, task, params, data.inputs, data.targets)
    return loss, task.metric_fn()(pred, data.targets)


def block_connectivity(
    cfg: RunConfig, tensors: dict[str, Any], inputs: np.ndarray, target: int, step: int
) -> np.ndarray:
    r"""How much a trained block's prediction at step τ reads each input of one sequence:

    .. math::
        c_t = \big\|∂ \log p_τ(\mathrm{target}) / ∂x_t\big\|, \quad t = 1 … T

    (0 after τ), a bare cell's ``target`` measure (:func:`rnnviz.studies.connectivity.connectivity`).

    Args:
        cfg: the trained run's config (a reference block).
        tensors: its tensors by name (:meth:`~rnnviz.base.training.Training.tensors`); the
            readout's outputs are the classes or the vocabulary.
        inputs: ``[T, I]`` the sequence.
        target: the class (or next token) whose log-probability is read.
        step: τ, 1 … T.

    Returns:
        ``[T]`` log₁₀ c_t (−inf for a true zero), float64.
    """
    out = int(np.shape(tensors["readout.bias"])[0])
    grads = _connectivity_grads(cfg, out)(
        tensors, jnp.asarray(inputs, jnp.float32)[None], jnp.int32(target), jnp.int32(step - 1)
    )
    with np.errstate(divide="ignore"):
        return np.log10(np.asarray(grads, np.float64))


@functools.lru_cache(maxsize=8)
def _connectivity_grads(cfg: RunConfig, output_size: int):
    """The jitted ``(tensors, x [1, T, I], target, τ − 1) -> c [T]`` of one config and readout size."""
    spec, _ = block_spec(cfg, output_size=output_size)

    def log_p(x, tensors, target, position):
        logits = vectors.forward(spec, tensors, x.astype(jnp.dtype(cfg.dtype)))[0, position]
        return jax.nn.log_softmax(logits.astype(jnp.float32))[target]

    def per_step(tensors, x, target, position):
        g = jax.grad(log_p)(x, tensors, target, position)[0]  # [T, I]
        return robust_norm(g, axis=1)

    return jax.jit(per_step)


def run_chunk(
    static: RunConfig,
    spec: TrainSpec,
    state: TrainState,
    key_data: jax.Array,
    values: Values,
    hyper: Hyper,
    start: jax.Array,
) -> tuple[TrainState, ChunkOut]:
    """``spec.chunk`` steps from step ``start`` after the probe profile (then, for a data set,
    the held-out evaluation): :func:`rnnviz.studies.training.model.run_chunk`'s contract."""
    del values
    task = get_task(spec.task)
    root = jax.random.wrap_key_data(key_data)
    probe = task.probe_batch(jax.random.fold_in(root, PROBE_SALT), PROBE_BATCH, static.seq_len, spec.lag)
    profile, w_grad = probe_profile(static, task, state.params, probe)
    kept = state.params
    train_key = jax.random.fold_in(root, TRAIN_SALT)
    opt = optimizer_for(spec.optimizer, hyper.learning_rate)
    metric_fn = task.metric_fn()

    def step(st: TrainState, step_index):
        data = task.batch(
            jax.random.fold_in(train_key, step_index), static.batch_size, static.seq_len, spec.lag
        )
        loss_fn = lambda p: task_loss(static, task, p, data.inputs, data.targets)  # noqa: E731
        return optimise(st, loss_fn, opt, hyper, lambda pred: metric_fn(pred, data.targets))

    state, (loss, metric, gnorm, clipped) = jax.lax.scan(step, state, start + jnp.arange(spec.chunk))
    held = (None, None)
    if task.held_out is not None:
        held = held_out(static, task, state.params, key_data)
    return state, ChunkOut(loss, metric, gnorm, clipped, profile, w_grad, *held, params=kept)


__all__ = [
    "ENDS",
    "block_connectivity",
    "held_out",
    "init_state",
    "model_spec",
    "probe_profile",
    "run_chunk",
    "task_loss",
]

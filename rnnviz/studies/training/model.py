"""The trained model and its loss, as pure functions (jitted by :mod:`rnnviz.studies.training.loop`).

The model is the configured cell exactly as :func:`rnnviz.engine.prepare.prepare_params` builds
it for :func:`rnnviz.analyze` (gain, forget bias, carry initialisation incl. a learned
carry, dtype) plus an ``nn.Dense`` readout on the task's last outputs (:mod:`rnnviz.studies.tasks.synthetic`).
One optimisation step (:func:`step_fn`) draws a fresh batch from
``fold_in(key(seed), step)``, clips by global norm (Pascanu et al. 2013:
g ← g · min(1, c/‖g‖)) and freezes the run at a non-finite loss or gradient;
:func:`run_chunk` runs ``log_every`` steps in a ``lax.scan`` after recording the probe
profile ‖∂L/∂carry_t‖ (:func:`probe_profile`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from rnnviz.base.train_settings import OPTIMIZERS
from rnnviz.config import (
    RunConfig,
)
from rnnviz.engine.cells import cell_spec, make_cell, outputs
from rnnviz.engine.gradients import full_carry0
from rnnviz.engine.logpass import log_carry_gradients, reduce_log_norms
from rnnviz.engine.norms import robust_norm
from rnnviz.engine.prepare import Values, prepare_params
from rnnviz.engine.rollout import rollout
from rnnviz.engine.strategies.registry import ForwardPass, strategy
from rnnviz.studies.tasks.synthetic import Task, get_task

SGD_MOMENTUM = 0.9


PROBE_BATCH = 32


TRAIN_SALT, PROBE_SALT, READOUT_SALT = 0x7A1, 0x7A2, 0x7A3


class TrainSpec(NamedTuple):
    """The static part of a training run (part of the compile key)."""

    task: str
    lag: int
    optimizer: str
    chunk: int  # steps per compiled call (= log_every)


class Hyper(NamedTuple):
    """Traced training values: the learning rate and the clip threshold (inf: no clipping)."""

    learning_rate: Any
    clip: Any


class TrainState(NamedTuple):
    """What one run carries from step to step (vmapped over N runs, every leaf gains a leading ``[N]``).

    Attributes:
        params: ``{"cell": …, "readout": …}``, plus ``"carry"`` for a learned initial carry.
        opt_state: the optimiser's state (:func:`optimizer_for`).
        alive: bool: no non-finite loss or gradient seen yet (the run is frozen once it is False).
    """

    params: Any  # {"cell": …, "readout": …, ("carry": learned initial carry)}
    opt_state: Any
    alive: Any  # bool: no non-finite value seen yet


class ChunkOut(NamedTuple):
    """Per step ``[chunk]``: loss, metric, global grad norm (before clipping), clipped;
    at the chunk's start: the probe profile as log₁₀ ``[T+1]`` and log₁₀ ‖∂L/∂W_h‖; at its
    end, for a data set's task, the loss and metric on its held-out sequences (else None);
    the params at the chunk's start (the weights kept at each log step)."""

    loss: Any
    metric: Any
    grad_norm: Any
    clipped: Any
    profile: Any
    recurrent_grad: Any
    held_out_loss: Any = None
    held_out_metric: Any = None
    params: Any = None


def optimizer_for(name: str, learning_rate) -> optax.GradientTransformation:
    """``optax.adam(learning_rate)`` for ``"adam"``, else SGD with momentum :data:`SGD_MOMENTUM`."""
    if name == "adam":
        return optax.adam(learning_rate)
    return optax.sgd(learning_rate, momentum=SGD_MOMENTUM)


def readout_for(task: Task) -> nn.Dense:
    """The task's readout: a float32 ``nn.Dense`` to ``task.out_features`` per output read."""
    return nn.Dense(task.out_features, dtype=jnp.float32, param_dtype=jnp.float32)


def init_state(static: RunConfig, spec: TrainSpec, key_data: jax.Array, values: Values) -> TrainState:
    """Params exactly as :func:`rnnviz.analyze` builds them for the same config and seed, plus
    a readout from its own key; the optimiser's state (its learning rate does not enter it)."""
    task = get_task(spec.task)
    cell_params, carry0 = prepare_params(static, key_data, values)
    xs = jnp.zeros((static.batch_size, 1, task.input_size), jnp.dtype(static.dtype))
    out_dim = jax.eval_shape(
        lambda: task_outputs(static, {"cell": cell_params}, full_carry0(static, carry0), xs)
    ).shape[-1]
    key = jax.random.fold_in(jax.random.wrap_key_data(key_data), READOUT_SALT)
    readout = readout_for(task).init(key, jnp.zeros((1, out_dim), jnp.float32))["params"]
    params = {"cell": cell_params, "readout": readout}
    if static.carry_init == "learned":
        params["carry"] = carry0
    return TrainState(params, optimizer_for(spec.optimizer, 1.0).init(params), jnp.bool_(True))


def task_outputs(static: RunConfig, params, carry0, xs, eps=None):
    """The outputs ``y [T, B, O]`` of the cell over batch-first ``xs`` ``[B, T, I]``; with
    ``eps`` (carry-shaped ``[T+1, …]``) through :func:`rnnviz.engine.rollout.rollout`'s
    zero-perturbation path, else (the training step's forward: nothing added) through the
    config's strategy (``fused``: the custom VJP with its deferred weight GEMMs; a strategy
    that differentiates per-step copies of the params trains with the plain scan)."""
    cell = make_cell(static)
    xs_tm = jnp.swapaxes(xs, 0, 1)
    strat = strategy(static.strategy)
    if eps is not None or strat.param_lift.stacked:
        return outputs(static, params["cell"], rollout(cell, params["cell"], carry0, xs_tm, eps), xs_tm)
    carries = strat.rollout(ForwardPass(static, cell, params["cell"], carry0, xs_tm))
    return outputs(static, params["cell"], carries, xs_tm)


def batch_carry0(static: RunConfig, params, carry0_fixed, batch: int):
    """The batch's initial carry: the learned one (a parameter) or the configured one."""
    if "carry" in params:
        return jax.tree.map(lambda c: jnp.broadcast_to(c, (batch,) + c.shape), params["carry"])
    return carry0_fixed


def predictions(task: Task, params, ys: jax.Array) -> jax.Array:
    """The readout on the last ``task.outputs_read`` outputs: ``[B, n, F]`` (``[B, F]`` for n = 1)."""
    read = jnp.swapaxes(ys[-task.outputs_read :], 0, 1).astype(jnp.float32)  # [B, n, O]
    pred = readout_for(task).apply({"params": params["readout"]}, read)
    return pred[:, 0] if task.outputs_read == 1 else pred


def task_loss(static: RunConfig, task: Task, params, carry0, inputs, targets, eps=None):
    """``(L, predictions)`` of the task on one batch (inputs ``[B, T, I]``)."""
    ys = task_outputs(static, params, carry0, inputs.astype(jnp.dtype(static.dtype)), eps)
    pred = predictions(task, params, ys)
    return task.loss_fn(static.seq_len)(pred, targets), pred


def fixed_carry0(static: RunConfig, key_data: jax.Array, values: Values, batch: int):
    """The configured (not learned) initial carry for ``batch`` examples, from the seed's
    carry key as in :func:`rnnviz.engine.prepare.prepare_params`."""
    cfg = static.replace(batch_size=batch)
    _, carry0 = prepare_params(cfg, key_data, values)
    return full_carry0(cfg, carry0)


def probe_profile(static: RunConfig, task: Task, params, carry0, probe):
    """``(Scaled [T+1], [])``: ‖∂L/∂carry_t‖ (exact: the log-magnitude pass with the task
    loss's direct terms) and ‖∂L/∂W_h‖ on the probe batch."""
    cell = make_cell(static)
    xs_tm = jnp.swapaxes(probe.inputs.astype(jnp.dtype(static.dtype)), 0, 1)
    carries = rollout(cell, params["cell"], carry0, xs_tm)

    def loss_of_carries(cs):
        ys = outputs(static, params["cell"], cs, xs_tm)
        return task.loss_fn(static.seq_len)(predictions(task, params, ys), probe.targets)

    direct = jax.grad(loss_of_carries)(carries)
    _, _, total = reduce_log_norms(
        log_carry_gradients(static, cell, params["cell"], carries, xs_tm, direct=direct)
    )
    grads = jax.grad(lambda p: task_loss(static, task, p, carry0, probe.inputs, probe.targets)[0])(params)
    recurrent = [
        leaf
        for path, leaf in jax.tree_util.tree_leaves_with_path(grads["cell"])
        if cell_spec(static.cell).params.recurrent(tuple(k.key for k in path))
    ]
    w_norm = (
        robust_norm(jnp.concatenate([r.astype(jnp.float32).reshape(-1) for r in recurrent]), 0)
        if recurrent
        else jnp.float32(0)
    )
    return total, w_norm


def step_fn(
    static: RunConfig, spec: TrainSpec, key_data: jax.Array, values: Values, hyper: Hyper, carry0=None
):
    """``(state, step_index) -> (state, (loss, metric, grad_norm, clipped))``: one
    optimisation step on the batch drawn for ``step_index`` (a frozen state once a
    non-finite value was seen; its records are then NaN)."""
    task = get_task(spec.task)
    batch = static.batch_size
    root = jax.random.wrap_key_data(key_data)
    if carry0 is None:
        carry0 = fixed_carry0(static, key_data, values, batch)
    train_key = jax.random.fold_in(root, TRAIN_SALT)
    opt = optimizer_for(spec.optimizer, hyper.learning_rate)
    metric_fn = task.metric_fn()

    def step(st: TrainState, step_index):
        data = task.batch(jax.random.fold_in(train_key, step_index), batch, static.seq_len, spec.lag)

        def loss_fn(p):
            return task_loss(
                static, task, p, batch_carry0(static, p, carry0, batch), data.inputs, data.targets
            )

        return optimise(st, loss_fn, opt, hyper, lambda pred: metric_fn(pred, data.targets))

    return step


def optimise(
    st: TrainState,
    loss_fn: Callable[[Any], tuple[jax.Array, jax.Array]],
    opt: optax.GradientTransformation,
    hyper: Hyper,
    metric_of: Callable[[jax.Array], jax.Array],
) -> tuple[TrainState, tuple[jax.Array, jax.Array, jax.Array, jax.Array]]:
    """One optimisation step of any trained model: ``loss_fn(params) -> (L, predictions)``
    differentiated, clipped by global norm, applied by ``opt``; the state frozen at a
    non-finite loss or gradient. Returns the new state and ``(loss, metric, grad_norm,
    clipped)`` (NaN, and False, once the run is frozen)."""
    (loss, pred), grads = jax.value_and_grad(loss_fn, has_aux=True)(st.params)
    gnorm = optax.tree.norm(grads)
    clipped = gnorm > hyper.clip
    scale = jnp.where(clipped, hyper.clip / gnorm, jnp.float32(1.0))
    grads = jax.tree.map(lambda g: (g * scale).astype(g.dtype), grads)
    with jax.numpy_dtype_promotion("standard"):  # optax mixes Python floats with its int32 step count
        updates, opt_state = opt.update(grads, st.opt_state, st.params)
        params = optax.apply_updates(st.params, updates)
    ok = st.alive & jnp.isfinite(loss) & jnp.isfinite(gnorm)
    keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)  # noqa: E731
    new = TrainState(keep(params, st.params), keep(opt_state, st.opt_state), ok)
    nan = jnp.float32(jnp.nan)
    rec = (
        jnp.where(st.alive, loss, nan),
        jnp.where(st.alive, metric_of(pred), nan),
        jnp.where(st.alive, gnorm, nan),
        clipped & st.alive,
    )
    return new, rec


def run_chunk(
    static: RunConfig,
    spec: TrainSpec,
    state: TrainState,
    key_data: jax.Array,
    values: Values,
    hyper: Hyper,
    start: jax.Array,
) -> tuple[TrainState, ChunkOut]:
    """``spec.chunk`` steps from step ``start``, after recording the probe profile (and, for
    a data set, followed by the held-out evaluation)."""
    task = get_task(spec.task)
    batch = static.batch_size
    root = jax.random.wrap_key_data(key_data)
    carry0 = fixed_carry0(static, key_data, values, batch)
    probe = task.probe_batch(jax.random.fold_in(root, PROBE_SALT), PROBE_BATCH, static.seq_len, spec.lag)
    probe_carry0 = batch_carry0(
        static, state.params, fixed_carry0(static, key_data, values, PROBE_BATCH), PROBE_BATCH
    )
    profile, w_grad = probe_profile(static, task, state.params, probe_carry0, probe)
    kept = state.params  # the weights the profile was taken at (the state itself is donated)
    step = step_fn(static, spec, key_data, values, hyper, carry0)
    state, (loss, metric, gnorm, clipped) = jax.lax.scan(step, state, start + jnp.arange(spec.chunk))
    held = (None, None)
    if task.held_out is not None:  # a data set: its test split, after this chunk's steps
        held = held_out(static, task, state.params, key_data, values)
    return state, ChunkOut(loss, metric, gnorm, clipped, profile, w_grad, *held, params=kept)


def held_out(static: RunConfig, task: Task, params, key_data: jax.Array, values: Values):
    """``(loss, metric)`` on the task's held-out sequences (a data set's test split) with
    the current params; the initial carry is the configured one for that many sequences."""
    data = task.held_out_batch(jax.random.wrap_key_data(key_data), 0, static.seq_len, 0)
    n = jax.tree.leaves(data.inputs)[0].shape[0]
    carry0 = batch_carry0(static, params, fixed_carry0(static, key_data, values, n), n)
    loss, pred = task_loss(static, task, params, carry0, data.inputs, data.targets)
    return loss, task.metric_fn()(pred, data.targets)


__all__ = [
    "OPTIMIZERS",
    "PROBE_BATCH",
    "PROBE_SALT",
    "READOUT_SALT",
    "SGD_MOMENTUM",
    "TRAIN_SALT",
    "ChunkOut",
    "Hyper",
    "TrainSpec",
    "TrainState",
    "batch_carry0",
    "fixed_carry0",
    "held_out",
    "init_state",
    "optimise",
    "optimizer_for",
    "predictions",
    "probe_profile",
    "readout_for",
    "run_chunk",
    "step_fn",
    "task_loss",
    "task_outputs",
]

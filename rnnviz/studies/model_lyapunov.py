r"""The top Lyapunov exponent λ₁ of every recurrent layer of a model, along one example's run.

For recurrent layer l with its state flattened (as :mod:`rnnviz.studies.model_jacobians`
flattens it) and J_t = ∂s_t/∂s_{t−1} its step Jacobian holding the layer's input fixed, a unit
vector carried through the steps (Benettin et al. 1980),

.. math::
    w_t = J_t v_{t−1},\qquad r_t = ‖w_t‖,\qquad v_t = w_t / r_t,

has ∑_{t ≤ n} ln r_t = ln ‖J_n ⋯ J_1 v_0‖: the log of how far the product of the layer's
Jacobians stretches v_0. After a warm-up, in which v_t turns toward the most stretched
direction, the mean

.. math::
    λ_1 = \frac{1}{n − w} \sum_{t = w + 1}^{n} \ln r_t

is the layer's top exponent over the run: > 0, a perturbation of its state grows (and a
gradient through the state alone can too); < 0, every one dies out at that rate per step.
Unlike the mean of ln σ₁(J_t) (:class:`~rnnviz.base.models.ModelJacobians`), which bounds it
from above, this is the growth of the product itself. Each w_t is one JVP of the family's
``layer_step`` (:mod:`rnnviz.engine.blocks`), J_t never formed: any D, no LAPACK call, one
``lax.scan`` per layer after one forward pass.

Example:
    >>> import rnnviz
    >>> from rnnviz.studies.block_models import block_model, block_inputs
    >>> cfg = rnnviz.RunConfig(cell="gru", block="reference", layers=2, hidden_size=8, seq_len=12)
    >>> ly = model_lyapunov(block_model(cfg), block_inputs(cfg), warmup=2)
    >>> ly.layers, ly.log_growth.shape, ly.lambda1.shape   # [R, T − 1] ln r_t, [R] λ₁
    ((0, 1), (2, 11), (2,))
"""

from __future__ import annotations

import functools
import time
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.models import ModelLyapunov
from rnnviz.engine.blocks.dispatch import module_of
from rnnviz.engine.compile import Compiled, compile_cache, compile_for
from rnnviz.engine.norms import robust_norm
from rnnviz.studies.jacobians import pack
from rnnviz.studies.model_jacobians import _flat_step, recurrent_layers
from rnnviz.studies.models import Model, check_inputs

#: Seed of the start vector v_0 (generic, fixed so that a result can be reproduced).
START_SEED = 0x1A7
#: Steps left out of λ₁'s mean by default, at most half of the run.
DEFAULT_WARMUP = 20


def log_growth(module: ModuleType, spec: Any, params: Any, inputs: jax.Array) -> jax.Array:
    """ln r_t ``[R, T − 1]`` of every recurrent layer, t = 1 … T − 1 (module docstring), of one
    example ``[1, T, …]``; float32."""
    layers, units = recurrent_layers(module, spec)
    _, trajectories = module.forward(spec, params, inputs, with_states=True)
    rows = []
    for layer in layers:
        states, step_inputs = trajectories[layer]
        step = _flat_step(module, spec, params, layer, states, units)
        prev = pack(jax.tree.map(lambda a: a[0, :-1], states), units).astype(jnp.float32)  # s_0 … s_{T−2}
        xs = jax.tree.map(lambda a: a[0, 1:][:, None], step_inputs)  # inputs of steps 1 … T − 1
        v0 = jax.random.normal(jax.random.key(START_SEED), prev.shape[-1:], jnp.float32)

        def carry_on(v, at, step=step):
            s, x = at
            w = jax.jvp(lambda u: step(u, x), (s,), (v.astype(s.dtype),))[1].astype(jnp.float32)
            r = robust_norm(w)
            return w / jnp.where(r > 0, r, 1), jnp.log(r)

        _, logs = jax.lax.scan(carry_on, v0 / robust_norm(v0), (prev, xs))
        rows.append(logs)
    return jnp.stack(rows)


def _shape_key(model: Model, inputs: np.ndarray) -> tuple:
    params = tuple(sorted((name, v.shape, str(v.dtype)) for name, v in model.params.items()))
    device = next(iter(model.params.values())).devices().pop()
    return model.model_type, model.spec, params, (inputs.shape, str(inputs.dtype)), device


@compile_cache(maxsize=8, key=_shape_key)
def _executable(model_type, spec, params, shape, device) -> Compiled:
    """:func:`log_growth` compiled for one model shape."""
    fn = functools.partial(log_growth, module_of(model_type, spec), spec)
    stand_ins = {name: jax.ShapeDtypeStruct(s, jnp.dtype(d)) for name, s, d in params}
    return compile_for(fn, (stand_ins, jax.ShapeDtypeStruct(shape[0], jnp.dtype(shape[1]))), device)


def model_lyapunov(
    model: Model, inputs: Any, *, example: int = 0, warmup: int | None = None
) -> ModelLyapunov:
    """λ₁ of each recurrent layer along one example's run, in one compiled pass.

    Args:
        model: from :func:`~rnnviz.studies.models.load_model`, :func:`~rnnviz.studies.models.fresh_model`
            or :func:`~rnnviz.studies.block_models.block_model`.
        inputs: as :func:`~rnnviz.studies.models.analyze_model` reads them (``<int>[B, T]`` tokens,
            or ``<float>[B, T, I]`` for a model of vectors).
        example: which sequence of the batch.
        warmup: steps left out of the mean (None: :data:`DEFAULT_WARMUP`, at most (T − 1) // 2).

    Returns:
        :class:`~rnnviz.base.models.ModelLyapunov`.

    Raises:
        ValueError: inputs of the wrong shape, T < 3, an example or a warm-up out of range.
    """
    batch = check_inputs(model, np.atleast_2d(np.asarray(inputs)) if model.vocab_size else np.asarray(inputs))
    if not 0 <= example < batch.shape[0]:
        raise ValueError(f"example {example}; allowed: 0 … {batch.shape[0] - 1}")
    steps = batch.shape[1] - 1
    if steps < 2:
        raise ValueError(f"λ₁ needs T ≥ 3 positions; got T = {batch.shape[1]}")
    warmup = min(DEFAULT_WARMUP, steps // 2) if warmup is None else int(warmup)
    if not 0 <= warmup < steps:
        raise ValueError(f"warmup = {warmup}; allowed: 0 … {steps - 1} (T − 2)")
    one = batch[example : example + 1]
    layers, _ = recurrent_layers(module_of(model.model_type, model.spec), model.spec)
    if not layers:
        empty = np.zeros((0, steps))
        return ModelLyapunov(
            model.model_type, model.source, example, (), warmup, empty, np.zeros(0), 0.0, 0.0
        )
    key = (model, one)
    fresh = key not in _executable
    compiled = _executable(*key)
    start = time.perf_counter()
    logs = np.asarray(jax.block_until_ready(compiled.fn(model.params, one)), np.float64)
    run_s = time.perf_counter() - start
    return ModelLyapunov(
        model.model_type,
        model.source,
        int(example),
        layers,
        warmup,
        logs,
        logs[:, warmup:].mean(axis=1),
        compiled.compile_s if fresh else 0.0,
        run_s,
    )


__all__ = ["DEFAULT_WARMUP", "START_SEED", "ModelLyapunov", "log_growth", "model_lyapunov"]

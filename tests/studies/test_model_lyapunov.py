"""λ₁ of each recurrent layer (:func:`rnnviz.studies.model_lyapunov.model_lyapunov`): its per-step
log growths telescope to the log-norm of the Jacobians' product applied to v₀ (the Jacobians
formed here with ``jax.jacfwd`` and multiplied in float64), every step's growth stays under
σ₁(J_t) from the step-Jacobian SVDs, and the executable is reused for new values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz.config import RunConfig
from rnnviz.engine.blocks.dispatch import module_of
from rnnviz.studies.block_models import block_inputs, block_model
from rnnviz.studies.jacobians import pack
from rnnviz.studies.model_jacobians import _flat_step, model_jacobians, recurrent_layers
from rnnviz.studies.model_lyapunov import START_SEED, model_lyapunov


def _products(model, inputs) -> list[np.ndarray]:
    """Per recurrent layer, ln ‖J_n ⋯ J_1 v₀‖ for n = 1 … T − 1 (float64 products of jacfwd's J_t)."""
    module = module_of(model.model_type, model.spec)
    layers, units = recurrent_layers(module, model.spec)
    one = jnp.asarray(inputs[:1])
    _, trajectories = module.forward(model.spec, model.params, one, with_states=True)
    out = []
    for layer in layers:
        states, step_inputs = trajectories[layer]
        step = _flat_step(module, model.spec, model.params, layer, states, units)
        prev = pack(jax.tree.map(lambda a: a[0, :-1], states), units)
        xs = jax.tree.map(lambda a: a[0, 1:][:, None], step_inputs)
        jac = np.asarray(jax.vmap(jax.jacfwd(step))(prev, xs), np.float64)  # [T − 1, D, D]
        v = np.asarray(
            jax.random.normal(jax.random.key(START_SEED), prev.shape[-1:], jnp.float32), np.float64
        )
        v /= np.linalg.norm(v)
        logs = []
        for j in jac:
            v = j @ v
            logs.append(np.log(np.linalg.norm(v)))
        out.append(np.asarray(logs))
    return out


@pytest.mark.parametrize("cell", ["gru", "mamba", "mlstm"])
def test_log_growths_telescope_to_the_product_of_the_jacobians(cell):
    cfg = RunConfig(cell=cell, block="reference", layers=2, hidden_size=8, seq_len=14, seed=2)
    model, inputs = block_model(cfg), block_inputs(cfg)
    ly = model_lyapunov(model, inputs, warmup=3)
    products = _products(model, inputs)
    assert ly.layers == (0, 1) and ly.log_growth.shape == (2, 13)
    for row, want in zip(ly.log_growth, products):
        np.testing.assert_allclose(np.cumsum(row), want, rtol=1e-4, atol=1e-4)
    expected = [(p[-1] - p[2]) / 10 for p in products]  # steps 4 … 13 after a warm-up of 3
    np.testing.assert_allclose(ly.lambda1, expected, atol=1e-4)
    np.testing.assert_allclose(ly.running()[:, -1], ly.lambda1)


def test_each_steps_growth_is_at_most_its_largest_singular_value_and_the_executable_is_reused():
    cfg = RunConfig(cell="lstm", block="reference", layers=2, hidden_size=6, seq_len=12)
    model, inputs = block_model(cfg), block_inputs(cfg)
    ly = model_lyapunov(model, inputs, warmup=0)
    sv = model_jacobians(model, inputs, k=1, steps=np.arange(1, 12), method="exact").singular_values
    assert np.all(ly.log_growth <= np.log(sv[..., 0]) + 1e-5)
    again = model_lyapunov(block_model(cfg.replace(seed=5)), block_inputs(cfg.replace(seed=5)), warmup=0)
    assert again.compile_s == 0.0 and not np.allclose(again.log_growth, ly.log_growth)
    with pytest.raises(ValueError, match="warmup"):
        model_lyapunov(model, inputs, warmup=11)

"""model_states against a computation that shares none of its code: each recurrent layer's
``layer_step`` run in a Python loop from the zero state over the inputs its scan recorded
(exact by the Trajectory contract), its states' norms taken by NumPy in float64; an attention
layer is absent; the executable is reused when only values change."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rnnviz
from rnnviz.checkpoints.families import recurrent_gemma as rg_family
from rnnviz.engine.blocks.dispatch import module_of
from rnnviz.studies.block_models import block_inputs, block_model, block_states
from rnnviz.studies.model_states import model_states
from rnnviz.studies.models import Model

T = 10
UNITS = 5


def _looped_states(model: Model, inputs: np.ndarray) -> dict[int, dict[str, np.ndarray]]:
    """``{layer: {leaf: [B, T, n]}}``: every recurrent layer's state after each step, by its
    ``layer_step`` in a loop from zeros over what the forward pass's scan read at each step."""
    module = module_of(model.model_type, model.spec)
    batch = inputs.shape[0]
    _, trajectories = module.forward(model.spec, model.params, jnp.asarray(inputs), with_states=True)
    shapes = module.state_shapes(model.spec, batch, 1)
    out = {}
    for layer, shape in enumerate(shapes):
        if shape is None:
            assert trajectories[layer] is None
            continue
        state = {name: jnp.zeros(s.shape[:1] + s.shape[2:], s.dtype) for name, s in shape.items()}
        recorded = trajectories[layer].inputs
        steps = []
        for t in range(inputs.shape[1]):
            state = module.layer_step(
                model.spec, model.params, layer, state, jax.tree.map(lambda a: a[:, t], recorded)
            )
            steps.append({name: np.asarray(v, np.float64).reshape(batch, -1) for name, v in state.items()})
        out[layer] = {name: np.stack([s[name] for s in steps], axis=1) for name in shape}
    return out


def _check(states, looped: dict, example: int, units: int) -> None:
    assert states.layers == tuple(looped)
    for r, layer in enumerate(states.layers):
        assert set(states.leaves) == set(looped[layer])
        for p, leaf in enumerate(states.leaves):
            expected = looped[layer][leaf][example]  # [T, n]
            assert states.leaf_sizes[p] == expected.shape[1]
            np.testing.assert_allclose(
                states.norms[r, p],
                np.linalg.norm(expected, axis=1),
                rtol=2e-5,
                atol=1e-6,
                err_msg=f"{layer} {leaf}",
            )
            k = min(units, expected.shape[1])
            np.testing.assert_allclose(
                states.units[p][r], expected[:, :k].T, rtol=2e-5, atol=1e-6, err_msg=f"{layer} {leaf}"
            )


@pytest.mark.parametrize(
    "cell, design, leaves",
    [
        ("mamba", "mamba", ("h",)),
        ("mlstm", "xlstm", ("C", "n", "m")),
        ("lstm", "torch_lstm", ("c", "h")),
        ("rglru", "recurrent_gemma", ("h",)),
        ("gated_deltanet", "qwen3_next", ("S",)),
    ],
)
def test_each_designs_states_are_its_steps_from_zero(cell, design, leaves):
    """A reference block two layers deep, the second example of a batch of two."""
    cfg = rnnviz.RunConfig(cell=cell, block="reference", layers=2, hidden_size=16, seq_len=T, batch_size=2)
    model, x = block_model(cfg), block_inputs(cfg)
    states = model_states(model, x, example=1, units=UNITS)
    assert states.model_type == design and states.leaves == leaves and states.example == 1
    assert states.norms.shape == (2, len(leaves), T)
    assert np.all(states.norms > 0)  # the inputs move every leaf from its zero start
    _check(states, _looped_states(model, x), example=1, units=UNITS)


GRIFFIN = {
    "model_type": "recurrent_gemma",
    "vocab_size": 16,
    "num_hidden_layers": 3,
    "hidden_size": 16,
    "intermediate_size": 24,
    "lru_width": 12,
    "num_attention_heads": 2,
    "attention_window_size": 4,
    "block_types": ["recurrent", "attention", "recurrent"],
}


def _random_model(family, config: dict, seed: int = 0) -> Model:
    """A model of ``family`` with N(0, 0.3²) weights, built without a checkpoint."""
    spec = family.parse(config, "random")
    keys = jax.random.split(jax.random.key(seed), len(family.tensors(spec)))
    params = {
        name: 0.3 * jax.random.normal(key, shape)
        for key, (name, shape) in zip(keys, family.tensors(spec).items())
    }
    return Model(config["model_type"], spec, params, "random")


def test_an_attention_layer_is_absent_and_tokens_are_read():
    model = _random_model(rg_family, GRIFFIN)
    ids = np.random.default_rng(0).integers(0, 16, size=(1, T))
    states = model_states(model, ids[0], units=64)  # one sequence as [T]; k above W: all 12
    assert states.layers == (0, 2) and states.leaves == ("h",) and states.leaf_sizes == (12,)
    assert states.units[0].shape == (2, 12, T)
    _check(states, _looped_states(model, ids), example=0, units=64)
    only_attention = _random_model(
        rg_family, {**GRIFFIN, "num_hidden_layers": 1, "block_types": ["attention"]}
    )
    none = model_states(only_attention, ids)
    assert none.layers == () and none.leaves == () and none.norms.shape == (0, 0, T) and none.units == ()


def test_block_states_reuses_the_executable_and_checks_its_arguments():
    cfg = rnnviz.RunConfig(cell="gru", block="reference", layers=2, hidden_size=8, seq_len=T, batch_size=2)
    model, x = block_model(cfg), block_inputs(cfg)
    first = block_states(cfg)
    direct = model_states(model, x)
    np.testing.assert_array_equal(first.norms, direct.norms)
    assert direct.compile_s == 0.0  # the same shape: the executable is reused
    other = model_states(model, 3 * x, example=1)  # other values, same shapes: reused too
    assert other.compile_s == 0.0 and not np.allclose(other.norms, first.norms)
    _check(other, _looped_states(model, 3 * x), example=1, units=8)
    as_json = first.to_json()
    assert (
        as_json["leaves"] == ["h"] and len(as_json["units"]["h"][1]) == 8 and len(as_json["norms"][0][0]) == T
    )
    for bad, match in [(dict(example=2), "0 … 1"), (dict(units=0), "at least 1")]:
        with pytest.raises(ValueError, match=match):
            model_states(model, x, **bad)
    with pytest.raises(ValueError, match=r"\[B, T, 8\]"):
        model_states(model, x[..., :3])

"""The analysis's state norms (``rnnviz.engine.blocks.gradients``), taken through norm probes
inside the reverse pass, against the whole gradients of full state probes of the same pass,
for every block family; and the chunked scan against one ``lax.scan``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz.checkpoints.registry import FAMILIES
from rnnviz.engine.blocks import Probes, chunked_scan, probed
from rnnviz.engine.blocks.gradients import model_gradients, position_losses
from rnnviz.engine.blocks.registry import BLOCKS

CONFIGS = [
    {"model_type": "mamba", "vocab_size": 16, "hidden_size": 8, "state_size": 4, "num_hidden_layers": 2},
    {
        "model_type": "mamba2", "vocab_size": 16, "hidden_size": 8, "state_size": 4, "num_heads": 4,
        "head_dim": 4, "n_groups": 2, "num_hidden_layers": 2,
    },
    {
        "model_type": "recurrent_gemma", "vocab_size": 16, "hidden_size": 16, "lru_width": 16,
        "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 32, "num_hidden_layers": 3,
        "attention_window_size": 4,
    },
    {
        "model_type": "qwen3_next", "vocab_size": 16, "hidden_size": 8, "intermediate_size": 8,
        "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"],
        "linear_num_key_heads": 1, "linear_num_value_heads": 2, "linear_key_head_dim": 4,
        "linear_value_head_dim": 3, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
        "num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 4,
        "shared_expert_intermediate_size": 4,
    },
    {"model_type": "xlstm", "vocab_size": 16, "hidden_size": 16, "num_blocks": 2, "num_heads": 2},
    {"model_type": "torch_lstm", "num_layers": 2, "input_size": 3, "hidden_size": 5, "bias": True},
    {"model_type": "torch_gru", "num_layers": 2, "input_size": 3, "hidden_size": 5, "bias": True},
]  # fmt: skip


def _model(config: dict) -> tuple:
    family = FAMILIES[config["model_type"]]
    spec = family.parse(config, "random")
    keys = jax.random.split(jax.random.key(0), len(family.tensors(spec)))
    params = {n: 0.3 * jax.random.normal(k, s) for k, (n, s) in zip(keys, family.tensors(spec).items())}
    rng = np.random.default_rng(0)
    inputs = rng.integers(0, 16, size=(3, 11)) if spec.vocab_size else rng.normal(size=(3, 11, 3))
    widths = (getattr(spec, "input_size", spec.d_model),) + (spec.d_model,) * spec.n_layers
    inputs = jnp.asarray(inputs, jnp.float32 if inputs.ndim == 3 else jnp.int32)
    return BLOCKS[config["model_type"]], spec, params, inputs, widths


def _whole_norms(module, spec, params, inputs, widths, position: int) -> tuple[list, np.ndarray]:
    """The same two cotangents through probes of the states' own shapes, one vmapped VJP: every
    ``[2, B, T, ...]`` gradient made whole, then its norm per step over the batch and units in
    float64; the loss's state norms (row 0) and ℓ_p's over the embeddings (row 1)."""
    batch, steps = inputs.shape[:2]
    stream = tuple(jnp.zeros((batch, steps, w)) for w in widths)
    states = tuple(
        None if s is None else jax.tree.map(lambda a: jnp.zeros(a.shape), s)
        for s in module.state_shapes(spec, batch, steps)
    )

    @jax.jit
    def whole(probes: Probes) -> Probes:  # one executable: eager dispatch of the scans is slow
        losses, vjp, weights = jax.vjp(
            lambda p: position_losses(module, spec, params, inputs, p), probes, has_aux=True
        )
        cotangents = jnp.stack([weights, jax.nn.one_hot(position, losses.shape[0])])
        return jax.vmap(vjp)(cotangents)[0]

    grads = whole(Probes(stream, states))

    def norms(g):
        g = np.moveaxis(np.asarray(g, np.float64), 2, 0)  # [T, 2, B, ...]
        return np.sqrt(np.sum(g.reshape(g.shape[0], 2, -1) ** 2, axis=-1)).T

    return [None if s is None else jax.tree.map(norms, s) for s in grads.states], norms(grads.stream[0])


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c["model_type"])
def test_norm_probes_give_the_whole_gradients_norms(config):
    """‖∂L/∂state_t‖ from the norm probes equals the norm of the whole state gradient, for every
    layer, leaf and step, and the connectivity ‖∂ℓ_p/∂x_t^{(0)}‖ (a second cotangent, or a pass
    of its own) is the whole gradient's too."""
    module, spec, params, inputs, widths = _model(config)
    gradients = jax.jit(model_gradients, static_argnums=(0, 1, 2, 3))
    out = gradients(module, spec, widths, jnp.float32, params, inputs, jnp.int32(4))
    expected, stream = _whole_norms(module, spec, params, inputs, widths, 4)
    assert [s is None for s in out.states] == [s is None for s in expected]
    for ours, whole in zip(out.states, expected):
        if whole is None:
            continue
        # every step but a language model's last reaches the loss (not every leaf: the mLSTM's m
        # gets none where |q̂ᵀn| wins the denominator's max), and the two rows differ
        assert np.all(sum(whole.values())[0, :-1] > 0)
        for leaf in whole:
            assert ours[leaf].shape == (inputs.shape[1],)
            np.testing.assert_allclose(np.asarray(ours[leaf]), whole[leaf][0], rtol=1e-5, atol=1e-30)
    # ℓ_4 reads steps 0 … 4 only (a language model's position 4 predicts token 5)
    assert np.all(stream[1, :5] > 0) and not np.any(stream[1, 5:]) and not np.allclose(stream[0], stream[1])
    np.testing.assert_allclose(np.asarray(out.connectivity), stream[1], rtol=1e-5, atol=1e-30)


def test_the_connectivitys_own_pass_is_the_second_cotangent():
    """Mamba's connectivity by a pass of its own equals the vmapped second cotangent's."""
    from rnnviz.engine.blocks import gradients as module_gradients

    module, spec, params, inputs, widths = _model(CONFIGS[0])
    assert module.__name__.rsplit(".", 1)[-1] in module_gradients.OWN_CONNECTIVITY_PASS
    # a new function each time: jax.jit's cache holds traces by function
    run = lambda: jax.jit(lambda p, x, i: model_gradients(module, spec, widths, jnp.float32, p, x, i))(  # noqa: E731
        params, inputs, jnp.int32(7)
    )
    own = run()
    saved = module_gradients.OWN_CONNECTIVITY_PASS
    module_gradients.OWN_CONNECTIVITY_PASS = frozenset()
    try:
        vmapped = run()
    finally:
        module_gradients.OWN_CONNECTIVITY_PASS = saved
    np.testing.assert_allclose(own.connectivity, vmapped.connectivity, rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(own.stream, vmapped.stream, rtol=1e-6, atol=1e-30)
    assert np.all(np.asarray(own.connectivity)[:8] > 0)


def test_the_mamba2_analysis_holds_no_layers_states_over_every_step():
    """XLA's count of the analysis's temporaries at a state much wider than the stream (2 heads
    of 64 × 128, T = 256, two layers) stays under one layer's states over T per layer: a plain
    scan's reverse pass keeps two (h_{t−1} and h_t), and whole state probes four more."""
    config = {
        "model_type": "mamba2", "vocab_size": 16, "hidden_size": 64, "num_heads": 2, "head_dim": 64,
        "state_size": 128, "n_groups": 1, "num_hidden_layers": 2,
    }  # fmt: skip
    family = FAMILIES["mamba2"]
    spec = family.parse(config, "random")
    params = {k: jax.ShapeDtypeStruct(s, jnp.float32) for k, s in family.tensors(spec).items()}
    steps = 256
    analysis = jax.jit(model_gradients, static_argnums=(0, 1, 2, 3)).lower(
        BLOCKS["mamba2"], spec, (64,) * 3, jnp.float32, params,
        jax.ShapeDtypeStruct((1, steps), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32),
    )  # fmt: skip
    temp = analysis.compile().memory_analysis().temp_size_in_bytes
    states = spec.n_layers * steps * spec.num_heads * spec.head_dim * spec.state_size * 4
    assert temp < states


def test_a_norm_probe_leaves_the_state_and_takes_the_norm_per_example():
    h, g = jnp.ones((2, 3, 2)), jnp.arange(12.0).reshape(2, 3, 2) - 5.0
    out, vjp = jax.vjp(probed, h, jnp.zeros(2))
    assert np.array_equal(out, h)
    dh, dp = vjp(g)
    assert np.array_equal(dh, g)
    np.testing.assert_allclose(dp, np.linalg.norm(np.asarray(g).reshape(2, -1), axis=1), rtol=1e-6)
    tiny = vjp(g * 1e-30)[1]  # below float32's squares: scaled before they are taken
    np.testing.assert_allclose(tiny, 1e-30 * np.asarray(dp), rtol=1e-5)


@pytest.mark.parametrize("steps, chunk", [(12, 4), (13, None), (7, 3), (1, None), (5, 8)])
def test_the_chunked_scan_is_the_scan_and_its_gradient(steps, chunk):
    """The carry, the outputs and the gradient to the first carry and to every input equal one
    ``lax.scan``'s, with T a multiple of the chunk, not one (a tail), and shorter than it."""

    def step(h, x):
        a, u, p = x
        h = jnp.tanh(a[:, None] * h + u) + p[:, None]
        return h, (h.sum(axis=1), h)

    keys = jax.random.split(jax.random.key(1), 4)
    h0 = jax.random.normal(keys[0], (2, 3))
    xs = (
        jax.random.uniform(keys[1], (steps, 2)),
        jax.random.normal(keys[2], (steps, 2, 3)),
        jnp.zeros((steps, 2)),
    )

    def loss(scan, h0, xs):
        carry, (y, h) = scan(step, h0, xs)
        return jnp.sum(carry**2) + jnp.sum(jnp.sin(y)) + jnp.sum(h * jnp.arange(3.0)[None, None])

    chunked = lambda f, c, x: chunked_scan(f, c, x, chunk)  # noqa: E731
    assert chunked(step, h0, xs)[1][1].shape == (steps, 2, 3)
    for got, want in zip(
        jax.tree.leaves(jax.value_and_grad(loss, argnums=(1, 2))(chunked, h0, xs)),
        jax.tree.leaves(jax.value_and_grad(loss, argnums=(1, 2))(jax.lax.scan, h0, xs)),
    ):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)

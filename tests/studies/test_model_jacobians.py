"""model_jacobians against computations that share none of its code: torch's autograd on an
LSTMCell/GRUCell step; the closed form of a Mamba layer's diagonal J_t = diag(exp(Δ_t A)) with
Δ_t from transformers' own layer; for the mLSTM and the RG-LRU, the dense Jacobian of the
whole forward pass with respect to the state probe one step earlier (exact there: nothing
else of the layer reads that probe); and the matrix-free Krylov values against the exact ones."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

import rnnviz
from rnnviz.base.hlo import lapack_calls
from rnnviz.checkpoints.families import recurrent_gemma as rg_family
from rnnviz.checkpoints.families import xlstm as xlstm_family
from rnnviz.checkpoints.registry import FAMILIES
from rnnviz.engine.blocks import Probes
from rnnviz.engine.blocks.registry import BLOCKS
from rnnviz.studies.jacobians import pack
from rnnviz.studies.model_jacobians import (
    _executable,
    _flat_step,
    chosen_steps,
    model_jacobians,
    recurrent_layers,
)
from rnnviz.studies.models import Model

T = 9
K = 4


def _singular_values(jacobians: np.ndarray, k: int) -> np.ndarray:
    return np.linalg.svd(np.asarray(jacobians, np.float64), compute_uv=False)[..., :k]


def _torch_cell_spectra(rnn: torch.nn.Module, x: np.ndarray, k: int) -> np.ndarray:
    """``[L, T − 1, k]``: σ_i of ∂(c_t, h_t)/∂(c_{t−1}, h_{t−1}) (LSTM) or ∂h_t/∂h_{t−1} (GRU) of
    each layer, by torch.autograd.functional.jacobian on a float64 LSTMCell/GRUCell loop."""
    lstm = isinstance(rnn, torch.nn.LSTM)
    inputs, out = torch.tensor(x, dtype=torch.float64), []
    for layer in range(rnn.num_layers):
        cell = (torch.nn.LSTMCell if lstm else torch.nn.GRUCell)(inputs.shape[-1], rnn.hidden_size).double()
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(cell, name).data = getattr(rnn, f"{name}_l{layer}").detach().double()
        h = c = torch.zeros(rnn.hidden_size, dtype=torch.float64)
        hs, values = [], []
        for t in range(inputs.shape[0]):
            x_t = inputs[t]
            if lstm:
                step = lambda c, h, x_t=x_t: tuple(reversed(cell(x_t, (h, c))))  # noqa: E731  (c', h')
                if t > 0:
                    blocks = torch.autograd.functional.jacobian(step, (c, h))  # [out][in]
                    values.append(_singular_values(torch.cat([torch.cat(row, 1) for row in blocks], 0), k))
                c, h = (v.detach() for v in step(c, h))
            else:
                if t > 0:
                    jacobian = torch.autograd.functional.jacobian(lambda h, x_t=x_t: cell(x_t, h), h)
                    values.append(_singular_values(jacobian, k))
                h = cell(x_t, h).detach()
            hs.append(h)
        out.append(np.stack(values))
        inputs = torch.stack(hs)
    return np.stack(out)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_torch_stack_equals_torchs_cells_at_every_step(kind, tmp_path):
    torch.manual_seed(0)
    rnn = getattr(torch.nn, kind)(3, 6, num_layers=2, batch_first=True)
    torch.save(rnn.state_dict(), tmp_path / "rnn.pt")
    x = np.random.default_rng(0).normal(size=(2, T, 3)).astype(np.float32)
    j = model_jacobians(rnnviz.load_model(tmp_path / "rnn.pt"), x, k=K, steps=T - 1, example=1)
    assert j.method == "exact" and j.layers == (0, 1) and j.steps.tolist() == list(range(1, T))
    assert j.state_dim == (12 if kind == "LSTM" else 6)
    expected = _torch_cell_spectra(rnn, x[1], K)
    np.testing.assert_allclose(j.singular_values, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(j.mean_log_sigma1, np.log(expected[..., 0]).mean(axis=1), atol=1e-5)
    # the matrix-free values: J_t's spectrum is generic here, so the Krylov space finds it
    model = rnnviz.load_model(tmp_path / "rnn.pt")
    krylov = model_jacobians(model, x, k=K, steps=T - 1, example=1, method="krylov")
    np.testing.assert_allclose(krylov.singular_values, expected, rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def mamba(tmp_path_factory):
    """A tiny Mamba (I = 32, N = 4: D = 128), every parameter moved off its initial value,
    saved by transformers and read by rnnviz."""
    torch.manual_seed(0)
    config = transformers.MambaConfig(
        vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2, conv_kernel=3, expand=2
    )
    model = transformers.MambaForCausalLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    folder = tmp_path_factory.mktemp("mamba")
    model.save_pretrained(folder)
    return model, rnnviz.load_model(folder)


def _mamba_decays(model, ids: np.ndarray) -> np.ndarray:
    """``[L, T, I·N]`` exp(Δ_t A) of each layer, Δ_t = softplus(W_Δ δ_t + b_Δ) from the δ_t of
    transformers' own forward (read by a hook on its ``x_proj``), A = −exp(A_log), in float64."""
    seen = []
    hooks = [
        layer.mixer.x_proj.register_forward_hook(lambda _m, _i, out: seen.append(out.detach().double()))
        for layer in model.backbone.layers
    ]
    with torch.no_grad():
        model(torch.as_tensor(ids))
    for hook in hooks:
        hook.remove()
    decays = []
    for layer, x_dbl in zip(model.backbone.layers, seen):
        mixer = layer.mixer
        dt_proj = mixer.dt_proj.weight.detach().double(), mixer.dt_proj.bias.detach().double()
        delta = torch.nn.functional.softplus(x_dbl[0, :, : mixer.time_step_rank] @ dt_proj[0].T + dt_proj[1])
        a = -torch.exp(mixer.A_log.detach().double())  # [I, N]
        decays.append(torch.exp(delta[:, :, None] * a[None]).reshape(delta.shape[0], -1).numpy())
    return np.stack(decays)


def test_mamba_is_diagonal_with_exp_delta_a(mamba):
    torch_model, model = mamba
    ids = np.random.default_rng(0).integers(0, 64, size=(1, T))
    top = -np.sort(-_mamba_decays(torch_model, ids)[:, 1:], axis=-1)[..., :K]  # [L, T − 1, K]
    auto = model_jacobians(model, ids, k=K, steps=range(1, T))
    assert auto.method == "diagonal" and auto.state_dim == 32 * 4
    np.testing.assert_allclose(auto.singular_values, top, rtol=1e-5)
    exact = model_jacobians(model, ids, k=K, steps=range(1, T), method="exact")
    np.testing.assert_allclose(exact.singular_values, top, rtol=1e-5)
    krylov = model_jacobians(model, ids, k=K, steps=range(1, T), method="krylov", iterations=24)
    np.testing.assert_allclose(krylov.singular_values, top, rtol=1e-3)
    assert np.all(krylov.singular_values <= top * (1 + 1e-5))  # Ritz values: never above
    for method, iterations in (("exact", 0), ("krylov", 24)):  # both layers' SVDs: one LAPACK call
        compiled = _executable(model, ids.astype(np.int32), method, K, iterations, T - 1)
        assert len(lapack_calls(compiled.fn.as_text())) == 1


def _random_model(family, config: dict, seed: int = 0) -> Model:
    """A model of ``family`` with N(0, 0.3²) weights, built without a checkpoint."""
    spec = family.parse(config, "random")
    keys = jax.random.split(jax.random.key(seed), len(family.tensors(spec)))
    params = {
        name: 0.3 * jax.random.normal(key, shape)
        for key, (name, shape) in zip(keys, family.tensors(spec).items())
    }
    return Model(config["model_type"], spec, params, "random")


def _probe_route(model: Model, ids: np.ndarray, layer: int, k: int) -> np.ndarray:
    """``[T − 1, k]`` σ_i of ∂state_t/∂probe_{t−1} of ``layer``, by jax.jacfwd of the whole
    forward pass (with the probe after step t − 1, the layer's next state is its step of it)."""
    module, spec = BLOCKS[model.model_type], model.spec
    inputs = jnp.asarray(ids)
    stream = tuple(jnp.zeros((1, ids.shape[1], w)) for w in model.stream_widths)
    zeros = tuple(
        None if s is None else jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), s)
        for s in module.state_shapes(spec, 1, ids.shape[1])
    )
    leaves, treedef = jax.tree.flatten(zeros[layer])
    sizes = [int(np.prod(leaf.shape[2:])) for leaf in leaves]

    def state_after(eps: jax.Array, t: jax.Array) -> jax.Array:
        parts = jnp.split(eps, np.cumsum(sizes)[:-1])
        probe = [leaf.at[0, t - 1].set(p.reshape(leaf.shape[2:])) for leaf, p in zip(leaves, parts)]
        states = zeros[:layer] + (jax.tree.unflatten(treedef, probe),) + zeros[layer + 1 :]
        _, trajectories = module.forward(spec, model.params, inputs, Probes(stream, states), with_states=True)
        return pack(jax.tree.map(lambda a: a[0, t].reshape(-1), trajectories[layer].states))

    jac = jax.jit(jax.vmap(jax.jacfwd(state_after), in_axes=(None, 0)))
    return _singular_values(jac(jnp.zeros(sum(sizes)), jnp.arange(1, ids.shape[1])), k)


XLSTM = {"model_type": "xlstm", "vocab_size": 16, "hidden_size": 16, "num_blocks": 2, "num_heads": 2}
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


@pytest.mark.parametrize(
    "family, config, layers",
    [(xlstm_family, XLSTM, (0, 1)), (rg_family, GRIFFIN, (0, 2))],
    ids=["mlstm", "rg_lru"],
)
def test_the_state_probes_route_agrees(family, config, layers):
    model = _random_model(family, config)
    ids = np.random.default_rng(1).integers(0, 16, size=(1, T))
    j = model_jacobians(model, ids, k=K, steps=T - 1, method="exact")
    assert j.layers == layers  # an attention layer has no state
    expected = np.stack([_probe_route(model, ids, layer, K) for layer in layers])
    np.testing.assert_allclose(j.singular_values, expected, rtol=1e-4, atol=1e-6)


def test_the_mlstm_krylov_values_equal_the_exact_ones():
    """The mLSTM's J_t repeats each head's forget factor over d_qk·d_v entries of C: a few
    distinct values with large multiplicities, which the block Krylov space holds exactly."""
    model = _random_model(xlstm_family, XLSTM)
    ids = np.random.default_rng(2).integers(0, 16, size=(1, T))
    exact = model_jacobians(model, ids, k=K, steps=4, method="exact")
    krylov = model_jacobians(model, ids, k=K, steps=4, method="krylov")
    assert exact.state_dim == 2 * (4 * 8 + 4 + 1)  # C [2, 4, 8], n [2, 4], m [2]
    np.testing.assert_allclose(krylov.singular_values, exact.singular_values, rtol=1e-5, atol=1e-6)


def test_steps_the_record_and_errors(mamba):
    _, model = mamba
    ids = np.random.default_rng(3).integers(0, 64, size=(2, 40))
    j = model_jacobians(model, ids, k=2)
    assert j.steps.tolist() == chosen_steps(40).tolist() and j.steps.size == 16
    assert j.singular_values.shape == (2, 16, 2) and j.compile_s > 0
    again = model_jacobians(model, ids, k=2, steps=[5, 1, 39, *range(2, 15)])  # as many: reused
    assert again.compile_s == 0.0 and again.steps[:3].tolist() == [5, 1, 39]
    assert again.to_json()["singular_values"][0][2] == pytest.approx(j.singular_values[0][-1].tolist())
    for bad, match in [
        (dict(k=129), "1 … 128"),
        (dict(steps=[0, 3]), "1 … 39"),
        (dict(steps=0), "at least 1"),
        (dict(method="svd"), "auto, diagonal, exact, krylov"),
        (dict(example=2), "0 … 1"),
    ]:
        with pytest.raises(ValueError, match=match):
            model_jacobians(model, ids, **bad)


@pytest.mark.parametrize(
    "config",
    [
        {"model_type": "mamba", "vocab_size": 16, "hidden_size": 8, "state_size": 4, "num_hidden_layers": 2},
        {
            "model_type": "mamba2",
            "vocab_size": 16,
            "hidden_size": 8,
            "state_size": 4,
            "num_heads": 4,
            "head_dim": 4,
            "n_groups": 1,
            "num_hidden_layers": 1,
        },
        {
            "model_type": "recurrent_gemma",
            "vocab_size": 16,
            "hidden_size": 16,
            "lru_width": 16,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "intermediate_size": 32,
            "num_hidden_layers": 2,
            "block_types": ["recurrent"],
        },
    ],
    ids=lambda c: c["model_type"],
)
def test_a_family_that_says_its_jacobian_is_diagonal_has_one(config):
    """STATE_IS_DIAGONAL holds: every J_t, built whole by jacfwd, has nothing off its diagonal,
    and the diagonal method's values are the exact method's."""
    model = _random_model(FAMILIES[config["model_type"]], config)
    assert BLOCKS[model.model_type].STATE_IS_DIAGONAL
    ids = np.random.default_rng(1).integers(0, 16, size=(1, 9))
    diagonal = model_jacobians(model, ids, k=3, steps=range(1, 9), method="diagonal")
    exact = model_jacobians(model, ids, k=3, steps=range(1, 9), method="exact")
    np.testing.assert_allclose(diagonal.singular_values, exact.singular_values, rtol=1e-5)
    layers, units = recurrent_layers(BLOCKS[model.model_type], model.spec)
    _, trajectories = BLOCKS[model.model_type].forward(
        model.spec, model.params, jnp.asarray(ids), with_states=True
    )
    states, inputs = trajectories[layers[0]]
    step = _flat_step(BLOCKS[model.model_type], model.spec, model.params, layers[0], states, units)
    prev = pack(jax.tree.map(lambda a: a[0, 3], states), units)
    jac = np.asarray(jax.jacfwd(step)(prev, jax.tree.map(lambda a: a[0, 4][None], inputs)))
    assert np.count_nonzero(jac - np.diag(np.diag(jac))) == 0 and np.count_nonzero(np.diag(jac)) > 0


def test_diagonal_is_refused_where_the_jacobian_is_not():
    torch_lstm = _random_model(
        FAMILIES["torch_lstm"],
        {"model_type": "torch_lstm", "num_layers": 1, "input_size": 2, "hidden_size": 3, "bias": True},
    )
    with pytest.raises(ValueError, match="not diagonal"):
        model_jacobians(torch_lstm, np.ones((1, 5, 2), np.float32), method="diagonal")

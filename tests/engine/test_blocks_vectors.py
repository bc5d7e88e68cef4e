"""Every design read as a model of vectors (rnnviz.engine.blocks.vectors) against its reference:
transformers' base model fed ``inputs_embeds`` (torch's ``nn.LSTM`` / ``nn.GRU`` fed x), between
the same input projection and readout in torch; the outputs, the gradient of a loss with respect
to the inputs and to every parameter, and the analysis read through the wrapper."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rnnviz
from rnnviz.engine.blocks import vectors
from rnnviz.engine.blocks.dispatch import module_of
from rnnviz.studies.models import Model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

B, T, I, O = 2, 9, 3, 4  # noqa: E741 (the docs' names for the sizes)
TOL = 1e-4  # relative, normwise, float32 against torch's float32
#: model_type → (transformers class name, config fields): small, two layers, every state kind.
DESIGNS = {
    "mamba": ("MambaForCausalLM", dict(hidden_size=16, state_size=4, num_hidden_layers=2)),
    "falcon_mamba": ("FalconMambaForCausalLM", dict(hidden_size=16, state_size=4, num_hidden_layers=2)),
    "mamba2": (
        "Mamba2ForCausalLM",
        dict(hidden_size=16, num_heads=4, head_dim=8, state_size=4, n_groups=2, num_hidden_layers=2),
    ),
    "recurrent_gemma": (
        "RecurrentGemmaForCausalLM",
        dict(
            hidden_size=16,
            intermediate_size=48,
            num_attention_heads=2,
            num_key_value_heads=1,
            num_hidden_layers=2,
            block_types=["recurrent", "attention"],
            attention_window_size=4,  # shorter than T
        ),
    ),
    "xlstm": ("xLSTMForCausalLM", dict(hidden_size=16, num_heads=2, num_blocks=2)),
    "qwen3_next": (
        "Qwen3NextForCausalLM",
        dict(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            layer_types=["linear_attention", "full_attention"],
            linear_num_key_heads=1,
            linear_num_value_heads=2,
            linear_key_head_dim=4,
            linear_value_head_dim=4,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=4,
            num_experts=0,
        ),
    ),
}
STACKS = ("torch_lstm", "torch_gru")


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _reference(design: str, folder):
    """``(torch body: e -> h [B, T, D], our Model of the same weights)``."""
    torch.manual_seed(0)
    if design in STACKS:
        kind = torch.nn.LSTM if design == "torch_lstm" else torch.nn.GRU
        body = kind(input_size=I, hidden_size=8, num_layers=2, batch_first=True)
        torch.save(body.state_dict(), folder / "rnn.pt")
        return (lambda e: body(e)[0]), rnnviz.load_model(folder / "rnn.pt")
    name, config = DESIGNS[design]
    config_cls = getattr(transformers, name.replace("ForCausalLM", "Config"))
    model = getattr(transformers, name)(config_cls(vocab_size=11, **config)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder)
    kwargs = {"use_cache": False}
    return (lambda e: model.base_model(inputs_embeds=e, **kwargs).last_hidden_state), rnnviz.load_model(
        folder
    )


def _vector_model(model: Model) -> Model:
    spec = vectors.VectorSpec(model.model_type, model.spec, input_size=I, output_size=O)
    drawn = vectors.init_params(spec, jax.random.key(1))
    params = {k: v for k, v in model.params.items() if k not in vectors.ENDS[model.model_type]}
    ends = {
        k: drawn[k]
        for k in ("input_proj.weight", "input_proj.bias", "readout.weight", "readout.bias")
        if k in drawn
    }
    return Model(model.model_type, spec, params | ends, f"{model.source} (vectors)")


@pytest.fixture(scope="module", params=[*DESIGNS, *STACKS])
def case(request, tmp_path_factory):
    body, model = _reference(request.param, tmp_path_factory.mktemp(request.param))
    return body, _vector_model(model)


def _torch_ends(model: Model) -> dict:
    return {
        k: torch.tensor(np.asarray(v), requires_grad=True)
        for k, v in model.params.items()
        if k.startswith(("input_proj.", "readout."))
    }


def test_outputs_and_gradients_match_the_reference(case):
    """ŷ, and ∂(½‖ŷ_{T−1}‖²)/∂x and /∂(input projection, readout), equal torch's through the
    reference body; ∂/∂(the design's own tensors) equals torch's for every tensor."""
    body, model = case
    x = np.random.default_rng(0).normal(size=(B, T, I)).astype(np.float32)
    ends = _torch_ends(model)
    xt = torch.tensor(x, requires_grad=True)
    e = xt @ ends["input_proj.weight"].T + ends["input_proj.bias"] if model.spec.projects else xt
    y_ref = body(e) @ ends["readout.weight"].T + ends["readout.bias"]
    (0.5 * (y_ref[:, -1] ** 2).sum()).backward()

    def loss(params, inputs):
        y = module_of(model.model_type, model.spec).forward(model.spec, params, inputs)
        return 0.5 * jnp.sum(y[:, -1] ** 2), y

    (_, y), (g_params, g_x) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(
        model.params, jnp.asarray(x)
    )
    assert _rel(y, y_ref.detach().numpy()) < TOL
    assert _rel(g_x, xt.grad.numpy()) < TOL
    for name, tensor in ends.items():
        assert _rel(g_params[name], tensor.grad.numpy()) < TOL, name


def test_the_analysis_reads_the_wrapped_design(case):
    """analyze_model runs on a vector model: rows for every layer, the design's state leaves,
    and the loss ½‖ŷ_{T−1}‖² summed over the batch."""
    _, model = case
    x = np.random.default_rng(1).normal(size=(B, T, I)).astype(np.float32)
    a = rnnviz.analyze_model(model, x)
    assert a.grad_norms.shape == (model.n_layers + 1, T)
    y = np.asarray(model(x), np.float64)
    assert a.loss == pytest.approx(0.5 * np.sum(y[:, -1] ** 2), rel=1e-5)
    assert a.state_grad_norms  # the design's recurrent layers, named as its own
    # the loss reads the top at T − 1 alone: through the first (recurrent) layer it reaches
    # every step; the top row's earlier steps are true zeros (and so are a windowed attention
    # layer's inputs before its window)
    assert np.isfinite(a.log10_grad_norms[0]).all() and a.grad_norms[-1, -1] > 0
    assert not a.grad_norms[-1, :-1].any()


def test_inputs_of_the_wrong_width_are_refused(case):
    _, model = case
    with pytest.raises(ValueError, match=rf"\[B, T, {I}\]"):
        rnnviz.analyze_model(model, np.ones((1, 4, I + 1), np.float32))

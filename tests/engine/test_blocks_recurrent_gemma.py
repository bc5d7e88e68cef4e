"""RecurrentGemma (rnnviz.engine.blocks.recurrent_gemma) against transformers'
``RecurrentGemmaForCausalLM`` built tiny and saved with ``save_pretrained``: the tensor list,
the logits, the loss and every parameter's gradient; the probes' gradients against torch's own
residual stream (forward pre-hooks) and RG-LRU state (its ``_rnn_scan`` input shifted by a
zero leaf, which is h_t's); the older ``_block_types`` spelling; bfloat16 weights; refusals."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from transformers import RecurrentGemmaConfig, RecurrentGemmaForCausalLM
from transformers.models.recurrent_gemma.modeling_recurrent_gemma import SqrtBoundDerivative

from rnnviz.checkpoints.families.recurrent_gemma import FAMILY, parse, tensors, tied
from rnnviz.checkpoints.record import CheckpointError
from rnnviz.engine.blocks import Probes
from rnnviz.engine.blocks.recurrent_gemma import forward, sqrt_bounded, state_shapes

B, V = 2, 61
CASES = {  # name: (config, T)
    # Hawk: recurrent layers only; D = 32 whose √ (5.657) bfloat16 rounds to 5.656
    "recurrent_only": (
        dict(
            num_hidden_layers=2,
            hidden_size=32,
            intermediate_size=48,
            num_attention_heads=2,
            block_types=["recurrent"],
        ),
        7,
    ),
    # Griffin's pattern; the window (4) shorter than T, W ≠ D, 4 query heads on 1 key/value head
    "griffin_window": (
        dict(
            num_hidden_layers=3,
            hidden_size=32,
            intermediate_size=40,
            num_attention_heads=4,
            num_key_value_heads=1,
            lru_width=48,
            attention_window_size=4,
            block_types=["recurrent", "recurrent", "attention"],
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        ),
        11,
    ),
    # attention first, 2 heads on 1, untied head, q/k/v biases, a 2-tap convolution, the exact
    # GELU, another rotary base and soft cap
    "attention_first_untied": (
        dict(
            num_hidden_layers=2,
            hidden_size=24,
            intermediate_size=36,
            num_attention_heads=2,
            num_key_value_heads=1,
            lru_width=36,
            attention_window_size=4,
            conv1d_width=2,
            block_types=["attention", "recurrent"],
            tie_word_embeddings=False,
            attention_bias=True,
            hidden_activation="gelu",
            logits_soft_cap=5.0,
            rope_parameters={"rope_type": "default", "rope_theta": 100.0, "partial_rotary_factor": 0.5},
        ),
        11,
    ),
}


def _rel(a, b) -> float:
    """‖a − b‖ / ‖b‖."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _model(config: dict, seed: int = 0) -> RecurrentGemmaForCausalLM:
    """transformers' model at its initialisation, every parameter then moved by N(0, 0.1²) so
    that the zero biases, the zero norm offsets and the tiny gate weights all matter."""
    torch.manual_seed(seed)
    model = RecurrentGemmaForCausalLM(RecurrentGemmaConfig(vocab_size=V, **config)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def _read(folder: Path):
    """``(spec, {name: float32 array})`` as rnnviz will read the folder: config, file, tied ones filled."""
    spec = parse(json.loads((folder / "config.json").read_text()), str(folder))
    arrays = load_file(folder / "model.safetensors")
    for name, source in tied(spec).items():
        arrays[name] = arrays[source]
    return spec, {k: jnp.asarray(v) for k, v in arrays.items()}


def _ids(seq_len: int, seed: int = 1) -> np.ndarray:
    # no pad token (0): torch leaves its embedding row out of the lookup's gradient
    return np.random.default_rng(seed).integers(1, V, (B, seq_len)).astype(np.int64)


def _loss(logits, ids):
    """Mean next-token cross-entropy over B·(T − 1), as transformers' ``ForCausalLMLoss``."""
    logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1))


def _torch_run(model, ids: np.ndarray) -> dict:
    """transformers' logits, loss, parameter gradients and, through zero tensors it adds
    itself, ∂L/∂ of each layer's input, of the final norm's input and of each RG-LRU's h_t.

    Without the cache, as every call here: transformers 5.25 builds a DynamicCache that a model
    of recurrent layers only cannot size its mask from (``get_mask_sizes`` raises); with
    attention layers the cached and uncached prefill agree exactly
    (:func:`test_the_cache_changes_nothing_in_a_prefill`)."""
    x = torch.from_numpy(ids)
    with torch.no_grad():
        logits = model(x, use_cache=False).logits.numpy()
    zeros, hooks = {}, []

    def shift(key):
        def hook(module, args):
            zeros[key] = torch.zeros_like(args[0], requires_grad=True)
            return (args[0] + zeros[key], *args[1:])

        return hook

    layers = model.model.layers
    for i, layer in enumerate(layers):
        hooks.append(layer.register_forward_pre_hook(shift(("stream", i))))
        lru = getattr(layer.temporal_block, "rg_lru", None)
        if lru is not None:  # h_t = a_t h_{t-1} + x_t: a shift of x_t is a shift of h_t

            def scan(hidden_states, _orig=lru._rnn_scan, _key=("h", i), **kw):
                zeros[_key] = torch.zeros_like(hidden_states, requires_grad=True)
                return _orig(hidden_states=hidden_states + zeros[_key], **kw)

            lru._rnn_scan = scan
    hooks.append(model.model.final_norm.register_forward_pre_hook(shift(("stream", len(layers)))))
    model.zero_grad()
    loss = model(x, labels=x, use_cache=False).loss
    loss.backward()
    for hook in hooks:
        hook.remove()
    for layer in layers:
        if getattr(layer.temporal_block, "rg_lru", None) is not None:
            del layer.temporal_block.rg_lru._rnn_scan
    grads = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    loss = loss.detach()
    probes = {key: z.grad.numpy() for key, z in zeros.items()}
    return {"logits": logits, "loss": float(loss), "grads": grads, "probes": probes}


def _zero_probes(spec, seq_len: int) -> Probes:
    stream = tuple(jnp.zeros((B, seq_len, spec.d_model), jnp.float32) for _ in range(spec.n_layers + 1))
    states = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), state_shapes(spec, B, seq_len))
    return Probes(stream, states)


@pytest.fixture(scope="module", params=list(CASES))
def case(request, tmp_path_factory):
    """One configuration: the folder, rnnviz's reading of it, torch's answers and JAX's."""
    config, seq_len = CASES[request.param]
    model = _model(config)
    folder = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(folder)
    spec, params = _read(folder)
    ids = _ids(seq_len)
    jids = jnp.asarray(ids, jnp.int32)

    def loss_and_logits(params, probes):
        logits = forward(spec, params, jids, probes)
        return _loss(logits, jids), logits

    (loss, logits), (grads, probe_grads) = jax.jit(jax.value_and_grad(loss_and_logits, (0, 1), has_aux=True))(
        params, _zero_probes(spec, seq_len)
    )
    return {
        "name": request.param,
        "model": model,
        "folder": folder,
        "spec": spec,
        "params": params,
        "ids": ids,
        "torch": _torch_run(model, ids),
        "plain": jax.jit(lambda p: forward(spec, p, jids))(params),
        "loss": float(loss),
        "logits": logits,
        "grads": grads,
        "probe_grads": probe_grads,
    }


def test_tensors_are_the_state_dict_and_the_file(case):
    model, spec = case["model"], case["spec"]
    state = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert tensors(spec) == state
    in_file = set(load_file(case["folder"] / "model.safetensors"))
    assert in_file == set(state) - set(tied(spec))
    assert ("lm_head.weight" in in_file) == (not spec.tie_word_embeddings)
    assert "recurrent_gemma" in FAMILY.model_types


def test_logits_match_transformers(case):
    err = _rel(case["plain"], case["torch"]["logits"])
    print(f"{case['name']}: logits rel {err:.2e}")
    assert err < 1e-4


def test_loss_and_every_gradient_match_torch(case):
    spec, grads, theirs = case["spec"], case["grads"], case["torch"]["grads"]
    assert abs(case["loss"] - case["torch"]["loss"]) < 1e-4 * abs(case["torch"]["loss"])
    ours = dict(grads)
    for name, source in tied(spec).items():  # torch's one tied parameter gathers both uses
        ours[source] = ours[source] + ours.pop(name)
    assert set(ours) == set(theirs)
    errs = {name: _rel(ours[name], theirs[name]) for name in theirs}
    worst = max(errs, key=errs.get)
    print(f"{case['name']}: worst gradient {worst} rel {errs[worst]:.2e}")
    assert errs[worst] < 1e-4, worst


def test_the_cache_changes_nothing_in_a_prefill(case):
    if "attention" not in case["spec"].layer_kinds:
        pytest.skip("transformers' cache refuses a model without attention layers")
    with torch.no_grad():
        cached = case["model"](torch.from_numpy(case["ids"])).logits.numpy()
    np.testing.assert_array_equal(cached, case["torch"]["logits"])


def test_zero_probes_leave_the_logits(case):
    assert _rel(case["logits"], case["plain"]) < 1e-6


def test_probe_gradients_match_torch_stream_and_state(case):
    spec, probe_grads, theirs = case["spec"], case["probe_grads"], case["torch"]["probes"]
    errs = {
        ("stream", i): _rel(probe_grads.stream[i], theirs[("stream", i)]) for i in range(spec.n_layers + 1)
    }
    for i, kind in enumerate(spec.layer_kinds):
        if kind == "recurrent":
            errs[("h", i)] = _rel(probe_grads.states[i]["h"], theirs[("h", i)])
    print(f"{case['name']}: worst probe gradient {max(errs, key=errs.get)} rel {max(errs.values()):.2e}")
    for i in range(spec.n_layers + 1):
        assert errs[("stream", i)] < 1e-4, ("stream", i)
    for i, kind in enumerate(spec.layer_kinds):
        if kind == "attention":
            assert probe_grads.states[i] is None and ("h", i) not in theirs
            continue
        got, want = probe_grads.states[i]["h"], theirs[("h", i)]
        assert got.shape == (B, len(case["ids"][0]), spec.lru_width)
        assert errs[("h", i)] < 1e-4, ("h", i)
        assert np.abs(want[:, -2]).max() > 0  # the last scored step reads it: a real check


def test_stream_row_zero_is_the_scaled_embeddings_gradient(case):
    """∂L/∂(inputs_embeds) = bf16(√D) · ∂L/∂x^{(0)}: torch's own entry point, no hooks."""
    model, ids = case["model"], case["ids"]
    embeds = model.model.embed_tokens(torch.from_numpy(ids)).detach().requires_grad_(True)
    model(inputs_embeds=embeds, labels=torch.from_numpy(ids), use_cache=False).loss.backward()
    scale = float(model.model.normalizer)
    assert scale != case["spec"].hidden_size ** 0.5  # the bfloat16 rounding matters here
    assert _rel(case["probe_grads"].stream[0] * scale, embeds.grad.numpy()) < 1e-4


def test_old_block_types_spelling_is_read(tmp_path):
    """A config.json that says ``_block_types`` (older transformers; Google's checkpoints)
    gives that pattern, not transformers 5's default (which it silently falls back to)."""
    config = dict(CASES["attention_first_untied"][0], tie_word_embeddings=True)
    model = _model(config, seed=3)
    model.save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    written = json.loads(path.read_text())
    written["_block_types"] = written.pop("block_types")
    path.write_text(json.dumps(written))
    spec, params = _read(tmp_path)
    assert spec.layer_kinds == ("attention", "recurrent")
    ids = _ids(11, seed=4)
    with torch.no_grad():
        want = model(torch.from_numpy(ids), use_cache=False).logits.numpy()
    assert _rel(forward(spec, params, jnp.asarray(ids, jnp.int32)), want) < 1e-4


def test_block_types_wins_over_the_old_spelling():
    config = {"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2}
    both = parse(dict(config, block_types=["recurrent"], _block_types=["attention"]), "m/")
    assert both.layer_kinds == ("recurrent", "recurrent")
    assert parse(config, "m/").layer_kinds == ("recurrent", "recurrent")  # the default pattern's start


def test_bfloat16_weights_follow_torch_in_bfloat16():
    config, seq_len = CASES["griffin_window"]
    model = _model(config).to(torch.bfloat16)
    ids = _ids(seq_len)
    with torch.no_grad():
        want = model(torch.from_numpy(ids), use_cache=False).logits.float().numpy()
    spec = parse(model.config.to_dict(), "bf16")
    params = {k: jnp.asarray(v.float().numpy()).astype(jnp.bfloat16) for k, v in model.state_dict().items()}
    got = forward(spec, params, jnp.asarray(ids, jnp.int32))
    assert got.dtype == jnp.float32
    err = _rel(got, want)
    print(f"bfloat16: logits rel {err:.2e}")
    assert err < 3e-2


def test_sqrt_derivative_is_bounded_as_transformers_bounds_it():
    x = np.array([1e-9, 1e-7, 2.5e-7, 1e-4, 0.3], np.float32)
    xt = torch.from_numpy(x).requires_grad_(True)
    SqrtBoundDerivative.apply(xt).sum().backward()
    got = jax.vmap(jax.grad(sqrt_bounded))(jnp.asarray(x))
    np.testing.assert_allclose(got, xt.grad.numpy(), rtol=1e-6)
    assert float(got[0]) == pytest.approx(1000.0)


GOOD = {"num_hidden_layers": 3, "hidden_size": 16, "num_attention_heads": 2, "lru_width": 16}
REFUSALS = [  # (change, words the message must hold)
    ({"block_types": ["recurrent", "mlp"]}, ["block_types", "'mlp'", "['recurrent', 'attention']"]),
    ({"_block_types": ["moe"]}, ["_block_types", "'moe'", "['recurrent', 'attention']"]),
    ({"block_types": []}, ["block_types", "non-empty"]),
    ({"lru_width": 15}, ["lru_width", "multiple of num_attention_heads"]),
    (
        {"num_key_value_heads": 3, "num_attention_heads": 4, "lru_width": 16},
        ["num_key_value_heads", "divisor"],
    ),
    ({"hidden_activation": "relu"}, ["hidden_activation", "gelu_pytorch_tanh"]),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0}}, ["rope_type", "'default'"]),
    ({"partial_rotary_factor": 0.2}, ["partial_rotary_factor", "even"]),
    ({"model_type": "gemma"}, ["model_type", "'recurrent_gemma'"]),
    ({"hidden_size": 0}, ["hidden_size", "positive integer"]),
    ({"tie_word_embeddings": "yes"}, ["tie_word_embeddings", "true or false"]),
]


@pytest.mark.parametrize("change, words", REFUSALS)
def test_parse_refuses_with_the_field_and_what_is_allowed(change, words):
    with pytest.raises(CheckpointError) as err:
        parse(dict(GOOD, **change), "some/folder")
    message = str(err.value)
    assert message.startswith("some/folder: ")
    for word in words:
        assert word in message, (word, message)

"""Qwen3-Next (rnnviz.engine.blocks.qwen3_next) against transformers' ``Qwen3NextForCausalLM``
built tiny and saved with ``save_pretrained``: the tensors the file holds, the logits, the loss
and every parameter's gradient; the probes' gradients against torch's own residual stream
(forward pre-hooks) and Gated DeltaNet states (the rule run one step at a time through
transformers' ``torch_recurrent_gated_delta_rule``, zeros added to each state); the model read by
``load_model`` and analysed, float64 pass included; bfloat16 weights; refusals."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gated_delta_reference import stepwise_rule

import rnnviz
from rnnviz.checkpoints.families.qwen3_next import FAMILY, parse, tensors, tied
from rnnviz.checkpoints.record import CheckpointError
from rnnviz.engine.blocks import Probes
from rnnviz.engine.blocks.qwen3_next import forward, state_shapes

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
reference = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")

B, V = 2, 53
LINEAR = dict(
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=4,
    linear_value_head_dim=6,
    linear_conv_kernel_dim=3,
)
CASES = {  # name: (config, T)
    # transformers' pattern (three Gated DeltaNet layers, then attention), experts on every other
    # layer (4, 2 chosen, renormalised), 2 query heads on 1 key/value head, a quarter of each
    # head rotated; 70 steps: one 64-step chunk and 6 more
    "hybrid_experts": (
        dict(
            num_hidden_layers=4,
            hidden_size=16,
            intermediate_size=24,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=8,
            shared_expert_intermediate_size=12,
            decoder_sparse_step=2,
            **LINEAR,
        ),
        70,
    ),
    # attention first, tied head, attention biases, an odd rotary dimension (6 · 0.5 = 3, of
    # which transformers rotates 4), one value head per key head, experts everywhere but layer
    # 1, the k = 2 weights not renormalised
    "attention_first_tied": (
        dict(
            num_hidden_layers=3,
            hidden_size=12,
            intermediate_size=20,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=6,
            layer_types=["full_attention", "linear_attention", "linear_attention"],
            num_experts=3,
            num_experts_per_tok=2,
            moe_intermediate_size=4,  # torch's grouped GEMM wants rows of a multiple of 16 bytes
            shared_expert_intermediate_size=6,
            norm_topk_prob=False,
            mlp_only_layers=[1],
            tie_word_embeddings=True,
            attention_bias=True,
            rope_parameters={"rope_type": "default", "rope_theta": 500.0, "partial_rotary_factor": 0.5},
            linear_num_key_heads=3,
            linear_num_value_heads=3,
            linear_key_head_dim=4,
            linear_value_head_dim=4,
            linear_conv_kernel_dim=4,
        ),
        11,
    ),
}


def _rel(a, b) -> float:
    """‖a − b‖ / ‖b‖."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _model(config: dict, seed: int = 0):
    """transformers' model at its initialisation, every parameter then moved by N(0, 0.1²) so
    that the zero norm offsets and the tiny router weights matter."""
    torch.manual_seed(seed)
    model = reference.Qwen3NextForCausalLM(transformers.Qwen3NextConfig(vocab_size=V, **config)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def _read(folder: Path):
    """``(spec, {name: float32 array})`` as rnnviz will read the folder: config, file, tied ones filled."""
    spec = parse(json.loads((folder / "config.json").read_text()), str(folder))
    arrays = safetensors_numpy.load_file(folder / "model.safetensors")
    for name, source in tied(spec).items():
        arrays[name] = arrays[source]
    return spec, {k: jnp.asarray(v) for k, v in arrays.items()}


def _ids(seq_len: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, V, (B, seq_len)).astype(np.int64)


def _loss(logits, ids):
    """Mean next-token cross-entropy over B·(T − 1), as transformers' ``ForCausalLMLoss``."""
    logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1))


def _file_names(grads: dict) -> dict:
    """torch's parameter gradients named as the file names its tensors: the experts, fused in
    memory (``gate_up_proj`` ``[E, 2F, D]``, ``down_proj`` ``[E, D, F]``), one by one."""
    out = {}
    for name, g in grads.items():
        if name.endswith("mlp.experts.gate_up_proj"):
            half = g.shape[1] // 2
            for e in range(g.shape[0]):
                out[f"{name[: -len('gate_up_proj')]}{e}.gate_proj.weight"] = g[e, :half]
                out[f"{name[: -len('gate_up_proj')]}{e}.up_proj.weight"] = g[e, half:]
        elif name.endswith("mlp.experts.down_proj"):
            for e in range(g.shape[0]):
                out[f"{name[: -len('down_proj')]}{e}.down_proj.weight"] = g[e]
        else:
            out[name] = g
    return out


def _torch_run(model, ids: np.ndarray) -> dict:
    """transformers' logits (its chunked rule), and with the rule run one step at a time its loss,
    parameter gradients and, through zero tensors added on the way, ∂L/∂ of each layer's input,
    of the final norm's input and of each Gated DeltaNet state after each step."""
    x = torch.from_numpy(ids)
    with torch.no_grad():
        logits = model(x, use_cache=False).logits.numpy()
    zeros, hooks, states = {}, [], {}

    def shift(key):
        def hook(module, args):
            zeros[key] = torch.zeros_like(args[0], requires_grad=True)
            return (args[0] + zeros[key], *args[1:])

        return hook

    layers = model.model.layers
    for i, layer in enumerate(layers):
        hooks.append(layer.register_forward_pre_hook(shift(("stream", i))))
    hooks.append(model.model.norm.register_forward_pre_hook(shift(("stream", len(layers)))))
    # the rule is a module-level function: which layer calls it is known from the order of calls
    order = [i for i, kind in enumerate(model.config.layer_types) if kind == "linear_attention"]
    calls = iter(order)

    def rule(*args, **kwargs):
        layer = next(calls)
        states[layer], zeros[("S", layer)] = [], []
        return stepwise_rule(states[layer], zeros[("S", layer)])(*args, **kwargs)

    patch = pytest.MonkeyPatch()
    patch.setattr(reference, "torch_chunk_gated_delta_rule", rule)
    try:
        model.zero_grad()
        out = model(x, labels=x, use_cache=False)
        out.loss.backward()
    finally:
        patch.undo()
        for hook in hooks:
            hook.remove()
    probes = {
        key: torch.stack([z.grad for z in value], dim=1).numpy() if key[0] == "S" else value.grad.numpy()
        for key, value in zeros.items()
    }
    return {
        "logits": logits,
        "stepwise_logits": out.logits.detach().numpy(),
        "loss": float(out.loss.detach()),
        "grads": _file_names({n: p.grad.numpy().copy() for n, p in model.named_parameters()}),
        "probes": probes,
        "states": {i: torch.stack(s, dim=1).numpy() for i, s in states.items()},
    }


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
        logits, trajectories = forward(spec, params, jids, probes, with_states=True)
        return _loss(logits, jids), (logits, trajectories)

    grad = jax.value_and_grad(loss_and_logits, (0, 1), has_aux=True)
    (loss, (logits, trajectories)), (grads, probe_grads) = jax.jit(grad)(params, _zero_probes(spec, seq_len))
    return SimpleNamespace(
        name=request.param,
        model=model,
        folder=folder,
        spec=spec,
        params=params,
        ids=ids,
        torch=_torch_run(model, ids),
        plain=jax.jit(lambda p: forward(spec, p, jids))(params),
        loss=float(loss),
        logits=logits,
        trajectories=trajectories,
        grads=grads,
        probe_grads=probe_grads,
    )


def test_tensors_are_the_files_and_the_state_dict(case):
    spec = case.spec
    in_file = set(safetensors_numpy.load_file(case.folder / "model.safetensors"))
    assert in_file == set(tensors(spec)) - set(tied(spec))
    assert ("lm_head.weight" in in_file) == (not spec.tie_word_embeddings)
    state = {k: tuple(v.shape) for k, v in case.model.state_dict().items()}
    named = _file_names({k: np.zeros(s) for k, s in state.items()})
    assert {k: v.shape for k, v in named.items()} == tensors(spec)
    assert "qwen3_next" in FAMILY.model_types


def test_logits_match_transformers(case):
    err = _rel(case.plain, case.torch["logits"])
    print(f"{case.name}: logits rel {err:.2e}")
    assert err < 1e-4
    assert _rel(case.torch["stepwise_logits"], case.torch["logits"]) < 1e-4  # the stand-in is the same model


def test_loss_and_every_gradient_match_torch(case):
    spec, theirs = case.spec, case.torch["grads"]
    assert abs(case.loss - case.torch["loss"]) < 1e-4 * abs(case.torch["loss"])
    ours = dict(case.grads)
    for name, source in tied(spec).items():  # torch's one tied parameter gathers both uses
        ours[source] = ours[source] + ours.pop(name)
    assert set(ours) == set(theirs)
    errs = {name: _rel(ours[name], theirs[name]) for name in theirs}
    worst = max(errs, key=errs.get)
    print(f"{case.name}: worst gradient {worst} rel {errs[worst]:.2e}")
    assert errs[worst] < 1e-4, worst


def test_zero_probes_leave_the_logits(case):
    assert _rel(case.logits, case.plain) < 1e-6


def test_states_and_probe_gradients_match_torch(case):
    spec, probe_grads, theirs = case.spec, case.probe_grads, case.torch["probes"]
    errs = {
        ("stream", i): _rel(probe_grads.stream[i], theirs[("stream", i)]) for i in range(spec.n_layers + 1)
    }
    for i, kind in enumerate(spec.layer_kinds):
        if kind == "full_attention":
            assert probe_grads.states[i] is None and case.trajectories[i] is None
            continue
        assert probe_grads.states[i]["S"].shape == case.torch["states"][i].shape
        errs[("S", i)] = _rel(probe_grads.states[i]["S"], theirs[("S", i)])
        errs[("state", i)] = _rel(case.trajectories[i].states["S"], case.torch["states"][i])
        assert np.abs(theirs[("S", i)][:, -2]).max() > 0  # the last scored step reads it: a real check
    worst = max(errs, key=errs.get)
    print(f"{case.name}: worst probe gradient or state {worst} rel {errs[worst]:.2e}")
    assert errs[worst] < 1e-4, worst


def test_the_analysis_reads_the_folder(case):
    """``load_model`` and ``analyze_model`` on the saved folder: every layer's per-step norms,
    the state norms of the Gated DeltaNet layers only, and the loss torch computes; the
    float64 pass agrees with float32 where float32 holds the numbers."""
    from rnnviz.studies import models

    model = rnnviz.load_model(case.folder)
    assert model.model_type == "qwen3_next" and model.n_layers == case.spec.n_layers
    a = rnnviz.analyze_model(model, case.ids, exact=False)
    assert a.loss == pytest.approx(case.torch["loss"], rel=1e-4)
    linear = [i for i, kind in enumerate(case.spec.layer_kinds) if kind == "linear_attention"]
    assert sorted(a.state_grad_norms) == linear
    want = np.sqrt((case.torch["probes"][("S", linear[0])] ** 2).sum(axis=(0, 2, 3, 4)))
    np.testing.assert_allclose(a.state_grad_norms[linear[0]]["S"], want, rtol=1e-4)
    wide = models._wide_pass(model, models.check_inputs(model, case.ids), a.position, False)
    np.testing.assert_allclose(wide.stream, a.grad_norms, rtol=2e-4, atol=1e-30)


def test_step_jacobian_spectra_are_the_closed_form(case):
    """``model_jacobians`` on the saved folder: J_t = α_t (I − β_t k_t k_tᵀ) ⊗ I_{d_v} per value
    head has the singular values α_t (d_k − 1 times) and α_t |1 − β_t ‖k_t‖²| (each d_v times)."""
    from rnnviz.studies.model_jacobians import model_jacobians

    j = model_jacobians(rnnviz.load_model(case.folder), case.ids, k=3, steps=4)
    spec = case.spec
    assert j.method == "exact" and j.layers == tuple(
        i for i, kind in enumerate(spec.layer_kinds) if kind == "linear_attention"
    )
    d_k, d_v = spec.linear_key_head_dim, spec.linear_value_head_dim
    for r, layer in enumerate(j.layers):
        inputs = case.trajectories[layer].inputs
        for s, t in enumerate(j.steps):
            alpha, beta, k = (np.asarray(inputs[n][0, t], np.float64) for n in ("alpha", "beta", "k"))
            shrunk = alpha * np.abs(1 - beta * np.sum(k * k, axis=-1))
            values = np.concatenate([np.repeat(alpha, (d_k - 1) * d_v), np.repeat(shrunk, d_v)])
            np.testing.assert_allclose(j.singular_values[r, s], np.sort(values)[::-1][:3], rtol=1e-4)


def test_bfloat16_weights_follow_torch_in_bfloat16():
    config, seq_len = CASES["hybrid_experts"]
    model = _model(config).to(torch.bfloat16)
    ids = _ids(seq_len)
    with torch.no_grad():
        want = model(torch.from_numpy(ids), use_cache=False).logits.float().numpy()
    spec = parse(model.config.to_dict(), "bf16")
    state = _file_names({k: v.float().numpy() for k, v in model.state_dict().items()})
    params = {k: jnp.asarray(v).astype(jnp.bfloat16) for k, v in state.items()}
    got = jax.jit(forward, static_argnums=0)(spec, params, jnp.asarray(ids, jnp.int32))
    assert got.dtype == jnp.float32
    err = _rel(got, want)
    print(f"bfloat16: logits rel {err:.2e}")
    assert err < 3e-2


def test_the_layer_pattern_follows_transformers():
    """Without ``layer_types``, transformers' rule from ``full_attention_interval``; the 80B
    model's config (its top-level ``rope_theta``, no ``layer_types``) parses as its 48 layers."""
    config = {"num_hidden_layers": 6, "full_attention_interval": 3}
    assert parse(config, "c").layer_kinds == tuple(transformers.Qwen3NextConfig(**config).layer_types)
    published = {
        "model_type": "qwen3_next", "decoder_sparse_step": 1, "full_attention_interval": 4, "head_dim": 256,
        "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 5120, "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
        "linear_value_head_dim": 128, "mlp_only_layers": [], "moe_intermediate_size": 512,
        "norm_topk_prob": True, "num_attention_heads": 16, "num_experts": 512, "num_experts_per_tok": 10,
        "num_hidden_layers": 48, "num_key_value_heads": 2, "partial_rotary_factor": 0.25,
        "rms_norm_eps": 1e-6, "rope_scaling": None, "rope_theta": 10000000,
        "shared_expert_intermediate_size": 512, "tie_word_embeddings": False, "vocab_size": 151936,
    }  # fmt: skip
    spec = parse(published, "config.json")
    assert spec.layer_kinds == ("linear_attention",) * 3 + ("full_attention",) + spec.layer_kinds[4:]
    assert spec.layer_kinds.count("full_attention") == 12 and spec.rope_theta == 1e7 and spec.rotary_dim == 64
    assert all(spec.has_experts(i) for i in range(48))


GOOD = {"num_hidden_layers": 2, "hidden_size": 16, "num_experts": 4, "num_experts_per_tok": 2}
REFUSALS = [  # (change, words the message must hold)
    ({"layer_types": ["linear_attention", "sliding_attention"]}, ["layer_types", "'sliding_attention'"]),
    ({"layer_types": ["linear_attention"]}, ["layer_types", "num_hidden_layers (2)"]),
    ({"linear_num_key_heads": 3, "linear_num_value_heads": 4}, ["linear_num_key_heads", "divisor"]),
    ({"num_key_value_heads": 3, "num_attention_heads": 4}, ["num_key_value_heads", "divisor"]),
    ({"num_experts_per_tok": 5}, ["num_experts_per_tok", "at most num_experts (4)"]),
    ({"mlp_only_layers": [2]}, ["mlp_only_layers", "0 … 1"]),
    ({"hidden_act": "gelu"}, ["hidden_act", "silu"]),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 2.0}}, ["rope_type", "'default'"]),
    ({"rope_scaling": {"type": "linear", "factor": 2.0}}, ["rope_scaling", "'default'"]),
    ({"head_dim": 3, "partial_rotary_factor": 1.0}, ["partial_rotary_factor", "fit in head_dim"]),
    ({"quantization_config": {"quant_method": "fp8"}}, ["quantization_config", "unquantized"]),
    ({"model_type": "qwen3_5"}, ["model_type", "'qwen3_next'"]),
    ({"hidden_size": 0}, ["hidden_size", "positive integer"]),
]


@pytest.mark.parametrize("change, words", REFUSALS)
def test_parse_refuses_with_the_field_and_what_is_allowed(change, words):
    with pytest.raises(CheckpointError) as err:
        parse(dict(GOOD, **change), "some/folder")
    message = str(err.value)
    assert message.startswith("some/folder: ")
    for word in words:
        assert word in message, (word, message)

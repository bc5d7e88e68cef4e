"""xLSTM in JAX (rnnviz.engine.blocks.xlstm) against transformers' own xLSTMForCausalLM: the
tensors' names and shapes, the logits, the loss and every parameter's gradient, and the probes
(the stream rows against torch pre-hooks, the state rows against a zero added to the state
inside transformers' own recurrent step), wherever transformers runs its chunkwise kernel
(mode "train", or the whole chunks of mode "inference") and its step loop (the rest)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from transformers import xLSTMConfig, xLSTMForCausalLM
from transformers.models.xlstm import modeling_xlstm

from rnnviz.checkpoints.families.xlstm import FAMILY, XLSTMSpec, parse, tensors, tied
from rnnviz.checkpoints.record import CheckpointError
from rnnviz.engine.blocks import Probes, xlstm
from rnnviz.engine.blocks.xlstm import forward, state_shapes

TOL = 1e-4  # relative, normwise, float32 against torch's float32
BATCH = 2
VOCAB = 48
#: (id, config overrides, T). Between them: 1, 2 and 4 heads, qk_dim_factor 0.5 and 1, D 32 and
#: 64, 1–2 blocks, single and fused weights, with and without biases, an untied head and a tied
#: one, chunk sizes 4 and 8; T a multiple of the chunk in mode "train" (chunkwise kernel only)
#: and "inference" (the same), 11 = 8 + 3 (chunkwise, then the step loop) and 6 < 8 (the step
#: loop only); non-default ε, caps, FFN width and float32 switch.
CASES = [
    ("h1-qk1-train-T8c4", dict(num_heads=1, num_blocks=1, qk_dim_factor=1.0, chunk_size=4, mode="train"), 8),
    ("h2-bias-tied-T16c8", dict(num_heads=2, use_bias=True, tie_word_embeddings=True, chunk_size=8), 16),
    (
        "h4-d64-train-ffn1.5-T16c8",
        dict(
            hidden_size=64,
            num_heads=4,
            chunk_size=8,
            mode="train",
            ffn_proj_factor=1.5,
            ffn_round_up_to_multiple_of=32,
        ),
        16,
    ),
    ("h2-fused-bias-T11c4", dict(num_heads=2, weight_mode="fused", use_bias=True, chunk_size=4), 11),
    (
        "h4-qk1-steps-caps-T6c8",
        dict(
            num_heads=4,
            qk_dim_factor=1.0,
            chunk_size=8,
            norm_reduction_force_float32=False,
            gate_soft_cap=4.0,
            output_logit_soft_cap=3.0,
            norm_eps=0.05,
            eps=1e-3,
        ),
        6,
    ),
]


class Case(NamedTuple):
    model: Any  # the torch model, float32
    spec: XLSTMSpec
    params: dict[str, jax.Array]  # the file's tensors, tied ones filled in
    saved: set[str]  # the names in model.safetensors
    ids: np.ndarray  # <int64>[B, T]
    stepped: int  # the first step transformers runs in its step loop (T: none)


class TorchRun(NamedTuple):
    logits: np.ndarray  # [B, T, V]
    loss: float
    grads: dict[str, np.ndarray]  # every parameter's
    stream: list[np.ndarray]  # ∂L/∂(zero added before block l / the final norm), [B, T, D]
    states: list[dict[str, np.ndarray]]  # ∂L/∂(zero added to the state), steps `stepped`…T−1


class JaxRun(NamedTuple):
    logits: jax.Array  # without probes
    probed: jax.Array  # with zero probes
    loss: jax.Array
    grads: dict[str, jax.Array]
    probes: Probes  # ∂L/∂probes


def _rel(a: Any, b: Any) -> float:
    """‖a − b‖ / ‖b‖ (‖a‖ where b is all zeros)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / (np.linalg.norm(b) or 1.0))


def _model(overrides: dict) -> xLSTMForCausalLM:
    """A tiny model, every parameter moved off its initial value. The layers named for a gate
    (input, forget, output, the FFN's) start with zero weights, the input gate's bias at −10
    (where it would barely open) and the forget gate's at 3…6: they are drawn afresh.
    transformers cannot initialise fused weights (its ``_init_weights`` mixes the shapes of the
    i and f halves), so those start from torch's own initialisation."""
    config = xLSTMConfig(**(dict(vocab_size=VOCAB, hidden_size=32, num_blocks=2) | overrides))
    torch.manual_seed(0)
    with pytest.MonkeyPatch.context() as patch:
        if config.weight_mode == "fused":
            patch.setattr(modeling_xlstm.xLSTMPreTrainedModel, "_init_weights", lambda self, module: None)
        model = xLSTMForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "gate" in name:
                p.copy_(torch.randn_like(p) * (1.0 if name.endswith("bias") else 0.3))
            else:
                p.add_(0.1 * torch.randn_like(p))
    return model


def _build(overrides: dict, seq_len: int, folder) -> Case:
    model = _model(overrides)
    model.save_pretrained(folder)
    spec = parse(json.loads((folder / "config.json").read_text()), str(folder))
    arrays = load_file(folder / "model.safetensors")
    if model.config.tie_word_embeddings:
        # transformers' xLSTM names no tied weights: it keeps (and saves) a head of its own, and
        # refuses to save one shared. Tied here after saving, and the head left out of the file,
        # as a tying config allows: the embeddings fill it, and its gradient adds to theirs.
        model.lm_head.weight = model.backbone.embeddings.weight
        for name in tied(spec):
            del arrays[name]
    saved = set(arrays)
    for name, source in tied(spec).items():
        arrays.setdefault(name, arrays[source])
    ids = torch.randint(0, VOCAB, (BATCH, seq_len), generator=torch.Generator().manual_seed(1))
    config = model.config
    stepped = seq_len if config.mode == "train" else seq_len // config.chunk_size * config.chunk_size
    return Case(model, spec, {k: jnp.asarray(v) for k, v in arrays.items()}, saved, ids.numpy(), stepped)


def _probed_step(probes: list[dict[str, torch.Tensor]], stepped: int, calls: list[int]):
    """transformers' ``mlstm_recurrent_step_native`` with ``probes[layer][leaf][:, t − stepped]``
    added to the state it returns, and its readout redone from that state as it does it."""
    original = modeling_xlstm.mlstm_recurrent_step_native

    def step(*, query, cstate, nstate, mstate, eps, **kwargs):
        layer, row = divmod(len(calls), probes[0]["m"].shape[1])
        calls.append(stepped + row)
        _, (c, n, m) = original(query=query, cstate=cstate, nstate=nstate, mstate=mstate, eps=eps, **kwargs)
        p = probes[layer]
        c, n, m = c + p["C"][:, row], n + p["n"][:, row], m + p["m"][:, row, :, None]
        q = query * query.shape[-1] ** -0.5
        numerator = (q[:, :, None, :] @ c).squeeze(2)
        qn = (q[:, :, None, :] @ n[:, :, :, None]).squeeze(2)
        return numerator / (torch.maximum(qn.abs(), torch.exp(-m)) + eps), (c, n, m)

    return step


def _torch_run(case: Case) -> TorchRun:
    """One forward and backward pass of transformers' model with zero probes: pre-hooks on the
    blocks and the final norm, and a wrapped step for the steps its step loop runs."""
    model, spec, (b, t) = case.model, case.spec, case.ids.shape
    stream = [torch.zeros(b, t, spec.d_model, requires_grad=True) for _ in range(spec.n_layers + 1)]
    shapes = state_shapes(spec, b, t - case.stepped)
    states = [{k: torch.zeros(s.shape, requires_grad=True) for k, s in layer.items()} for layer in shapes]
    targets = [*model.backbone.blocks, model.backbone.out_norm]
    hooks = [
        m.register_forward_pre_hook(lambda _m, a, z=z: (a[0] + z, *a[1:])) for m, z in zip(targets, stream)
    ]
    calls: list[int] = []
    step = _probed_step(states, case.stepped, calls)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(modeling_xlstm, "mlstm_recurrent_step_native", step)
            ids = torch.as_tensor(case.ids)
            model.zero_grad()
            out = model(ids, labels=ids, use_cache=False)
            out.loss.backward()
    finally:
        for hook in hooks:
            hook.remove()
    assert calls == list(range(case.stepped, t)) * spec.n_layers  # the step loop ran where expected
    return TorchRun(
        logits=out.logits.detach().numpy(),
        loss=out.loss.item(),
        grads={n: p.grad.numpy() for n, p in model.named_parameters()},
        stream=[z.grad.numpy() for z in stream],
        states=[{k: v.grad.numpy() for k, v in layer.items()} for layer in states if t > case.stepped],
    )


def _loss(spec: XLSTMSpec, params, ids, probes, chunked: bool = False) -> tuple[jax.Array, jax.Array]:
    """Mean next-token cross-entropy over B·(T − 1), as transformers' ``ForCausalLMLoss``; and the logits."""
    logits = forward(spec, params, ids, probes, chunked=chunked)
    logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1)), logits


_forward = jax.jit(forward, static_argnums=0)
_grads = jax.jit(jax.value_and_grad(_loss, argnums=(1, 3), has_aux=True), static_argnums=0)
_chunked_grads = jax.jit(
    jax.value_and_grad(lambda spec, p, ids: _loss(spec, p, ids, None, chunked=True), argnums=1, has_aux=True),
    static_argnums=0,
)


def _zero_probes(spec: XLSTMSpec, seq_len: int) -> Probes:
    stream = tuple(jnp.zeros((BATCH, seq_len, spec.d_model), jnp.float32) for _ in range(spec.n_layers + 1))
    states = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), state_shapes(spec, BATCH, seq_len))
    return Probes(stream, states)


def _jax_run(case: Case) -> JaxRun:
    ids = jnp.asarray(case.ids)
    probes = _zero_probes(case.spec, ids.shape[1])
    (loss, probed), (grads, probe_grads) = _grads(case.spec, case.params, ids, probes)
    return JaxRun(_forward(case.spec, case.params, ids), probed, loss, grads, probe_grads)


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def runs(request, tmp_path_factory) -> tuple[Case, TorchRun, JaxRun]:
    _, overrides, seq_len = request.param
    case = _build(overrides, seq_len, tmp_path_factory.mktemp("ckpt"))
    return case, _torch_run(case), _jax_run(case)


def test_tensors_are_the_state_dict(runs):
    case, _, _ = runs
    expected = {k: tuple(v.shape) for k, v in case.model.state_dict().items()}
    assert tensors(case.spec) == expected
    assert case.saved == set(expected) - set(tied(case.spec))
    assert FAMILY.model_types == ("xlstm",)


def test_logits_match_transformers(runs):
    _, want, got = runs
    assert got.logits.dtype == jnp.float32 and got.logits.shape == want.logits.shape
    assert _rel(got.logits, want.logits) < TOL


def test_loss_and_every_gradient_match_torch(runs):
    case, want, got = runs
    assert abs(float(got.loss) - want.loss) < TOL * want.loss
    _assert_grads_match(case, got.grads, want)


def test_the_chunkwise_form_matches_transformers(runs):
    """What training runs (``forward(chunked=True)``: no probes, :func:`xlstm.chunked_mlstm` in
    chunks of 64) gives transformers' logits, loss and every parameter's gradient, whatever
    transformers ran (its chunkwise kernel in chunks of 4 or 8, its step loop, or both)."""
    case, want, _ = runs
    (loss, logits), grads = _chunked_grads(case.spec, case.params, jnp.asarray(case.ids))
    assert _rel(logits, want.logits) < TOL
    assert abs(float(loss) - want.loss) < TOL * want.loss
    _assert_grads_match(case, grads, want)


def _assert_grads_match(case: Case, got: dict, want: TorchRun) -> None:
    grads = dict(got)
    for name, source in tied(case.spec).items():  # torch holds one tensor, its gradient the sum
        grads[source] = grads[source] + grads.pop(name)
    assert set(grads) == set(want.grads)
    for name, expected in want.grads.items():
        error = np.linalg.norm(np.asarray(grads[name], np.float64) - expected)
        assert error < TOL * _scale(name, want.grads), name


def _scale(name: str, grads: dict[str, np.ndarray]) -> float:
    """The norm that measures the error of ``name``'s gradient: its own, but for the input
    gate's bias, whose gradient is a small difference of large terms
    (:func:`test_input_gate_bias_is_nearly_a_symmetry`) and as inexact in torch's float32 as
    here: it is measured against the gate's weight gradient as well."""
    own = float(np.linalg.norm(grads[name]))
    if name.endswith(("igate_preact.bias", "ifgate_preact.bias")):
        return max(own, float(np.linalg.norm(grads[name.removesuffix("bias") + "weight"])))
    return own


def test_stream_probes_match_torch_hooks(runs):
    """Zero probes leave the logits as they were; ∂L/∂(stream row l) equals torch's gradient of a
    zero added by a pre-hook to block l's input (row L: the final norm's input)."""
    _, want, got = runs
    np.testing.assert_allclose(got.probed, got.logits, rtol=1e-6, atol=1e-6)
    assert len(got.probes.stream) == len(want.stream)
    for row, expected in enumerate(want.stream):
        assert _rel(got.probes.stream[row], expected) < TOL, row


def test_state_probes_match_transformers_step(runs):
    """∂L/∂(state probe) at the steps transformers' step loop runs equals torch's gradient of a
    zero added to C, n and m inside that step, before its readout (states leaves [B, T, ...]).

    n reaches the loss only through the readout's denominator, one scale per head and step,
    which the per-head layer norm divides out but for its ε: at the default ε = 10⁻⁶ its
    gradient is float32 round-off in both, and it is compared where ε makes it a number."""
    case, want, got = runs
    if not want.states:
        pytest.skip("transformers runs its chunkwise kernel on every step here")
    leaves = ("C", "n", "m") if case.spec.norm_eps >= 1e-2 else ("C", "m")
    for layer, expected in enumerate(want.states):
        stepped = {leaf: grad[:, case.stepped :] for leaf, grad in got.probes.states[layer].items()}
        for leaf in leaves:
            assert _rel(stepped[leaf], expected[leaf]) < TOL, (layer, leaf)


def test_float64_matches_transformers_float64(tmp_path):
    """In float64 the float32 round-off of transformers' chunkwise kernel is gone, and with it
    the only slack the float32 comparisons need: the logits and every gradient, the input
    gate's bias included, agree to float64's error but for the final norm, which reduces in
    float32 in both. (transformers' step loop keeps a float32 state whatever the model's dtype:
    T is a multiple of the chunk here.)"""
    overrides = dict(num_heads=2, qk_dim_factor=1.0, use_bias=True, chunk_size=8)
    case = _build(overrides | dict(norm_reduction_force_float32=False), 16, tmp_path)
    model = case.model.double()
    ids = torch.as_tensor(case.ids)
    out = model(ids, labels=ids, use_cache=False)
    out.loss.backward()
    with jax.enable_x64():
        params = {k: v.astype(jnp.float64) for k, v in case.params.items()}
        (_, logits), grads = jax.jit(jax.value_and_grad(_loss, argnums=1, has_aux=True), static_argnums=0)(
            case.spec, params, jnp.asarray(case.ids), None
        )
        logits, grads = np.asarray(logits), {k: np.asarray(v) for k, v in grads.items()}
    assert _rel(logits, out.logits.detach().numpy()) < 1e-6
    for name, p in model.named_parameters():
        assert _rel(grads[name], p.grad.numpy()) < 1e-5, name


@pytest.mark.parametrize("steps, chunk", [(1, 4), (7, 4), (16, 16), (33, 16), (70, 64)])
def test_the_chunkwise_rule_is_the_step_by_step_rule_in_float64(steps, chunk):
    """:func:`xlstm.chunked_mlstm` = :func:`xlstm.mlstm` in float64, outputs and the gradient of
    every input: T a multiple of the chunk or not, one chunk or several, gates spread wide
    enough that the stabiliser m switches between its two arms and the denominator between
    |q̂ᵀn| and e^{−m}."""
    with jax.enable_x64():
        key = jax.random.split(jax.random.key(steps), 6)
        q, k = (jax.random.normal(a, (2, steps, 3, 4), jnp.float64) for a in key[:2])
        v = jax.random.normal(key[2], (2, steps, 3, 5), jnp.float64)
        i_pre = 6 * jax.random.normal(key[3], (2, steps, 3), jnp.float64)
        f_pre = 4 * jax.random.normal(key[4], (2, steps, 3), jnp.float64) + 2
        w = jax.random.normal(key[5], (2, steps, 3, 5), jnp.float64)
        args = (q, k, v, i_pre, f_pre)
        stepwise = lambda *a: jnp.sum(xlstm.mlstm(*a, 1e-6)[0] * w)  # noqa: E731
        chunked = lambda *a: jnp.sum(xlstm.chunked_mlstm(*a, 1e-6, chunk) * w)  # noqa: E731
        got = jax.jit(xlstm.chunked_mlstm, static_argnums=(5, 6))(*args, 1e-6, chunk)
        np.testing.assert_allclose(got, jax.jit(xlstm.mlstm, static_argnums=5)(*args, 1e-6)[0], atol=1e-11)
        argnums = tuple(range(len(args)))
        grads = (jax.jit(jax.grad(f, argnums))(*args) for f in (chunked, stepwise))
        for name, got, expected in zip("qkvif", *grads):
            np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-12, err_msg=name)


def test_the_chunkwise_form_refuses_a_probe():
    spec = parse({"vocab_size": VOCAB, "hidden_size": 32, "num_blocks": 1, "num_heads": 2}, "c")
    params = {n: jnp.full(s, 0.01, jnp.float32) for n, s in tensors(spec).items()}
    probes = Probes(
        tuple(jnp.zeros((BATCH, 5, spec.d_model)) for _ in range(2)),
        jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), state_shapes(spec, BATCH, 5)),
    )
    with pytest.raises(ValueError, match="chunked=False with a probe"):
        forward(spec, params, jnp.zeros((BATCH, 5), jnp.int32), probes, chunked=True)


def test_input_gate_bias_is_nearly_a_symmetry():
    """In float64, without the gates' soft cap and with ε ≈ 0, the input gate's bias has no
    gradient: its shift δ moves every step's ĩ alike, which scales a head's whole history
    (C, n from zero) by e^δ, and the readout's division by |q̂ᵀn| or the per-head layer norm
    undoes any such scale. The cap and the ε break it only slightly."""
    spec = parse({"vocab_size": VOCAB, "hidden_size": 32, "num_blocks": 1, "num_heads": 2}, "c")
    exact = dict(gate_soft_cap=None, eps=1e-14, norm_eps=1e-14, norm_reduction_force_float32=False)
    spec = dataclasses.replace(spec, **exact)
    keys = jax.random.split(jax.random.key(0), len(tensors(spec)))
    ids = jax.random.randint(jax.random.key(1), (BATCH, 8), 0, VOCAB)
    with jax.enable_x64():
        params = {
            name: 0.5 * jax.random.normal(key, shape, jnp.float64)
            for key, (name, shape) in zip(keys, tensors(spec).items())
        }
        grads = jax.jit(jax.grad(lambda p: _loss(spec, p, ids, None)[0]))(params)
        gate = "backbone.blocks.0.mlstm_layer.igate_preact."
        bias, weight = (float(jnp.linalg.norm(grads[gate + k])) for k in ("bias", "weight"))
    assert bias < 1e-9 * weight


def test_bfloat16_follows_torch_bfloat16(tmp_path):
    """In bfloat16 (mode "train": transformers' chunkwise kernel fails in bfloat16 under mode
    "inference", which starts from a float32 state) the logits agree to bfloat16's precision."""
    _, overrides, seq_len = CASES[0]
    case = _build(overrides, seq_len, tmp_path)
    model = case.model.to(torch.bfloat16)
    with torch.no_grad():
        want = model(torch.as_tensor(case.ids), use_cache=False).logits.float().numpy()
    params = {k: v.astype(jnp.bfloat16) for k, v in case.params.items()}
    got = _forward(case.spec, params, jnp.asarray(case.ids))
    assert got.dtype == jnp.float32
    assert _rel(got, want) < 2e-2


def test_defaults_are_transformers_defaults():
    """An almost empty config.json reads as transformers' default config, whose model (built on
    the meta device: no memory) has exactly the tensors listed."""
    config = xLSTMConfig()
    spec = parse({"model_type": "xlstm"}, "defaults")
    assert spec == parse(config.to_dict(), "defaults")
    assert (spec.hidden_size, spec.num_blocks, spec.num_heads) == (4096, 32, 8)
    assert (spec.qk_dim, spec.v_dim, spec.ffn_dim) == (2048, 4096, 10944)
    with torch.device("meta"):
        model = xLSTMForCausalLM(xLSTMConfig(num_blocks=2))
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert tensors(parse({"num_blocks": 2}, "defaults")) == shapes
    assert tied(spec) == {}


def test_state_shapes():
    spec = parse({"hidden_size": 32, "num_blocks": 2, "num_heads": 4, "qk_dim_factor": 1.0}, "s")
    shapes = state_shapes(spec, 3, 9)
    assert [{k: v.shape for k, v in s.items()} for s in shapes] == [
        {"C": (3, 9, 4, 8, 8), "n": (3, 9, 4, 8), "m": (3, 9, 4)}
    ] * 2
    assert all(v.dtype == jnp.float32 for s in shapes for v in s.values())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model_type": "mlstm"}, "model_type is 'mlstm'; allowed: 'xlstm'"),
        ({"weight_mode": "triple"}, "weight_mode is 'triple'; allowed: single, fused"),
        ({"hidden_size": 30, "num_heads": 4}, "qk_dim_factor is 0.5: int(hidden_size · qk_dim_factor) = 15"),
        ({"hidden_size": 32, "embedding_dim": 16}, "embedding_dim is 16; allowed: null or hidden_size (32)"),
        ({"num_heads": 0}, "num_heads is 0; allowed: a positive integer"),
        ({"use_bias": "no"}, "use_bias is 'no'; allowed: true or false"),
        ({"gate_soft_cap": -1.0}, "gate_soft_cap is -1.0; allowed: a positive number or null"),
    ],
)
def test_parse_refuses_what_it_does_not_implement(config, message):
    with pytest.raises(CheckpointError) as err:
        parse(config, "folder/config.json")
    assert str(err.value).startswith("folder/config.json: ") and message in str(err.value)

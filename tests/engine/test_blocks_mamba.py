"""Mamba and FalconMamba in JAX (rnnviz.engine.blocks.mamba) against transformers' own models:
the tensors' names and shapes, the logits, the loss and every parameter's gradient, and the
probes (the stream rows against torch hooks, the state rows by float64 finite differences)."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from transformers import FalconMambaConfig, FalconMambaForCausalLM, MambaConfig, MambaForCausalLM

from rnnviz.checkpoints.families.mamba import FAMILY, MambaSpec, parse, tensors, tied
from rnnviz.checkpoints.record import CheckpointError
from rnnviz.engine.blocks import Probes, mamba, probed
from rnnviz.engine.blocks.mamba import forward, selective_scan, ssm_step, state_shapes

TOL = 1e-4  # relative, normwise, float32 against torch's float32
BATCH = 2
MODELS = {
    "mamba": (MambaConfig, MambaForCausalLM),
    "falcon_mamba": (FalconMambaConfig, FalconMambaForCausalLM),
}
#: (id, model_type, config overrides, seq_len): between them d_state 4 and 8, kernels 2–4, with
#: and without the conv bias and the projections' biases, tied and untied heads, R "auto" and set,
#: T 7 and 13, 1–3 layers, and a non-default ε.
CASES = [
    ("mamba-n4-k4-tied-auto", "mamba", dict(state_size=4, conv_kernel=4, num_hidden_layers=2), 7),
    (
        "mamba-n8-k2-nobias-untied-r3",
        "mamba",
        dict(state_size=8, conv_kernel=2, use_conv_bias=False, tie_word_embeddings=False, time_step_rank=3),
        13,
    ),
    (
        "mamba-n8-k4-untied-projbias-3layers",
        "mamba",
        dict(state_size=8, hidden_size=24, num_hidden_layers=3, tie_word_embeddings=False, use_bias=True),
        7,
    ),
    (
        "mamba-n4-k3-tied-r5-eps",
        "mamba",
        dict(state_size=4, conv_kernel=3, time_step_rank=5, expand=3, layer_norm_epsilon=1e-2),
        13,
    ),
    ("falcon-n4-k4-tied-auto", "falcon_mamba", dict(state_size=4, num_hidden_layers=2), 13),
    (
        "falcon-n8-k2-untied-r3-bias",
        "falcon_mamba",
        dict(
            state_size=8,
            conv_kernel=2,
            use_conv_bias=False,
            use_bias=True,
            tie_word_embeddings=False,
            time_step_rank=3,
            mixer_rms_eps=1e-3,
        ),
        7,
    ),
]


class Case(NamedTuple):
    model: Any  # the torch model, float32, eval mode
    spec: MambaSpec
    params: dict[str, jax.Array]  # the file's tensors, tied ones filled in
    saved: set[str]  # the names in model.safetensors
    ids: np.ndarray  # <int64>[B, T]


def _rel(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _build(model_type: str, overrides: dict, seq_len: int, folder, seed: int = 0) -> Case:
    config_cls, model_cls = MODELS[model_type]
    torch.manual_seed(seed)
    sizes = dict(vocab_size=96, hidden_size=32, num_hidden_layers=1) | overrides
    model = model_cls(config_cls(**sizes)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(0.2 * torch.randn_like(p))
            if name.endswith("dt_proj.bias"):  # Δ ≈ 0.05–0.5 instead of 10⁻³: the state matters
                p.add_(3.0)
    model.save_pretrained(folder)
    spec = parse(json.loads((folder / "config.json").read_text()), str(folder))
    arrays = load_file(folder / "model.safetensors")
    saved = set(arrays)
    for name, source in tied(spec).items():
        arrays.setdefault(name, arrays[source])
    ids = torch.randint(
        0, sizes["vocab_size"], (BATCH, seq_len), generator=torch.Generator().manual_seed(seed)
    )
    return Case(model, spec, {k: jnp.asarray(v) for k, v in arrays.items()}, saved, ids.numpy())


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def case(request, tmp_path_factory) -> Case:
    _, model_type, overrides, seq_len = request.param
    return _build(model_type, overrides, seq_len, tmp_path_factory.mktemp("ckpt"))


def _loss(spec: MambaSpec, params, ids, probes=None) -> jax.Array:
    """Mean next-token cross-entropy over B·(T − 1), as transformers' ``ForCausalLMLoss``."""
    logits = forward(spec, params, ids, probes)
    logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1))


_forward = jax.jit(forward, static_argnums=0)
_param_grad = jax.jit(jax.value_and_grad(_loss, argnums=1), static_argnums=0)
_probe_grad = jax.jit(jax.grad(_loss, argnums=3), static_argnums=0)


def _zero_probes(spec: MambaSpec, seq_len: int, dtype=jnp.float32) -> Probes:
    stream = tuple(jnp.zeros((BATCH, seq_len, spec.d_model), dtype) for _ in range(spec.n_layers + 1))
    states = jax.tree.map(lambda s: jnp.zeros(s.shape, dtype), state_shapes(spec, BATCH, seq_len))
    return Probes(stream, states)


def test_tensors_are_the_state_dict(case):
    expected = {k: tuple(v.shape) for k, v in case.model.state_dict().items()}
    assert tensors(case.spec) == expected
    assert case.saved == set(expected) - set(tied(case.spec))
    assert FAMILY.model_types == ("mamba", "falcon_mamba")


def test_logits_match_transformers(case):
    with torch.no_grad():
        want = case.model(torch.as_tensor(case.ids), use_cache=False).logits.numpy()
    got = _forward(case.spec, case.params, jnp.asarray(case.ids))
    assert got.dtype == jnp.float32 and got.shape == want.shape
    assert _rel(got, want) < TOL


def test_loss_and_every_gradient_match_torch(case):
    case.model.zero_grad()
    ids = torch.as_tensor(case.ids)
    out = case.model(ids, labels=ids, use_cache=False)
    out.loss.backward()
    loss, grads = _param_grad(case.spec, case.params, jnp.asarray(case.ids))
    assert abs(float(loss) - out.loss.item()) < TOL * out.loss.item()
    for name, source in tied(case.spec).items():  # torch holds one tensor, its gradient the sum
        grads = grads | {source: grads[source] + grads.pop(name)}
    torch_grads = {n: p.grad.numpy() for n, p in case.model.named_parameters()}
    assert set(grads) == set(torch_grads)
    for name, want in torch_grads.items():
        assert _rel(grads[name], want) < TOL, name


def test_stream_probes_match_torch_hooks(case):
    """Zero probes leave the logits as they were; ∂L/∂(stream row l) equals torch's gradient of a
    zero added by a pre-hook to block l's input (row L: the final norm's input)."""
    spec, ids = case.spec, jnp.asarray(case.ids)
    probes = _zero_probes(spec, ids.shape[1])
    plain = _forward(spec, case.params, ids)
    np.testing.assert_allclose(_forward(spec, case.params, ids, probes), plain, rtol=1e-6, atol=1e-6)
    backbone = case.model.backbone
    zeros = [torch.zeros(probes.stream[0].shape, requires_grad=True) for _ in probes.stream]
    targets = [*backbone.layers, backbone.norm_f]
    hooks = [
        m.register_forward_pre_hook(lambda _m, a, z=z: (a[0] + z, *a[1:])) for m, z in zip(targets, zeros)
    ]
    try:
        torch_ids = torch.as_tensor(case.ids)
        case.model(torch_ids, labels=torch_ids, use_cache=False).loss.backward()
    finally:
        for hook in hooks:
            hook.remove()
    grads = _probe_grad(spec, case.params, ids, probes)
    for row, z in enumerate(zeros):
        assert _rel(grads.stream[row], z.grad.numpy()) < TOL, row


@pytest.mark.parametrize("index", [0, 4])
def test_state_probe_gradient_is_the_finite_difference_and_causal(index, tmp_path):
    """In float64, ∂L/∂(state probe) equals the central difference at entries of the first and
    the last layer; the entry's step t is where it first reaches the logits."""
    _, model_type, overrides, seq_len = CASES[index]
    case = _build(model_type, overrides, seq_len, tmp_path)
    spec, ids = case.spec, jnp.asarray(case.ids)
    with jax.enable_x64():
        params = {k: v.astype(jnp.float64) for k, v in case.params.items()}
        probes = _zero_probes(spec, seq_len, jnp.float64)
        grads = jax.jit(jax.grad(_loss, argnums=3), static_argnums=0)(spec, params, ids, probes)
        shape = probes.states[0]["h"].shape
        for layer, entry in ((0, (0, 2, 3, 1)), (spec.n_layers - 1, (1, seq_len - 2, 5, shape[-1] - 1))):

            def nudged(eps: float, layer=layer, entry=entry) -> Probes:
                states = list(probes.states)
                states[layer] = {"h": states[layer]["h"].at[entry].set(eps)}
                return probes._replace(states=tuple(states))

            eps = 1e-5
            fd = (_loss(spec, params, ids, nudged(eps)) - _loss(spec, params, ids, nudged(-eps))) / (2 * eps)
            assert abs(float(fd)) > 1e-6  # an entry the loss depends on
            assert abs(float(fd) - float(grads.states[layer]["h"][entry])) < 1e-5 * abs(float(fd))
            changed = jnp.abs(forward(spec, params, ids, nudged(1e-3)) - forward(spec, params, ids, probes))
            step = entry[1]
            assert float(changed[:, :step].max()) == 0.0  # the past does not see it
            assert float(changed[entry[0], step].max()) > 0.0  # the readout of its own step does


def _scan_by_autodiff(a, inputs, c_t, probe, dtype):
    """The selective scan as one plain ``lax.scan`` of :func:`ssm_step`, left to JAX's own
    transpose: the oracle of the hand-written reverse pass."""
    wide = inputs["delta"].dtype
    swap = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    if probe is None or probe.ndim == 2:  # none, or a norm probe [B, T]
        probe_t = None if probe is None else swap(probe)
    else:
        probe_t = jnp.transpose(probe, (1, 0, 3, 2))

    def step(h, xs):
        step_inputs, c, p = xs
        h = ssm_step(a, h, step_inputs)
        h = h if p is None else probed(h, p)
        return h, (jnp.sum(h.astype(dtype).astype(wide) * c.astype(wide)[..., None], axis=1), h)

    h0 = jnp.zeros(c_t.shape[:1] + a.shape, wide)
    _, (readout, hs) = jax.lax.scan(step, h0, (jax.tree.map(swap, inputs), swap(c_t), probe_t))
    return swap(readout), jnp.transpose(hs, (1, 0, 3, 2))


@pytest.mark.parametrize("reads_states", [True, False])
@pytest.mark.parametrize(
    ("probe", "wide", "dtype", "rtol"),
    [
        (None, "float64", "float64", 1e-12),
        ("state", "float64", "float64", 1e-12),
        ("norm", "float64", "float64", 1e-12),
        ("norm", "float32", "bfloat16", 1e-5),
    ],
)
def test_the_scans_reverse_pass_is_jaxs_transpose_of_the_steps(probe, wide, dtype, rtol, reads_states):
    """Every input's gradient (A, Δ, B, u, C and the probe) through the readout, and the states
    or not (training reads only the readout), from the hand-written reverse pass and from JAX's
    transpose of the plain steps; with decays from near 1 to near 0, a probe of each kind, and
    the bfloat16 readout's casts."""
    batch, steps, inner, n = 3, 9, 5, 4
    with jax.enable_x64(wide == "float64"):
        k = jax.random.split(jax.random.key(3), 7)
        a = -jnp.exp(2 * jax.random.normal(k[0], (n, inner), wide))
        inputs = {
            "delta": jax.nn.softplus(2 * jax.random.normal(k[1], (batch, steps, inner), wide)),
            "b": jax.random.normal(k[2], (batch, steps, n), wide),
            "u": jax.random.normal(k[3], (batch, steps, inner), wide),
        }
        c_t = jax.random.normal(k[4], (batch, steps, n), dtype)
        shapes = {None: None, "state": (batch, steps, inner, n), "norm": (batch, steps)}
        p = None if probe is None else jnp.zeros(shapes[probe], wide)
        weights = jax.random.normal(k[5], (batch, steps, inner, n), wide)

        def loss(scan, a, inputs, c_t, p):
            readout, hs = scan(a, inputs, c_t, p, jnp.dtype(dtype))
            return jnp.sum(jnp.sin(readout)) + (jnp.sum(weights * jnp.cos(hs)) if reads_states else 0.0)

        by_hand, by_autodiff = (
            jax.jit(jax.grad(lambda *x, scan=scan: loss(scan, *x), argnums=(0, 1, 2, 3)))
            for scan in (selective_scan, _scan_by_autodiff)
        )
        got, want = by_hand(a, inputs, c_t, p), by_autodiff(a, inputs, c_t, p)
        assert jax.tree.structure(got) == jax.tree.structure(want)
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            assert g.dtype == w.dtype
            g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
            assert np.max(np.abs(g - w)) <= rtol * np.max(np.abs(w)), g.shape


@pytest.mark.parametrize("in_turn", [8, 1])
def test_the_scans_reverse_pass_under_vmap_is_each_alone(in_turn, monkeypatch):
    """``jax.vmap`` of one VJP over a batch of cotangents (the analysis's two) and of the whole
    gradient over a batch of problems (training's seeds) give each member's own gradient, state
    probe included: run one after the other, and vmapped past ``IN_TURN`` members."""
    monkeypatch.setattr(mamba, "IN_TURN", in_turn)
    batch, steps, inner, n = 2, 6, 3, 4
    with jax.enable_x64():
        k = jax.random.split(jax.random.key(5), 6)

        def problem(key):
            kk = jax.random.split(key, 4)
            a = -jnp.exp(jax.random.normal(kk[0], (n, inner), jnp.float64))
            inputs = {
                "delta": jax.nn.softplus(jax.random.normal(kk[1], (batch, steps, inner), jnp.float64)),
                "b": jax.random.normal(kk[2], (batch, steps, n), jnp.float64),
                "u": jax.random.normal(kk[3], (batch, steps, inner), jnp.float64),
            }
            return a, inputs, jax.random.normal(kk[0], (batch, steps, n), jnp.float64)

        def readout(a, inputs, c_t, probe):
            return selective_scan(a, inputs, c_t, probe, jnp.dtype("float64"))[0]

        a, inputs, c_t = problem(k[0])
        probe = jnp.zeros((batch, steps), jnp.float64)
        cts = jax.random.normal(k[1], (3, batch, steps, inner), jnp.float64)
        pull = jax.vjp(readout, a, inputs, c_t, probe)[1]
        together = jax.jit(jax.vmap(pull))(cts)
        for i in range(3):
            alone = jax.jit(pull)(cts[i])
            for g, w in zip(jax.tree.leaves(together), jax.tree.leaves(alone)):
                np.testing.assert_allclose(g[i], w, rtol=1e-12, atol=1e-300)

        problems = jax.vmap(problem)(jax.random.split(k[2], 3))
        grad = jax.grad(lambda *x: jnp.sum(jnp.sin(readout(*x, None))), argnums=(0, 1, 2))
        together = jax.jit(jax.vmap(grad))(*problems)
        for i in range(3):
            alone = jax.jit(grad)(*jax.tree.map(lambda x, i=i: x[i], problems))
            for g, w in zip(jax.tree.leaves(together), jax.tree.leaves(alone)):
                np.testing.assert_allclose(g[i], w, rtol=1e-12, atol=1e-300)


def test_bfloat16_follows_torch_bfloat16(tmp_path):
    """bfloat16 weights run (no silent promotion under strict dtypes) and the logits agree with
    torch's bfloat16 model to bfloat16's precision: about as far apart as either is from float32,
    so this does not pin down where each cast sits (XLA may also keep excess precision)."""
    _, model_type, overrides, seq_len = CASES[4]
    case = _build(model_type, overrides, seq_len, tmp_path)
    model = case.model.to(torch.bfloat16)
    with torch.no_grad():
        want = model(torch.as_tensor(case.ids), use_cache=False).logits.numpy()
    params = {k: v.astype(jnp.bfloat16) for k, v in case.params.items()}
    got = _forward(case.spec, params, jnp.asarray(case.ids))
    assert got.dtype == jnp.float32
    assert bool(jnp.isfinite(got).all()) and _rel(got, want) < 3e-2


@pytest.mark.parametrize("model_type", list(MODELS))
def test_defaults_are_transformers_defaults(model_type):
    """An almost empty config.json reads as transformers' default config, whose model (built on
    the meta device: no memory) has exactly the tensors listed."""
    config_cls, model_cls = MODELS[model_type]
    config = config_cls()
    spec = parse({"model_type": model_type}, "defaults")
    assert spec == parse(config.to_dict(), "defaults")
    for field in ("vocab_size", "hidden_size", "state_size", "intermediate_size", "conv_kernel"):
        assert getattr(spec, field) == getattr(config, field), field
    assert (spec.time_step_rank, spec.layer_norm_epsilon) == (
        config.time_step_rank,
        config.layer_norm_epsilon,
    )
    assert spec.mixer_rms_eps == getattr(config, "mixer_rms_eps", None)
    with torch.device("meta"):
        model = model_cls(config)
    assert tensors(spec) == {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert tied(spec) == {"lm_head.weight": "backbone.embeddings.weight"}


def test_state_shapes():
    spec = parse({"model_type": "mamba", "hidden_size": 20, "num_hidden_layers": 2, "state_size": 3}, "s")
    shapes = state_shapes(spec, 4, 9)
    assert [s["h"].shape for s in shapes] == [(4, 9, 40, 3)] * 2
    assert all(s["h"].dtype == jnp.float32 for s in shapes)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model_type": "mamba2"}, "model_type is 'mamba2'; allowed: mamba, falcon_mamba"),
        ({"model_type": "mamba", "hidden_act": "gelu"}, "hidden_act is 'gelu'; allowed: silu"),
        ({"model_type": "mamba", "time_step_rank": "half"}, "time_step_rank is 'half'; allowed: \"auto\""),
        ({"model_type": "falcon_mamba", "state_size": 0}, "state_size is 0; allowed: a positive integer"),
        ({"model_type": "mamba", "use_conv_bias": "yes"}, "use_conv_bias is 'yes'; allowed: true or false"),
        ({"model_type": "falcon_mamba", "mixer_rms_eps": -1}, "mixer_rms_eps is -1; allowed: a positive"),
        ({"model_type": "mamba", "quantization_config": {"bits": 4}}, "quantization_config is set"),
    ],
)
def test_parse_refuses_what_it_does_not_implement(config, message):
    with pytest.raises(CheckpointError) as err:
        parse(config, "folder/config.json")
    assert str(err.value).startswith("folder/config.json: ") and message in str(err.value)

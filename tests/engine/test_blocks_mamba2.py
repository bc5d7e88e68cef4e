"""Mamba-2 in JAX (``rnnviz.engine.blocks.mamba2``) against transformers' ``Mamba2ForCausalLM``,
the live oracle, on tiny random checkpoints written by ``save_pretrained``: the tensors' names
and shapes, the logits, the loss and every parameter's gradient, the stream probes' gradients
against torch hooks on the same stream, and the state probes' against finite differences of
torch's own cached continuation from a perturbed state.

transformers scans by chunks (``chunk_size`` 4 here, T = 7, 10 and 13 not multiples of it), rnnviz
step by step, so every comparison crosses the two algorithms.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz.checkpoints.families import mamba2 as family
from rnnviz.checkpoints.record import CheckpointError
from rnnviz.engine.blocks import Probes
from rnnviz.engine.blocks import mamba2 as block

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

VOCAB, HIDDEN, BATCH, CHUNK = 64, 16, 2, 4
TOL = 1e-4


def _arch(groups: int, heads: int, state: int, kernel: int, **rest: Any) -> dict[str, Any]:
    """A ``Mamba2Config``'s architecture fields: n_h · P = 2 · HIDDEN (expand 2)."""
    sizes = dict(n_groups=groups, num_heads=heads, head_dim=2 * HIDDEN // heads, state_size=state)
    return sizes | {"conv_kernel": kernel} | rest


#: name → (T, architecture).
CONFIGS = {
    "g1-h2-n4-k4-tied-T7": (7, _arch(1, 2, 4, 4, tie_word_embeddings=True, num_hidden_layers=2)),
    "g2-h4-n8-k2-noconvbias-T10": (10, _arch(2, 4, 8, 2, use_conv_bias=False, num_hidden_layers=2)),
    # the limit binds at both ends: Δ spans about [0.09, 1.8]
    "g2-h4-n4-k4-bias-limit-T13": (13, _arch(2, 4, 4, 4, use_bias=True, time_step_limit=(0.15, 0.8))),
    "g1-h4-n8-k2-tied-bf16resid-T13": (
        13,
        _arch(1, 4, 8, 2, tie_word_embeddings=True, num_hidden_layers=2, residual_in_fp32=False),
    ),
}


class Case(NamedTuple):
    """One tiny checkpoint and what torch and rnnviz compute on it."""

    model: Any  # the torch model, eval mode
    spec: family.Mamba2Spec
    file_tensors: dict[str, np.ndarray]
    ids: np.ndarray  # [B, T]
    torch_logits: np.ndarray
    torch_loss: float
    torch_grads: dict[str, np.ndarray]  # named_parameters: a tied head counts once, as the embeddings
    torch_stream_grads: list[np.ndarray]  # ∂L/∂(stream entering block l), l = 0 … L
    torch_in_proj: list[np.ndarray]  # each layer's in_proj output [B, T, 2I + 2GN + n_h]
    logits: np.ndarray  # rnnviz, no probes
    probed_logits: np.ndarray  # rnnviz, zero probes
    loss: float
    grads: dict[str, np.ndarray]
    probe_grads: Probes


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """‖a − b‖ / ‖b‖."""
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


def _torch_model(arch: dict[str, Any], seed: int, folder) -> Any:
    """A random ``Mamba2ForCausalLM``, every parameter moved off its initial value, saved."""
    torch.manual_seed(seed)
    sizes = dict(vocab_size=VOCAB, hidden_size=HIDDEN, expand=2, chunk_size=CHUNK, num_hidden_layers=1)
    config = transformers.Mamba2Config(**(sizes | arch))
    model = transformers.Mamba2ForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("dt_bias"):
                # Δ = softplus(δ + b_Δ) of order 0.1–1, so that exp(Δ A) decays visibly per step
                p.copy_(torch.randn_like(p) - 1.0)
            else:  # ones-initialised norms, zero biases, D = 1 included
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder)
    return model


def _torch_pass(model: Any, ids: np.ndarray, layers: int):
    """Loss, logits, parameter gradients and stream-probe gradients from one torch pass."""
    batch, steps = ids.shape
    probes = [torch.zeros(batch, steps, HIDDEN, requires_grad=True) for _ in range(layers + 1)]
    in_proj: list[np.ndarray] = [np.empty(0)] * layers

    def add(row: int):
        return lambda module, args: (args[0] + probes[row], *args[1:])

    def keep(layer: int):
        return lambda module, args, out: in_proj.__setitem__(layer, out.detach().numpy())

    stack = model.backbone
    handles = [stack.layers[i].register_forward_pre_hook(add(i)) for i in range(layers)]
    handles += [stack.layers[i].mixer.in_proj.register_forward_hook(keep(i)) for i in range(layers)]
    handles.append(stack.norm_f.register_forward_pre_hook(add(layers)))
    try:
        model.zero_grad()
        ids_t = torch.as_tensor(ids)
        out = model(ids_t, labels=ids_t, use_cache=False)
        out.loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    grads = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    stream = [p.grad.numpy().copy() for p in probes]
    return float(out.loss.detach()), out.logits.detach().numpy(), grads, stream, in_proj


def _loss(spec: family.Mamba2Spec, params, ids, probes):
    """transformers' loss with ``labels=input_ids``: mean next-token cross-entropy over B·(T−1)."""
    logits = block.forward(spec, params, ids, probes)
    logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, ids[:, 1:, None], axis=-1)), logits


def _zero_probes(spec: family.Mamba2Spec, batch: int, steps: int) -> Probes:
    stream = tuple(jnp.zeros((batch, steps, spec.d_model), jnp.float32) for _ in range(spec.n_layers + 1))
    states = tuple(
        {"h": jnp.zeros(s["h"].shape, s["h"].dtype)} for s in block.state_shapes(spec, batch, steps)
    )
    return Probes(stream, states)


@pytest.fixture(scope="module", params=list(CONFIGS))
def case(request, tmp_path_factory) -> Case:
    steps, arch = CONFIGS[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    model = _torch_model(arch, seed=list(CONFIGS).index(request.param), folder=folder)
    spec = family.parse(json.loads((folder / "config.json").read_text()), str(folder))
    file_tensors = safetensors_numpy.load_file(folder / "model.safetensors")
    ids = np.random.default_rng(0).integers(0, VOCAB, (BATCH, steps))
    loss_t, logits_t, grads_t, stream_t, in_proj = _torch_pass(model, ids, spec.n_layers)

    params = {name: jnp.asarray(v) for name, v in file_tensors.items()}
    for name, source in family.tied(spec).items():
        params.setdefault(name, params[source])
    ids_j = jnp.asarray(ids, jnp.int32)
    plain = jax.jit(lambda p, i: block.forward(spec, p, i))(params, ids_j)
    value_and_grad = jax.value_and_grad(lambda p, q: _loss(spec, p, ids_j, q), argnums=(0, 1), has_aux=True)
    (loss, probed), (grads, probe_grads) = jax.jit(value_and_grad)(params, _zero_probes(spec, *ids.shape))
    return Case(
        model,
        spec,
        file_tensors,
        ids,
        logits_t,
        loss_t,
        grads_t,
        stream_t,
        in_proj,
        np.asarray(plain),
        np.asarray(probed),
        float(loss),
        {k: np.asarray(v) for k, v in grads.items()},
        jax.tree.map(np.asarray, probe_grads),
    )


def test_tensors_are_the_state_dict(case: Case):
    """Every name and shape of :func:`tensors` is the model's state dict, and the file holds all
    of them but the tied head."""
    expected = family.tensors(case.spec)
    assert expected == {k: tuple(v.shape) for k, v in case.model.state_dict().items()}
    in_file = {k: v for k, v in expected.items() if k not in family.tied(case.spec)}
    assert in_file == {k: v.shape for k, v in case.file_tensors.items()}


def test_logits_match_transformers(case: Case):
    assert _rel(case.logits, case.torch_logits) < TOL


def test_loss_and_every_parameter_gradient_match_torch(case: Case):
    """jax.grad over the flat dict equals torch's ``.grad``; a tied head's gradient is the sum of
    its two entries, as torch's one shared parameter gets both."""
    assert abs(case.loss - case.torch_loss) < TOL * case.torch_loss
    grads = dict(case.grads)
    for name, source in family.tied(case.spec).items():
        grads[source] = grads[source] + grads.pop(name)
    assert grads.keys() == case.torch_grads.keys()
    worst = max((_rel(grads[k], g), k) for k, g in case.torch_grads.items())
    assert worst[0] < TOL, worst


def test_zero_probes_leave_the_logits_and_stream_probes_match_torch_hooks(case: Case):
    """Zero probes change nothing; ∂L/∂(stream probe l) equals torch's gradient of a zero added by
    a hook to block l's input (row L: the final norm's input)."""
    assert _rel(case.probed_logits, case.logits) < 1e-6
    assert len(case.probe_grads.stream) == case.spec.n_layers + 1
    for row, (ours, torch_grad) in enumerate(zip(case.probe_grads.stream, case.torch_stream_grads)):
        assert _rel(ours, torch_grad) < TOL, row


def test_bfloat16_logits_match_transformers(case: Case):
    """In bfloat16 the casts and roundings follow torch's: the logits agree far more closely than
    either agrees with float32 on the same rounded weights (about 1e-2 apart here)."""
    model = copy.deepcopy(case.model).to(torch.bfloat16)
    with torch.no_grad():
        expected = model(torch.as_tensor(case.ids), use_cache=False).logits.float().numpy()
    params = {k: jnp.asarray(v, jnp.bfloat16) for k, v in case.file_tensors.items()}
    for name, source in family.tied(case.spec).items():
        params.setdefault(name, params[source])
    logits = block.forward(case.spec, params, jnp.asarray(case.ids, jnp.int32))
    assert logits.dtype == jnp.float32
    assert _rel(np.asarray(logits), expected) < 1e-3


def _continued_loss(case: Case, layer: int, split: int, eps: float, direction: np.ndarray) -> float:
    """Torch's loss over the predictions from position ``split`` on, continuing with the cache of
    the first ``split`` tokens after ε·direction is added to ``layer``'s SSM state in it."""
    ids = torch.as_tensor(case.ids)
    with torch.no_grad():
        cache = case.model(ids[:, :split], use_cache=True).cache
        cache.get_recurrent_state(layer).add_(eps * torch.as_tensor(direction))
        logits = case.model(ids[:, split:], cache=cache, use_cache=True).logits[:, :-1]
        targets = ids[:, split + 1 :].reshape(-1)
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets, reduction="sum")
    return float(nll) / (ids.shape[0] * (ids.shape[1] - 1))


@pytest.mark.parametrize("layer", [0, -1])
def test_state_probe_gradient_matches_torch_finite_differences(case: Case, layer: int):
    """∂L/∂h_t from the state probe against torch: perturbing the state cached after t tokens (h_{t−1},
    what step t reads) by ε·u moves L by ε·(a_t ⊙ ∂L/∂h_t)·u, a_t = exp(Δ_t A) per head, since
    h_t = a_t h_{t−1} + …. Central differences along the gradient and along a random direction;
    a probe added one step early or late, or after the readout, fails it."""
    spec, layer = case.spec, layer % case.spec.n_layers
    split = case.ids.shape[1] // 2
    mixer = case.model.backbone.layers[layer].mixer
    dt_raw = torch.as_tensor(case.torch_in_proj[layer][:, split, -spec.num_heads :])
    delta = torch.nn.functional.softplus(dt_raw + mixer.dt_bias.detach()).clamp(*spec.time_step_limit)
    decay = torch.exp(-torch.exp(mixer.A_log.detach()) * delta).numpy()  # [B, n_h]
    grad = decay[:, :, None, None] * case.probe_grads.states[layer]["h"][:, split]
    scale = float(np.linalg.norm(grad))
    random = np.random.default_rng(1).standard_normal(grad.shape).astype(np.float32)
    for direction in (grad / scale, random / np.linalg.norm(random)):
        moved = {eps: _continued_loss(case, layer, split, eps, direction) for eps in (-0.1, -0.05, 0.05, 0.1)}
        central = {eps: (moved[eps] - moved[-eps]) / (2 * eps) for eps in (0.05, 0.1)}
        # Richardson: the ε² error cancels. torch's scan runs in float32 whatever the weights, so
        # a step small enough to need no extrapolation drowns in its rounding instead.
        derivative = (4 * central[0.05] - central[0.1]) / 3
        assert abs(derivative - float(np.sum(grad * direction))) < 1e-3 * scale


def test_parse_defaults_are_transformers():
    """An almost empty config reads as ``Mamba2Config()``'s defaults (sizes consistent as the
    class demands; everything else absent)."""
    spec = family.parse({"model_type": "mamba2"}, "demo")
    reference = transformers.Mamba2Config()
    for field in family.Mamba2Spec.__dataclass_fields__:
        value = getattr(reference, field)
        assert getattr(spec, field) == (tuple(value) if isinstance(value, list | tuple) else value), field


SMALL = {"model_type": "mamba2", "hidden_size": 16, "num_heads": 4, "head_dim": 8, "n_groups": 2}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model_type": "mamba"}, "model_type is 'mamba'; allowed: mamba2"),
        ({"n_groups": 3}, "n_groups is 3; allowed: a divisor of num_heads (4)"),
        ({"hidden_size": 24}, "expand · hidden_size is 2 · 24; allowed: num_heads · head_dim = 32"),
        ({"hidden_act": "gelu"}, "hidden_act is 'gelu'; allowed: silu"),
        ({"norm_before_gate": True}, "norm_before_gate is True; allowed: false"),
        ({"time_step_limit": [0.5, 0.1]}, "time_step_limit is [0.5, 0.1]; allowed: [lo, hi] with lo ≤ hi"),
        ({"state_size": 0}, "state_size is 0; allowed: a positive integer"),
        ({"use_conv_bias": "yes"}, "use_conv_bias is 'yes'; allowed: true or false"),
    ],
)
def test_parse_refuses_what_it_cannot_compute(change: dict[str, Any], message: str):
    config = SMALL | change
    with pytest.raises(CheckpointError) as err:
        family.parse(config, "ckpt/")
    assert str(err.value).startswith("ckpt/: ") and message in str(err.value)


def test_parse_reads_transformers_infinity_tag():
    """``save_pretrained`` writes the open upper limit as ``{"__float__": "Infinity"}``."""
    spec = family.parse(SMALL | {"time_step_limit": [0.0, {"__float__": "Infinity"}]}, "demo")
    assert spec.time_step_limit == (0.0, math.inf)

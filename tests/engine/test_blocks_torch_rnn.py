"""The torch.nn.LSTM / GRU stack (rnnviz.engine.blocks.torch_rnn) against torch itself: the
outputs and every parameter's gradient against ``nn.LSTM`` / ``nn.GRU``, the probes'
gradients against an independent step-by-step loop of ``nn.LSTMCell`` / ``nn.GRUCell``
sharing the weights, and the spec read from a state dict's shapes, refusals included."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch import nn

from rnnviz.checkpoints.families.torch_rnn import FAMILY, parse, spec_from_shapes, tensors
from rnnviz.checkpoints.record import CheckpointError
from rnnviz.engine.blocks import Probes
from rnnviz.engine.blocks.torch_rnn import forward, state_shapes

B, T, IN, H = 3, 9, 5, 12  # IN ≠ H: layer 0's input weights differ in shape from the others'
TORCH = {"torch_lstm": (nn.LSTM, nn.LSTMCell), "torch_gru": (nn.GRU, nn.GRUCell)}
CASES = [  # (model_type, layers, bias, prefix): both biases and a prefix for each kind
    ("torch_lstm", 1, True, ""),
    ("torch_lstm", 2, False, "rnn."),
    ("torch_lstm", 3, True, ""),
    ("torch_gru", 1, False, ""),
    ("torch_gru", 2, True, "rnn."),
    ("torch_gru", 3, False, ""),
]


class Holder(nn.Module):
    """A user's module holding the stack as ``rnn``: its state dict names start ``"rnn."``."""

    def __init__(self, stack: nn.Module):
        super().__init__()
        self.rnn = stack


def _rel(a, b) -> float:
    """‖a − b‖ / ‖b‖."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _stack(model_type: str, layers: int, bias: bool, prefix: str = "") -> tuple[nn.Module, nn.Module]:
    """``(module as saved, the stack)``: random weights, a little larger than torch's
    U(±1/√H) so that the gates leave their linear range."""
    torch.manual_seed(layers + 10 * bias)
    stack = TORCH[model_type][0](IN, H, num_layers=layers, bias=bias, batch_first=True)
    with torch.no_grad():
        for p in stack.parameters():
            p.copy_(0.45 * torch.randn_like(p))
    return (Holder(stack) if prefix else stack), stack


def _last_loss(y):
    """rnnviz's ``last`` loss on batch-first outputs ``[B, T, H]``: ½ Σ_b ‖y_{b,T}‖²."""
    return 0.5 * (y[:, -1] ** 2).sum()


def _inputs() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((B, T, IN)).astype(np.float32)


def _spec_params(module: nn.Module):
    state = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    spec = spec_from_shapes({k: v.shape for k, v in state.items()}, "model.pt")
    return spec, {k: jnp.asarray(v) for k, v in state.items()}


def _zero_probes(spec) -> Probes:
    widths = [IN] + [H] * spec.num_layers
    stream = tuple(jnp.zeros((B, T, w), jnp.float32) for w in widths)
    states = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), state_shapes(spec, B, T))
    return Probes(stream, states)


@pytest.mark.parametrize("model_type, layers, bias, prefix", CASES)
def test_spec_from_shapes_recovers_the_sizes(model_type, layers, bias, prefix):
    module, _ = _stack(model_type, layers, bias, prefix)
    shapes = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    spec = spec_from_shapes(shapes, "model.pt")
    config = {"model_type": model_type, "num_layers": layers, "input_size": IN, "hidden_size": H}
    assert spec == parse({**config, "bias": bias, "prefix": prefix}, "model.pt")
    assert (spec.n_layers, spec.d_model, spec.vocab_size, spec.input_size) == (layers, H, 0, IN)
    assert tensors(spec) == shapes and FAMILY.tied(spec) == {}
    assert model_type in FAMILY.model_types


@pytest.mark.parametrize("model_type, layers, bias, prefix", CASES)
def test_outputs_and_parameter_gradients_match_torch(model_type, layers, bias, prefix):
    module, stack = _stack(model_type, layers, bias, prefix)
    spec, params = _spec_params(module)
    x = _inputs()

    y_torch, _ = stack(torch.from_numpy(x))
    _last_loss(y_torch).backward()
    loss = jax.jit(jax.value_and_grad(lambda p: _last_loss(forward(spec, p, jnp.asarray(x)))))
    value, grads = loss(params)
    y = forward(spec, params, jnp.asarray(x))

    assert y.shape == (B, T, H) and y.dtype == jnp.float32
    assert _rel(y, y_torch.detach().numpy()) < 1e-5
    assert _rel(value, _last_loss(y_torch).item()) < 1e-5
    assert set(grads) == {name for name, _ in module.named_parameters()}
    for name, p in module.named_parameters():
        assert _rel(grads[name], p.grad.numpy()) < 1e-4, name
    # zero probes change nothing
    np.testing.assert_allclose(
        forward(spec, params, jnp.asarray(x), _zero_probes(spec)), y, rtol=1e-6, atol=1e-7
    )


def _torch_steps(model_type: str, stack: nn.Module, x: np.ndarray):
    """The stack stepped by ``nn.LSTMCell`` / ``nn.GRUCell`` (shared weights), every step's
    state and every layer's input kept with ``retain_grad``: ``(loss, stream, states)``,
    stream[k] the list over t of layer k's inputs (row L: the outputs), states[k] per leaf."""
    lstm = model_type == "torch_lstm"
    inp = torch.from_numpy(x).requires_grad_(True)
    stream = [[inp[:, t] for t in range(T)]]
    states = []
    for k in range(stack.num_layers):
        cell = TORCH[model_type][1](IN if k == 0 else H, H, bias=stack.bias)
        with torch.no_grad():
            for name, _ in cell.named_parameters():
                getattr(cell, name).copy_(getattr(stack, f"{name}_l{k}"))
        h = c = torch.zeros(B, H)
        leaves = {"c": [], "h": []} if lstm else {"h": []}
        for u in stream[k]:
            h, c = cell(u, (h, c)) if lstm else (cell(u, h), None)
            for n in leaves:
                leaves[n].append({"c": c, "h": h}[n])
                leaves[n][-1].retain_grad()
        states.append(leaves)
        stream.append([1.0 * h_t for h_t in leaves["h"]])  # a node of its own: the next input
        for u in stream[-1]:
            u.retain_grad()
    _last_loss(torch.stack(stream[-1], 1)).backward()
    return inp, stream, states


def _grads_over_time(steps) -> np.ndarray:
    return torch.stack([s.grad for s in steps], 1).numpy()


@pytest.mark.parametrize("model_type, layers, bias, prefix", CASES)
def test_probe_gradients_match_a_cell_by_cell_loop(model_type, layers, bias, prefix):
    module, stack = _stack(model_type, layers, bias, prefix)
    spec, params = _spec_params(module)
    x = _inputs()

    probe_loss = lambda probes: _last_loss(forward(spec, params, jnp.asarray(x), probes))  # noqa: E731
    g = jax.jit(jax.grad(probe_loss))(_zero_probes(spec))
    inp, stream, states = _torch_steps(model_type, stack, x)

    assert _rel(g.stream[0], inp.grad.numpy()) < 1e-4
    for k in range(1, layers + 1):
        assert _rel(g.stream[k], _grads_over_time(stream[k])) < 1e-4, f"stream {k}"
    for k in range(layers):
        assert set(g.states[k]) == set(states[k])
        for n, steps in states[k].items():
            assert _rel(g.states[k][n], _grads_over_time(steps)) < 1e-4, f"layer {k} {n}"


def _shapes(module: nn.Module) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def _lstm2() -> dict[str, tuple[int, ...]]:
    return _shapes(nn.LSTM(IN, H, num_layers=2))


REFUSALS = {
    "bidirectional": (lambda: _shapes(nn.LSTM(IN, H, bidirectional=True)), "bidirectional"),
    "proj_size": (lambda: _shapes(nn.LSTM(IN, H, proj_size=4)), "proj_size"),
    "inconsistent": (
        lambda: {**_lstm2(), "weight_hh_l1": (4 * H, H + 1)},
        rf"weight_hh_l1 has shape \({4 * H}, {H + 1}\); allowed: \({4 * H}, {H}\)",
    ),
    "other hidden size above": (
        lambda: {**_lstm2(), "weight_ih_l1": (4 * H, H - 2)},
        rf"weight_ih_l1 has shape \({4 * H}, {H - 2}\); allowed: \({4 * H}, {H}\)",
    ),
    "gap": (
        lambda: {k: s for k, s in _shapes(nn.GRU(IN, H, num_layers=3)).items() if "_l1" not in k},
        r"has layers \[0, 2\] but not \[1\]",
    ),
    "mixed prefixes": (
        lambda: {"a.weight_ih_l0": (4 * H, IN), "b.weight_hh_l0": (4 * H, H)},
        r"mixes the prefixes \['a\.', 'b\.'\]",
    ),
    "rows": (
        lambda: {"weight_ih_l0": (5 * H, IN), "weight_hh_l0": (5 * H, H)},
        rf"weight_hh_l0 has {5 * H} rows for H = {H}; allowed: 4H = {4 * H} \(LSTM\) or 3H = {3 * H}",
    ),
    "one bias": (
        lambda: {k: s for k, s in _lstm2().items() if k != "bias_hh_l1"},
        "has no bias_hh_l1",
    ),
    "not a stack's": (
        lambda: {**_shapes(Holder(nn.GRU(IN, H))), "head.weight": (3, H)},
        "holds 'head.weight', not a torch.nn.LSTM/GRU tensor",
    ),
    "no weights": (lambda: {"bias_ih_l0": (4 * H,)}, "has no weight_ih_l0"),
    "empty": (lambda: {}, "holds no tensors"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_spec_from_shapes_refuses(case):
    shapes, message = REFUSALS[case]
    with pytest.raises(CheckpointError, match=rf"^model\.pt: .*{message}"):
        spec_from_shapes(shapes(), "model.pt")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "torch_rnn"}, "model_type is 'torch_rnn'; allowed: torch_lstm, torch_gru"),
        ({"hidden_size": 0}, "hidden_size is 0; allowed: a positive integer"),
        ({"num_layers": None}, "num_layers is None; allowed: a positive integer"),
        ({"bidirectional": True}, "bidirectional is True; allowed: False"),
        ({"proj_size": 4}, "proj_size is 4; allowed: 0"),
        ({"bias": "yes"}, "bias is 'yes'; allowed: true or false"),
        ({"prefix": "rnn"}, "prefix is 'rnn'; allowed: '' or a name ending in '.'"),
    ],
)
def test_parse_refuses(change, message):
    config = {"model_type": "torch_lstm", "num_layers": 2, "input_size": IN, "hidden_size": H}
    with pytest.raises(CheckpointError, match=f"^x.pt: {message}"):
        parse({**config, **change}, "x.pt")

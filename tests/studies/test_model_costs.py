"""The ways of computing a block's per-step gradients (rnnviz.studies.model_costs) on a tiny
2-layer LSTM stack and a tiny Mamba block: the one-reverse-pass and two-cotangent analyses give
the same per-step norms, every way's loss is plain jax.grad's, and plain jax.grad's gradient is
torch's (the LSTM) or an independent jax.grad of the loss written out (Mamba). No time is
asserted: only that the ratios are positive and finite."""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz.config import RunConfig
from rnnviz.studies.block_models import block_inputs, block_model
from rnnviz.studies.model_costs import (
    WAYS,
    analysis_prepared,
    block_strategies,
    max_rel_diff,
    placed_inputs,
    plain_prepared,
)

LSTM = RunConfig(
    cell="lstm", block="reference", layers=2, hidden_size=6, input_size=3, seq_len=7, batch_size=2
)
MAMBA = RunConfig(cell="mamba", block="reference", layers=2, hidden_size=8, seq_len=8, batch_size=2)


@pytest.fixture(scope="module", params=[LSTM, MAMBA], ids=["lstm", "mamba"])
def measured(request):
    cfg = request.param
    model, inputs = block_model(cfg), block_inputs(cfg)
    return cfg, model, inputs, block_strategies(model, inputs, repeats=2)


def test_every_way_is_a_row_plain_first_with_positive_finite_ratios(measured):
    cfg, model, _, s = measured
    assert (
        [w.name for w in s.ways]
        == [w.name for w in WAYS]
        == [
            "plain jax.grad",
            "analysis, one reverse pass",
            "analysis, two cotangents",
        ]
    )
    assert (s.batch, s.steps, s.n_params) == (cfg.batch_size, cfg.seq_len, model.n_params)
    assert s.ways[0].ratio == 1.0
    for way in s.ways:
        assert math.isfinite(way.ratio) and way.ratio > 0, way
        assert way.ratio == pytest.approx(way.run_s / s.ways[0].run_s)
        assert way.repeats == 2 and way.run_min_s <= way.run_s <= way.run_max_s
        assert way.compile_s > 0 and way.description
    assert json.loads(json.dumps(s.to_json()))["ways"][0]["max_rel_diff"] is None


def test_both_analyses_agree_and_every_loss_is_plain_grads(measured):
    _, model, inputs, s = measured
    plain, shared, two = s.ways
    assert plain.max_rel_diff is None and shared.max_rel_diff == 0.0
    assert two.max_rel_diff <= 1e-5
    for way in (shared, two):
        assert way.loss == pytest.approx(plain.loss, rel=1e-5)
    # what was compared is not empty: every stream row and state leaf, and none of them zero
    at = placed_inputs(model, inputs)
    prepared = [analysis_prepared(model, at, shared) for shared in (True, False)]
    outs = [jax.device_get(p.compiled.fn(*p.args)) for p in prepared]
    rows = [WAYS[1].norms(out) for out in outs]
    stream, *states = rows[0]
    assert stream.shape == (model.n_layers + 1, inputs.shape[1])
    assert len(states) == len(jax.tree.leaves(outs[0].states)) > 0
    assert all(np.any(r > 0) for r in (*stream, *states))
    assert max_rel_diff(rows[1], rows[0]) == two.max_rel_diff


def _plain(model, inputs) -> tuple[float, dict[str, np.ndarray]]:
    p = plain_prepared(model, placed_inputs(model, inputs))
    loss, grads = jax.device_get(p.compiled.fn(*p.args))
    return float(loss), {k: np.asarray(v, np.float64) for k, v in grads.items()}


def test_plain_grad_of_an_lstm_stack_is_torchs():
    torch = pytest.importorskip("torch")
    model, inputs = block_model(LSTM), block_inputs(LSTM)
    loss, grads = _plain(model, inputs)
    lstm = torch.nn.LSTM(3, 6, 2, batch_first=True).double()
    head = torch.nn.Linear(6, 6).double()
    tensors = {k: torch.tensor(np.asarray(v, np.float64)) for k, v in model.params.items()}
    lstm.load_state_dict({k: v for k, v in tensors.items() if "readout" not in k})
    head.load_state_dict({k.split(".")[1]: v for k, v in tensors.items() if "readout" in k})
    x = torch.tensor(np.asarray(inputs, np.float64), requires_grad=True)
    want = 0.5 * torch.sum(head(lstm(x)[0][:, -1]) ** 2)
    want.backward()
    assert loss == pytest.approx(want.item(), rel=1e-5)
    named = {**dict(lstm.named_parameters()), **{f"readout.{k}": v for k, v in head.named_parameters()}}
    assert sorted(named) == sorted(grads)
    for name, param in named.items():
        np.testing.assert_allclose(grads[name], param.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    # the analysis's stream row 0 is the inputs' own gradient: torch's ‖∂L/∂x_t‖ over the batch
    at = placed_inputs(model, inputs)
    p = analysis_prepared(model, at, shared=True)
    norms = np.asarray(p.compiled.fn(*p.args).stream[0], np.float64)
    np.testing.assert_allclose(norms, np.linalg.norm(x.grad.numpy(), axis=(0, 2)), rtol=1e-4)


def test_plain_grad_of_a_mamba_block_is_jax_grad_of_the_loss_written_out():
    model, inputs = block_model(MAMBA), block_inputs(MAMBA)
    loss, grads = _plain(model, inputs)

    def written(params):  # through the model's own call, the loss written here
        out = dataclasses.replace(model, params=params)(inputs)
        return 0.5 * jnp.sum(out[:, -1] ** 2)

    want_loss, want = jax.jit(jax.value_and_grad(written))(model.params)
    assert loss == pytest.approx(float(want_loss), rel=1e-6)
    assert sorted(want) == sorted(grads)
    for name, g in want.items():
        np.testing.assert_allclose(grads[name], np.asarray(g, np.float64), rtol=1e-5, atol=1e-7, err_msg=name)

"""A reference block's phase diagram (rnnviz.studies.block_phase): each design's knob changes
what its reference's setting changes and nothing else, its default draws the reference, the
sweep at the default is the block's own analysis, and the sweep compiles once."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from rnnviz.config import ConfigError, RunConfig
from rnnviz.engine.blocks import vectors
from rnnviz.studies.block_models import analyze_block, block_inputs, block_key, block_model, block_spec
from rnnviz.studies.block_phase import block_phase, knob_grid, knob_model
from rnnviz.studies.models import is_compiled_for
from rnnviz.tables.block_knobs import BLOCK_KNOBS
from rnnviz.tables.blocks import BLOCK_DESIGNS


def _block(cell: str, **fields) -> RunConfig:
    return RunConfig(cell=cell, block="reference", **({"layers": 2, "hidden_size": 8, "seq_len": 6} | fields))


def _np(params) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in params.items()}


def test_every_design_has_a_knob_whose_default_lies_in_its_range():
    designs = {d.design for d in BLOCK_DESIGNS.values()}
    assert set(BLOCK_KNOBS) == designs
    for knob in BLOCK_KNOBS.values():
        assert knob.lo <= knob.view[0] < knob.view[1] <= knob.hi
        assert knob.lo <= knob.default <= knob.hi
        assert knob.spacing in ("linear", "log") and (knob.spacing == "linear" or knob.lo > 0)


@pytest.mark.parametrize("cell", list(BLOCK_DESIGNS))
def test_the_default_draws_the_reference_and_another_value_changes_only_the_knobs_tensors(cell):
    cfg = _block(cell)
    knob = BLOCK_KNOBS[BLOCK_DESIGNS[cell].design]
    base = _np(block_model(cfg).params)
    at_default = _np(knob_model(cfg, knob.default).params)
    assert at_default.keys() == base.keys()
    for name in base:
        np.testing.assert_array_equal(at_default[name], base[name], err_msg=name)
    other = knob.view[1]
    moved = _np(knob_model(cfg, other).params)
    changed = sorted(name for name in base if not np.array_equal(moved[name], base[name]))
    assert changed, cell
    suffix = {
        "torch_lstm": "weight_hh_l",
        "torch_gru": "weight_hh_l",
        "mamba": "mixer.dt_proj.bias",
        "recurrent_gemma": "rg_lru.recurrent_param",
        "xlstm": ".fgate_preact.bias",
        "slstm_stack": "xlstm.slstm_cell.bias",
        "qwen3_next": "linear_attn.A_log",
    }[BLOCK_DESIGNS[cell].design]
    assert all(suffix in name for name in changed), changed
    assert len(changed) == cfg.layers  # one per layer
    assert all(moved[name].shape == base[name].shape for name in changed)


def test_the_gain_scales_torch_lstms_recurrent_weights_exactly():
    cfg = _block("lstm")
    base, scaled = block_model(cfg).params, knob_model(cfg, 1.75).params
    for layer in range(cfg.layers):
        name = f"weight_hh_l{layer}"
        np.testing.assert_array_equal(np.asarray(scaled[name]), 1.75 * np.asarray(base[name]))


@pytest.mark.parametrize("scale", [0.05, 1.0, 30.0])
def test_the_mamba_scale_draws_dt_bias_as_transformers_time_step_range_does(scale):
    """The knob is transformers' own fields: drawing the block with ``time_step_min`` and
    ``time_step_max`` times s gives the same tensors; Δ = softplus(bias) lies in the scaled range
    (floored at ``time_step_floor``) and log Δ spreads over it as a uniform draw does."""
    cfg = _block("mamba", hidden_size=16)
    spec, settings = block_spec(cfg)
    fields = dataclasses.replace(
        settings, time_step_min=scale * settings.time_step_min, time_step_max=scale * settings.time_step_max
    )
    reference = vectors.init_params(spec, block_key(cfg), settings=fields)
    drawn = knob_model(cfg, scale).params
    for name in drawn:
        np.testing.assert_array_equal(np.asarray(drawn[name]), np.asarray(reference[name]), err_msg=name)
    bias = np.concatenate([np.asarray(v) for k, v in drawn.items() if k.endswith("dt_proj.bias")])
    dt = np.log1p(np.exp(bias.astype(np.float64)))  # softplus
    lo, hi = max(scale * 1e-3, 1e-4), scale * 0.1
    assert lo * (1 - 1e-5) <= dt.min() and dt.max() <= hi * (1 + 1e-5)
    # log-uniform: the mean of log Δ within 4 standard errors of the middle of the range
    log_lo, log_hi = np.log(scale * 1e-3), np.log(hi)
    floored = np.maximum(np.log(dt), log_lo)
    se = (log_hi - log_lo) / np.sqrt(12 * dt.size)
    assert abs(floored.mean() - (log_lo + log_hi) / 2) < 4 * se


def test_transformers_draws_delta_in_the_range_the_mamba_scale_says():
    """transformers' own MambaForCausalLM, given time_step_min/max × s, starts Δ where the knob's
    draw does: in the scaled range, with log Δ spread over it alike (torch draws other numbers)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    scale = 20.0
    torch.manual_seed(0)
    config = transformers.MambaConfig(
        vocab_size=8, hidden_size=16, state_size=4, num_hidden_layers=4,
        time_step_min=scale * 1e-3, time_step_max=scale * 0.1,
    )  # fmt: skip
    model = transformers.MambaForCausalLM(config)
    theirs = np.concatenate(
        [
            torch.nn.functional.softplus(layer.mixer.dt_proj.bias).detach().numpy()
            for layer in model.backbone.layers
        ]
    )
    cfg = _block("mamba", hidden_size=16, layers=4)
    bias = np.concatenate(
        [np.asarray(v) for k, v in knob_model(cfg, scale).params.items() if k.endswith("dt_proj.bias")]
    )
    ours = np.log1p(np.exp(bias.astype(np.float64)))
    assert theirs.shape == ours.shape
    for dt in (theirs, ours):
        assert scale * 1e-3 * (1 - 1e-5) <= dt.min() and dt.max() <= scale * 0.1 * (1 + 1e-5)
    se = np.log(100) / np.sqrt(12 * ours.size)  # log Δ uniform over a range of width log 100
    assert abs(np.log(theirs).mean() - np.log(ours).mean()) < 6 * se


def test_the_rglru_scale_draws_a_in_the_scaled_radius_range():
    cfg = _block("rglru")
    for s in (0.1, 10.0):
        lam = np.concatenate(
            [
                np.asarray(v, np.float64)
                for k, v in knob_model(cfg, s).params.items()
                if "recurrent_param" in k
            ]
        )
        a = np.exp(-np.log1p(np.exp(lam)))
        assert (a >= 0.9**s * (1 - 1e-4)).all() and (a <= 0.999**s * (1 + 1e-4)).all(), (s, a)


def test_the_gated_deltanet_scale_draws_a_in_the_scaled_range_and_keeps_dt_bias():
    cfg = _block("gated_deltanet")
    params = knob_model(cfg, 0.01).params
    a = np.concatenate([np.exp(np.asarray(v)) for k, v in params.items() if k.endswith("A_log")])
    assert (a >= 0.01 * 0.01 * (1 - 1e-5)).all() and (a <= 16 * 0.01 * (1 + 1e-5)).all()
    assert all((np.asarray(v) == 1.0).all() for k, v in params.items() if k.endswith("dt_bias"))


@pytest.mark.parametrize("cell, name", [("mlstm", "fgate_preact.bias"), ("slstm", "slstm_cell.bias")])
def test_the_forget_bias_shift_adds_b_to_the_forget_gate_alone(cell, name):
    cfg = _block(cell)
    base, shifted = block_model(cfg).params, knob_model(cfg, -2.5).params
    for k in (k for k in base if k.endswith(name)):
        diff = np.asarray(shifted[k], np.float64) - np.asarray(base[k], np.float64)
        if cell == "slstm":  # [heads, 4, d], the gates (i, f, z, o)
            np.testing.assert_allclose(diff[:, 1], -2.5, atol=1e-6)
            np.testing.assert_array_equal(np.delete(diff, 1, axis=1), 0.0)
        else:
            np.testing.assert_allclose(diff, -2.5, atol=1e-6)


def test_the_sweep_at_the_default_is_the_blocks_own_analysis_and_compiles_once():
    cfg = _block("gru", hidden_size=12, seq_len=7)
    values = [0.5, 1.0, 1.5, 2.0]
    p = block_phase(cfg, values, seeds=[3, 4])
    assert p.log10_grad_norms.shape == (4, 2, cfg.layers + 1, cfg.seq_len)
    assert p.compile_s.shape == (4, 2)
    for j, seed in enumerate(p.seeds):
        expected = analyze_block(cfg.replace(seed=seed)).log10_grad_norms
        np.testing.assert_array_equal(p.log10_grad_norms[1, j], expected)
    # one executable for the whole sweep: every point but the first found it compiled
    assert p.compile_s[0, 0] > 0
    assert (p.compile_s.flatten()[1:] == 0).all()
    assert is_compiled_for(block_model(cfg), block_inputs(cfg))
    # the knob moves the gradient: the gains' rows are not all one
    assert not np.allclose(p.log10_grad_norms[0], p.log10_grad_norms[-1])


def test_the_mamba_sweep_row_zero_at_the_default_is_analyze_blocks():
    cfg = _block("mamba")
    p = block_phase(cfg, [0.1, 1.0])
    np.testing.assert_array_equal(p.log10_grad_norms[1, 0, 0], analyze_block(cfg).log10_grad_norms[0])
    assert p.knob == "scale of the range of Δ" and p.default == 1.0 and p.seeds == (cfg.seed,)


def test_the_grid_is_linear_for_a_gain_and_geometric_for_a_scale():
    assert knob_grid(_block("lstm"), 0.5, 1.5, 3) == [0.5, 1.0, 1.5]
    assert knob_grid(_block("gated_deltanet"), 0.01, 1.0, 3) == [0.01, 0.1, 1.0]
    assert knob_grid(_block("slstm"), -4.0, 4.0, 1) == [-4.0]


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: knob_grid(_block("mamba"), 0.0, 1.0, 3),
            "knob=0.0 is not allowed: a scale of the range of Δ in [0.001, 100] for the mamba block.",
        ),
        (
            lambda: block_phase(_block("lstm"), [11.0]),
            "knob=11.0 is not allowed: a gain on the recurrent weights in [0, 10] for the lstm block.",
        ),
        (lambda: knob_grid(_block("lstm"), 1.5, 0.5, 3), "hi=0.5 is not allowed: a bound above lo (1.5)."),
        (lambda: knob_grid(_block("lstm"), 0.5, 1.5, 0), "n=0 is not allowed: 1 … 256 values."),
        (
            lambda: block_phase(_block("mlstm"), []),
            "values=[] is not allowed: at least one value of the shift of the forget-gate bias.",
        ),
        (lambda: block_phase(RunConfig(cell="lstm"), [1.0]), "block='cell' is not allowed"),
    ],
)
def test_a_bad_range_is_one_message_naming_what_is_allowed(call, message):
    with pytest.raises(ConfigError) as err:
        call()
    assert str(err.value).startswith(message)


def test_the_record_is_json_ready():
    p = block_phase(_block("lstm", layers=1, hidden_size=4, seq_len=4), [1.0])
    out = json.loads(json.dumps(p.to_json()))
    assert out["values"] == [1.0] and out["seeds"] == [0] and len(out["log10_grad_norms"][0][0]) == 2

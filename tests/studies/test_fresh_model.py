"""fresh_model: a design drawn from its sizes, read by analyze_model as a loaded checkpoint is
(its loss is transformers' on the same weights), and refused with the loader's messages."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers

import rnnviz
from rnnviz.checkpoints import CheckpointError, read_checkpoint

MAMBA = dict(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2, conv_kernel=3)


def test_the_loss_is_transformers_loss_on_the_same_weights():
    model = rnnviz.fresh_model("mamba", MAMBA, seed=3)
    ids = np.random.default_rng(0).integers(0, 64, size=(2, 10))
    a = rnnviz.analyze_model(model, ids)
    reference = transformers.MambaForCausalLM(transformers.MambaConfig(**MAMBA)).eval()
    weights = {k: torch.tensor(np.asarray(v)) for k, v in model.params.items()}  # the tied head too
    reference.load_state_dict(weights, strict=True)
    with torch.no_grad():
        loss = reference(torch.as_tensor(ids), labels=torch.as_tensor(ids)).loss.item()
    assert a.loss == pytest.approx(loss, rel=1e-4)
    assert a.source == "fresh mamba (seed 3)" and a.grad_norms.shape == (3, 10)


def test_a_fresh_stack_is_analysed_and_seeds_decide_the_weights():
    config = dict(num_layers=2, input_size=3, hidden_size=8)
    model = rnnviz.fresh_model("torch_lstm", config, seed=1)
    a = rnnviz.analyze_model(model, np.ones((2, 6, 3), np.float32))
    assert a.grad_norms.shape == (3, 6) and sorted(a.state_grad_norms[0]) == ["c", "h"]
    again, other = rnnviz.fresh_model("torch_lstm", config, seed=1), rnnviz.fresh_model("torch_lstm", config)
    assert all(np.array_equal(model.params[k], again.params[k]) for k in model.params)
    assert not np.array_equal(model.params["weight_hh_l0"], other.params["weight_hh_l0"])
    narrow = rnnviz.fresh_model("torch_lstm", config, seed=1, dtype="bfloat16")
    assert np.array_equal(narrow.params["weight_hh_l0"], model.params["weight_hh_l0"].astype("bfloat16"))


def test_bad_sizes_get_the_loaders_message(tmp_path):
    bad = {"model_type": "mamba", "hidden_size": 0}
    (tmp_path / "config.json").write_text(json.dumps(bad))
    with pytest.raises(CheckpointError) as loaded:
        read_checkpoint(tmp_path)
    with pytest.raises(CheckpointError) as fresh:
        rnnviz.fresh_model("mamba", bad)
    assert fresh.value.allowed == loaded.value.allowed == "hidden_size is 0; allowed: a positive integer"
    assert str(fresh.value).startswith("fresh mamba (seed 0): hidden_size is 0")


@pytest.mark.parametrize(
    "model_type, config, kwargs, message",
    [
        ("lstm", {}, {}, "model_type is 'lstm'; allowed: falcon_mamba, mamba, mamba2"),
        ("mamba", {"model_type": "mamba2"}, {}, "config's model_type is 'mamba2'; allowed: 'mamba'"),
        ("mamba", MAMBA, {"dtype": "float16"}, "dtype 'float16' asked for; allowed: float32, bfloat16"),
        ("mamba", MAMBA, {"max_bytes": 1000}, "of weights as float32; allowed: at most"),
        (
            "mamba",
            MAMBA | {"time_step_min": 0.5},
            {},
            "time_step_max is 0.1; allowed: at least time_step_min",
        ),
        ("recurrent_gemma", {"vocab_size": 8, "pad_token_id": 8}, {}, "pad_token_id is 8; allowed: null or"),
        ("torch_gru", {"num_layers": 1, "input_size": 2}, {}, "hidden_size is None; allowed: a positive"),
    ],
)
def test_refusals_name_the_field(model_type, config, kwargs, message):
    with pytest.raises(CheckpointError, match=message.replace("(", r"\(")):
        rnnviz.fresh_model(model_type, config, **kwargs)

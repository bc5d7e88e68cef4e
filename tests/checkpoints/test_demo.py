"""The demo checkpoint, written with NumPy alone: torch loads it as an ``nn.LSTM``'s state dict,
and the loader reads the same numbers torch computes with."""

from __future__ import annotations

import numpy as np

import rnnviz
from rnnviz.checkpoints.demo import DEMO_HIDDEN, DEMO_INPUT, DEMO_LAYERS, demo_bytes


def test_the_demo_is_a_state_dict_torch_and_the_loader_both_read(tmp_path):
    import torch
    from safetensors.torch import load_file

    (tmp_path / "demo.safetensors").write_bytes(demo_bytes())
    lstm = torch.nn.LSTM(DEMO_INPUT, DEMO_HIDDEN, DEMO_LAYERS, batch_first=True)
    lstm.load_state_dict(load_file(tmp_path / "demo.safetensors"))  # every name and shape torch's
    model = rnnviz.load_model(tmp_path / "demo.safetensors")
    assert (model.model_type, model.n_layers, model.n_params) == ("torch_lstm", 2, 3584)
    x = np.random.default_rng(0).normal(size=(2, 7, 4)).astype(np.float32)
    y = lstm(torch.as_tensor(x))[0].detach().numpy()
    np.testing.assert_allclose(np.asarray(model(x)), y, rtol=1e-5, atol=1e-6)
    assert demo_bytes() == demo_bytes()  # one file for every visitor

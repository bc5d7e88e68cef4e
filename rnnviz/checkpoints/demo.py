"""A tiny demo checkpoint written with NumPy alone (torch is not needed to run the dashboard):
a 2-layer ``torch.nn.LSTM`` state dict, I = 4 inputs, H = 16, as torch initialises it (every
weight and bias uniform in ±1/√H), drawn by a fixed seed, so that every visitor gets one file.

>>> from rnnviz.checkpoints.safetensors import read_header
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / DEMO_NAME
>>> _ = path.write_bytes(demo_bytes())
>>> read_header(str(path))["weight_hh_l1"].shape   # [4H, H]
(64, 16)
"""

from __future__ import annotations

import numpy as np

from rnnviz.checkpoints.safetensors import encode

#: The demo's file name, layers L, inputs I, hidden size H and seed.
DEMO_NAME, DEMO_LAYERS, DEMO_INPUT, DEMO_HIDDEN, DEMO_SEED = "demo-lstm.safetensors", 2, 4, 16, 0


def demo_bytes() -> bytes:
    """The demo model's ``.safetensors`` file (:data:`DEMO_NAME`): torch's names and shapes,
    ``weight_ih_l{k}`` ``[4H, I_k]``, ``weight_hh_l{k}`` ``[4H, H]``, ``bias_ih_l{k}`` and
    ``bias_hh_l{k}`` ``[4H]``."""
    rng, h = np.random.default_rng(DEMO_SEED), DEMO_HIDDEN
    bound = 1 / np.sqrt(h)
    tensors = {}
    for k in range(DEMO_LAYERS):
        shapes = {"weight_ih": (4 * h, DEMO_INPUT if k == 0 else h), "weight_hh": (4 * h, h)}
        shapes |= {"bias_ih": (4 * h,), "bias_hh": (4 * h,)}
        for kind, shape in shapes.items():
            tensors[f"{kind}_l{k}"] = rng.uniform(-bound, bound, size=shape).astype(np.float32)
    return encode(tensors)


__all__ = ["DEMO_HIDDEN", "DEMO_INPUT", "DEMO_LAYERS", "DEMO_NAME", "DEMO_SEED", "demo_bytes"]

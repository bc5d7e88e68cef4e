"""NX-AI's vanilla sLSTM cell run one step at a time, for test_blocks_slstm.py and
test_blocks_slstm_stack.py: the reference's state after every step, and its gradient through
torch's autograd (torch and xlstm are imported when it is called, after the test's own
``importorskip``); and what both tests compare with (NumPy only): the relative difference, the
reference's states per head, and the initialisation's statistics."""

from __future__ import annotations

import math

import numpy as np

#: The reference's order of the sLSTM states.
STATES = ("h", "c", "n", "m")


def rel(a, b) -> float:
    """‖a − b‖ / ‖b‖."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def to_heads(a: np.ndarray, heads: int) -> dict[str, np.ndarray]:
    """The reference's states ``[4, T, B, H]`` as ours ``{name: [B, T, N, d]}``."""
    four, steps, batch, hidden = a.shape
    a = a.reshape(four, steps, batch, heads, hidden // heads).transpose(0, 2, 1, 3, 4)
    return dict(zip(STATES, a))


def package_configs(spec):
    """The package's ``sLSTMLayerConfig`` (vanilla backend) and ``FeedForwardConfig`` (None without
    a feed-forward branch) of a block spec: what both tests build their reference module from."""
    from xlstm.blocks.slstm.layer import sLSTMLayerConfig
    from xlstm.components.feedforward import FeedForwardConfig

    layer = sLSTMLayerConfig(
        embedding_dim=spec.embedding_dim,
        num_heads=spec.num_heads,
        conv1d_kernel_size=spec.conv1d_kernel_size,
        backend="vanilla",
        bias_init=spec.bias_init,
        recurrent_weight_init=spec.recurrent_weight_init,
    )
    ffn = None if spec.proj_factor is None else FeedForwardConfig(proj_factor=spec.proj_factor, act_fn="gelu")
    return layer, ffn


def assert_same_init(ours: dict, theirs: list[dict]) -> None:
    """Per tensor, ``ours`` (leaves ``[seeds, ...]``, JAX's draws) against the reference's draws
    ``theirs`` (one dict per seed), each pooled over its seeds (n numbers): a tensor the reference
    draws the same every time is equal; a random one has the reference's mean and standard
    deviation within 6 standard errors of their difference, √2 σ/√n for the mean and √2 σ/√(2n)
    for the standard deviation (a normal's; a uniform's, 0.45 σ/√n, is smaller), σ the
    reference's pooled one: a false alarm about once in 10⁸ comparisons."""
    assert set(ours) == set(theirs[0])
    for k in ours:
        ref = np.stack([np.asarray(t[k], np.float64) for t in theirs])
        got = np.asarray(ours[k], np.float64)
        assert got.shape == ref.shape, k
        if all(np.array_equal(r, ref[0]) for r in ref):  # drawn the same by every seed
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6, err_msg=k)
            continue
        n, sigma = ref.size, ref.std()
        assert abs(got.mean() - ref.mean()) < 6 * math.sqrt(2) * sigma / math.sqrt(n), k
        assert abs(got.std() - sigma) < 6 * sigma / math.sqrt(n), k


def stepwise_forward(states_after: list, zeros: list):
    """A stand-in for the vanilla backend's ``slstm_forward``
    (``xlstm/blocks/slstm/src/vanilla/__init__.py``) that runs the package's own
    ``slstm_forward_step`` (the same recurrent product and ``slstm_forward_pointwise``) one step
    at a time and adds a zero tensor ``[4, B, H]`` (to be differentiated) to the states
    (h, c, n, m) after every step, before the next step and the layer's output read them.
    Returns what ``slstm_forward`` does, the states ``[4, T + 1, B, H]`` first (its gates,
    unused by the cell, as None)."""
    import torch
    from xlstm.blocks.slstm.src.vanilla import slstm_forward_step

    def forward(x, states, R, b, pointwise_forward, constants=None):
        kept = [states]
        for t in range(x.shape[0]):
            states = slstm_forward_step(x[t : t + 1], states, R, b, pointwise_forward, constants or {})[0][
                :, 0
            ]
            zeros.append(torch.zeros_like(states, requires_grad=True))
            states = states + zeros[-1]
            kept.append(states)
            states_after.append(states.detach().clone())
        return torch.stack(kept, dim=1), states, None

    return forward

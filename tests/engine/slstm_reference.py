"""NX-AI's vanilla sLSTM cell run one step at a time, for test_blocks_slstm.py: the reference's
state after every step, and its gradient through torch's autograd. torch and xlstm are imported
when it is called, after the test's own ``importorskip``."""

from __future__ import annotations


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

"""transformers' gated delta rule run one step at a time, for the Qwen3-Next tests
(test_blocks_gated_deltanet.py, test_blocks_qwen3_next.py): the reference's state after every
step, and its gradient through torch's autograd. torch and transformers are imported when it
is called, after the tests' own ``importorskip``."""

from __future__ import annotations


def stepwise_rule(states: list, zeros: list):
    """A stand-in for ``torch_chunk_gated_delta_rule`` that runs transformers' own
    ``torch_recurrent_gated_delta_rule`` one step at a time, keeps S_t after every step, and
    adds a zero tensor (to be differentiated) to S_t before o_t reads it. The read-out is the
    reference's too: a step with k = v = 0, g = 0 and β = 0 leaves the state as it is and
    returns Sᵀ q̂ with q̂ normalised and scaled as the rule does."""
    import torch
    from transformers.models.qwen3_next.modeling_qwen3_next import (
        torch_recurrent_gated_delta_rule as recurrent,
    )

    def rule(query, key, value, g, beta, initial_state=None, use_qk_l2norm_in_kernel=False, **_):
        state, outs = initial_state, []
        for t in range(query.shape[1]):
            at = {"g": g[:, t : t + 1], "beta": beta[:, t : t + 1]}
            q, k, v = query[:, t : t + 1], key[:, t : t + 1], value[:, t : t + 1]
            _, state = recurrent(
                q, k, v, **at, initial_state=state, output_final_state=True,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            )  # fmt: skip
            zeros.append(torch.zeros_like(state, requires_grad=True))
            state = state + zeros[-1]
            states.append(state.detach().clone())
            still = {"g": torch.zeros_like(at["g"]), "beta": torch.zeros_like(at["beta"])}
            out, _ = recurrent(
                q, torch.zeros_like(k), torch.zeros_like(v), **still, initial_state=state,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            )  # fmt: skip
            outs.append(out)
        return torch.cat(outs, dim=1), state

    return rule

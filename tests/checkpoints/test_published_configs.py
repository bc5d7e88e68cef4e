"""The published models' config.json files (as their Hugging Face repositories give them) parse,
and the tensors their families expect add up to the parameter counts those repositories state:
the sizes are read as the real checkpoints spell them, RecurrentGemma's ``_block_types``
included. Shapes only: nothing is downloaded or allocated."""

from __future__ import annotations

import math

import pytest

from rnnviz.checkpoints import FAMILIES

MAMBA_130M = {
    "architectures": ["MambaForCausalLM"], "bos_token_id": 0, "conv_kernel": 4, "d_inner": 1536,
    "d_model": 768, "eos_token_id": 0, "expand": 2, "fused_add_norm": True, "hidden_act": "silu",
    "hidden_size": 768, "initializer_range": 0.1, "intermediate_size": 1536, "layer_norm_epsilon": 1e-05,
    "model_type": "mamba", "n_layer": 24, "num_hidden_layers": 24, "pad_token_id": 0,
    "pad_vocab_size_multiple": 8, "rescale_prenorm_residual": False, "residual_in_fp32": True,
    "rms_norm": True, "state_size": 16, "time_step_floor": 0.0001, "time_step_init_scheme": "random",
    "time_step_max": 0.1, "time_step_min": 0.001, "time_step_rank": 48, "time_step_scale": 1.0,
    "torch_dtype": "float32", "transformers_version": "4.39.0.dev0", "use_bias": False, "use_cache": True,
    "use_conv_bias": True, "vocab_size": 50280,
}  # fmt: skip
RECURRENTGEMMA_2B = {
    "architectures": ["RecurrentGemmaForCausalLM"], "attention_bias": False, "attention_window_size": 2048,
    "_block_types": ["recurrent", "recurrent", "attention"], "bos_token_id": 2, "conv1d_width": 4,
    "embeddings_scale_by_sqrt_dim": True, "eos_token_id": 1, "final_w_init_variance_scale": 0.2357,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2560,
    "intermediate_size": 15360, "logits_soft_cap": 30.0, "lru_width": 2560, "model_type": "recurrent_gemma",
    "num_attention_heads": 10, "num_hidden_layers": 26, "num_key_value_heads": 1, "pad_token_id": 0,
    "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
    "vocab_size": 256000, "w_init_variance_scale": 0.01,
}  # fmt: skip
XLSTM_7B = {
    "architectures": ["xLSTMForCausalLM"], "add_out_norm": True, "bos_token_id": 0, "chunk_size": 64,
    "chunkwise_kernel": "chunkwise--triton_xl_chunk", "embedding_dim": 4096, "eos_token_id": 2, "eps": 1e-06,
    "ffn_proj_factor": 2.667, "ffn_round_up_to_multiple_of": 64, "force_bos_token_insert": True,
    "gate_soft_cap": 15.0, "inference_state_dtype": "float32", "max_inference_chunksize": 16384,
    "mode": "inference", "model_type": "xlstm", "norm_eps": 1e-06, "norm_reduction_force_float32": True,
    "num_blocks": 32, "num_heads": 8, "output_logit_soft_cap": 30.0, "pad_token_id": 1, "qk_dim_factor": 0.5,
    "return_last_states": True, "sequence_kernel": "native_sequence__triton", "step_kernel": "triton",
    "tie_word_embeddings": False, "torch_dtype": "float32", "use_bias": False, "use_cache": True,
    "v_dim_factor": 1.0, "vocab_size": 50304, "weight_mode": "single",
}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "layers", "params"),
    [
        # state-spaces/mamba-130m-hf: 129,135,360 parameters (the head tied to the embeddings)
        (MAMBA_130M, 24, 129_135_360),
        # google/recurrentgemma-2b: 2.68 B (tied)
        (RECURRENTGEMMA_2B, 26, 2_682_862_080),
        # NX-AI/xLSTM-7b: 6.87 B (its own head)
        (XLSTM_7B, 32, 6_865_424_896),
    ],
    ids=["mamba-130m", "recurrentgemma-2b", "xlstm-7b"],
)
def test_a_published_config_gives_its_published_size(config, layers, params):
    family = FAMILIES[config["model_type"]]
    spec = family.parse(config, "config.json")
    shapes = family.tensors(spec)
    tied = family.tied(spec)
    assert spec.n_layers == layers
    assert sum(math.prod(s) for name, s in shapes.items() if name not in tied) == params


def test_recurrentgemmas_block_list_is_read_in_both_spellings():
    family = FAMILIES["recurrent_gemma"]
    pattern = ["recurrent", "attention"]
    old = family.parse(RECURRENTGEMMA_2B | {"_block_types": pattern}, "config.json")
    new = family.parse({**RECURRENTGEMMA_2B, "block_types": pattern}, "config.json")
    assert old.layer_kinds == new.layer_kinds == tuple(pattern * 13)

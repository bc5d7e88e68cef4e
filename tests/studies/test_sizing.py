"""Sizing: param_count against the references' own ``sum(p.numel())``, every design template
landing within 5 % of targets from 30 k to 2 M at depths 1, 2 and 4 (its config read by the
family's parser), matched designs within 5 % of their median, and the refusals."""

from __future__ import annotations

import statistics

import pytest
import torch
import transformers

from rnnviz.checkpoints.registry import FAMILIES
from rnnviz.config import ConfigError
from rnnviz.studies.sizing import (
    TEMPLATES,
    TOLERANCE,
    design_config,
    matched_configs,
    param_count,
    target_count,
)

#: transformers' config and causal-LM classes by model type.
REFERENCES = {
    "mamba": ("MambaConfig", "MambaForCausalLM"),
    "falcon_mamba": ("FalconMambaConfig", "FalconMambaForCausalLM"),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM"),
    "recurrent_gemma": ("RecurrentGemmaConfig", "RecurrentGemmaForCausalLM"),
    "xlstm": ("xLSTMConfig", "xLSTMForCausalLM"),
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM"),
}

MAMBA = dict(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2)
MAMBA2 = dict(
    vocab_size=64, hidden_size=16, num_heads=4, head_dim=8, n_groups=2, state_size=4, num_hidden_layers=2
)
GEMMA = dict(vocab_size=64, hidden_size=16, intermediate_size=48, num_attention_heads=2, num_hidden_layers=3)
XLSTM = dict(vocab_size=64, hidden_size=32, num_blocks=2, num_heads=2)
QWEN = dict(
    vocab_size=64,
    hidden_size=16,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=8,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=8,
)
#: Two configs per family: tied and untied heads where a family ties, biases, other patterns.
CASES = [
    ("mamba", MAMBA),
    ("mamba", MAMBA | dict(tie_word_embeddings=False, use_bias=True)),
    ("falcon_mamba", MAMBA),
    ("falcon_mamba", MAMBA | dict(tie_word_embeddings=False, use_conv_bias=False)),
    ("mamba2", MAMBA2),
    ("mamba2", MAMBA2 | dict(tie_word_embeddings=True, use_bias=True)),
    ("recurrent_gemma", GEMMA | dict(num_key_value_heads=1)),
    ("recurrent_gemma", GEMMA | dict(tie_word_embeddings=False, block_types=["recurrent"], lru_width=24)),
    ("xlstm", XLSTM),
    ("xlstm", XLSTM | dict(use_bias=True, num_heads=4, num_blocks=1)),
    ("qwen3_next", QWEN | dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=8)),
    ("qwen3_next", QWEN | dict(num_experts=0, intermediate_size=40, tie_word_embeddings=True)),
    ("torch_lstm", dict(num_layers=2, input_size=3, hidden_size=8)),
    ("torch_lstm", dict(num_layers=3, input_size=5, hidden_size=4, bias=False)),
    ("torch_gru", dict(num_layers=2, input_size=3, hidden_size=8)),
    ("torch_gru", dict(num_layers=1, input_size=2, hidden_size=16, bias=False)),
]


def reference(model_type: str, config: dict) -> torch.nn.Module:
    """transformers' (torch's, for a stack) own model of ``config``."""
    if model_type in ("torch_lstm", "torch_gru"):
        return (torch.nn.LSTM if model_type == "torch_lstm" else torch.nn.GRU)(**config)
    config_class, model_class = (getattr(transformers, n) for n in REFERENCES[model_type])
    return model_class(config_class(**config))


def numel(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("model_type, config", CASES, ids=lambda c: c if isinstance(c, str) else "")
def test_the_count_is_the_references_own(model_type, config):
    assert param_count(model_type, config) == numel(reference(model_type, config))


def test_a_tied_head_counts_once_though_transformers_xlstm_keeps_its_own():
    untied = param_count("xlstm", XLSTM)
    tied = param_count("xlstm", XLSTM | dict(tie_word_embeddings=True))
    assert untied - tied == 64 * 32  # V · D: the head is the embeddings' array in rnnviz
    assert numel(reference("xlstm", XLSTM | dict(tie_word_embeddings=True))) == untied


def test_every_model_type_a_family_reads_has_a_template():
    assert set(TEMPLATES) == set(FAMILIES)


@pytest.mark.parametrize("model_type", sorted(TEMPLATES))
@pytest.mark.parametrize("layers", [1, 2, 4])
def test_design_config_lands_within_the_tolerance(model_type, layers):
    family = FAMILIES[model_type]
    for target in (30_000, 55_555, 100_000, 333_333, 1_000_000, 2_000_000):
        config = design_config(model_type, params=target, layers=layers)
        spec = family.parse(config, "test")  # the loader's parser reads it
        assert spec.n_layers == layers
        assert abs(param_count(model_type, config) - target) <= TOLERANCE * target, (target, config)


@pytest.mark.parametrize("model_type", sorted(TEMPLATES))
def test_the_count_grows_with_the_width(model_type):
    """What the bisection over the legal widths relies on."""
    template = TEMPLATES[model_type]
    widths = [d for d in range(1, 400) if template.allows(d, template.knobs)]
    counts = [param_count(model_type, template.build(d, 3, template.knobs)) for d in widths]
    assert counts == sorted(counts) and len(set(counts)) > len(counts) // 2


def test_design_config_is_the_nearest_legal_width():
    config = design_config("torch_gru", params=10_000, layers=1, input_size=4)
    d = config["hidden_size"]
    counts = {w: param_count("torch_gru", config | {"hidden_size": w}) for w in (d - 1, d, d + 1)}
    assert abs(counts[d] - 10_000) == min(abs(c - 10_000) for c in counts.values())
    assert counts[d] == 3 * (4 * d + d * d + 2 * d)  # the closed form of one GRU layer


def test_knobs_are_kept_and_their_constraints_shape_the_widths():
    config = design_config("mamba2", params="300k", layers=2, head_dim=16, n_groups=2, vocab_size=512)
    assert config["vocab_size"] == 512 and config["head_dim"] == 16
    assert config["num_heads"] * 16 == 2 * config["hidden_size"] and config["num_heads"] % 2 == 0
    attention = design_config(
        "recurrent_gemma", params="200k", layers=3, block_types=("recurrent", "attention")
    )
    kinds = FAMILIES["recurrent_gemma"].parse(attention, "test").layer_kinds
    assert kinds == ("recurrent", "attention", "recurrent")
    qwen = FAMILIES["qwen3_next"].parse(design_config("qwen3_next", params="200k", layers=4), "test")
    assert qwen.layer_kinds[-1] == "full_attention" and not any(map(qwen.has_experts, range(4)))


@pytest.mark.parametrize("layers", [2, 4])
@pytest.mark.parametrize("target", [30_000, 100_000, 400_000, 2_000_000])
def test_matched_designs_lie_within_the_tolerance_of_their_median(target, layers):
    configs = matched_configs(sorted(TEMPLATES), params=target, layers=layers, vocab_size=128, input_size=8)
    counts = [param_count(t, c) for t, c in configs.items()]
    middle = statistics.median(counts)
    assert all(abs(c - target) <= TOLERANCE * target for c in counts)
    assert all(abs(c - middle) <= TOLERANCE * middle for c in counts)
    assert configs["torch_lstm"]["input_size"] == 8 and configs["mamba"]["vocab_size"] == 128


#: Three designs whose widths are coarse (heads of 32 channels, four heads): at 57.5 k their
#: nearest counts are 60,136, 57,218 and 57,050, 5.1 % about their median.
COARSE = dict(model_types=["xlstm", "mamba2", "recurrent_gemma"], layers=2, num_heads=4, head_dim=32)


def test_a_median_that_needs_moving_is_found():
    nearest = [
        param_count(t, design_config(t, params=57_500, layers=2, **knobs))
        for t, knobs in [("xlstm", dict(num_heads=4)), ("mamba2", dict(head_dim=32)), ("recurrent_gemma", {})]
    ]
    assert nearest == [60_136, 57_218, 57_050]
    counts = [param_count(t, c) for t, c in matched_configs(params=57_500, **COARSE).items()]
    assert counts == [60_136, 57_218, 59_435]  # RecurrentGemma moved up, towards the others


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: design_config("lstm", params=1000, layers=1), "design='lstm' is not allowed: one of mamba"),
        (
            lambda: design_config("mamba", params="1k", layers=4),
            "the nearest are 741 (hidden_size 1) and 1,530",
        ),
        (lambda: design_config("mamba", params="2x", layers=1), "params='2x' is not allowed: a count ≥ 1"),
        (lambda: design_config("mamba", params=10**5, layers=0), "layers=0 is not allowed: an integer ≥ 1"),
        (
            lambda: design_config("mamba", params=10**5, layers=1, heads=2),
            "heads=2 is not allowed: a knob of mamba",
        ),
        (
            lambda: design_config("xlstm", params="30k", layers=4, num_heads=8),
            "a count a xlstm design of 4 layers reaches within 5% (its legal widths: d ≥ 2 with d and",
        ),
        (
            lambda: matched_configs(["mamba", "mamba"], params="1M", layers=1),
            "one or more designs, each once",
        ),
        (
            lambda: matched_configs(["mamba", "xlstm"], params="1M", layers=1, input_size=3),
            "input_size=3 is not allowed: a knob of one of mamba, xlstm",
        ),
    ],
)
def test_refusals_say_what_is_impossible(call, message):
    with pytest.raises(ConfigError) as err:
        call()
    assert message in str(err.value)


def test_no_common_median_is_refused_with_each_designs_reach():
    with pytest.raises(ConfigError) as err:
        matched_configs(params=84_500, **COARSE)
    assert str(err.value) == (
        "params=84500 is not allowed: counts within 5% of their median; the designs reach "
        "xlstm 80,992 … 80,992; mamba2 88,600 … 88,600; recurrent_gemma 83,390 … 88,256."
    )


def test_counts_read_k_and_m():
    assert [target_count(v) for v in ("30k", "2M", "1.5m", " 400K ", "12345")] == [
        30_000,
        2_000_000,
        1_500_000,
        400_000,
        12_345,
    ]


@pytest.mark.parametrize("model_type", ["recurrent_gemma", "qwen3_next", "xlstm"])
def test_a_fresh_model_of_the_design_holds_that_many_parameters(model_type):
    from rnnviz.studies.models import fresh_model

    config = design_config(model_type, params="30k", layers=4)
    assert fresh_model(model_type, config).n_params == param_count(model_type, config)

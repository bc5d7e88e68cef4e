"""Fresh weights (each family's ``init_params``) against the reference's own fresh model:
transformers' ``<Model>ForCausalLM(config)`` after ``torch.manual_seed(s)`` (its
``_init_weights``), and torch's ``nn.LSTM`` / ``nn.GRU``.

(a) the names, shapes and dtypes are those ``save_pretrained`` writes (a torch stack's
``state_dict()``); (b) per tensor, over SEEDS seeds each side, the entries the reference sets
whatever the seed are equal exactly, and the rest, pooled, agree in mean and standard deviation
within Z standard errors of the difference, and in distribution by the two-sample
Kolmogorov–Smirnov test at level KS_ALPHA; (c) a tensor drawn from a wrong distribution fails.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file
from scipy.stats import ks_2samp

from rnnviz.checkpoints.registry import FAMILIES
from rnnviz.engine.blocks.mamba import init_params as mamba_init
from rnnviz.engine.blocks.registry import BLOCKS

#: Seeds drawn on each side.
SEEDS = 12
#: Standard errors a mean or a standard deviation may differ by: a one-in-1.7-million miss for
#: a normal statistic, so some hundreds of checks hold with a right draw, while a σ off by a few
#: per cent fails (``test_a_wrong_distribution_fails``).
Z = 5.0
#: The Kolmogorov–Smirnov test's level: its critical distance is √(−ln(α/2)/2) · √((n + m)/(n m)).
KS_ALPHA = 1e-6

MAMBA = dict(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2)
#: id → (model_type, config). Between them: every family, tied and untied heads, biases on and
#: off, Mamba's rescaled out_proj, constant Δ weights and other Δ bounds, RecurrentGemma's
#: other variance scale and padding row, Qwen3-Next's experts and dense MLPs with a padding row.
CASES = {
    "mamba": ("mamba", MAMBA),
    "mamba-rescaled-bias-untied": (
        "mamba",
        MAMBA
        | dict(
            rescale_prenorm_residual=True,
            use_bias=True,
            tie_word_embeddings=False,
            initializer_range=0.05,
            time_step_min=0.01,
            time_step_max=0.5,
            time_step_scale=2.0,
        ),
    ),
    "mamba-constant-dt": ("mamba", MAMBA | dict(time_step_init_scheme="constant", use_conv_bias=False)),
    "falcon_mamba": ("falcon_mamba", MAMBA),
    "mamba2": (
        "mamba2",
        dict(
            vocab_size=64,
            hidden_size=16,
            num_heads=4,
            head_dim=8,
            n_groups=2,
            state_size=4,
            num_hidden_layers=2,
        ),
    ),
    "mamba2-rescaled-bias-tied": (
        "mamba2",
        dict(
            vocab_size=64,
            hidden_size=16,
            num_heads=8,
            head_dim=4,
            n_groups=1,
            state_size=4,
            num_hidden_layers=3,
            rescale_prenorm_residual=True,
            use_bias=True,
            tie_word_embeddings=True,
            time_step_max=0.3,
        ),
    ),
    "recurrent_gemma": (
        "recurrent_gemma",
        dict(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=48,
            num_attention_heads=2,
            num_key_value_heads=1,
            num_hidden_layers=3,
            attention_window_size=8,
        ),
    ),
    "recurrent_gemma-bias-untied-pad3": (
        "recurrent_gemma",
        dict(
            vocab_size=64,
            hidden_size=32,
            lru_width=16,
            intermediate_size=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            num_hidden_layers=2,
            block_types=["attention", "recurrent"],
            attention_bias=True,
            tie_word_embeddings=False,
            w_init_variance_scale=0.04,
            pad_token_id=3,
            conv1d_width=3,
        ),
    ),
    "xlstm": ("xlstm", dict(vocab_size=64, hidden_size=32, num_blocks=2, num_heads=2)),
    "xlstm-bias": ("xlstm", dict(vocab_size=64, hidden_size=32, num_blocks=1, num_heads=4, use_bias=True)),
    "qwen3_next": (
        "qwen3_next",
        dict(
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
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=8,
            shared_expert_intermediate_size=8,
        ),
    ),
    "qwen3_next-dense-bias-pad0": (
        "qwen3_next",
        dict(
            vocab_size=64,
            hidden_size=16,
            num_hidden_layers=2,
            layer_types=["linear_attention", "full_attention"],
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=4,
            linear_num_key_heads=1,
            linear_num_value_heads=2,
            linear_key_head_dim=4,
            linear_value_head_dim=4,
            num_experts=0,
            intermediate_size=24,
            attention_bias=True,
            tie_word_embeddings=True,
            initializer_range=0.05,
            pad_token_id=0,
        ),
    ),
    "torch_lstm": ("torch_lstm", dict(num_layers=2, input_size=3, hidden_size=8)),
    "torch_gru-no-bias": ("torch_gru", dict(num_layers=2, input_size=5, hidden_size=16, bias=False)),
}

#: transformers' config and causal-LM classes by model type.
REFERENCES = {
    "mamba": ("MambaConfig", "MambaForCausalLM"),
    "falcon_mamba": ("FalconMambaConfig", "FalconMambaForCausalLM"),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM"),
    "recurrent_gemma": ("RecurrentGemmaConfig", "RecurrentGemmaForCausalLM"),
    "xlstm": ("xLSTMConfig", "xLSTMForCausalLM"),
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM"),
}


def reference(model_type: str, config: dict, seed: int) -> torch.nn.Module:
    """The reference's fresh model of ``config``, drawn after ``torch.manual_seed(seed)``."""
    torch.manual_seed(seed)
    if model_type in ("torch_lstm", "torch_gru"):
        kind = torch.nn.LSTM if model_type == "torch_lstm" else torch.nn.GRU
        return kind(**config, batch_first=True)
    config_class, model_class = (getattr(transformers, n) for n in REFERENCES[model_type])
    return model_class(config_class(**config))


def _reference_state(model_type: str, config: dict, seed: int) -> dict[str, np.ndarray]:
    """The reference's fresh tensors under the names a saved checkpoint gives them: Qwen3-Next's
    experts, fused in memory (``gate_up_proj`` ``[E, 2F, D]``, ``down_proj`` ``[E, D, F]``), one by one."""
    out = {}
    for name, value in reference(model_type, config, seed).state_dict().items():
        value = value.detach().numpy()
        if name.endswith("experts.gate_up_proj"):
            stem, width = name.removesuffix("gate_up_proj"), value.shape[1] // 2
            for e, w in enumerate(value):
                out[f"{stem}{e}.gate_proj.weight"], out[f"{stem}{e}.up_proj.weight"] = w[:width], w[width:]
        elif name.endswith("experts.down_proj"):
            stem = name.removesuffix("down_proj")
            out |= {f"{stem}{e}.down_proj.weight": w for e, w in enumerate(value)}
        else:
            out[name] = value
    return out


def _spec_and_settings(model_type: str, config: dict):
    family = FAMILIES[model_type]
    config = {**config, "model_type": model_type}
    settings = family.init(config, "test") if family.init else None
    return family.parse(config, "test"), settings


def ours(model_type: str, config: dict, seeds: int = SEEDS) -> dict[str, np.ndarray]:
    """``init_params`` at keys 0 … seeds − 1, ``{name: [seeds, *shape]}`` (one vmapped call)."""
    spec, settings = _spec_and_settings(model_type, config)
    fn = jax.vmap(lambda key: BLOCKS[model_type].init_params(spec, key, settings=settings))
    return {k: np.asarray(v) for k, v in fn(jax.vmap(jax.random.key)(np.arange(seeds))).items()}


def mismatches(ref: np.ndarray, got: np.ndarray) -> list[str]:
    """What differs between two stacks of draws ``[seeds, *shape]`` of one tensor.

    Entries the reference gives the same value at every seed must be those values to within
    one float32 ulp (a constant such as ``A_log = log(1 … N)`` is rounded by the library's log:
    torch's AVX-512 float32 log gives log 7 an ulp above the correctly rounded value that
    rnnviz takes from float64); the others, pooled, must agree in mean and standard deviation
    within :data:`Z` standard errors (the standard deviation's from the pooled kurtosis κ:
    s·√((κ − 1)/(4n))) and pass the two-sample Kolmogorov–Smirnov test at level
    :data:`KS_ALPHA`.
    """
    ulp = np.spacing(np.abs(ref[0]).astype(np.float32)).astype(np.float64)
    ref, got = ref.astype(np.float64), got.astype(np.float64)
    fixed = np.all(ref == ref[:1], axis=0)
    problems = []
    if fixed.any() and not np.all(np.abs(got[:, fixed] - ref[0][fixed]) <= ulp[fixed]):
        problems.append("fixed entries differ")
    r, g = ref[:, ~fixed].ravel(), got[:, ~fixed].ravel()
    if r.size == 0:
        return problems
    if g.std() == 0:
        return problems + ["the reference's entries vary, these do not"]
    se_mean = math.sqrt(r.var() / r.size + g.var() / g.size)
    if abs(r.mean() - g.mean()) > Z * se_mean:
        problems.append(f"mean {g.mean():.4g} vs {r.mean():.4g} (se {se_mean:.2g})")
    se_std = math.sqrt(sum(_std_variance(x) for x in (r, g)))
    if abs(r.std() - g.std()) > Z * se_std:
        problems.append(f"std {g.std():.4g} vs {r.std():.4g} (se {se_std:.2g})")
    critical = math.sqrt(-math.log(KS_ALPHA / 2) / 2) * math.sqrt((r.size + g.size) / (r.size * g.size))
    distance = ks_2samp(r, g).statistic
    if distance > critical:
        problems.append(f"KS distance {distance:.3g} > {critical:.3g}")
    return problems


def _std_variance(x: np.ndarray) -> float:
    """The sampling variance of the standard deviation of ``x``: s²(κ − 1)/(4n)."""
    centred = x - x.mean()
    kurtosis = np.mean(centred**4) / np.mean(centred**2) ** 2
    return x.var() * (kurtosis - 1) / (4 * x.size)


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    model_type, config = CASES[request.param]
    refs = [_reference_state(model_type, config, s) for s in range(SEEDS)]
    return model_type, config, {k: np.stack([r[k] for r in refs]) for k in refs[0]}, ours(model_type, config)


def _saved(model_type: str, config: dict, folder) -> dict[str, np.ndarray]:
    """What the reference's checkpoint holds: ``save_pretrained``'s file, a stack's ``state_dict()``."""
    model = reference(model_type, config, 0)
    if model_type in ("torch_lstm", "torch_gru"):
        return {k: v.numpy() for k, v in model.state_dict().items()}
    model.save_pretrained(folder)
    return load_file(folder / "model.safetensors")


@pytest.mark.parametrize("name", list(CASES))
def test_names_shapes_and_dtypes_are_the_saved_checkpoints(name, tmp_path):
    model_type, config = CASES[name]
    spec, settings = _spec_and_settings(model_type, config)
    params = BLOCKS[model_type].init_params(spec, jax.random.key(0), settings=settings)
    saved = _saved(model_type, config, tmp_path)
    left_out = {k for k in FAMILIES[model_type].tied(spec) if k not in saved}
    assert set(params) == set(saved) | left_out
    assert {k: (v.shape, str(v.dtype)) for k, v in saved.items()} == {
        k: (params[k].shape, str(params[k].dtype)) for k in saved
    }
    for k in left_out:  # a tied head is the embeddings' own array, as the loader fills it
        assert params[k] is params[FAMILIES[model_type].tied(spec)[k]]
    narrow = BLOCKS[model_type].init_params(spec, jax.random.key(0), dtype="bfloat16", settings=settings)
    assert {str(v.dtype) for v in narrow.values()} == {"bfloat16"}
    assert all(np.array_equal(narrow[k], params[k].astype("bfloat16")) for k in params)


def test_every_tensor_is_drawn_as_the_reference_draws_it(case):
    model_type, config, refs, got = case
    assert set(got) >= set(refs)
    problems = {name: p for name in refs if (p := mismatches(refs[name], got[name]))}
    assert not problems


def test_draws_are_deterministic_by_key_and_differ_between_keys():
    spec, _ = _spec_and_settings("mamba", MAMBA)
    a, b, c = (mamba_init(spec, jax.random.key(k)) for k in (7, 7, 8))
    name = "backbone.layers.1.mixer.in_proj.weight"
    assert all(np.array_equal(a[k], b[k]) for k in a) and not np.array_equal(a[name], c[name])


def _perturbed(name: str, arrays: np.ndarray, how: str) -> np.ndarray:
    """One tensor's draws made wrong in one way a mistake would."""
    rng = np.random.default_rng(0)
    if how == "std 5% wide":
        return arrays * 1.05
    if how == "uniform of the same std":
        return rng.uniform(-1.0, 1.0, arrays.shape) * arrays.std() * math.sqrt(3)
    if how == "not rescaled by 1/sqrt(L)":
        return arrays * math.sqrt(2)
    if how == "dt uniform, not log-uniform":
        dt = rng.uniform(0.001, 0.1, arrays.shape)
        return dt + np.log(-np.expm1(-dt))
    if how == "A_log from 0":
        return np.log(np.arange(2, arrays.shape[-1] + 2, dtype=np.float32)) + 0 * arrays
    raise ValueError(how)


@pytest.mark.parametrize(
    "name, how",
    [
        ("backbone.embeddings.weight", "std 5% wide"),
        ("backbone.layers.0.mixer.in_proj.weight", "uniform of the same std"),
        ("backbone.layers.1.mixer.dt_proj.bias", "dt uniform, not log-uniform"),
        ("backbone.layers.0.mixer.A_log", "A_log from 0"),
    ],
)
def test_a_wrong_distribution_fails(name, how):
    """The statistics catch a σ a few per cent off, the wrong family of distribution at the
    same σ, and a deterministic tensor off by one step."""
    refs = np.stack([_reference_state("mamba", MAMBA, s)[name] for s in range(SEEDS)])
    got = ours("mamba", MAMBA)[name]
    assert not mismatches(refs, got)
    assert mismatches(refs, _perturbed(name, got, how))


def test_rescaled_out_proj_is_caught_when_left_out():
    """``rescale_prenorm_residual``: the out_proj drawn without the 1/√L factor fails."""
    model_type, config = CASES["mamba-rescaled-bias-untied"]
    name = "backbone.layers.0.mixer.out_proj.weight"
    refs = np.stack([_reference_state(model_type, config, s)[name] for s in range(SEEDS)])
    got = ours(model_type, config)[name]
    assert not mismatches(refs, got) and mismatches(refs, _perturbed(name, got, "not rescaled by 1/sqrt(L)"))


def test_a_fused_xlstm_is_the_single_one_stacked():
    """transformers cannot draw a fused xLSTM; here it is the single-weight draw, stacked."""
    config = dict(vocab_size=64, hidden_size=32, num_blocks=1, num_heads=2, use_bias=True)
    single = ours("xlstm", config, seeds=1)
    fused = ours("xlstm", config | dict(weight_mode="fused"), seeds=1)
    layer = "backbone.blocks.0.mlstm_layer."
    rows = [single[layer + n + ".bias"] for n in ("q", "k", "v", "ogate_preact")]
    assert np.array_equal(fused[layer + "qkv_opreact.bias"], np.concatenate(rows, axis=1))
    gates = [single[layer + n + ".weight"] for n in ("igate_preact", "fgate_preact")]
    assert np.array_equal(fused[layer + "ifgate_preact.weight"], np.concatenate(gates, axis=1))
    spec, _ = _spec_and_settings("xlstm", config | dict(weight_mode="fused"))
    assert {k: v.shape[1:] for k, v in fused.items()} == FAMILIES["xlstm"].tensors(spec)


def test_named_keys_leave_other_tensors_alone():
    """Tying the head changes no other tensor's draw."""
    spec, _ = _spec_and_settings("mamba", MAMBA)
    tied, untied = (
        mamba_init(s, jax.random.key(3)) for s in (spec, dataclasses.replace(spec, tie_word_embeddings=False))
    )
    assert all(np.array_equal(tied[k], untied[k]) for k in tied if k != "lm_head.weight")
    assert not np.array_equal(untied["lm_head.weight"], untied["backbone.embeddings.weight"])

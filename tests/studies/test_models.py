"""analyze_model and the CLI on checkpoints written by transformers and torch: the loss equals
transformers' own, and the per-step norms equal gradients torch computes independently
(∂L/∂inputs_embeds and ∂ℓ_p/∂inputs_embeds); load_model reads each family through its
headers; the CLI prints the same record as JSON, with a tokenizer.json's tokens."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers

import rnnviz
from rnnviz.cli.main import main

T = 9


def _perturbed(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """The model with every parameter moved off its initial value (norms off 1, biases off 0)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g))
    return model.eval()


@pytest.fixture(scope="module")
def mamba_folder(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.MambaConfig(
        vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2, conv_kernel=3, expand=2
    )
    model = _perturbed(transformers.MambaForCausalLM(config))
    folder = tmp_path_factory.mktemp("mamba")
    model.save_pretrained(folder)
    return folder, model


def _torch_norms(model, ids: torch.Tensor, position: int):
    """‖∂L/∂e_t‖ and ‖∂ℓ_p/∂e_t‖ over the batch, by torch through inputs_embeds."""
    embeds = model.get_input_embeddings()(ids).detach().requires_grad_(True)
    logits = model(inputs_embeds=embeds, use_cache=False).logits
    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
    ).view(ids.shape[0], -1)
    loss = nll.mean()
    (g_loss,) = torch.autograd.grad(loss, embeds, retain_graph=True)
    (g_pos,) = torch.autograd.grad(nll[:, position].mean(), embeds)
    norm = lambda g: g.double().pow(2).sum(dim=(0, 2)).sqrt().numpy()  # noqa: E731
    return loss.item(), norm(g_loss), norm(g_pos)


def test_the_analysis_equals_torchs_gradients(mamba_folder):
    folder, model = mamba_folder
    ids = np.random.default_rng(0).integers(0, 64, size=(3, T))
    a = rnnviz.analyze_model(rnnviz.load_model(folder), ids, position=4)
    reference = model(torch.as_tensor(ids), labels=torch.as_tensor(ids)).loss.item()
    loss, g_loss, g_pos = _torch_norms(model, torch.as_tensor(ids), 4)
    assert a.loss == pytest.approx(reference, rel=1e-5) and loss == pytest.approx(reference, rel=1e-6)
    assert a.grad_norms.shape == (3, T)
    np.testing.assert_allclose(a.grad_norms[0], g_loss, rtol=1e-4)
    np.testing.assert_allclose(a.connectivity[:5], g_pos[:5], rtol=1e-4)
    assert np.all(a.connectivity[5:] == 0)  # nothing after p reaches ℓ_p: a causal model
    assert sorted(a.state_grad_norms) == [0, 1] and a.state_grad_norms[0]["h"].shape == (T,)
    # The top row is the final norm's input, which every position's loss reads but the last.
    assert a.grad_norms[2, -1] == 0 and np.all(a.grad_norms[2, :-1] > 0)


def test_the_analysis_without_the_connectivity_is_the_same_pass_of_the_loss(mamba_folder):
    """``connectivity=False``: the loss's norms of the default analysis (to float32 rounding) from
    the one-pass executable, the connectivity left out and said to be (None in the JSON too)."""
    model = rnnviz.load_model(mamba_folder[0])
    ids = np.random.default_rng(2).integers(0, 64, size=(2, T))
    whole = rnnviz.analyze_model(model, ids, position=4)
    alone = rnnviz.analyze_model(model, ids, position=4, connectivity=False)
    assert alone.connectivity is None and alone.log10_connectivity is None
    assert alone.to_json()["connectivity"] is None and alone.position == 4
    assert alone.loss == pytest.approx(whole.loss, rel=1e-6)
    np.testing.assert_allclose(alone.grad_norms, whole.grad_norms, rtol=1e-5)
    np.testing.assert_allclose(alone.state_grad_norms[1]["h"], whole.state_grad_norms[1]["h"], rtol=1e-5)
    assert not np.array_equal(whole.connectivity, whole.grad_norms[0])  # ℓ_4's, not L's
    from rnnviz.frames.models import token_connectivity_frame

    with pytest.raises(ValueError, match="no connectivity: run analyze_model with connectivity=True"):
        token_connectivity_frame(alone)


def test_new_values_reuse_the_executable(mamba_folder):
    model = rnnviz.load_model(mamba_folder[0])
    rng = np.random.default_rng(1)
    rnnviz.analyze_model(model, rng.integers(0, 64, size=(2, T)))
    again = rnnviz.analyze_model(model, rng.integers(0, 64, size=(2, T)))
    assert again.compile_s == 0.0


def test_bad_inputs_are_named(mamba_folder):
    model = rnnviz.load_model(mamba_folder[0])
    with pytest.raises(ValueError, match="0 … 63"):
        rnnviz.analyze_model(model, [[1, 2, 64]])
    with pytest.raises(ValueError, match="integers"):
        rnnviz.analyze_model(model, np.ones((1, 5), np.float32))
    with pytest.raises(ValueError, match="position 9"):
        rnnviz.analyze_model(model, np.ones((1, 5), np.int64), position=9)


def test_a_torch_lstm_stack(tmp_path):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 6, 2, batch_first=True)
    torch.save(lstm.state_dict(), tmp_path / "lstm.pt")
    x = np.random.default_rng(0).normal(size=(2, T, 3)).astype(np.float32)
    a = rnnviz.analyze_model(rnnviz.load_model(tmp_path / "lstm.pt"), x)
    xt = torch.tensor(x, requires_grad=True)
    y = lstm(xt)[0]
    loss = 0.5 * (y[:, -1] ** 2).sum()  # the bare cells' "last" loss
    loss.backward()
    assert a.loss == pytest.approx(loss.item(), rel=1e-5)
    np.testing.assert_allclose(a.grad_norms[0], xt.grad.double().pow(2).sum(dim=(0, 2)).sqrt(), rtol=1e-4)
    assert sorted(a.state_grad_norms[1]) == ["c", "h"]
    # the loss is the last step's own: its pass gives the connectivity, which is kept
    alone = rnnviz.analyze_model(rnnviz.load_model(tmp_path / "lstm.pt"), x, connectivity=False)
    np.testing.assert_array_equal(alone.connectivity, a.connectivity)


def _word_tokenizer(folder) -> list[str]:
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["the", "cat", "sat", "on", "mat", "[UNK]"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    return words


def test_the_cli_reads_text_through_the_tokenizer(mamba_folder, capsys):
    folder, _ = mamba_folder
    _word_tokenizer(folder)
    assert main(["analyze", "--model", str(folder), "--text", "the cat sat on the mat", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tokens"] == ["the", "cat", "sat", "on", "the", "mat"]
    direct = rnnviz.analyze_model(rnnviz.load_model(folder), [[0, 1, 2, 3, 0, 4]])
    np.testing.assert_allclose(out["grad_norms"], direct.grad_norms, rtol=1e-6)
    assert out["loss"] == pytest.approx(direct.loss)
    np.testing.assert_allclose(out["connectivity"], direct.connectivity, rtol=1e-6)
    alone = ["--tokens", "0,1,2,3,0,4", "--no-connectivity", "--json"]
    assert main(["analyze", "--model", str(folder), *alone]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["connectivity"] is None
    np.testing.assert_allclose(out["grad_norms"], direct.grad_norms, rtol=1e-5)
    assert main(["analyze", "--model", str(folder), "--tokens", "0,1,2,3", "--jacobians", "2"]) == 0
    text = capsys.readouterr().out
    assert "after block 2" in text and "step Jacobians (diagonal" in text and "layer 2: mean ln σ1" in text
    assert main(["analyze", "--model", str(folder), "--tokens", "0,1,2,3", "--jacobians", "2", "--json"]) == 0
    j = json.loads(capsys.readouterr().out)["jacobians"]
    direct = rnnviz.model_jacobians(rnnviz.load_model(folder), [[0, 1, 2, 3]], k=2)
    np.testing.assert_allclose(j["singular_values"], direct.singular_values, rtol=1e-6)


def test_the_cli_names_what_is_wrong(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    assert main(["analyze", "--model", str(tmp_path), "--tokens", "1,2"]) == 2
    err = capsys.readouterr().err
    assert (
        "model_type is 'gpt2'; allowed: falcon_mamba, mamba, mamba2, qwen3_next, recurrent_gemma, xlstm"
        in err
    )


def test_a_model_split_over_two_devices_gives_the_same_analysis(mamba_folder):
    """Two host CPU devices (a subprocess: XLA's device count is fixed at start-up): the
    weights split over a mesh, the analysis equal to one device's."""
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    script = textwrap.dedent(f"""
        import json, jax, numpy as np, rnnviz
        from jax.sharding import NamedSharding
        devices = jax.devices("cpu")
        assert len(devices) == 2, devices
        ids = np.random.default_rng(0).integers(0, 64, size=(2, 9))
        split = rnnviz.load_model({str(mamba_folder[0])!r}, devices=devices)
        whole = rnnviz.load_model({str(mamba_folder[0])!r}, devices=devices[:1])
        emb = split.params["backbone.embeddings.weight"]
        a, b = rnnviz.analyze_model(split, ids), rnnviz.analyze_model(whole, ids)
        print(json.dumps({{
            "split": isinstance(emb.sharding, NamedSharding) and len(emb.sharding.device_set) == 2,
            "shard_rows": [s.data.shape[0] for s in emb.addressable_shards],
            "tied": split.params["lm_head.weight"] is emb,
            "loss": [a.loss, b.loss],
            "zeros": bool((np.isneginf(a.log10_grad_norms) == np.isneginf(b.log10_grad_norms)).all()),
            "diff": float(np.nanmax(np.abs(a.log10_grad_norms - b.log10_grad_norms))),
        }}))
    """)
    root = Path(__file__).resolve().parents[2]
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2"
    env = {**os.environ, "XLA_FLAGS": flags, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["split"] and result["shard_rows"] == [32, 32] and result["tied"]
    assert result["loss"][0] == pytest.approx(result["loss"][1], rel=1e-6)
    assert result["zeros"] and result["diff"] < 1e-5


def test_weights_too_large_for_one_device_go_on_all(monkeypatch):
    from rnnviz.studies import models

    class Device:
        platform = "gpu"

        def __init__(self, limit):
            self.limit = limit

        def memory_stats(self):
            return {"bytes_limit": self.limit}

    devices = [Device(100), Device(100)]
    monkeypatch.setattr(models.jax, "devices", lambda platform=None: devices)
    assert models.devices_for(50) == devices[:1]
    assert models.devices_for(51) == devices
    assert models.devices_for(10**9, devices[1:]) == devices[1:]


RANDOM_CONFIGS = [
    {"model_type": "mamba", "vocab_size": 16, "hidden_size": 8, "state_size": 4, "num_hidden_layers": 2},
    {
        "model_type": "mamba2", "vocab_size": 16, "hidden_size": 8, "state_size": 4, "num_heads": 4,
        "head_dim": 4, "n_groups": 1, "num_hidden_layers": 2, "chunk_size": 4,
    },
    {
        "model_type": "recurrent_gemma", "vocab_size": 16, "hidden_size": 16, "lru_width": 16,
        "num_attention_heads": 2, "num_key_value_heads": 1, "intermediate_size": 32, "num_hidden_layers": 3,
        "attention_window_size": 4,
    },
    {"model_type": "xlstm", "vocab_size": 16, "hidden_size": 16, "num_blocks": 2, "num_heads": 2},
    {"model_type": "torch_gru", "num_layers": 2, "input_size": 3, "hidden_size": 5, "bias": True},
]  # fmt: skip


@pytest.mark.parametrize("config", RANDOM_CONFIGS, ids=lambda c: c["model_type"])
def test_every_family_runs_the_float64_pass(config):
    """The pass below float32's range runs for every family (its scans follow the weights'
    width) and agrees with float32 where float32 holds the numbers."""
    import jax

    from rnnviz.checkpoints.registry import FAMILIES
    from rnnviz.studies import models

    family = FAMILIES[config["model_type"]]
    spec = family.parse(config, "random")
    keys = jax.random.split(jax.random.key(0), len(family.tensors(spec)))
    params = {n: 0.3 * jax.random.normal(k, s) for k, (n, s) in zip(keys, family.tensors(spec).items())}
    model = models.Model(config["model_type"], spec, params, "random")
    rng = np.random.default_rng(0)
    inputs = rng.integers(0, 16, size=(2, 11)) if spec.vocab_size else rng.normal(size=(2, 11, 3))
    narrow = rnnviz.analyze_model(model, inputs, exact=False)
    wide = models._wide_pass(model, models.check_inputs(model, inputs), narrow.position, False)
    assert wide.stream.dtype == np.float64
    np.testing.assert_allclose(wide.stream, narrow.grad_norms, rtol=2e-4, atol=1e-30)
    assert wide.loss == pytest.approx(narrow.loss, rel=1e-5)


def test_a_gradient_below_float32_is_exact_against_torch_in_float64(tmp_path):
    """An LSTM whose forget gates are nearly shut: ‖∂L/∂x_t‖ falls several decades a step, far
    below float32's 1e-38 by the first steps; the record's log10 equals torch's in float64."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(2, 4, 1, batch_first=True)
    with torch.no_grad():
        lstm.weight_hh_l0.mul_(0.01)
        lstm.bias_ih_l0[4:8] = -18.0  # the forget gate: σ(−18) ≈ 1.5e-8
        lstm.bias_ih_l0[0:4] = -3.0  # the input gate
    torch.save(lstm.state_dict(), tmp_path / "lstm.pt")
    x = np.random.default_rng(0).normal(size=(1, 12, 2))
    a = rnnviz.analyze_model(rnnviz.load_model(tmp_path / "lstm.pt"), x)
    lstm64 = lstm.double()
    xt = torch.tensor(x, requires_grad=True)
    y = lstm64(xt)[0]
    (0.5 * (y[:, -1] ** 2).sum()).backward()
    reference = np.log10(xt.grad.pow(2).sum(dim=(0, 2)).sqrt().numpy())
    assert a.log10_source.startswith("float64")
    assert reference[0] < -40 and a.grad_norms[0, 0] == 0  # float32 has nothing there
    np.testing.assert_allclose(a.log10_grad_norms[0], reference, atol=1e-4)

"""read_checkpoint: round trips against the libraries that wrote the files, and every hostile
file refused from its headers with one message naming the file and what was expected."""

from __future__ import annotations

import json
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
import torch

from rnnviz.checkpoints import CheckpointError, read_checkpoint


def _lstm_state(layers: int = 2) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return torch.nn.LSTM(3, 5, layers, batch_first=True).state_dict()


@pytest.mark.parametrize("suffix", [".pt", ".safetensors"])
def test_state_dict_round_trip(tmp_path, suffix):
    state = _lstm_state()
    path = tmp_path / f"lstm{suffix}"
    if suffix == ".pt":
        torch.save(state, path)
    else:
        safetensors.numpy.save_file({k: v.numpy() for k, v in state.items()}, str(path))
    ckpt = read_checkpoint(path)
    assert ckpt.model_type == "torch_lstm"
    assert set(ckpt.tensors) == set(state)
    for name, value in state.items():
        np.testing.assert_array_equal(ckpt.tensors[name], value.numpy())


def test_bfloat16_on_request(tmp_path):
    state = _lstm_state(1)
    torch.save(state, tmp_path / "lstm.pt")
    ckpt = read_checkpoint(tmp_path / "lstm.pt", dtype="bfloat16")
    w = ckpt.tensors["weight_hh_l0"]
    assert w.dtype.name == "bfloat16"
    np.testing.assert_array_equal(
        w.astype(np.float32), state["weight_hh_l0"].to(torch.bfloat16).float().numpy()
    )


def test_a_parameter_saved_as_such_and_a_view_with_an_offset(tmp_path):
    """nn.Parameter pickles through _rebuild_parameter; a slice of a larger storage keeps its offset."""
    big = torch.arange(40, dtype=torch.float32)
    state = {
        "weight_ih_l0": torch.nn.Parameter(torch.randn(20, 3)),
        "weight_hh_l0": torch.randn(20, 5),
        "bias_ih_l0": big[:20],
        "bias_hh_l0": big[20:],  # offset 20 into the storage bias_ih_l0 shares
    }
    torch.save(state, tmp_path / "p.pt")
    ckpt = read_checkpoint(tmp_path / "p.pt")
    for name, value in state.items():
        np.testing.assert_array_equal(ckpt.tensors[name], value.detach().numpy())


# --- hostile files: each refused before any data are read, naming the file ---------------


def _safetensors(path: Path, header: dict, data: bytes) -> Path:
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


def _entry(shape, begin, end, dtype="F32"):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def _lstm_header(**overrides) -> dict:
    header = {
        "weight_ih_l0": _entry([8, 3], 0, 96),
        "weight_hh_l0": _entry([8, 2], 96, 160),
        "bias_ih_l0": _entry([8], 160, 192),
        "bias_hh_l0": _entry([8], 192, 224),
    }
    return header | overrides


HOSTILE_SAFETENSORS = {
    "header longer than the file": (None, "its header claims 1099511627776 bytes; allowed: at most"),
    "offsets past the end": ({"bias_hh_l0": _entry([8], 192, 10**12)}, "needs 32"),
    "extent disagrees with shape": ({"bias_hh_l0": _entry([9], 192, 224)}, "needs 36"),
    "data past the end of the file": ({"bias_hh_l0": _entry([8], 224, 256)}, "the file holds"),
    "overlap": ({"bias_hh_l0": _entry([8], 160, 192)}, "overlaps"),
    "unknown dtype": ({"bias_hh_l0": _entry([8], 192, 224, "F8_E4M3")}, "allowed: F64"),
    "shape not sizes": ({"bias_hh_l0": _entry([-8], 192, 224)}, "allowed: a list of sizes"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_SAFETENSORS))
def test_hostile_safetensors(tmp_path, case):
    overrides, message = HOSTILE_SAFETENSORS[case]
    path = tmp_path / "x.safetensors"
    if overrides is None:
        path.write_bytes(struct.pack("<Q", 2**40) + b"{}")
    else:
        _safetensors(path, _lstm_header(**overrides), bytes(224))
    with pytest.raises(CheckpointError, match=message) as err:
        read_checkpoint(path)
    assert str(path) in str(err.value)


def test_header_not_json(tmp_path):
    path = tmp_path / "x.safetensors"
    path.write_bytes(struct.pack("<Q", 4) + b"\xff{[ " + bytes(8))
    with pytest.raises(CheckpointError, match="not JSON"):
        read_checkpoint(path)


def test_a_bare_pickle_is_refused(tmp_path):
    path = tmp_path / "x.pt"
    path.write_bytes(pickle.dumps({"weight_ih_l0": [1.0, 2.0]}))
    with pytest.raises(CheckpointError, match="not a torch.save zip archive"):
        read_checkpoint(path)


class _Payload:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    state = dict(_lstm_state(1))
    torch.save(state, tmp_path / "good.pt")
    with zipfile.ZipFile(tmp_path / "good.pt") as z, zipfile.ZipFile(tmp_path / "evil.pt", "w") as out:
        for info in z.infolist():
            data = z.read(info)
            if info.filename.endswith("data.pkl"):
                data = pickle.dumps({"weight_ih_l0": _Payload(marker)}, protocol=2)
            out.writestr(info, data)
    with pytest.raises(CheckpointError, match="its pickle asks for .*refused") as err:
        read_checkpoint(tmp_path / "evil.pt")
    assert "evil.pt" in str(err.value) and not marker.exists()


def test_a_missing_tensor(tmp_path):
    header = _lstm_header()
    del header["bias_hh_l0"]
    # without bias_hh the state dict is read as a bias-free stack missing bias_ih's partner
    with pytest.raises(CheckpointError, match="bias"):
        read_checkpoint(_safetensors(tmp_path / "x.safetensors", header, bytes(224)))


def test_over_the_cap(tmp_path):
    torch.save(_lstm_state(1), tmp_path / "lstm.pt")
    with pytest.raises(CheckpointError, match="800 bytes of weights as float32; allowed: at most 100 bytes"):
        read_checkpoint(tmp_path / "lstm.pt", max_bytes=100)


def test_not_found_and_bad_suffix(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        read_checkpoint(tmp_path / "nothing")
    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(CheckpointError, match="allowed: .safetensors"):
        read_checkpoint(tmp_path / "x.txt")


# --- Hugging Face folders: sharded, tied, and the folder-level refusals -----------------


@pytest.fixture(scope="module")
def mamba(tmp_path_factory):
    import transformers

    torch.manual_seed(0)
    config = transformers.MambaConfig(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2)
    model = transformers.MambaForCausalLM(config)
    whole, sharded = tmp_path_factory.mktemp("whole"), tmp_path_factory.mktemp("sharded")
    model.save_pretrained(whole)
    model.save_pretrained(sharded, max_shard_size="8KB")
    return model, whole, sharded


def test_a_sharded_folder_reads_as_one_with_the_tied_head_filled(mamba):
    model, whole, sharded = mamba
    assert (sharded / "model.safetensors.index.json").is_file()
    assert len(list(sharded.glob("*.safetensors"))) > 1
    a, b = read_checkpoint(whole), read_checkpoint(sharded)
    state = model.state_dict()
    assert a.model_type == b.model_type == "mamba" and set(a.tensors) == set(b.tensors) == set(state)
    for name, value in state.items():
        np.testing.assert_array_equal(b.tensors[name], value.numpy())
    assert b.tensors["lm_head.weight"] is b.tensors["backbone.embeddings.weight"]  # tied: one array


def _copy(folder: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(folder, tmp_path / "copy"))


def test_an_index_naming_a_file_outside_the_folder(mamba, tmp_path):
    folder = _copy(mamba[2], tmp_path)
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["backbone.norm_f.weight"] = "../elsewhere.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(
        CheckpointError, match="names shard '../elsewhere.safetensors'; allowed: a file beside it"
    ):
        read_checkpoint(folder)


def test_a_tensor_in_two_files(mamba, tmp_path):
    folder = _copy(mamba[2], tmp_path)
    shards = sorted(folder.glob("*.safetensors"))
    first = safetensors.numpy.load_file(str(shards[0]))
    name = next(iter(first))
    second = safetensors.numpy.load_file(str(shards[1])) | {name: first[name]}
    safetensors.numpy.save_file(second, str(shards[1]))
    with pytest.raises(CheckpointError, match=f"tensor '{name}' is also in"):
        read_checkpoint(folder)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"model_type": "gpt2"},
            "model_type is 'gpt2'; allowed: falcon_mamba, mamba, mamba2, qwen3_next, recurrent_gemma, xlstm",
        ),
        ({"hidden_size": 24}, r"tensor 'backbone.embeddings.weight' is \[64, 16\]; expected \[64, 24\]"),
        ({"num_hidden_layers": 3}, r"tensor 'backbone.layers.2.norm.weight' \[16\] is missing"),
    ],
)
def test_a_config_that_disagrees_with_the_weights(mamba, tmp_path, change, message):
    folder = _copy(mamba[1], tmp_path)
    config = json.loads((folder / "config.json").read_text()) | change
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=message):
        read_checkpoint(folder)


def test_a_config_too_large_or_absent(mamba, tmp_path):
    folder = _copy(mamba[1], tmp_path)
    (folder / "config.json").write_text(" " * (2**20 + 1))
    with pytest.raises(CheckpointError, match="allowed: at most 1048576"):
        read_checkpoint(folder)
    (folder / "config.json").unlink()
    with pytest.raises(CheckpointError, match="has no config.json"):
        read_checkpoint(folder)


def test_a_file_cut_short_is_refused_before_reading(mamba, tmp_path):
    folder = _copy(mamba[1], tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(CheckpointError, match="the file holds"):
        read_checkpoint(folder)

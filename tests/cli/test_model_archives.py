"""``rnnviz analyze --model model.zip``: a model folder in an archive is judged, extracted into a
temporary folder, analysed exactly as the folder itself, and the folder removed; a hostile
archive is the dashboard's one message, with nothing extracted."""

from __future__ import annotations

import gc
import json
import tempfile

import numpy as np
from hostile_archives import HOSTILE, zip_bytes

import rnnviz
from rnnviz.checkpoints.registry import FAMILIES
from rnnviz.checkpoints.safetensors import encode
from rnnviz.cli.main import main

TEXT = "the cat sat on the mat"
CONFIG = {"model_type": "mamba", "vocab_size": 8, "hidden_size": 8, "state_size": 4, "num_hidden_layers": 2}


def _tiny_mamba(folder) -> dict[str, bytes]:
    """A 2-block Mamba's files (its config, weights drawn with NumPy, a word tokenizer),
    written to ``folder`` and returned by name."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    family = FAMILIES["mamba"]
    shapes = family.tensors(family.parse(CONFIG, "config.json"))
    rng = np.random.default_rng(0)
    tensors = {n: (0.3 * rng.normal(size=s)).astype(np.float32) for n, s in shapes.items()}
    del tensors["lm_head.weight"]  # tied to the embeddings
    words = ["the", "cat", "sat", "on", "mat", "[UNK]"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    files = {"config.json": json.dumps(CONFIG).encode(), "model.safetensors": encode(tensors)}
    files["tokenizer.json"] = tok.to_str().encode()
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


def test_analyze_reads_a_zipped_model_folder_as_the_folder_and_removes_what_it_extracted(
    tmp_path, monkeypatch, capsys
):
    files = _tiny_mamba(tmp_path / "tiny-mamba")
    archive = tmp_path / "tiny-mamba.zip"
    archive.write_bytes(zip_bytes({f"tiny-mamba/{name}": data for name, data in files.items()}))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert main(["analyze", "--model", str(archive), "--text", TEXT, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    direct = rnnviz.analyze_model(rnnviz.load_model(tmp_path / "tiny-mamba"), [[0, 1, 2, 3, 0, 4]])
    assert out["tokens"] == TEXT.split() and out["source"] == f"{archive}/tiny-mamba"
    np.testing.assert_allclose(out["grad_norms"], direct.grad_norms, rtol=1e-6)
    assert out["loss"] == direct.loss
    gc.collect()  # the tokenizer.json lives as long as the model
    assert list((tmp_path / "tmp").iterdir()) == []
    assert main(["analyze", "--model", str(archive), "--tokens", "0,1,2"]) == 0
    assert f"model: mamba ({archive}/tiny-mamba), 2 layers, T = 3" in capsys.readouterr().out


def test_analyze_refuses_a_zip_that_climbs_out_with_the_dashboards_message(tmp_path, monkeypatch, capsys):
    name, data, message = HOSTILE["zip slip"]
    (tmp_path / name).write_bytes(data)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    assert main(["analyze", "--model", str(tmp_path / name), "--tokens", "0,1"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / name}: {message}; allowed: relative paths inside it.\n"
    assert list((tmp_path / "tmp").iterdir()) == [] and not (tmp_path / "x").exists()

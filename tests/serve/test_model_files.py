"""The Your model tab's files on the server: the data folder's models (its recorded runs passed
over), and an uploaded archive judged against the upload folder's cap before a byte is
written, kept once by its bytes' hash and held to that folder's caps."""

from __future__ import annotations

import pytest
from hostile_archives import HOSTILE, REG, TOO_LARGE, demo_folder_zip, tar_bytes, zip_bytes

import rnnviz
from rnnviz.checkpoints import CheckpointError
from rnnviz.checkpoints.demo import demo_bytes
from rnnviz.serve import folders, model_files


def test_the_data_folders_models_pass_over_its_recorded_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNVIZ_DATA_DIR", str(tmp_path))
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "lstm.pt").write_bytes(b"")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "x.bin").write_bytes(b"")
    assert model_files.data_models() == ("stacks/lstm.pt",)


@pytest.mark.parametrize(("name", "data", "message"), HOSTILE.values(), ids=list(HOSTILE))
def test_a_hostile_archive_is_refused_by_its_directory_and_nothing_is_written(
    tmp_path, monkeypatch, name, data, message
):
    uploads = tmp_path / "server" / "uploads"
    monkeypatch.setenv("RNNVIZ_UPLOADS_DIR", str(uploads))
    monkeypatch.setenv("RNNVIZ_UPLOADS_MB", "2")
    with pytest.raises(CheckpointError) as err:
        model_files.keep_archive(name, data)
    assert str(err.value).startswith(f"{name}: ") and message in str(err.value), str(err.value)
    if message == TOO_LARGE:  # the cap the dashboard judges by, named
        assert str(err.value).endswith("(the smaller of the upload folder's cap and the checkpoint cap).")
    assert list(tmp_path.rglob("*")) == []  # judged before a byte was written, anywhere


def test_a_good_archive_is_extracted_once_and_its_one_model_found(tmp_path, monkeypatch):
    uploads = tmp_path / "uploads"
    monkeypatch.setenv("RNNVIZ_UPLOADS_DIR", str(uploads))
    path = model_files.keep_archive("my model.zip", demo_folder_zip())
    assert path.relative_to(uploads).parts[1:] == ("my_model", "tiny", "demo.safetensors")
    assert rnnviz.load_model(path).model_type == "torch_lstm"
    written = path.stat().st_mtime_ns
    assert model_files.keep_archive("my model.zip", demo_folder_zip()) == path  # by its bytes' hash
    assert path.stat().st_mtime_ns == written and len(folders.entries(uploads)) == 1  # one entry
    tarred = tar_bytes([("m/a.safetensors", demo_bytes(), REG)], gz=True)
    assert model_files.keep_archive("m.tar.gz", tarred).name == "a.safetensors"
    two = zip_bytes({"a.pt": b"", "b/config.json": b"{}"})
    with pytest.raises(CheckpointError, match=r"^two.zip: holds 2 models \(a.pt, b\); allowed: one"):
        model_files.keep_archive("two.zip", two)

"""A model folder in an archive: the checkpoints found in a folder, every hostile archive refused
by its directory (or its headers, read through a bounded stream) with one message and nothing
written, and a good one extracted member by member and removed after use."""

from __future__ import annotations

import tempfile

import pytest
from hostile_archives import CAP, HOSTILE, REG, demo_folder_zip, tar_bytes, zip_bytes

from rnnviz.checkpoints import CheckpointError
from rnnviz.checkpoints.archive import (
    archive_members,
    extract_archive,
    extracted_model,
    find_models,
    is_archive,
    one_model,
)
from rnnviz.checkpoints.demo import demo_bytes


def test_models_are_found_one_and_two_folders_down_and_weights_beside_a_config_are_not(tmp_path):
    (tmp_path / "hf" / "weights").mkdir(parents=True)
    (tmp_path / "hf" / "config.json").write_text("{}")
    (tmp_path / "hf" / "model.safetensors").write_bytes(b"")
    (tmp_path / "hf" / "weights" / "extra.pt").write_bytes(b"")  # inside a model folder
    (tmp_path / "zoo" / "gru").mkdir(parents=True)
    (tmp_path / "zoo" / "gru" / "config.json").write_text("{}")
    (tmp_path / "zoo" / "a" / "b").mkdir(parents=True)
    (tmp_path / "zoo" / "a" / "lstm.pth").write_bytes(b"")
    (tmp_path / "zoo" / "a" / "b" / "deep.pt").write_bytes(b"")  # three folders down
    (tmp_path / "top.safetensors").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / ".hidden.pt").write_bytes(b"")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "x.bin").write_bytes(b"")
    found = [p.relative_to(tmp_path).as_posix() for p in find_models(tmp_path, skip=("runs",))]
    assert found == ["hf", "top.safetensors", "zoo/a/lstm.pth", "zoo/gru"]
    assert "runs/x.bin" in [p.relative_to(tmp_path).as_posix() for p in find_models(tmp_path)]


def test_an_archive_is_known_by_its_suffix():
    assert [is_archive(n) for n in ("m.zip", "m.TAR", "m.tar.gz", "m.tgz", "m.gz", "m.pt")] == [
        True,
        True,
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(("name", "data", "message"), HOSTILE.values(), ids=list(HOSTILE))
def test_a_hostile_archive_is_refused_by_its_directory_and_nothing_is_written(
    tmp_path, monkeypatch, name, data, message
):
    with pytest.raises(CheckpointError) as err:
        archive_members(name, data, CAP)
    assert str(err.value).startswith(f"{name}: ") and message in str(err.value), str(err.value)
    # the same from its file, through the loader's way in: nothing extracted, anywhere
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / name).write_bytes(data)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.raises(CheckpointError) as err, extracted_model(tmp_path / "in" / name, CAP):
        pass
    assert str(err.value).startswith(f"{tmp_path / 'in' / name}: ") and message in str(err.value)
    assert list((tmp_path / "tmp").iterdir()) == []


def test_the_cap_is_named_as_the_caller_names_it():
    name, data, _ = HOSTILE["a zip bomb"]
    with pytest.raises(CheckpointError, match=r"at most 2,097,152 \(the checkpoint cap\)\.$"):
        archive_members(name, data, CAP)
    with pytest.raises(CheckpointError, match=r"at most 2,097,152 \(the upload cap\)\.$"):
        archive_members(name, data, CAP, cap="the upload cap")


def test_a_good_archive_is_extracted_member_by_member(tmp_path):
    members = archive_members("tiny.zip", demo_folder_zip(), CAP)
    assert [(m.path.as_posix(), m.size, m.is_dir) for m in members] == [
        ("tiny/demo.safetensors", len(demo_bytes()), False),
        ("tiny/README.md", 6, False),
    ]
    extract_archive("tiny.zip", demo_folder_zip(), members, tmp_path / "out")
    assert (tmp_path / "out" / "tiny" / "demo.safetensors").read_bytes() == demo_bytes()
    assert one_model(tmp_path / "out", "tiny.zip") == tmp_path / "out" / "tiny" / "demo.safetensors"
    tarred = tar_bytes([("m/a.safetensors", demo_bytes(), REG)], gz=True)
    extract_archive("m.tgz", tarred, archive_members("m.tgz", tarred, CAP), tmp_path / "tar")
    assert (tmp_path / "tar" / "m" / "a.safetensors").read_bytes() == demo_bytes()


def test_a_member_that_holds_more_than_its_directory_declares_is_cut_and_refused(tmp_path):
    data = zip_bytes({"m/a.safetensors": b"x" * 100})
    members = archive_members("lie.zip", data, CAP)
    fewer = tuple(m._replace(size=10) for m in members)  # a directory that lied about the size
    lied = r"^lie.zip: member 'a.safetensors' holds more than its declared 10 bytes"
    with pytest.raises(CheckpointError, match=lied):
        extract_archive("lie.zip", data, fewer, tmp_path / "out")
    assert (tmp_path / "out" / "m" / "a.safetensors").stat().st_size <= 10


def test_the_extracted_model_is_named_inside_the_archive_and_removed_after(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    archive = tmp_path / "tiny.zip"
    archive.write_bytes(demo_folder_zip())
    with extracted_model(archive) as found:
        assert found.name == f"{archive}/tiny/demo.safetensors"
        assert found.path.read_bytes() == demo_bytes()
    assert list((tmp_path / "tmp").iterdir()) == []
    # a refusal of the model read from it names the file inside the archive, not the temporary one
    with pytest.raises(CheckpointError) as err, extracted_model(archive) as found:
        raise CheckpointError(str(found.path), "tensor 'x' is missing")
    assert str(err.value) == f"{archive}/tiny/demo.safetensors: tensor 'x' is missing."
    two = tmp_path / "two.zip"
    two.write_bytes(zip_bytes({"a.pt": b"", "b/config.json": b"{}"}))
    with pytest.raises(CheckpointError, match=r"two.zip: holds 2 models \(a.pt, b\); allowed: one"):
        with extracted_model(two):
            pass
    assert list((tmp_path / "tmp").iterdir()) == []
    with pytest.raises(CheckpointError, match=r"missing.zip: does not exist; allowed: a folder archive"):
        with extracted_model(tmp_path / "missing.zip"):
            pass

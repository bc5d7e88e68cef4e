"""The server's limits: settings validated in one place and shown by ``rnnviz app``,
folders held to their caps without evicting what a session uses, the result cache held to
bytes, and workers that retire between jobs with their successor started first."""

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from rnnviz.serve import folders
from rnnviz.serve.settings import SETTINGS, ServerSettings, SettingsError, markdown_table, parse
from rnnviz.serve.worker import ResultCache, WorkerPool, pickled_bytes, rss_bytes

ROOT = Path(__file__).resolve().parents[2]


# ---- settings ----------------------------------------------------------------------------


def test_every_setting_reads_its_variable_and_refuses_what_it_does_not_allow():
    defaults = ServerSettings()
    assert ServerSettings.from_env({}) == defaults and hash(defaults) == hash(ServerSettings.from_env({}))
    for f in SETTINGS:
        env, low, high = f.metadata["env"], f.metadata["low"], f.metadata["high"]
        if low is None:  # a folder: any path, ~ expanded
            assert getattr(ServerSettings.from_env({env: "~/x"}), f.name) == str(Path("~/x").expanduser())
            continue
        assert getattr(ServerSettings.from_env({env: str(high)}), f.name) == high
        assert getattr(ServerSettings.from_env({env: " "}), f.name) == f.default  # empty: the default
        for bad, why in (
            ("lots", "is not a"),
            (str(high * 2), "is out of range"),
            (str(low - 1), "is out of range"),
        ):
            with pytest.raises(SettingsError) as err:
                ServerSettings.from_env({env: bad})
            message = str(err.value)
            assert message.startswith(f"{env}={bad!r} {why}") and f.metadata["what"] in message, message
            assert f"from {low:g}" in message or f"from {low}" in message
    assert "1.5" in str(pytest.raises(SettingsError, parse, SETTINGS[0], "1.5").value)  # workers: whole


def test_the_docs_and_rnnviz_app_help_list_every_setting(capsys):
    from rnnviz.cli.main import build_parser

    page = (ROOT / "docs" / "guide" / "serving.md").read_text()
    assert markdown_table() in page  # the page carries the table made from the settings themselves
    with pytest.raises(SystemExit):
        build_parser().parse_args(["app", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for f in SETTINGS:
        assert f"--{f.name.replace('_', '-')}" in shown and f.metadata["env"] in shown, f.name


def test_rnnviz_app_hands_its_limits_to_the_server_and_refuses_bad_ones(monkeypatch, capsys):
    from rnnviz.cli import launch

    seen = {}

    class Execed(Exception):
        """What stands for os.execve here: like the real one, it does not return."""

    def execve(path, cmd, env):
        seen.update(env=env, cmd=cmd)
        raise Execed

    monkeypatch.setattr(launch.os, "execve", execve)
    # the real one starts a process that waits a minute for a server at the default port
    # (and warms one found there): recorded here instead
    monkeypatch.setattr(launch, "_start_warming", lambda cmd, env: seen.update(warm=launch.served_at(cmd)))
    parser = argparse.ArgumentParser()
    launch.add_parser(parser.add_subparsers())
    args = parser.parse_args(["app", "--workers", "3", "--uploads-mb", "64", "--jax-cache", "off"])
    args.extra = []
    with pytest.raises(Execed):
        launch.cmd_app(args)
    assert seen["env"]["RNNVIZ_WORKERS"] == "3" and seen["env"]["RNNVIZ_UPLOADS_MB"] == "64"
    assert seen["env"]["RNNVIZ_JAX_CACHE"] == "off"
    assert seen["warm"] == "http://127.0.0.1:8501/"
    with pytest.raises(SystemExit):
        parser.parse_args(["app", "--trained-files", "0"])
    assert "--trained-files='0' is out of range" in capsys.readouterr().err
    monkeypatch.setenv("RNNVIZ_RESULT_CACHE_MB", "-5")
    seen.clear()
    assert launch.cmd_app(parser.parse_args(["app"])) == 2 and not seen
    assert "RNNVIZ_RESULT_CACHE_MB='-5' is out of range" in capsys.readouterr().err


# ---- folders -----------------------------------------------------------------------------


def _entry(folder: Path, name: str, size: int, used_at: float) -> Path:
    path = folder / name
    path.mkdir(parents=True)
    (path / "data.npz").write_bytes(b"x" * size)
    os.utime(path, (used_at, used_at))
    return path / "data.npz"


def test_a_folder_over_its_caps_evicts_the_least_recently_used_entries_nobody_uses(tmp_path):
    files = [_entry(tmp_path, f"e{i}", 100, used_at=1000 + i) for i in range(6)]
    usage = folders.enforce(tmp_path, max_bytes=450, max_files=10, in_use={str(files[0])})
    # e0 is the oldest but in use: e1 and e2 go (600 → 400 bytes)
    assert usage == folders.Usage(("e1", "e2"), 400, 4, True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e0", "e3", "e4", "e5"]
    folders.touch(files[3])  # used now: the newest
    usage = folders.enforce(tmp_path, max_bytes=10**6, max_files=2, in_use=())
    assert usage.evicted == ("e0", "e4") and sorted(p.name for p in tmp_path.iterdir()) == ["e3", "e5"]
    # a file being written (hidden, young) is left alone; one a crash left long ago is not
    (tmp_path / ".e9.npz.1234.part").write_bytes(b"x" * 100)
    (tmp_path / ".e8.npz.5678.part").write_bytes(b"x" * 100)
    os.utime(tmp_path / ".e8.npz.5678.part", (1, 1))
    usage = folders.enforce(tmp_path, max_bytes=10**6, max_files=2, in_use=())
    assert set(usage.evicted) == {".e8.npz.5678.part", "e5"} and (tmp_path / ".e9.npz.1234.part").exists()
    (tmp_path / ".e9.npz.1234.part").unlink()
    _entry(tmp_path, "e5", 100, used_at=2000)
    # everything in use: nothing is evicted, and the caller is told it does not fit
    kept = {str(p / "data.npz") for p in tmp_path.iterdir()}
    assert folders.enforce(tmp_path, 1, 1, kept) == folders.Usage((), 200, 2, False)


def test_a_new_entry_is_admitted_by_evicting_others_or_refused_whole(tmp_path, monkeypatch):
    registry = folders.InUse(active=lambda session: session == "live")
    monkeypatch.setattr(folders, "IN_USE", registry)
    old = _entry(tmp_path, "old", 300, used_at=1)
    registry.mark("live", [str(old)])  # marking touches: it becomes the most recently used
    registry.mark("gone", [str(_entry(tmp_path, "gone", 300, used_at=2))])
    new = _entry(tmp_path, "new", 300, used_at=3)
    usage = folders.admit(tmp_path, new, max_bytes=700, max_files=5, what="the upload folder")
    assert usage.evicted == ("gone",) and new.exists() and old.exists()  # an ended session's file goes
    big = _entry(tmp_path, "big", 800, used_at=4)
    with pytest.raises(folders.FolderFull, match=r"0\.0 MB is more than the upload folder holds \(0 MB\)"):
        folders.admit(tmp_path, big, max_bytes=700, max_files=5, what="the upload folder")
    assert not big.parent.exists() and old.exists() and new.exists()
    registry.mark("live", [str(old), str(new)])
    third = _entry(tmp_path, "third", 300, used_at=5)
    with pytest.raises(folders.FolderFull, match="the upload folder is full .* open sessions are using"):
        folders.admit(tmp_path, third, max_bytes=700, max_files=5, what="the upload folder")
    assert not third.parent.exists() and old.exists() and new.exists()


def test_a_sessions_files_are_its_data_its_weights_and_those_of_its_pins():
    pin = json.dumps({"cell": "gru", "data": {"name": "/up/a/x.csv"}, "weights": {"path": "/t/r.rnnviz"}})
    state = {
        "data_source": {"name": "/up/b/y.npz", "_version": 3},
        "weights_source": None,
        "weights_choice": "/t/s.rnnviz",
        "pins": [pin, json.dumps({"cell": "lstm", "data": {"name": "digits", "order": "rows"}}), "not json"],
    }
    assert folders.session_paths(state) == {"/up/a/x.csv", "/t/r.rnnviz", "/up/b/y.npz", "/t/s.rnnviz"}
    assert folders.session_paths({"weights_choice": "initial"}) == set()


def test_uploads_and_trained_runs_are_held_to_their_caps(tmp_path, monkeypatch):
    from rnnviz.ui.sidebar import data

    monkeypatch.setenv("RNNVIZ_UPLOADS_DIR", str(tmp_path / "up"))
    monkeypatch.setenv("RNNVIZ_UPLOADS_FILES", "2")
    monkeypatch.setattr(folders, "IN_USE", folders.InUse(active=lambda s: True))
    paths = []
    for i in range(3):
        paths.append(data.save_upload(f"../f{i}.csv", f"a,b\n{i},1\n".encode()))
        os.utime(paths[-1].parent, (100 + i, 100 + i))
    assert [p.exists() for p in paths] == [False, True, True] and paths[2].name == "f2.csv"
    assert data.save_upload("f1.csv", b"a,b\n1,1\n") == paths[1]  # the same bytes: the same file
    monkeypatch.setenv("RNNVIZ_UPLOADS_MB", "1")
    with pytest.raises(folders.FolderFull, match="more than the upload folder holds"):
        data.save_upload("huge.npz", bytes(2**20 + 1))
    assert len(list((tmp_path / "up").iterdir())) == 2


# ---- the result cache --------------------------------------------------------------------


def test_the_result_cache_is_held_to_bytes_and_counts_arrays_by_their_size():
    big = np.zeros((256, 1024), np.float32)  # 1 MiB
    assert big.nbytes <= pickled_bytes({"a": big}) < big.nbytes + 1024
    cache = ResultCache(max_bytes=3 * big.nbytes + 4096)  # three, with their pickles' few bytes
    for i in range(5):
        cache.get(i, lambda i=i: big + i)
    assert [cache.peek(i) for i in range(5)] == [False, False, True, True, True]
    assert 3 * big.nbytes < cache.bytes <= 3 * big.nbytes + 4096
    cache.get(2, lambda: 0)  # used: now the most recent, so 3 goes next
    cache.get("huge", lambda: np.zeros(4 * big.size, np.float32))  # over the whole budget: not kept
    assert not cache.peek("huge") and cache.peek(2)
    cache.get(5, lambda: big)
    assert [cache.peek(i) for i in (2, 3, 4, 5)] == [True, False, True, True]
    cache.clear()
    assert cache.bytes == 0


# ---- workers that retire -----------------------------------------------------------------


def _wait_for(condition, limit_s=60.0):
    deadline = time.monotonic() + limit_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_worker_retires_after_its_jobs_its_successor_ready_before_it_takes_over():
    pool = WorkerPool(size=1, max_jobs=3)
    try:
        first = pool.call(os.getpid, route="r", what="pid")
        assert [pool.call(os.getpid, route="r", what="pid") for _ in range(2)] == [first, first]
        assert pool.generation("r") == 1  # one process so far (what idle time prepared is its)
        # three jobs done: the successor is starting, and the old worker still answers meanwhile
        assert pool.retirements == 1 and len(pool.pids()) == 2
        successor = pool.workers[0].successor[0]
        _wait_for(lambda: pool.workers[0].successor[1].poll())  # its setup ran: it has answered
        second = pool.call(os.getpid, route="r", what="pid")
        assert second == successor.pid != first and pool.restarts == 0
        assert pool.generation("r") == 2  # the successor holds nothing the first had prepared
        _wait_for(
            lambda: rss_bytes(first) is None or "State:\tZ" in Path(f"/proc/{first}/status").read_text()
        )
        assert pool.pids() == [second] and pool.workers[0].jobs == 1
    finally:
        pool.shutdown()


def test_a_worker_past_its_memory_retires_and_its_successor_finds_the_executables_on_disk(
    tmp_path, monkeypatch
):
    from worker_probes import analysis_and_cache_stats

    from rnnviz import RunConfig

    monkeypatch.setenv("RNNVIZ_JAX_CACHE", str(tmp_path / "jax"))
    monkeypatch.setenv("RNNVIZ_JAX_CACHE_MB", "64")
    pool = WorkerPool(size=1, setup="rnnviz.serve.jobs:setup", max_rss_bytes=2**20)  # every worker is over
    cfg = json.dumps(
        RunConfig(hidden_size=6, input_size=3, seq_len=9, batch_size=2).to_dict(), sort_keys=True
    )
    try:
        first, before = pool.call(analysis_and_cache_stats, cfg, route="r", what="an analysis")
        assert (
            pool.retirements == 1 and before.get("cache_hits", 0) == 0 < before["compile_requests_use_cache"]
        )
        successor = pool.workers[0].successor[0].pid
        _wait_for(lambda: pool.workers[0].successor[1].poll())
        again, after = pool.call(analysis_and_cache_stats, cfg, route="r", what="the same analysis")
        assert pool.call(os.getpid, route="r", what="pid") in (successor, *pool.pids())
        assert float(again.loss) == float(first.loss) and pool.retirements >= 2
        # every executable the successor needed came from the folder the first one wrote
        assert (
            after["cache_hits"] == after["compile_requests_use_cache"] == before["compile_requests_use_cache"]
        )
        size = sum(p.stat().st_size for p in (tmp_path / "jax").rglob("*") if p.is_file())
        assert 0 < size <= 64 * 2**20
    finally:
        pool.shutdown()


def test_a_worker_refuses_a_data_file_it_could_hold_only_over_its_memory_cap(tmp_path, monkeypatch):
    """A worker holds a file to a quarter of its memory cap, where that is under the loaders'
    1 GiB: a file over it is refused by its header (a worker over its cap after every job would
    retire after every job, each successor reading the file and compiling again)."""
    from rnnviz.dataset import DataError
    from rnnviz.serve import jobs

    big, small = tmp_path / "big.npy", tmp_path / "small.npy"
    np.save(big, np.ones((20, 256, 1024), np.float32))  # 20 MiB
    np.save(small, np.ones((4, 256, 1024), np.float32))  # 4 MiB
    monkeypatch.setenv("RNNVIZ_WORKER_MAX_RSS_MB", "64")
    assert jobs.data_budget().data_bytes == 16 * 2**20
    with pytest.raises(DataError) as err:
        jobs.load_source(json.dumps({"name": str(big)}))
    assert str(err.value) == (
        "big.npy: 20 MiB as float32, over the 16 MiB limit (its header claims [20, 256, 1024] float32); "
        "the limit is a quarter of a worker's 64 MB memory cap (RNNVIZ_WORKER_MAX_RSS_MB)."
    )
    assert jobs.load_source(json.dumps({"name": str(small)})).inputs.shape == (4, 256, 1024)
    monkeypatch.setenv("RNNVIZ_WORKER_MAX_RSS_MB", "4096")  # the default: the loaders' own limit
    assert jobs.data_budget() == (2**30, 1_000_000, "")
    assert jobs.load_source(json.dumps({"name": str(big)})).inputs.shape == (20, 256, 1024)
    # the built-ins bound themselves
    assert jobs.load_source(json.dumps({"name": "digits", "order": "rows"})).inputs.shape[1:] == (8, 8)


def test_touching_marks_an_entry_used_and_keeps_its_files_version(tmp_path):
    """A session using a file touches it on every page run: its entry becomes the most recently
    used, and its version (the workers' cache key, :func:`folders.stamp`) stays, so that the
    answers computed on it are found again."""
    old, new = tmp_path / "a" / "x.csv", tmp_path / "b" / "y.csv"
    for i, p in enumerate((old, new)):
        p.parent.mkdir()
        p.write_text("a,b\n1,2\n")
        os.utime(p.parent, (100 + i, 100 + i))
    version = folders.stamp(old)
    folders.touch(old)
    assert folders.stamp(old) == version
    assert [e.path.name for e in folders.entries(tmp_path)] == ["b", "a"]  # a: just used
    loose = tmp_path / "z.rnnviz"  # an entry that is a file: its access time says it was used
    loose.write_text("run")
    os.utime(loose, (50, 50))
    version = folders.stamp(loose)
    folders.touch(loose)
    assert folders.stamp(loose) == version and folders.entries(tmp_path)[-1].path == loose

"""The server's heap trimming (rnnviz.serve.heap): on glibc, free memory fragmented inside the
malloc arenas goes back to the system when trimmed. In a subprocess, so the arenas measured
are those of a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

#: glibc's malloc statistics in a probe: ``libc.mallinfo2()``.
MALLINFO = textwrap.dedent(
    """
    import ctypes
    from rnnviz.serve import heap

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    """
)

PROBE = MALLINFO + textwrap.dedent(
    """
    import threading

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    kept = []
    def churn():  # many small blocks, in threads (arenas of their own), most of them freed
        blocks = [bytes(900) for _ in range(120_000)]
        kept.extend(blocks[::200])
    threads = [threading.Thread(target=churn) for _ in range(4)]
    [t.start() for t in threads]; [t.join() for t in threads]
    before_free, before_rss = libc.mallinfo2().fordblks, rss()
    assert heap.trim()
    after_free, after_rss = libc.mallinfo2().fordblks, rss()
    print(before_free, after_free, before_rss, after_rss)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_trimming_hands_fragmented_free_memory_back():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    before_free, after_free, before_rss, after_rss = map(int, out.stdout.split())
    # about 400 MB were freed in the threads' arenas, 2 MB stay in use
    assert before_free > 200 * 2**20, before_free
    assert before_rss - after_rss > 150 * 2**20, (before_rss, after_rss)


MMAPPED = MALLINFO + textwrap.dedent(
    """
    import sys
    if sys.argv[1] == "start":
        first = heap.start(every_s=3600)
        assert heap.start(every_s=3600) is first is True  # once per process, and it applies (glibc)
    big = bytearray(8 << 20)  # a chart's JSON, a pickled result…
    del big  # …freed: glibc's own rule now raises its mmap threshold to 8 MB
    before = libc.mallinfo2().hblkhd
    block = bytearray(2 << 20)
    print(libc.mallinfo2().hblkhd - before)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_start_holds_the_mmap_threshold_so_large_blocks_go_back_when_freed():
    """Without :func:`heap.start`, a freed 8 MB block makes glibc serve the next 2 MB block from
    its arenas (where its pages stay after it is freed); with it, the block is mapped alone."""

    def mapped(mode: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", MMAPPED, mode], capture_output=True, text=True, timeout=120, check=True
        )
        return int(out.stdout)

    assert mapped("default") == 0  # glibc's dynamic threshold: the hazard is real here
    assert mapped("start") >= 2 << 20


def test_the_imports_are_frozen_once_so_the_collection_after_each_run_skips_them():
    """What the server has imported when its first page runs is frozen: the collector tracks
    none of it afterwards (Streamlit's collection after every run walks only what runs made),
    and a second call freezes nothing."""
    code = textwrap.dedent(
        """
        import gc
        import rnnviz.ui.app  # what the server has imported when its first page runs
        from rnnviz.serve import heap
        before = len(gc.get_objects())
        frozen = heap.freeze_imports()
        print(before, frozen, gc.get_freeze_count(), len(gc.get_objects()), heap.freeze_imports())
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    before, frozen, count, left, again = map(int, done.stdout.split()[-5:])
    assert frozen == count >= 0.9 * before > 100_000  # JAX, Plotly, pandas, Streamlit
    assert left < 0.01 * before and again == 0


def test_the_page_freezes_the_imports_of_its_process(monkeypatch):
    import gc

    from apptest_helpers import run_app

    from rnnviz.serve import heap

    gc.unfreeze()  # as a fresh server: nothing frozen yet
    monkeypatch.setattr(heap, "_frozen", False)
    at = run_app({"seq_len": "20", "hidden_size": "4"})
    assert not at.exception and gc.get_freeze_count() > 100_000


def test_once_frozen_a_page_run_does_not_count_the_frozen_objects_again(monkeypatch):
    """gc.get_freeze_count() walks the whole frozen list: 40 ms a page run in a server."""
    import gc

    from rnnviz.serve import heap

    monkeypatch.setattr(heap, "_frozen", True)

    def walked():
        raise AssertionError("the frozen list was walked again")

    monkeypatch.setattr(gc, "get_freeze_count", walked)
    assert heap.freeze_imports() == 0

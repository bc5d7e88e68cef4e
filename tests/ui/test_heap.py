"""The server's heap trimming (rnnviz.ui.heap): on glibc, free memory fragmented inside the
malloc arenas goes back to the system when trimmed. In a subprocess, so the arenas measured
are those of a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rnnviz.ui import heap

PROBE = textwrap.dedent(
    """
    import ctypes, threading
    from rnnviz.ui import heap

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2

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


def test_start_is_once_per_process_and_says_whether_it_applies():
    first = heap.start(every_s=3600)
    assert heap.start(every_s=3600) is first
    assert first is sys.platform.startswith("linux")

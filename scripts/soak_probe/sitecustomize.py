"""The soak's heap probe (scripts/soak.py puts this folder on the server's PYTHONPATH only):
in the Streamlit server process, a daemon thread appends one JSON line every
``SOAK_HEAP_PROBE_S`` seconds to ``SOAK_HEAP_PROBE``: RSS, the Python heap
(``sys.getallocatedblocks``, tracemalloc off), glibc's malloc statistics (``mallinfo2``:
bytes in use, bytes free inside its arenas, mmapped bytes), the thread count, Streamlit's
sessions, and every few samples the object counts (of the oldest generation) of the 25 most
common types and the result cache's pickled bytes and entries. It tells a leak (Python
objects or bytes in use grow) from fragmentation (free bytes in the arenas grow
while those in use do not). Nothing here runs in any other process.

With ``SOAK_TRACEMALLOC=<seconds>`` (``soak.py --tracemalloc``) it also traces Python's
allocations (10 frames; the server then runs slower and holds more) and, from that many
seconds on, writes the 15 allocation sites whose live bytes grew most since then: where a
leak is, by file and line."""

from __future__ import annotations

import os
import sys


def _start() -> None:
    import collections
    import ctypes
    import gc
    import json
    import threading
    import time

    out, every = os.environ["SOAK_HEAP_PROBE"], float(os.environ.get("SOAK_HEAP_PROBE_S", "20"))

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_size_t)
            for n in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = MallInfo2
    except (OSError, AttributeError):
        libc = None

    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    def sessions() -> int | None:
        try:
            from streamlit.runtime import Runtime

            return len(Runtime.instance()._session_mgr.list_sessions())
        except Exception:
            return None

    traced_from = float(os.environ.get("SOAK_TRACEMALLOC") or 0) or None
    if traced_from is not None:
        import tracemalloc

        tracemalloc.start(10)
    base = None

    def grown(snapshot) -> list[dict]:
        """The allocation sites whose live bytes grew most since ``base``, innermost frame of
        rnnviz or streamlit first (else the innermost)."""
        out = []
        for stat in snapshot.compare_to(base, "traceback")[:15]:
            frames = list(stat.traceback)
            ours = [f for f in frames if "rnnviz" in f.filename or "streamlit" in f.filename]
            where = ours[-1] if ours else frames[-1]
            out.append(
                {
                    "kb": round(stat.size_diff / 1024, 1),
                    "count": stat.count_diff,
                    "at": f"{where.filename.rsplit('site-packages/', 1)[-1]}:{where.lineno}",
                    "innermost": f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}",
                }
            )
        return out

    def run() -> None:
        nonlocal base
        start, n = time.monotonic(), 0
        while True:
            time.sleep(every)
            line = {
                "t": round(time.monotonic() - start, 1),
                "rss_mb": round(rss_mb(), 1),
                "py_blocks": sys.getallocatedblocks(),
                "threads": threading.active_count(),
                "sessions": sessions(),
            }
            if libc is not None:
                m = libc.mallinfo2()
                line.update(
                    malloc_in_use_mb=round(m.uordblks / 2**20, 1),
                    malloc_free_mb=round(m.fordblks / 2**20, 1),
                    mmapped_mb=round(m.hblkhd / 2**20, 1),
                )
            if n % 6 == 0:
                # the oldest generation only: a list of every object would hold the tuples that
                # other threads are still building (tuple(generator) resizes in place), and their
                # resize then fails ("SystemError: bad argument to internal function", seen in a
                # soak); what leaks lives long enough to reach generation 2
                objects = gc.get_objects(generation=2)
                counts = collections.Counter(type(o).__name__ for o in objects)
                line["types"] = dict(counts.most_common(25))
                # the server's result cache grows to its cap by design (RNNVIZ_RESULT_CACHE_MB):
                # its pickled bytes tell that growth from a leak
                caches = [o for o in objects if type(o).__name__ == "ResultCache"]
                line["result_cache_mb"] = round(sum(getattr(c, "bytes", 0) for c in caches) / 2**20, 1)
                line["result_cache_entries"] = sum(len(getattr(c, "_values", ())) for c in caches)
                del objects, caches
                if traced_from is not None and line["t"] >= traced_from:
                    snapshot = tracemalloc.take_snapshot()  # unfiltered: filtering is pure Python, slow
                    if base is None:
                        base = snapshot
                        line["traced_from"] = True
                    else:
                        line["grown"] = grown(snapshot)
            n += 1
            with open(out, "a") as f:
                f.write(json.dumps(line) + "\n")

    threading.Thread(target=run, name="rnnviz-soak-probe", daemon=True).start()


def _command() -> str:
    # sys.argv is not set yet when site imports this module: the kernel's copy is
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


if (
    os.environ.get("SOAK_HEAP_PROBE")
    and "streamlit" in _command()
    and "rnnviz.serve.worker" not in _command()
):
    _start()

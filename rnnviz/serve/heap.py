"""The server's heap on glibc: fewer malloc arenas, free memory handed back to the system,
and the imports' objects left out of Streamlit's collection after every script run.

Elsewhere (another C library) :func:`start` does nothing and says so; the worker processes
keep their freed buffers on purpose. Why: docs/guide/serving.md; what the soak measured:
docs/dev/benchmarks.md.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import threading
import time

log = logging.getLogger("rnnviz.serve.heap")

#: Malloc arenas the server may use (glibc's default is 8 per core).
ARENAS = 2
#: Seconds between two ``malloc_trim(0)`` calls.
TRIM_EVERY_S = 30.0
#: Bytes from which a block is a mapping of its own (glibc's starting value, held there).
MMAP_THRESHOLD = 128 * 1024
#: Free bytes at the top of an arena above which glibc gives them back at once.
TRIM_THRESHOLD = 1 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameter numbers

_started = threading.Event()


@functools.cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def trim() -> bool:
    """Hand the free memory of every malloc arena back to the system now (glibc); whether it
    could (False: not glibc)."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(ctypes.c_size_t(0))
    return True


def start(every_s: float = TRIM_EVERY_S, arenas: int = ARENAS) -> bool:
    """Cap the arenas at ``arenas``, hold the mmap threshold (a large block is a mapping of its
    own, gone when freed) and the trim threshold, and trim every ``every_s`` seconds from now
    on, once per process; whether it applies here (glibc)."""
    libc = _libc()
    if libc is None:
        log.info("not glibc: the server's malloc arenas are left as they are")
        return False
    if _started.is_set():
        return True
    _started.set()
    libc.mallopt(ctypes.c_int(_M_ARENA_MAX), ctypes.c_int(arenas))
    libc.mallopt(ctypes.c_int(_M_MMAP_THRESHOLD), ctypes.c_int(MMAP_THRESHOLD))
    libc.mallopt(ctypes.c_int(_M_TRIM_THRESHOLD), ctypes.c_int(TRIM_THRESHOLD))

    def loop() -> None:  # ends with the process
        while True:
            time.sleep(every_s)
            trim()

    threading.Thread(target=loop, name="rnnviz-heap-trim", daemon=True).start()
    return True


def freeze_imports() -> int:
    """Move every object alive now (the imported modules and what they hold) out of the cyclic
    collector's reach, once per process, after a collection; how many were frozen (0: already
    frozen). Streamlit's collection after each script run then walks only what the runs made.

    Example:
        >>> import gc
        >>> from rnnviz.serve import heap
        >>> n = heap.freeze_imports()
        >>> gc.get_freeze_count() > 0 and heap.freeze_imports() == 0
        True
        >>> gc.unfreeze()  # (a doctest process is no server)
    """
    global _frozen
    # a flag, not gc.get_freeze_count(): that walks the whole frozen list, and every page run asks
    if _frozen or gc.get_freeze_count():
        _frozen = True
        return 0
    gc.collect()  # garbage now is not frozen with the rest
    gc.freeze()
    _frozen = True
    return gc.get_freeze_count()


#: Whether :func:`freeze_imports` has frozen this process's objects (or found them frozen).
_frozen = False


__all__ = ["ARENAS", "MMAP_THRESHOLD", "TRIM_EVERY_S", "TRIM_THRESHOLD", "freeze_imports", "start", "trim"]

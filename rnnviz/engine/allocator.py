"""The process's allocator: keep XLA:CPU's freed per-call buffers in the heap
(:func:`keep_freed_buffers`), and what it was told (:func:`allocator`).
"""

from __future__ import annotations

import os

#: glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


#: Buffers up to this size come from the heap and stay there when freed.
HEAP_KEEP_BYTES = 1 << 30


_ALLOCATOR = ["default"]  # what this process's malloc was told: the record field ``allocator``


def allocator() -> str:
    """``"heap"`` once :func:`keep_freed_buffers` took effect in this process, else ``"default"``."""
    return _ALLOCATOR[0]


def keep_freed_buffers(limit: int = HEAP_KEEP_BYTES) -> bool:
    """Let this process's allocator keep freed buffers up to ``limit`` bytes for reuse.

    An XLA:CPU executable allocates its temporary and output buffers (residuals, gate
    cotangents, trajectories: tens of MB) with ``malloc`` on every call. glibc serves a
    request above its mmap threshold (128 kB, adapting up to 32 MB) with a fresh ``mmap``
    and gives it back with ``munmap``, so every call page-faults and zero-fills its buffers
    again: measured on this project's 2-core CPU, ~16 000 minor faults (64 MB) and
    a quarter of the run time of an LSTM analysis at B=32·T=200·H=128 (~700 faults per
    call left with this setting; docs/dev/benchmarks.md). Raising the mmap and trim thresholds to
    ``limit`` keeps those pages in the heap between calls; the cost is that up to
    ``limit`` bytes of freed memory stay resident.

    Not covered: a buffer over 64 MB asked for by one of XLA's worker threads, which
    glibc maps from its own arena whatever the threshold (the ``fused`` analysis at that
    size). Limiting glibc to one arena would cover it, but costs the training step ~15 %
    in lock contention, so it is left alone.

    Process-wide, like an XLA flag: the app, the CLI and the test suite call it at start;
    a library user may.

    Args:
        limit: bytes of freed memory glibc may keep for reuse (the mmap and trim thresholds).

    Returns:
        True when set; False where there is no glibc (macOS, musl) or
        ``RNNVIZ_MALLOC=default`` asks to leave the allocator alone.
    """
    import ctypes

    if os.environ.get("RNNVIZ_MALLOC") == "default":
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    settings = ((_M_MMAP_THRESHOLD, limit), (_M_TRIM_THRESHOLD, limit), (_M_TOP_PAD, 64 << 20))
    if all(mallopt(param, value) == 1 for param, value in settings):
        _ALLOCATOR[0] = "heap"
        return True
    return False

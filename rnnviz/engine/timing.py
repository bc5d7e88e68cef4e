"""Compile and run timing, memory and FLOP figures of compiled JAX functions."""

from __future__ import annotations

import collections
import functools
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import flax
import jax
import jaxlib

from rnnviz.base.hlo import check_serial_lapack
from rnnviz.base.measurements import now_utc


class Compiled(NamedTuple):
    """An ahead-of-time compiled function and what compiling it told us.

    peak_bytes: temp + argument + output − aliased bytes from ``memory_analysis()``
    (on CPU its ``peak_memory_in_bytes`` leaves temp buffers out, so it is only used when
    larger). FLOPs come from :func:`rnnviz.config.estimate_flops`: XLA's cost analysis
    counts a scan body once, not T times.
    """

    fn: Callable
    compile_s: float
    peak_bytes: int


class RunTiming(NamedTuple):
    median_s: float
    min_s: float
    max_s: float
    repeats: int


class Timing(NamedTuple):
    """Timing of one analysis. ``compile_s`` is what compiling took when it happened;
    ``cache_hit`` says whether this call reused an executable compiled earlier."""

    compile_s: float
    run_s: float
    run_min_s: float
    run_max_s: float
    repeats: int
    peak_bytes: int
    flops: float  # analytic estimate for one run, see rnnviz.config.estimate_flops
    device: str
    backend: str
    cache_hit: bool
    #: The log-magnitude pass (:mod:`rnnviz.engine.logpass`): median run and compile seconds when
    #: it ran (float32 could not hold every norm), 0.0 when float32's norms were exact.
    log_pass_s: float = 0.0
    log_pass_compile_s: float = 0.0


def abstract(tree: Any, device: jax.Device) -> Any:
    """Shape/dtype stand-ins of ``tree`` committed to ``device``, for ``.lower``."""
    sharding = jax.sharding.SingleDeviceSharding(device)
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), tree)


def compile_for(fn: Callable, args: tuple, device: jax.Device) -> Compiled:
    """``jax.jit(fn)`` lowered for ``args`` (arrays or stand-ins) on ``device`` and compiled."""
    start = time.perf_counter()
    compiled = compile_lowered(
        jax.jit(fn).lower(*abstract(args, device)),
        getattr(getattr(fn, "func", fn), "__name__", "an executable"),
    )
    elapsed = time.perf_counter() - start
    return Compiled(compiled, elapsed, peak_bytes(compiled))


def compile_lowered(lowered: Any, what: str) -> Any:
    """``lowered.compile()``, refused when it could deadlock: every executable rnnviz builds
    comes through here, and on the CPU none may hold two LAPACK calls that XLA may run at
    once (:func:`rnnviz.base.hlo.check_serial_lapack`, raising ``ConcurrentLapackError``)."""
    compiled = lowered.compile()
    check_serial_lapack(
        compiled, what
    )  # GPU executables call cuSOLVER, never lapack_*: nothing to find there
    return compiled


def peak_bytes(compiled: Any) -> int:
    try:
        ma = compiled.memory_analysis()
    except Exception:  # some backends do not implement it
        return 0
    if ma is None:
        return 0
    total = (
        ma.temp_size_in_bytes + ma.argument_size_in_bytes + ma.output_size_in_bytes - ma.alias_size_in_bytes
    )
    return int(max(total, getattr(ma, "peak_memory_in_bytes", 0) or 0))


def time_runs(
    fn: Callable, args: tuple, repeats: int, warmup: int = 1, budget_s: float | None = None
) -> tuple[Any, RunTiming]:
    """Run ``fn(*args)`` ``warmup`` + ``repeats`` times, blocking on each; return the last
    result and the wall-clock statistics of the timed runs. With ``budget_s``, slow
    functions get fewer timed runs (at least 3) so the total stays near the budget."""
    out = None
    start = time.perf_counter()
    for _ in range(warmup):
        out = jax.block_until_ready(fn(*args))
    if budget_s is not None and warmup:
        per_run = (time.perf_counter() - start) / warmup
        repeats = max(3, min(repeats, int(budget_s / max(per_run, 1e-9))))
    times = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return out, RunTiming(statistics.median(times), min(times), max(times), len(times))


def time_within(fn: Callable, args: tuple, budget_s: float, max_repeats: int) -> tuple[Any, RunTiming]:
    """Run ``fn(*args)`` at least once and again while the runs so far took less than
    ``budget_s`` (at most ``max_repeats`` runs), blocking on each; return the last result
    and the statistics of all of them. No separate warm-up: the executable is compiled
    ahead of time, so the first run is a run like the others, and a slow configuration
    costs one run, not a warm-up plus a fixed count."""
    times: list[float] = []
    out = None
    while not times or (sum(times) < budget_s and len(times) < max(1, max_repeats)):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return out, RunTiming(statistics.median(times), min(times), max(times), len(times))


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    currsize: int


class _CompileCache:
    """A least-recently-used cache of compiled executables, safe across threads (the
    app's sessions): one lock, so two sessions asking for a new shape compile it once.
    Supports ``key in cache`` so callers can say "compiling…" before they wait."""

    def __init__(self, build: Callable, maxsize: int):
        self._build, self._maxsize = build, maxsize
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.RLock()
        self._hits = self._misses = 0
        functools.update_wrapper(self, build)

    def __call__(self, *key: Any) -> Any:
        with self._lock:
            if key in self._items:
                self._hits += 1
                self._items.move_to_end(key)
                return self._items[key]
            self._misses += 1
            value = self._build(*key)
            self._items[key] = value
            if len(self._items) > self._maxsize:
                self._items.popitem(last=False)
            return value

    def __contains__(self, key: Any) -> bool:
        with self._lock:
            return key in self._items

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._items))


def compile_cache(maxsize: int) -> Callable[[Callable], _CompileCache]:
    """Decorator: cache a ``(static_config, device) -> executable`` builder."""
    return lambda build: _CompileCache(build, maxsize)


def enable_compilation_cache(folder: str) -> None:
    """Turn on JAX's persistent compilation cache in ``folder`` for this process.

    Its default skips compiles under 1 s — all of ours — so the thresholds go to 0.
    """
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


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
    a quarter of the run time of an LSTM analysis at B=32·T=200·H=128 (67 → 48 ms with
    this setting, ~700 faults per call left). Raising the mmap and trim thresholds to
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
    import os

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


def environment() -> dict[str, Any]:
    """Versions and host facts stamped on every record (``allocator``: see
    :func:`rnnviz.engine.timing.keep_freed_buffers`)."""
    return {
        "jax_version": jax.__version__,
        "jaxlib_version": jaxlib.__version__,
        "flax_version": flax.__version__,
        "cpu_count": os.cpu_count() or 0,
        "python": platform.python_version(),
        "allocator": allocator(),
    }


def run_stamp(device: jax.Device) -> dict[str, Any]:
    """The fields every schema-1 record carries about where and when it was measured:
    the device, the backend, the versions and host facts of :func:`environment`, and the
    UTC time."""
    env = environment()
    return {
        "device_kind": device.platform,
        "device_name": str(device.device_kind),
        "backend": jax.default_backend(),
        **{k: env[k] for k in ("jax_version", "jaxlib_version", "flax_version", "cpu_count", "allocator")},
        "timestamp": now_utc(),
    }

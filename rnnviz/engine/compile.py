"""Ahead-of-time compilation: :func:`compile_for` (with the concurrent-LAPACK check on every
executable), the per-shape :func:`compile_cache`, peak memory, and JAX's persistent cache.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import functools
import hashlib
import importlib.util
import logging
import math
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from rnnviz.base.hlo import check_serial_lapack
from rnnviz.engine.compat import persistent_cache_module

log = logging.getLogger("rnnviz.compile")


class Compiled(NamedTuple):
    """An ahead-of-time compiled function and what compiling it told us.

    peak_bytes: temp + argument + output − aliased bytes from ``memory_analysis()``
    (on CPU its ``peak_memory_in_bytes`` leaves temp buffers out, so it is only used when
    larger). FLOPs come from :func:`rnnviz.config.estimate_flops`: XLA's cost analysis
    counts a scan body once, not T times.
    """

    fn: Callable
    #: Seconds this process spent getting it: compiling, or reading it from JAX's persistent
    #: compilation cache (then often a third of compiling it).
    compile_s: float
    peak_bytes: int
    #: Seconds compiling it takes: ``compile_s`` where this process compiled it, the compile
    #: time that the entry it was read from records (:func:`seal_compilation_cache`; None: not
    #: known). What a decision that weighs compiling something else of this shape needs, as
    #: :func:`rnnviz.studies.sweep.sweep_reusing` does.
    fresh_compile_s: float | None = None


def abstract(tree: Any, device: jax.Device) -> Any:
    """Shape/dtype stand-ins of ``tree`` committed to ``device``, for ``.lower``."""
    sharding = jax.sharding.SingleDeviceSharding(device)
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), tree)


#: XLA options for an executable that runs once per value change and costs little to run
#: (drawing the parameters, the inputs, a data batch): LLVM at -O0 without its expensive
#: passes, and XLA:CPU's older fused-kernel emitters instead of its MLIR fusion emitters. The
#: HLO is the same; only the machine code is less optimised: the emitters change no bit of
#: the draws, -O0 only float32 rounding (tests/engine/test_engine.py). On this 2-core CPU,
#: where every new shape pays these compiles before its first chart, the first two cut them
#: most, and the emitters and then one LLVM module instead of up to 32 compiled in parallel
#: cut them further (docs/dev/benchmarks.md); one module changes no bit either. CPU only:
#: measured there. The analysis keeps the MLIR emitters: its code runs faster with them at
#: real sizes (a small shape's analysis compiles with these options too: :data:`QUICK_COMPILE_FLOPS`).
RUN_ONCE_OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
    "xla_cpu_parallel_codegen_split_count": 1,
}


def compile_for(fn: Callable, args: tuple, device: jax.Device, *, run_once: bool = False) -> Compiled:
    """``jax.jit(fn)`` lowered for ``args`` (arrays or stand-ins) on ``device`` and compiled;
    with ``run_once``, on the CPU, compiled for compile speed (:data:`RUN_ONCE_OPTIONS`)."""
    start = time.perf_counter()
    options = run_once_options(device) if run_once else None
    # what a persistent-cache entry written or read during this compile records (sealed_put)
    _compiling.start, _compiling.read_s = start, None
    try:
        compiled = compile_lowered(
            jax.jit(fn).lower(*abstract(args, device)),
            getattr(getattr(fn, "func", fn), "__name__", "an executable"),
            options,
        )
    finally:
        _compiling.start = None
    elapsed = time.perf_counter() - start
    fresh = elapsed if _compiling.read_s is None else max(_compiling.read_s, elapsed)
    return Compiled(compiled, elapsed, peak_bytes(compiled), fresh)


#: Per thread: when the :func:`compile_for` under way began (None: none is), so that the cache
#: entry its compile writes records the seconds compiling took (lowering included, as
#: ``Compiled.compile_s``); and the seconds recorded in the entry it read, if it read one.
_compiling = threading.local()


def run_once_options(device: jax.Device) -> dict | None:
    """:data:`RUN_ONCE_OPTIONS` on a CPU device, else None (XLA's defaults)."""
    return RUN_ONCE_OPTIONS if device.platform == "cpu" else None


#: The most FLOPs (:func:`rnnviz.config.estimate_flops`, one gradient evaluation; a sweep's
#: points and their parameter draws) at which an executable compiles for compile speed
#: (:data:`RUN_ONCE_OPTIONS`) instead of run speed. Below it the code runs in milliseconds
#: either way, and compiling is what a new shape costs. The analysis on this 2-core CPU
#: (scripts/quick_compile.py; docs/dev/benchmarks.md, "XLA:CPU's flags") compiles much
#: faster with those options and runs slower: nearer the line, at LSTM H=32 T=1000
#: B=4 (1.2e8) and H=64 T=200 B=8 (1.8e8), 30 and 37 value changes would spend the gain;
#: over it, at mLSTM H=64 T=200 B=16 (3.5e8) and LSTM H=64 T=200 B=32 (7.1e8), 14 and 16
#: would. The default Phase diagram's sweeps (123 points, 2.4e8) are under it.
QUICK_COMPILE_FLOPS = 2.5e8

_OPTIMISED = contextvars.ContextVar("rnnviz_optimised_code", default=False)


@contextlib.contextmanager
def optimised_code():
    """Within this block (this thread), every analysis and sweep compiles at XLA's full
    optimisation whatever its size: what recorded measurements time
    (:func:`rnnviz.studies.comparisons.measure`), so that a benchmark's numbers are those of
    the fastest code.

    >>> from rnnviz.engine.compile import optimised_code, quick_compile
    >>> import jax
    >>> cpu = jax.devices("cpu")[0]
    >>> quick_compile(1e6, cpu), quick_compile(1e9, cpu)
    (True, False)
    >>> with optimised_code():
    ...     quick_compile(1e6, cpu)
    False
    """
    token = _OPTIMISED.set(True)
    try:
        yield
    finally:
        _OPTIMISED.reset(token)


def quick_compile(flops: float, device: jax.Device) -> bool:
    """Whether an executable of ``flops`` (an analysis: :func:`rnnviz.config.estimate_flops`;
    a sweep: :func:`rnnviz.studies.sweep.sweep_flops`) on ``device`` compiles for compile
    speed: on a CPU, at most :data:`QUICK_COMPILE_FLOPS`, outside :func:`optimised_code`. The
    answer is part of each executable's cache key, so a quick and an optimised executable of
    one shape never stand in for each other."""
    return device.platform == "cpu" and flops <= QUICK_COMPILE_FLOPS and not _OPTIMISED.get()


def compile_lowered(lowered: Any, what: str, options: dict | None = None) -> Any:
    """``lowered.compile()`` (with XLA ``options`` when given), refused when it could
    deadlock: every executable rnnviz builds comes through here, and on the CPU none may hold
    two LAPACK calls that XLA may run at once (:func:`rnnviz.base.hlo.check_serial_lapack`,
    raising ``ConcurrentLapackError``)."""
    compiled = lowered.compile(compiler_options=options) if options else lowered.compile()
    check_serial_lapack(
        compiled, what
    )  # GPU executables call cuSOLVER, never lapack_*: nothing to find there
    return compiled


def peak_bytes(compiled: Any) -> int:
    """Bytes one call of ``compiled`` holds at its peak: temp + arguments + outputs − aliased
    (``memory_analysis()``), or its ``peak_memory_in_bytes`` where that is larger; 0 where
    the backend does not say."""
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


class CacheInfo(NamedTuple):
    """What a :func:`compile_cache` holds, as ``functools.lru_cache`` reports it: ``hits``,
    ``misses`` and ``currsize`` (executables kept)."""

    hits: int
    misses: int
    currsize: int


class _CompileCache:
    """A least-recently-used cache of compiled executables, safe across threads (the
    app's sessions): one lock, so two sessions asking for a new shape compile it once.
    Supports ``key in cache`` so callers can say "compiling…" before they wait."""

    def __init__(self, build: Callable, maxsize: int, key: Callable | None = None):
        self._build, self._maxsize, self._key = build, maxsize, key
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.RLock()
        self._hits = self._misses = 0
        functools.update_wrapper(self, build)

    def __call__(self, *args: Any) -> Any:
        key = self._key(*args) if self._key else args
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

    def __contains__(self, args: Any) -> bool:
        """Whether the entry for the argument tuple ``args`` is held."""
        key = self._key(*args) if self._key else args
        with self._lock:
            return key in self._items

    def ensure(self, *args: Any) -> bool:
        """Build the entry for ``args`` unless it is held; whether it was built (what the
        ``compile_*`` functions that prepare a tab in a server's idle time return)."""
        with self._lock:
            if args in self:
                return False
            self(*args)
            return True

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._items))


def compile_cache(maxsize: int, key: Callable | None = None) -> Callable[[Callable], _CompileCache]:
    """Decorator: cache a ``(static_config, device) -> executable`` builder. With ``key``,
    a call's arguments become ``key(*args)``, which is both the cache's key and what the
    builder is called with (defaults filled in, a choice such as :func:`quick_compile` added)."""
    return lambda build: _CompileCache(build, maxsize, key)


def enable_compilation_cache(folder: str, max_bytes: int | None = None) -> None:
    """Turn on JAX's persistent compilation cache in ``folder`` for this process.

    Its default skips compiles under 1 s — all of ours — so the thresholds go to 0.
    ``max_bytes`` bounds the folder: past it, JAX deletes the least recently used entries
    when it writes one (``jax_compilation_cache_max_size``; None: unbounded). Entries are
    sealed (:func:`seal_compilation_cache`): a damaged one is compiled again, never run.
    """
    seal_compilation_cache()
    jax.config.update("jax_compilation_cache_dir", folder)
    if max_bytes is not None and importlib.util.find_spec("filelock") is None:
        # JAX would fail at the first compile, not here: leave the folder unbounded instead
        log.warning("the compilation cache in %s is not bounded: the filelock package is missing", folder)
        max_bytes = None
    jax.config.update("jax_compilation_cache_max_size", -1 if max_bytes is None else int(max_bytes))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


#: What a sealed cache entry starts with, before the SHA-256 digest of the rest (the entries
#: of stops before the compile seconds were recorded; still read).
_SEAL = b"rnnviz-sha256:"
#: What a sealed entry that records its compile starts with: then the seconds compiling took
#: (a big-endian float64, NaN: not known), the SHA-256 digest of those 8 bytes and the value,
#: and the value. JAX's own record of a compile keeps whole seconds (0 for most of ours).
_SEAL_TIMED = b"rnnviz-sha256-s:"


def _seal(value: bytes, compile_s: float = math.nan) -> bytes:
    seconds = struct.pack(">d", compile_s)
    return _SEAL_TIMED + seconds + hashlib.sha256(seconds + value).digest() + value


def _unseal_timed(blob: bytes) -> tuple[bytes | None, float]:
    """``(value, compile seconds)`` of an entry: the value None when the entry is not sealed
    or its digest does not match, the seconds NaN where it records none."""
    if blob.startswith(_SEAL_TIMED) and len(blob) >= len(_SEAL_TIMED) + 40:
        seconds, digest = blob[len(_SEAL_TIMED) : len(_SEAL_TIMED) + 8], blob[len(_SEAL_TIMED) + 8 :][:32]
        value = blob[len(_SEAL_TIMED) + 40 :]
        if hashlib.sha256(seconds + value).digest() == digest:
            return value, struct.unpack(">d", seconds)[0]
        return None, math.nan
    head = len(_SEAL) + 32
    if len(blob) < head or not blob.startswith(_SEAL):
        return None, math.nan
    value = blob[head:]
    return (value if hashlib.sha256(value).digest() == blob[len(_SEAL) : head] else None), math.nan


def _unseal(blob: bytes) -> bytes | None:
    """The entry's value, or None when it is not sealed or its digest does not match."""
    return _unseal_timed(blob)[0]


def seal_compilation_cache() -> bool:
    """Seal every entry JAX's persistent cache writes with a SHA-256 digest, and treat an entry
    whose digest does not match as absent (it is deleted, compiled again and rewritten).

    Why: jaxlib 0.10.2 rejects a cache entry that fails to decompress or parse, but runs one
    whose compressed stream is whole while the machine code inside is damaged (a disk error, a
    write cut short by a crash, a tampered file). Of 12 such entries tried here (16 bytes
    flipped at one place in the object code of two small programs), 7 killed the process
    (SIGABRT "LLVM ERROR", SIGILL, SIGSEGV), 1 returned a wrong number without a word (-inf
    for 172.3), and 4 were refused or harmless. A replaced worker would read the same entry and
    die again. The digest costs one SHA-256 of each entry read or written (well under a
    millisecond for these sizes, next to a compile). Unsealed entries (another program's) count
    as absent too.

    An entry written during :func:`compile_for` also records the seconds compiling took, so
    a process that reads it knows (``Compiled.fresh_compile_s``): reading an entry takes a
    fraction of the compile it saved, and JAX records only whole seconds.

    Patches ``jax._src.lru_cache.LRUCache`` (the cache JAX builds for a folder, reached through
    :func:`rnnviz.engine.compat.persistent_cache_module`); returns False, changing nothing,
    where that class is not there (another jax).
    """
    lru_cache = persistent_cache_module()
    cls = getattr(lru_cache, "LRUCache", None)
    if cls is None or not hasattr(cls, "get") or not hasattr(cls, "put"):
        return False
    if getattr(cls, "_rnnviz_sealed", False):
        return True
    get, put = cls.get, cls.put
    suffixes = (getattr(lru_cache, "_CACHE_SUFFIX", "-cache"), getattr(lru_cache, "_ATIME_SUFFIX", "-atime"))

    def checked_get(self, key: str) -> bytes | None:
        blob = get(self, key)
        if blob is None:
            return None
        value, compile_s = _unseal_timed(blob)
        if value is None:
            log.warning("compilation cache entry %s is damaged or not sealed: compiling it again", key)
            for suffix in suffixes:
                (self.path / f"{key}{suffix}").unlink(missing_ok=True)
        elif math.isfinite(compile_s):
            _compiling.read_s = compile_s
        return value

    def sealed_put(self, key: str, value: bytes) -> None:
        # written by JAX right after the compile, in the compiling thread
        start = getattr(_compiling, "start", None)
        put(self, key, _seal(value, math.nan if start is None else time.perf_counter() - start))

    cls.get, cls.put, cls._rnnviz_sealed = checked_get, sealed_put, True
    return True

"""The dashboard's computations, in worker processes that can be abandoned (:class:`WorkerPool`,
each call with a time limit; the worker side is :func:`serve`, ``python -m rnnviz.serve.worker``),
and :class:`ResultCache`, the server's results for every session. Why each rule is as it is:
*The worker pool in detail*, ``docs/dev/serving.md``.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import importlib
import logging
import math
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Hashable
from multiprocessing.connection import Connection
from typing import Any

from rnnviz.serve.settings import (
    IDLE_LIMIT_S,
    IDLE_NICE,
    IDLE_S,
    MAX_GRACE_S,
    PAGE_DRAW_S,
    POLL_S,
    SPILL_S,
    VISIT_GRACE_S,
    ServerSettings,
    settings,
)

log = logging.getLogger("rnnviz.worker")


class ComputationTimeout(RuntimeError):
    """A computation ran past its time limit; its worker was killed and replaced.

    Attributes:
      what: the computation, in words (``"the phase diagram (41 gains × 3 seeds)"``).
      elapsed_s: how long it ran before it was stopped.
      limit_s: the limit.
    """

    def __init__(self, what: str, elapsed_s: float, limit_s: float):
        self.what, self.elapsed_s, self.limit_s = what, elapsed_s, limit_s
        super().__init__(
            f"{what} did not finish within the {limit_s:g} s limit (stopped after {elapsed_s:.1f} s)"
        )


class WorkerDied(RuntimeError):
    """The worker process ended while computing (killed by the system, out of memory, a crash)."""


def _run_setup(setup: str | None) -> None:
    """Call ``setup``, a ``"module:function"`` (None or empty: nothing)."""
    if setup:
        module, name = setup.split(":")
        getattr(importlib.import_module(module), name)()


def serve(conn: Any, setup: str | None) -> None:
    """The worker's loop: run ``setup`` (``"module:function"``), then answer each ``(fn, args)``
    with ``("ok", result)`` or ``("error", exception)``, until the pipe closes."""
    _run_setup(setup)
    while True:
        try:
            fn, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = ("ok", fn(*args))
        except BaseException as err:  # every failure goes back to the caller
            reply = ("error", err)
        try:
            conn.send(reply)
        except Exception as err:  # an unpicklable result or exception
            conn.send(("error", RuntimeError(f"{type(err).__name__} while sending the result back: {err}")))


def rss_bytes(pid: int) -> int | None:
    """A process's resident memory in bytes (None where it cannot be read: not Linux, or gone)."""
    try:
        resident = int(open(f"/proc/{pid}/statm").read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident * os.sysconf("SC_PAGE_SIZE")


def _start(setup: str | None, nice: int = 0) -> tuple[subprocess.Popen, Any]:
    """A worker process (``python -m rnnviz.serve.worker FD SETUP NICE``) and our end of its pipe."""
    ours, theirs = socket.socketpair()
    # The child sees the modules this process sees (as multiprocessing's spawn would).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    process = subprocess.Popen(
        [sys.executable, "-m", "rnnviz.serve.worker", str(theirs.fileno()), setup or "", str(nice)],
        pass_fds=(theirs.fileno(),),
        stdin=subprocess.DEVNULL,
        env=env,
    )
    theirs.close()
    return process, Connection(ours.detach())


def _stop(process: subprocess.Popen | None, conn: Any, grace_s: float = 0.0) -> None:
    """End a worker: close its pipe (it exits between jobs), then kill it after ``grace_s``."""
    if conn is not None:
        conn.close()
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace_s)  # 0: a look
            return
        process.kill()
        process.wait(timeout=30)


class _Worker:
    """One worker process, started on first use; ``lock`` gives one caller at a time, and
    ``successor`` is the process that takes over when it retires. Only the lock's holder
    changes the rest (shutdown aside)."""

    def __init__(self, index: int, setup: str | None, clock: Callable[[], float], nice: int = 0):
        self.index, self.setup, self.clock, self.nice = index, setup, clock, nice
        self.lock = threading.Lock()
        self.process: subprocess.Popen | None = None
        self.conn: Any = None
        self.successor: tuple[subprocess.Popen, Any] | None = None
        self.jobs = 0
        self.generation = 0  # processes it has had: a new one holds nothing the old one compiled
        self.free_since = clock()  # when a visitor's job last released it
        self.doing: str | None = None  # the job under way, in words
        self.idle_job = False  # whether that job is idle-time work (nobody waits for it)

    def release(self) -> None:
        """Free the worker for the next caller; a visitor's job's end (not an idle-time job's)
        starts the :data:`IDLE_S` wait: their script run may call again in a moment."""
        if not self.idle_job:
            self.free_since = self.clock()
        self.doing, self.idle_job = None, False
        self.lock.release()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _use(self, process: subprocess.Popen, conn: Any) -> None:
        self.process, self.conn, self.jobs = process, conn, 0
        self.generation += 1

    def ensure(self) -> None:
        if not self.alive():
            self.kill()
            self._use(*_start(self.setup, self.nice))

    def take_over(self) -> bool:
        """Swap in the successor if it has answered (True when it did); the old process is let
        go in the background (it exits when its pipe closes, or is killed after a while)."""
        if self.successor is None:
            return False
        process, conn = self.successor
        try:
            if process.poll() is not None:  # it died starting: try again after the next job
                raise EOFError
            if not conn.poll():
                return False
            conn.recv()
        except (EOFError, OSError):
            _stop(process, conn)
            self.successor = None
            return False
        old, self.successor = (self.process, self.conn), None
        self._use(process, conn)
        threading.Thread(target=_stop, args=(*old, 30.0), daemon=True, name="retired-worker").start()
        return True

    def kill(self) -> None:
        _stop(self.process, self.conn)
        self.process = self.conn = None
        if self.successor is not None:
            _stop(*self.successor)
            self.successor = None


class WorkerPool:
    """Worker processes for the dashboard's computations (see the module doc).

    Args:
      size: workers for visitors (each holds its own executables); one more, ``idle_worker``,
        runs idle-time work at a lower OS priority (:data:`IDLE_NICE`).
      setup: ``"module:function"`` run once in each new worker (compilation cache, allocator settings).
      idle_setup: what the idle worker runs instead (default: ``setup``): it serves no visitor,
        so what a visitor's first call needs ready need not be (and should not compete with the
        first pages for the cores).
      time_limit_s: default limit of one call, in seconds.
      max_jobs: jobs after which a worker retires, its successor started first (None: never).
      max_rss_bytes: resident bytes (read after each job) past which a worker retires (None: never).
      clock: the seconds the idle-time rules read (a test's is fake); time limits and
        spilling time real waits with :func:`time.perf_counter`.

    >>> pool = WorkerPool(size=1)
    >>> pool.call(divmod, 7, 2, route="example", what="a division")
    (3, 1)
    >>> pool.shutdown()
    """

    def __init__(
        self,
        size: int = 2,
        setup: str | None = None,
        idle_setup: str | None = None,
        time_limit_s: float = 90.0,
        max_jobs: int | None = None,
        max_rss_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        if size < 1:
            raise ValueError(f"WorkerPool needs at least one worker, got size={size}")
        self.clock, self.time_limit_s = clock, time_limit_s
        self.workers = [_Worker(i, setup, clock) for i in range(size)]
        self.idle_worker = _Worker(size, setup if idle_setup is None else idle_setup, clock, nice=IDLE_NICE)
        self.max_jobs, self.max_rss_bytes = max_jobs, max_rss_bytes
        self.restarts = self.retirements = 0
        # the visitors, as idle time sees them (under _counting; the times read self.clock)
        self._counting = threading.Lock()
        self._visitors = 0  # visitors' jobs under way
        self._activity = 0  # page runs and visitors' jobs begun, ever (a timing's witness)
        self._seen = -math.inf  # when a page run or a visitor's job last began or ended
        self._page_began = -math.inf  # when a page run last began: its grace counts from then
        self._drawn_by = -math.inf  # when the fresh pages, drawn one after another, are drawn
        atexit.register(self.shutdown)  # the server exits: its workers too

    def start(self) -> None:
        """Start every worker process now, not on its first call: each sets up while the server
        goes on, and a call that spills finds the other worker ready."""
        for w in (*self.workers, self.idle_worker):
            with w.lock:
                w.ensure()

    def worker_for(self, route: str) -> _Worker:
        """The worker a route always goes to (a stable hash, the same in every process)."""
        return self.workers[zlib.crc32(route.encode()) % len(self.workers)]

    def generation(self, route: str) -> int:
        """How many processes the route's worker has had (0 before its first): what was
        prepared in one is gone once a successor or a replacement has taken over."""
        return self.worker_for(route).generation

    def routes_to_each(self, route: str) -> list[str]:
        """One route to each worker, ``route`` itself first, then ``route`` with suffixes that
        hash to the others: for work every worker should hold, since a call may spill.

        >>> pool = WorkerPool(size=3)
        >>> routes = pool.routes_to_each("lstm T=50")
        >>> routes[0], sorted(pool.worker_for(r).index for r in routes)
        ('lstm T=50', [0, 1, 2])
        """
        out, seen, n = [route], {self.worker_for(route).index}, 0
        while len(seen) < len(self.workers):
            other = f"{route} #{n}"
            if self.worker_for(other).index not in seen:
                seen.add(self.worker_for(other).index)
                out.append(other)
            n += 1
        return out

    def call(
        self,
        fn: Callable,
        *args: Any,
        route: str,
        what: str,
        on_wait: Callable[[float, bool], None] | None = None,
        time_limit_s: float | None = None,
        spill: bool = False,
    ) -> Any:
        """``fn(*args)`` in the route's worker; its result, or its exception re-raised here.

        Args:
          fn: a module-level function (sent by reference); args must pickle.
          route: see :meth:`worker_for`.
          what: the computation in words, for messages.
          on_wait: called about every :data:`POLL_S` with ``(seconds so far, running)``
            (running: not waiting for another call). It may raise (a Streamlit rerun): the
            answer is then drained in the background.
          time_limit_s: the limit for this call (default: the pool's).
          spill: take any free worker when the route's is busy for :data:`SPILL_S`, or with
            idle-time work (for pure jobs only).

        Raises:
          ComputationTimeout: the call ran past the limit (its worker was replaced).
          WorkerDied: the worker ended during the call (it is replaced on the next call).
        """
        limit = self.time_limit_s if time_limit_s is None else time_limit_s
        worker = self._take(route, spill, on_wait)
        self._visiting(+1)
        handed_off = False

        def watch(elapsed: float, running: bool) -> None:
            nonlocal handed_off
            try:
                on_wait(elapsed, running)
            except BaseException:  # the caller left (a rerun): drain the answer in the background
                handed_off = True
                drain = functools.partial(self._drain, worker, began, limit, what, visitor=True)
                threading.Thread(target=drain, daemon=True).start()
                raise

        try:
            self._send(worker, fn, args, what)
            began = time.perf_counter()
            status, value = self._answer(worker, began, limit, what, watch if on_wait else None)
        finally:
            if not handed_off:
                worker.release()
                self._visiting(-1)
        if status == "error":
            raise value
        return value

    def visit(self) -> None:
        """A page run begins: idle-time work waits :data:`VISIT_GRACE_S`, or until the fresh
        pages are drawn (:meth:`drawn`) if later; a job under way goes on."""
        with self._counting:
            self._activity += 1
            self._seen = self._page_began = self.clock()

    def drawn(self, fresh: bool = False) -> None:
        """A page run has ended and its browser draws what it sent.

        Args:
          fresh: the run was a session's first: idle-time work waits :data:`PAGE_DRAW_S` more,
            after the fresh pages before it (at most :data:`MAX_GRACE_S`); a rerun's end adds nothing.
        """
        with self._counting:
            now = self._seen = self.clock()
            if fresh:
                self._drawn_by = min(max(self._drawn_by, now) + PAGE_DRAW_S, now + MAX_GRACE_S)

    def activity(self) -> int:
        """Page runs and visitors' jobs begun so far (an idle-time timing's witness)."""
        with self._counting:
            return self._activity

    def quiet_for_s(self) -> float:
        """Seconds since a page run or a visitor's job began or ended: 0 while a visitor's job
        runs, inf before any."""
        return 0.0 if self._visitors > 0 else self.clock() - self._seen

    def _visiting(self, change: int) -> None:
        """Count a visitor's job in (+1) or out (−1)."""
        with self._counting:
            self._visitors += change
            self._activity += change > 0
            self._seen = self.clock()

    def _take(self, route: str, spill: bool, on_wait: Callable[[float, bool], None] | None) -> _Worker:
        """A worker for ``route``, its lock held: its own, or with ``spill`` a free one (:meth:`call`)."""
        home = self.worker_for(route)
        if home.lock.acquire(blocking=False):
            return home
        start = time.perf_counter()
        while not home.lock.acquire(timeout=POLL_S / 4 if spill else POLL_S):
            waited = time.perf_counter() - start
            if spill and (waited >= SPILL_S or home.idle_job):
                free = (w for w in self.workers if w is not home and w.lock.acquire(blocking=False))
                other = next(free, None)
                if other is not None:
                    return other
            if on_wait is not None:
                on_wait(waited, False)
        return home

    def _send(self, worker: _Worker, fn: Callable, args: tuple, what: str, idle: bool = False) -> None:
        """Hand ``fn(*args)`` to a worker whose lock the caller holds (its successor if ready)."""
        if worker.take_over():
            log.info("worker %d: its successor took over", worker.index)
        worker.ensure()
        worker.conn.send((fn, args))
        worker.doing, worker.idle_job = what, idle

    def _after_job(self, worker: _Worker) -> None:
        """Count the job; start the worker's successor when it has done enough or grown too big."""
        if not worker.alive():
            return
        worker.jobs += 1
        if worker.successor is not None:
            return
        rss = rss_bytes(worker.process.pid) if self.max_rss_bytes is not None else None
        too_many = self.max_jobs is not None and worker.jobs >= self.max_jobs
        too_big = rss is not None and rss > self.max_rss_bytes
        if too_many or too_big:
            why = f"{worker.jobs} jobs" if too_many else f"RSS {rss / 2**20:.0f} MB"
            log.warning("retiring worker %d after %s: its successor is starting", worker.index, why)
            worker.successor = _start(worker.setup, worker.nice)  # it sets up while this one serves
            worker.successor[1].send((os.getpid, ()))  # answered once it is ready
            self.retirements += 1

    def _answer(
        self, worker: _Worker, began: float, limit: float, what: str, on_wait: Callable | None = None
    ) -> tuple[str, Any]:
        """The answer, ``("ok", result)`` or ``("error", exception)``, by ``limit`` seconds after
        ``began``; a worker past it, or dead, is replaced and the exception says so."""
        while not worker.conn.poll(POLL_S):
            elapsed = time.perf_counter() - began
            if elapsed > limit:
                self._replace(worker, f"{what}: past its {limit:g} s limit")
                return "error", ComputationTimeout(what, elapsed, limit)
            if not worker.alive():
                code = None if worker.process is None else worker.process.poll()
                self._replace(worker, f"{what}: the worker died")
                return "error", WorkerDied(f"the worker computing {what} ended (exit code {code})")
            if on_wait is not None:
                on_wait(elapsed, True)
        try:
            return worker.conn.recv()
        except (EOFError, OSError):
            self._replace(worker, f"{what}: the pipe closed")
            return "error", WorkerDied(f"the worker computing {what} ended before answering")
        finally:
            self._after_job(worker)

    def _drain(
        self,
        worker: _Worker,
        began: float,
        limit: float,
        what: str,
        on_answer: Callable[[str, Any], None] | None = None,
        visitor: bool = False,
    ) -> None:
        """Free the worker once an abandoned call (``visitor``) or an idle-time job has answered;
        the answer goes to ``on_answer(status, value)`` if given."""
        try:
            answer = self._answer(worker, began, limit, what)
        except Exception as err:  # the pipe broke: a new worker on the next call
            self._replace(worker, f"{what}: abandoned, pipe broke")
            answer = ("error", WorkerDied(f"the worker computing {what} ended ({err})"))
        finally:
            worker.release()
            if visitor:
                self._visiting(-1)
        if answer[0] == "error":
            log.debug("%s (nobody waited for it): %r", what, answer[1])
        if on_answer is not None:
            on_answer(*answer)

    def call_if_idle(
        self,
        fn: Callable,
        *args: Any,
        route: str,
        what: str,
        time_limit_s: float | None = None,
        on_answer: Callable[[str, Any], None] | None = None,
        own: bool = False,
    ) -> bool:
        """Start ``fn(*args)`` if the pool is :meth:`idle`; whether it started.

        Args:
          route, what: as for :meth:`call`.
          time_limit_s: its limit, at most :data:`IDLE_LIMIT_S` and the pool's (the default).
          on_answer: given ``("ok", result)`` or ``("error", exception)`` in a thread of the
            pool's once the worker is free again; without it the answer is dropped.
          own: run it in the pool's ``idle_worker``, of lower OS priority, instead.

        >>> now = [0.0]
        >>> pool = WorkerPool(size=1, clock=lambda: now[0])
        >>> pool.call_if_idle(divmod, 7, 2, route="example", what="a division")  # just started
        False
        >>> now[0] += IDLE_S
        >>> pool.call_if_idle(divmod, 7, 2, route="example", what="a division")
        True
        >>> pool.call(divmod, 9, 2, route="example", what="a division")  # waits for the first
        (4, 1)
        >>> pool.shutdown()
        """
        limit = min(IDLE_LIMIT_S, self.time_limit_s, math.inf if time_limit_s is None else time_limit_s)
        if not self.idle():
            return False
        worker = self.idle_worker if own else self.worker_for(route)
        if not worker.lock.acquire(blocking=False):
            return False
        try:
            self._send(worker, fn, args, what, idle=True)
        except BaseException:
            self._replace(worker, f"{what}: could not be sent")
            worker.release()
            raise
        job = (worker, time.perf_counter(), limit, what, on_answer)
        threading.Thread(target=self._drain, args=job, daemon=True, name="idle-call").start()
        return True

    def idle(self) -> bool:
        """Whether idle-time work may start: every worker free, none has ended a visitor's job
        within :data:`IDLE_S`, and the pages' grace over."""
        now = self.clock()
        busy = self.idle_worker.lock.locked() or any(
            w.lock.locked() or now - w.free_since < IDLE_S for w in self.workers
        )
        return not busy and now >= max(self._page_began + VISIT_GRACE_S, self._drawn_by)

    def _replace(self, worker: _Worker, why: str) -> None:
        log.warning("replacing worker %d (%s)", worker.index, why)
        worker.kill()
        self.restarts += 1

    def doing(self, route: str) -> str | None:
        """What the route's worker is busy with, in words (None when it is free)."""
        return self.worker_for(route).doing

    def pids(self) -> list[int]:
        """The process ids of the running workers (and of successors being started)."""
        every = (*self.workers, self.idle_worker)
        found = [w.process.pid for w in every if w.alive()]
        return found + [w.successor[0].pid for w in every if w.successor is not None]

    def shutdown(self) -> None:
        """Stop every worker (waiting for none)."""
        for w in (*self.workers, self.idle_worker):
            w.kill()


class InlinePool:
    """:meth:`WorkerPool.call` in this process, without isolation or time limits
    (``RNNVIZ_WORKERS=0``): for profiling, and for the tests that drive the tabs. It has no
    workers and no idle time, so the page's other calls on a pool do nothing here."""

    time_limit_s = math.inf

    def call(self, fn: Callable, *args: Any, route: str, what: str, **_: Any) -> Any:
        """``fn(*args)``, here and now; the other arguments are :meth:`WorkerPool.call`'s, ignored."""
        return fn(*args)

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to start, stop or hold back, and no worker busy (None)."""

    start = shutdown = visit = drawn = doing = _nothing


def make_pool(
    setup: str | None = None, limits: ServerSettings | None = None, idle_setup: str | None = None
) -> WorkerPool | InlinePool:
    """The pool the settings ask for (default: this process's environment's): ``workers``
    workers (0: an :class:`InlinePool`), ``time_limit_s``, ``worker_max_jobs``, ``worker_max_rss_mb``;
    ``setup`` and ``idle_setup`` as :class:`WorkerPool` takes them."""
    limits = limits or settings()
    if limits.workers <= 0:
        _run_setup(setup)
        return InlinePool()
    return WorkerPool(
        size=limits.workers,
        setup=setup,
        idle_setup=idle_setup,
        time_limit_s=limits.time_limit_s,
        max_jobs=limits.worker_max_jobs,
        max_rss_bytes=limits.worker_max_rss_mb * 2**20,
    )


def pickled_bytes(value: Any) -> int:
    """About what ``value`` costs to keep: its pickled size, array buffers counted without
    being copied (protocol 5's out-of-band buffers); 0 for a value that does not pickle."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        head = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception:
        return 0
    return len(head) + sum(b.raw().nbytes for b in buffers)


class ResultCache:
    """Results by key, least recently used dropped past ``max_bytes`` (:func:`pickled_bytes`)
    or ``max_entries``; a key being computed is waited for, not computed twice.

    >>> cache = ResultCache(max_entries=2)
    >>> cache.get(("square", 3), lambda: 9)
    9
    >>> cache.get(("square", 3), lambda: 0)  # cached: not called again
    9
    >>> small = ResultCache(max_bytes=1000)
    >>> _ = small.get("big", lambda: bytes(5000))
    >>> small.peek("big"), small.bytes
    (False, 0)
    """

    def __init__(self, max_entries: int = 4096, max_bytes: int | None = None):
        self.max_entries = max_entries
        self.max_bytes = math.inf if max_bytes is None else max_bytes
        self.bytes = 0
        self._values: collections.OrderedDict[Hashable, tuple[Any, int]] = collections.OrderedDict()
        self._pending: dict[Hashable, threading.Event] = {}
        self._lock = threading.Lock()

    def get(
        self, key: Hashable, compute: Callable[[], Any], on_wait: Callable[[float, bool], None] | None = None
    ) -> Any:
        """The cached value for ``key``, or ``compute()``'s (an exception is not cached);
        ``on_wait`` as in :meth:`WorkerPool.call`, while another caller computes it."""
        start = time.perf_counter()
        while True:
            with self._lock:
                if key in self._values:
                    self._values.move_to_end(key)
                    return self._values[key][0]
                event = self._pending.get(key)
                if event is None:
                    event = self._pending[key] = threading.Event()
                    break
            while not event.wait(POLL_S):  # another caller computes it: wait, then look again
                if on_wait is not None:
                    on_wait(time.perf_counter() - start, False)
        try:
            value = compute()
            self.put(key, value)
            return value
        finally:
            with self._lock:
                self._pending.pop(key, None)
            event.set()

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` under ``key`` (replacing any), then drop the least recently used past
        the budget; a value larger than the whole budget is not kept."""
        size = pickled_bytes(value)  # outside the lock: it takes time on a large result
        with self._lock:
            if key in self._values:  # stored after a clear() by a computation still running
                self.bytes -= self._values.pop(key)[1]
            if size <= self.max_bytes:
                self._values[key] = (value, size)
                self.bytes += size
            while self._values and (len(self._values) > self.max_entries or self.bytes > self.max_bytes):
                self.bytes -= self._values.popitem(last=False)[1][1]

    def peek(self, key: Hashable) -> bool:
        """Whether ``key`` has a value now."""
        with self._lock:
            return key in self._values

    def items(self) -> list[tuple[Hashable, Any]]:
        """``(key, value)`` of every value kept now, least recently used first."""
        with self._lock:
            return [(k, v) for k, (v, _) in self._values.items()]

    def clear(self) -> None:
        """Drop every cached value (a computation in progress still stores its own)."""
        with self._lock:
            self._values.clear()
            self.bytes = 0


__all__ = [
    "ComputationTimeout",
    "InlinePool",
    "ResultCache",
    "WorkerDied",
    "WorkerPool",
    "make_pool",
    "pickled_bytes",
    "rss_bytes",
    "serve",
]


def _exit_with_parent(parent: int, every_s: float = 1.0) -> None:
    """End this worker once its server is gone, even while a job is stuck inside XLA."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os._exit(0)


def _main(fd: str, setup: str, nice: str) -> None:
    if int(nice):  # before JAX starts its threads: each inherits it
        os.nice(int(nice))
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True, name="parent-watch").start()
    serve(Connection(int(fd)), setup)


if __name__ == "__main__":
    _main(*sys.argv[1:])

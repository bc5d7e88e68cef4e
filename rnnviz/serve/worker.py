"""The dashboard's computations, in worker processes that can be abandoned.

Streamlit runs each session's script in a thread of one server process. A computation
that never returns (a deadlock inside XLA, see :mod:`rnnviz.base.hlo`) cannot be stopped from
Python: the thread, and with it the session, would stay stuck until the server restarts.
So no JAX computation runs in the server process. :class:`WorkerPool` keeps a few worker
processes (fresh ones: each has its own JAX runtime and thread pool); a call sends a function
and its arguments to one of them and waits with a time limit. On time-out the worker is
killed and replaced, the caller gets :class:`ComputationTimeout` (what it asked for, how long
it ran), and every other session goes on: nothing of theirs lived in that process.

Routing keeps the compiled-executable caches warm: a call names a *route* (the config's
shape, or a training run's key) and goes to the same worker (unless it may spill, below),
whose caches then hold that shape's executables; changing only values (seed, gain, scales)
recompiles nothing.
Results are cached in the server (:class:`ResultCache`): a second session asking for the
same thing gets it without a call, and one already being computed is waited for, not
computed twice.

Idle time is used (:meth:`WorkerPool.call_if_idle`): when no visitor's job has ended for
:data:`IDLE_S`, none is under way and the pages' grace is over (:data:`VISIT_GRACE_S` after
the last page run began, and until fresh pages are drawn: :meth:`WorkerPool.visit`,
:meth:`WorkerPool.drawn`), a short job whose answer nobody waits for starts: computing what
the tabs not yet opened declare, in the pool's own idle worker, a process of lower OS
priority (:data:`IDLE_NICE`) that no visitor's job ever waits for; or compiling a shape a
visitor may switch to, in the worker that will serve it. No process is ever stopped: idle
work gives way by construction (one short job at a time, the lower priority, and a visitor's
job that finds its worker busy with idle work goes to a free one at once, or waits for that
one job). A timing taken in idle time is kept only when no visitor did anything meanwhile
(:meth:`WorkerPool.activity`).

A call whose worker is busy may go to another (``spill=True``, for pure jobs whose answer
depends only on their arguments): after :data:`SPILL_S` (at once when its worker is doing
idle-time work) it takes whichever worker is free first. That worker compiles the shape
too (or reads it from the shared persistent compilation cache, quicker than compiling),
which costs less than waiting behind another session's long view.
Stateful calls (a training run lives in its worker) never spill.

The worker side is :func:`serve` (``python -m rnnviz.serve.worker``); it needs nothing from Streamlit.
"""

from __future__ import annotations

import atexit
import collections
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


def serve(conn: Any, setup: str | None) -> None:
    """The worker's loop: run ``setup`` (``"module:function"``), then receive ``(fn, args)``
    and answer ``("ok", result)`` or ``("error", exception)``, until the pipe closes."""
    if setup:
        module, name = setup.split(":")
        getattr(importlib.import_module(module), name)()
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


def _ready() -> int:
    """A successor's first job: answered once its setup has run (its pid)."""
    return os.getpid()


def _start(setup: str | None, nice: int = 0) -> tuple[subprocess.Popen, Any]:
    """A worker process and our end of its pipe (``python -m rnnviz.serve.worker FD SETUP
    NICE``): ``nice`` raises its OS niceness before anything else runs in it, so every thread
    it starts (XLA's too) runs at that lower priority."""
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
    if process is None:
        return
    if grace_s > 0:
        try:
            process.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            pass
    process.kill()
    process.wait(timeout=30)


class _Worker:
    """One worker process, started on first use; ``lock`` gives one caller at a time.

    Started with ``subprocess`` (``python -m rnnviz.serve.worker FD SETUP``) and a socket pair,
    not with multiprocessing's spawn: Streamlit runs the app as ``__main__``, and spawn would
    import that module again in the child (starting a dashboard inside the worker).

    ``successor`` is the process that takes over when this one retires: started (and sent
    :func:`_ready`) while this one still serves, swapped in once it has answered."""

    def __init__(self, index: int, setup: str | None, nice: int = 0):
        self.index, self.setup, self.nice = index, setup, nice
        self.lock = threading.Lock()
        self.process: subprocess.Popen | None = None
        self.conn: Any = None
        self.jobs = 0
        #: processes this worker has had: a new one holds nothing the old one compiled
        self.generation = 0
        self.successor: tuple[subprocess.Popen, Any] | None = None
        # when a visitor's job last released it (an idle-time job's end is no gap in a script
        # run: the next idle-time job may follow at once)
        self.free_since = time.monotonic()
        self.doing: str | None = None  # the job under way, in words
        self.idle_job = False  # whether that job is idle-time work (nobody waits for it)
        self.state = threading.Lock()  # idle_job and doing change together

    def release(self) -> None:
        """Free the worker for the next caller."""
        with self.state:
            self.doing = None
            was_idle, self.idle_job = self.idle_job, False
        if not was_idle:  # a visitor's job: their script run may call again in a moment
            self.free_since = time.monotonic()
        self.lock.release()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ensure(self) -> None:
        if self.alive():
            return
        self.kill()
        self.process, self.conn = _start(self.setup, self.nice)
        self.jobs = 0
        self.generation += 1

    def exitcode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def start_successor(self) -> None:
        """Start the process that will replace this one (it sets up while this one serves)."""
        process, conn = _start(self.setup, self.nice)
        conn.send((_ready, ()))
        self.successor = (process, conn)

    def take_over(self) -> bool:
        """Swap in the successor if it is ready (True when it was); the old process is let go
        in the background (it exits when its pipe closes, or is killed after a while)."""
        if self.successor is None:
            return False
        process, conn = self.successor
        if process.poll() is not None:  # it died starting: try again after the next job
            _stop(None, conn)
            self.successor = None
            return False
        try:
            if not conn.poll():
                return False
            conn.recv()
        except (EOFError, OSError):
            _stop(process, conn)
            self.successor = None
            return False
        old = (self.process, self.conn)
        self.process, self.conn, self.jobs, self.successor = process, conn, 0, None
        self.generation += 1
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

    A worker *retires* after ``max_jobs`` jobs, or once its resident memory passes
    ``max_rss_bytes`` (checked after each job), as gunicorn's ``max_requests`` or Celery's
    ``max_tasks_per_child`` do: it keeps serving while its successor starts, and the
    successor takes over between two jobs, so nobody waits for a process to start (the
    executables of its routes come back from the persistent compilation cache).

    Args:
      size: how many workers (each holds its own compiled executables).
      setup: ``"module:function"`` run once in each new worker (compilation cache, allocator settings).
      time_limit_s: default limit of one call, in seconds of the worker's time.
      max_jobs: jobs after which a worker retires (None: never).
      max_rss_bytes: resident bytes past which a worker retires (None: never).

    >>> pool = WorkerPool(size=1)
    >>> pool.call(divmod, 7, 2, route="example", what="a division")
    (3, 1)
    >>> pool.shutdown()
    """

    def __init__(
        self,
        size: int = 2,
        setup: str | None = None,
        time_limit_s: float = 90.0,
        max_jobs: int | None = None,
        max_rss_bytes: int | None = None,
    ):
        if size < 1:
            raise ValueError(f"WorkerPool needs at least one worker, got size={size}")
        self.workers = [_Worker(i, setup) for i in range(size)]
        #: idle time's own process, at lower OS priority: what it computes nobody waits for
        self.idle_worker = _Worker(size, setup, nice=IDLE_NICE)
        self.time_limit_s = time_limit_s
        self.max_jobs, self.max_rss_bytes = max_jobs, max_rss_bytes
        self.restarts = 0
        self.retirements = 0
        self._visitors = 0  # visitors' jobs under way
        self._activity = 0  # page runs and visitors' jobs begun, ever (a timing's witness)
        self._counting = threading.Lock()
        self._visited = -math.inf  # when a page run last began or ended (monotonic)
        self._grace_until = -math.inf  # idle-time work does not start before (monotonic)
        self._drawing_until = -math.inf  # when the fresh pages are drawn
        self._visitor_seen = -math.inf  # when a visitor's job last began or ended
        atexit.register(self.shutdown)  # the server exits: its workers too

    def start(self) -> None:
        """Start every worker process now (each runs its set-up while the server goes on),
        instead of on its first call: a call that goes to another worker than its route's
        (``spill``) then finds it ready."""
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
        """One route to each worker, ``route``'s own first (``route`` itself, then ``route``
        with a suffix that hashes to the next worker): work that every worker should hold,
        because a call spills to whichever is free (:meth:`call`).

        >>> pool = WorkerPool(size=3)
        >>> routes = pool.routes_to_each("lstm T=50")
        >>> routes[0], sorted(pool.worker_for(r).index for r in routes)
        ('lstm T=50', [0, 1, 2])
        """
        out, seen = [route], {self.worker_for(route).index}
        n = 0
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
          on_wait: called about every :data:`POLL_S` with ``(seconds so far, running)`` —
            running is False while another call holds the worker; it may raise (a
            Streamlit rerun) and the computation is then finished in the background.
          time_limit_s: the limit for this call (default: the pool's).
          spill: when the route's worker is still busy after :data:`SPILL_S` (or busy with
            idle-time work), take any free one (for pure jobs only: see the module doc).

        Raises:
          ComputationTimeout: the call ran past the limit (its worker was replaced).
          WorkerDied: the worker ended during the call (it is replaced on the next call).
        """
        limit = self.time_limit_s if time_limit_s is None else time_limit_s
        worker = self._take(route, spill, on_wait)
        self._visiting(+1)
        handed_off = False
        try:
            self._send(worker, fn, args, what)
            began = time.perf_counter()
            while not worker.conn.poll(POLL_S):
                elapsed = time.perf_counter() - began
                if elapsed > limit:
                    self._replace(worker, f"{what}: past its {limit:g} s limit")
                    raise ComputationTimeout(what, elapsed, limit)
                if not worker.alive():
                    code = worker.exitcode()
                    self._replace(worker, f"{what}: the worker died")
                    raise WorkerDied(f"the worker computing {what} ended (exit code {code})")
                if on_wait is not None:
                    try:
                        on_wait(elapsed, True)
                    except BaseException:
                        handed_off = True  # the caller left: drain the answer in the background
                        threading.Thread(
                            target=self._drain,
                            args=(worker, began, limit, what),
                            kwargs=dict(visitor=True),
                            daemon=True,
                        ).start()
                        raise
            try:
                return self._receive(worker, what)
            finally:
                self._after_job(worker)
        finally:
            if not handed_off:
                worker.release()
                self._visiting(-1)

    def visit(self) -> None:
        """A page run begins: idle-time work starts again only once no page has run for
        :data:`VISIT_GRACE_S` (and no visitor's job is under way), or once the fresh pages
        are drawn (:meth:`drawn`). A page run that finds every result cached calls no worker,
        but its browser still draws: idle time is the machine's, not only the workers'."""
        with self._counting:
            self._activity += 1
        self._hold(0.0)

    def drawn(self, fresh: bool = False) -> None:
        """A page run has ended and its browser draws what it sent.

        Args:
            fresh: the run was a session's first (a fresh page: its browser compiles
                Streamlit's Plotly bundle and draws every element), wherever that browser
                runs: every visitor is treated alike (one on this machine shares its cores;
                for one elsewhere, idle time is only put off a moment). Idle-time work then
                waits :data:`PAGE_DRAW_S` from now, after the drawing of the fresh pages
                before it: eight opened at once hold it back for eight times that (never
                more than :data:`MAX_GRACE_S`). Counted from the
                run's begin alone, the grace of a fresh page whose run compiled was over
                before its chart was sent: the first page opened after the warm-up (whose run
                is such a page) met idle-time compiles and drew its chart later
                (``scripts/page_open.py --fresh-browsers``; docs/dev/benchmarks.md). A rerun
                draws little: its begin's grace is enough, and idle time keeps the rest.
        """
        self._hold(PAGE_DRAW_S if fresh else 0.0, from_end=True)

    def _hold(self, drawing_s: float, from_end: bool = False) -> None:
        """Hold idle-time work back until :data:`VISIT_GRACE_S` from now (a run's begin) and
        until the fresh pages' drawing, ``drawing_s`` more, is done, whichever is later (at
        most :data:`MAX_GRACE_S` from now). A job under way goes on: it is one short step."""
        with self._counting:
            now = time.monotonic()
            self._visited = now
            if drawing_s:
                self._drawing_until = min(max(self._drawing_until, now) + drawing_s, now + MAX_GRACE_S)
            begin = -math.inf if from_end else now + VISIT_GRACE_S
            self._grace_until = min(max(self._grace_until, begin, self._drawing_until), now + MAX_GRACE_S)

    def activity(self) -> int:
        """Page runs and visitors' jobs begun so far: a timing taken in idle time is kept only
        when this did not change while it ran (nothing else had the cores)."""
        with self._counting:
            return self._activity

    def quiet_for_s(self) -> float:
        """Seconds since a visitor last did anything: a page run began or ended (:meth:`visit`,
        :meth:`drawn`), or a visitor's job began or ended (a page computing a long view is not
        being read); inf before any. How long the visitors have been reading."""
        if self._visitors > 0:
            return 0.0
        return time.monotonic() - max(self._visited, self._visitor_seen)

    def _in_grace(self) -> bool:
        return time.monotonic() < self._grace_until

    def _visiting(self, change: int) -> None:
        """Count a visitor's job in (+1) or out (−1)."""
        with self._counting:
            self._visitors += change
            self._activity += change > 0
            self._visitor_seen = time.monotonic()  # a job began or ended: the visitor is not reading

    def _take(self, route: str, spill: bool, on_wait: Callable[[float, bool], None] | None) -> _Worker:
        """A worker for ``route``, its lock held: the route's own, or with ``spill`` any that
        is free once the route's has been busy for :data:`SPILL_S`, or at once when the
        route's is doing idle-time work (a compile whose end nobody waits for: another worker,
        even one that reads the shape from the compilation cache, answers sooner)."""
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

    def _send(self, worker: _Worker, fn: Callable, args: tuple, what: str) -> None:
        """Hand ``fn(*args)`` to a worker whose lock the caller holds: its successor first if
        one is ready, a new process if it died."""
        if worker.take_over():
            log.info("worker %d: its successor took over", worker.index)
        worker.ensure()
        worker.conn.send((fn, args))
        worker.doing = what

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
            worker.start_successor()
            self.retirements += 1

    def _receive(self, worker: _Worker, what: str) -> Any:
        try:
            status, value = worker.conn.recv()
        except (EOFError, OSError) as err:
            self._replace(worker, f"{what}: the pipe closed")
            raise WorkerDied(f"the worker computing {what} ended before answering") from err
        if status == "error":
            raise value
        return value

    def _drain(
        self,
        worker: _Worker,
        began: float,
        limit: float,
        what: str,
        on_answer: Callable[[str, Any], None] | None = None,
        visitor: bool = False,
    ) -> None:
        """Wait for an abandoned call's answer (``visitor``) or an idle-time job's within its
        limit, then free the worker; the answer goes to ``on_answer(status, value)`` when
        given, else it is dropped."""
        answer: tuple[str, Any]
        try:
            while True:
                remaining = limit - (time.perf_counter() - began)
                if remaining <= 0 or worker.conn.poll(min(remaining, POLL_S)):
                    break
            if remaining <= 0:
                self._replace(worker, f"{what}: abandoned and past its limit")
                answer = ("error", ComputationTimeout(what, time.perf_counter() - began, limit))
            else:
                answer = worker.conn.recv()
                if answer[0] == "error":
                    log.debug("%s (nobody waited for it): %r", what, answer[1])
                self._after_job(worker)
        except Exception as err:  # the pipe broke: a new worker on the next call
            self._replace(worker, f"{what}: abandoned, pipe broke")
            answer = ("error", WorkerDied(f"the worker computing {what} ended ({err})"))
        finally:
            worker.release()
            if visitor:
                self._visiting(-1)
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
        """Start ``fn(*args)`` on the route's worker (with ``own``: on the pool's idle worker,
        of lower OS priority, for work whose answer the server keeps) if nobody has used any
        worker for :data:`IDLE_S` (:meth:`idle`); whether it started. Its answer goes to
        ``on_answer("ok", result)`` or ``on_answer("error", exception)`` in a thread of the
        pool's, once the worker is free again (a worker that died or ran past
        ``time_limit_s`` is replaced, as for any call, and the exception says so); without
        ``on_answer`` it is dropped. The limit is at most :data:`IDLE_LIMIT_S` and the pool's
        own (the default).

        >>> pool = WorkerPool(size=1)
        >>> pool.call_if_idle(divmod, 7, 2, route="example", what="a division")  # just started
        False
        >>> import time; time.sleep(IDLE_S)
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
            self._send(worker, fn, args, what)
            with worker.state:
                worker.idle_job = True
        except BaseException:
            self._replace(worker, f"{what}: could not be sent")
            worker.release()
            raise
        threading.Thread(
            target=self._drain,
            args=(worker, time.perf_counter(), limit, what, on_answer),
            daemon=True,
            name="idle-call",
        ).start()
        return True

    def idle(self) -> bool:
        """Whether every worker is free (the idle worker too), none has ended a visitor's job
        within :data:`IDLE_S`, and the pages' grace is over (:meth:`visit`, :meth:`drawn`):
        the workers share the machine's cores with the browser, so idle-time work beside a
        visitor's job or a page being drawn would slow it; this also keeps idle-time jobs to
        one at a time, each free to follow the last at once."""
        now = time.monotonic()
        busy = self.idle_worker.lock.locked() or any(
            w.lock.locked() or now - w.free_since < IDLE_S for w in self.workers
        )
        return not busy and not self._in_grace()

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
    """The same :meth:`call` in this process, without isolation or time limits
    (``RNNVIZ_WORKERS=0``): for profiling and for tests that drive the tabs (AppTest),
    where a second process would only compile everything twice."""

    time_limit_s = math.inf
    restarts = 0

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
        """``fn(*args)``, here and now; the other arguments are :meth:`WorkerPool.call`'s, ignored."""
        return fn(*args)

    def call_if_idle(self, fn: Callable, *args: Any, **_: Any) -> bool:
        """False: nothing runs beside this process's own calls (the arguments are ignored)."""
        return False

    def visit(self) -> None:
        """Nothing to hold back: no idle-time work runs here."""
        return None

    def activity(self) -> int:
        """0: nothing runs beside this process's own calls."""
        return 0

    def drawn(self, fresh: bool = False) -> None:
        """Nothing to hold back: no idle-time work runs here."""
        return None

    def doing(self, route: str) -> str | None:
        """None: no worker is ever busy with another's job here."""
        return None

    def start(self) -> None:
        """Nothing to start: there are no workers."""
        return None

    def shutdown(self) -> None:
        """Nothing to stop: there are no workers."""
        return None


def make_pool(setup: str | None = None, limits: ServerSettings | None = None) -> WorkerPool | InlinePool:
    """The pool the settings ask for (:mod:`rnnviz.serve.settings`, default: this process's
    environment): ``workers`` workers (0: inline, in this process) with ``time_limit_s`` as
    the limit, retiring after ``worker_max_jobs`` jobs or past ``worker_max_rss_mb``."""
    limits = limits or settings()
    if limits.workers <= 0:
        if setup:
            module, name = setup.split(":")
            getattr(importlib.import_module(module), name)()
        return InlinePool()
    return WorkerPool(
        size=limits.workers,
        setup=setup,
        time_limit_s=limits.time_limit_s,
        max_jobs=limits.worker_max_jobs,
        max_rss_bytes=limits.worker_max_rss_mb * 2**20,
    )


def pickled_bytes(value: Any) -> int:
    """About what ``value`` costs to keep: its pickled size, with array buffers counted
    without being copied (protocol 5's out-of-band buffers). A value that does not pickle
    counts as 0 (only the InlinePool of the tests makes such values)."""
    buffers: list[pickle.PickleBuffer] = []
    try:
        head = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    except Exception:
        return 0
    return len(head) + sum(b.raw().nbytes for b in buffers)


class ResultCache:
    """Results by key in the server, least recently used dropped past ``max_bytes`` (of
    :func:`pickled_bytes`) or ``max_entries``; a key being computed is waited for by the
    others who ask for it (one computation, not two). A result larger than the whole
    budget is returned but not kept.

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
        """The cached value for ``key``, or ``compute()``'s (an exception is not cached)."""
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
            while not event.wait(POLL_S):  # another session computes it: wait, then look again
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
        the budget; a value larger than the whole budget is not kept.

        >>> cache = ResultCache(max_bytes=120)  # two of these (55 bytes pickled each), not three
        >>> cache.put("a", bytes(40)); cache.put("b", bytes(40)); cache.put("c", bytes(40))
        >>> cache.peek("a"), cache.peek("b"), cache.peek("c")
        (False, True, True)
        """
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
    """End this worker when the server that started it is gone — even while a computation
    here is stuck inside XLA, where the closed pipe would never be read."""
    while os.getppid() == parent:
        time.sleep(every_s)
    os._exit(0)


def _main(argv: list[str]) -> None:
    nice = int(argv[2]) if len(argv) > 2 and argv[2] else 0
    if nice:  # before JAX starts its threads: each inherits it
        os.nice(nice)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True, name="parent-watch").start()
    serve(Connection(int(argv[0])), argv[1] if len(argv) > 1 else None)


if __name__ == "__main__":
    _main(sys.argv[1:])

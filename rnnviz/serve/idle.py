"""The workers' idle time, used: what the tabs not yet opened will ask for, computed ahead.

A page hands :class:`Preparer` a *plan* per route: a function that, given a look-up of
answers, returns the requests (:class:`~rnnviz.serve.requests.Request`) its closed tabs will
make, as they declare them (``requests(ctx)``). A thread runs them one short job at a time in
the pool's idle time (:meth:`~rnnviz.serve.worker.WorkerPool.call_if_idle`). Why each rule is
as it is: *Idle-time preparation*, ``docs/dev/serving.md``. Nothing here imports Streamlit or JAX.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

from rnnviz.serve.requests import Missing, Request
from rnnviz.serve.settings import PREPARER_POLL_S

log = logging.getLogger("rnnviz.idle")

#: Plans waiting at once; a newer one pushes the oldest out (its visitor has moved on).
MAX_WANTED = 8
#: Jobs one plan may start before it is given up (a request that never keeps an answer).
MAX_JOBS = 48
#: Requests remembered as done or failed.
MAX_DONE = 2048

Plan = Callable[[Callable[[Request], Any]], list[Request]]


def _missing(request: Request) -> Any:
    raise Missing(request)


class Preparer:
    """Requests run in the pool's idle time, plan by plan, until every request of each
    plan has its answer.

    Args:
      pool: a :class:`~rnnviz.serve.worker.WorkerPool` (anything with its ``call_if_idle``,
        ``idle``, ``generation``, ``activity`` and ``quiet_for_s``).
      results: where answers are kept (a :class:`~rnnviz.serve.worker.ResultCache`), under
        each request's key; None: the answers are not kept, and a request is done once it
        ran in the worker process that now serves its route (compiling ahead: what it leaves
        is in that process).
      what: the work in words, for the log.
      turns_with: a preparer to take turns with, one job each, that one first, while both
        are :meth:`ready` (alone, each runs freely).
      max_wanted: plans held at once (:data:`MAX_WANTED`); a newer one pushes the oldest out.
      quiet_s: start a job only once the pool has been quiet for this long (its
        ``quiet_for_s``; 0: whenever it is idle).
      own: run the jobs on the pool's own idle worker, of lower OS priority (work whose
        answers are kept); else on the worker of each request's route (compiling ahead).

    >>> from rnnviz.serve.worker import ResultCache, WorkerPool
    >>> pool, cache = WorkerPool(size=1), ResultCache()
    >>> prep = Preparer(pool, cache, "an example")
    >>> prep.want("route", lambda get: [Request(divmod, (7, 2), "route", "a division")])
    >>> prep.drained.wait(30) and cache.get(("divmod", 7, 2), lambda: None)
    (3, 1)
    >>> prep.stop(); pool.shutdown()
    """

    def __init__(
        self,
        pool: Any,
        results: Any,
        what: str,
        turns_with: Preparer | None = None,
        max_wanted: int = MAX_WANTED,
        quiet_s: float = 0.0,
        own: bool = False,
    ):
        self.pool, self.results, self.what, self.own = pool, results, what, own
        self.turns_with, self.max_wanted, self.quiet_s = turns_with, max_wanted, quiet_s
        self.started = 0  # jobs started, all plans together (what the other of a pair watches)
        self._other_seen = -1  # the other's `started` when this one last started a job
        if turns_with is not None:
            turns_with.turns_with = self
            self._other_seen = 0  # the other goes first
        self._wanted: collections.OrderedDict[str, Plan] = collections.OrderedDict()  # route -> plan
        self._jobs: collections.Counter[str] = collections.Counter()
        # (route, key) -> the worker generation it ran in (results None), or the exception it raised
        self._done: collections.OrderedDict[tuple, Any] = collections.OrderedDict()
        self._busy: set[str] = set()  # routes with a job under way
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()  # a job answered: look again now, not a poll later
        #: Set while no plan is left (what a test or a warm-up waits on, instead of polling).
        self.drained = threading.Event()
        self.drained.set()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="idle-preparer")
        self._thread.start()

    def want(self, route: str, plan: Plan) -> None:
        """Prepare ``plan``'s requests in idle time: it replaces the route's older plan."""
        with self._lock:
            self._wanted.pop(route, None)
            self._jobs.pop(route, None)
            self._wanted[route] = plan  # newest last
            while len(self._wanted) > self.max_wanted:
                self._jobs.pop(self._wanted.popitem(last=False)[0], None)
            self.drained.clear()
        self._wake.set()

    def pending(self) -> bool:
        """Whether any plan is left to prepare."""
        with self._lock:
            return bool(self._wanted)

    def ready(self) -> bool:
        """Whether a plan is left and the visitors have been quiet for :attr:`quiet_s` (what
        the other of a pair taking turns waits for)."""
        return self.pending() and (self.quiet_s <= 0 or self.pool.quiet_for_s() >= self.quiet_s)

    def stop(self) -> None:
        """End the thread (jobs under way finish in the pool)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    # ---- what is done ------------------------------------------------------------------

    def _has(self, request: Request) -> bool:
        """Whether ``request`` needs no job: its answer is kept, it failed, or (answers not
        kept) it ran in the process that serves its route now."""
        done = self._done.get((request.route, request.key))
        if isinstance(done, BaseException):
            return True
        if self.results is not None:
            return self.results.peek(request.key)
        return done == self.pool.generation(request.route)

    def _look_up(self, request: Request) -> Any:
        """A plan's look-up: the kept answer, the error it failed with, or :class:`Missing`."""
        done = self._done.get((request.route, request.key))
        if isinstance(done, BaseException):
            raise done
        if self.results is None or not self.results.peek(request.key):
            raise Missing(request)
        return self.results.get(request.key, lambda: _missing(request))  # (dropped meanwhile: Missing)

    def _next(self, plan: Plan) -> Request | None:
        """The plan's next request to run, or None when it is all prepared (or cannot be)."""
        try:
            requests = plan(self._look_up)
        except Missing as missing:
            requests = [missing.request]
        except Exception as err:  # a failed answer the plan needs, or the plan's own error
            log.debug("planning %s: %r", self.what, err)
            return None
        return next((r for r in requests if not self._has(r)), None)

    def _record(self, request: Request, value: Any) -> None:
        with self._lock:
            self._done[(request.route, request.key)] = value
            self._done.move_to_end((request.route, request.key))
            while len(self._done) > MAX_DONE:
                self._done.popitem(last=False)

    def _answered(self, request: Request, generation: list[int], seen: int, status: str, answer: Any) -> None:
        with self._lock:
            self._busy.discard(request.route)
        if status != "ok":  # a job that fails would fail again: the tab asks and says why
            log.debug("preparing %s: %r", request.what, answer)
            self._record(request, answer if isinstance(answer, BaseException) else RuntimeError(answer))
        elif request.timed and self.pool.activity() != seen:
            pass  # a visitor had the cores meanwhile: its times are not the executable's; again later
        elif self.results is not None:
            self.results.put(request.key, answer)
        else:
            self._record(request, generation[0])
        for preparer in (self, self.turns_with):  # the next job, of either, may start now
            if preparer is not None:
                preparer._wake.set()

    # ---- the thread --------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            self._wake.wait(PREPARER_POLL_S)
            self._wake.clear()  # before looking: an answer from now on wakes the next look
            if self._stop.is_set():
                return
            if not self.ready() or not self.pool.idle():
                continue  # planning waits too: it takes the server's time while a page runs
            runnable = self._runnable()  # plans all prepared are dropped first (cheap: no job)
            other = self.turns_with
            if not runnable or (other is not None and other.ready() and other.started == self._other_seen):
                continue  # nothing to run, or the other's turn: it has started no job since this one's last
            for route, request in runnable:  # newest first
                if self._start(request):
                    with self._lock:
                        self.started += 1
                        self._jobs[route] += 1
                        if other is not None:
                            self._other_seen = other.started
                    if other is not None:
                        break  # one job a turn

    def _runnable(self) -> list[tuple[str, Request]]:
        """``(route, next request)`` of every plan with work left, newest first; the others
        are dropped (and the partner woken: it may have been waiting for this one's turn)."""
        with self._lock:
            wanted = list(reversed(self._wanted.items()))
        out = []
        for route, plan in wanted:
            request = self._next(plan) if self._jobs[route] < MAX_JOBS else None
            if request is not None:
                out.append((route, request))
                continue
            with self._lock:
                if self._wanted.get(route) is plan:
                    del self._wanted[route]
                    self._jobs.pop(route, None)
                if not self._wanted:
                    self.drained.set()
            if self.turns_with is not None:
                self.turns_with._wake.set()
        return out

    def _start(self, request: Request) -> bool:
        with self._lock:
            if request.route in self._busy:
                return False
            self._busy.add(request.route)
        # the process the job runs in: known once it is sent (a successor takes over then),
        # and the same until the job has answered (the worker is held meanwhile)
        generation, seen = [self.pool.generation(request.route)], self.pool.activity()
        try:
            started = self.pool.call_if_idle(
                request.job,
                *request.args,
                route=request.route,
                what=request.what,
                on_answer=lambda status, answer: self._answered(request, generation, seen, status, answer),
                own=self.own,
            )
        except Exception as err:  # the worker could not be started: try again later
            log.debug("preparing %s: %s", request.what, err)
            started = False
        if started:
            generation[0] = self.pool.generation(request.route)
        else:
            with self._lock:
                self._busy.discard(request.route)
        return started


__all__ = ["MAX_JOBS", "Plan", "Preparer"]

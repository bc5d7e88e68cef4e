"""The workers' idle time, used: what the tabs not yet opened will ask for, prepared ahead.

A visitor reads the first chart for a while before opening another tab, and meanwhile the
worker that holds their shape waits. :class:`Preparer` keeps what pages asked to have
prepared, one wish per shape (the newest: its visitor has moved on from the older values),
newest first, and one thread of its own gives each to its worker whenever that worker has
been idle (:meth:`rnnviz.serve.worker.WorkerPool.call_if_idle`), one short job at a time,
until the job answers that nothing is left. A visitor's own call waits at most for the
one job under way. Nothing here imports Streamlit or JAX.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("rnnviz.idle")

#: Seconds between looks for an idle worker (a job's answer wakes the next look at once).
POLL_S = 0.25
#: Shapes waiting at once; a newer one pushes the oldest out (its visitor has moved on).
MAX_WANTED = 8
#: Jobs one wish may start before it is given up (a job that never answers "done"): a
#: page's quiet timing, its tabs' executables (a dozen) and their answers (a score).
MAX_JOBS = 48
#: Wishes remembered as prepared, so that a page asking again costs nothing.
MAX_DONE = 512


class Preparer:
    """Jobs ``job(*args)`` run in the pool's idle time for each route wanted with ``args``,
    until one answers that nothing is left to prepare, or raises. A route holds one wish,
    named by its ``key``: a newer one for the route replaces it. A wish prepared is
    remembered with the worker process that prepared it (the pool's ``generation(route)``,
    where it has one): once a successor or a replacement serves the route, it is prepared
    again when a page asks. A wish whose job failed is not.

    Args:
      pool: a :class:`~rnnviz.serve.worker.WorkerPool` (anything with its ``call_if_idle``).
      job: a module-level function; its answer says whether it has more to do.
      what: the work in words, for the pool's messages.
      more: ``answer -> bool``: whether the job has more to do (default: the answer's truth).
      keep: ``(route, answer) -> None``, given every answer (what a job measured, for the
        server to keep), in a thread of the pool's.
      turns_with: a preparer to take turns with, one job each, that one first: while both
        are :meth:`ready`, neither starts a job before the other has started one since its
        last (two kinds of work a visitor may ask for next both progress; alone, each runs
        freely).
      max_wanted: wishes held at once (:data:`MAX_WANTED`); a newer one pushes the oldest out.
      quiet_s: start a job only once the visitors have done nothing for this long (the
        pool's ``quiet_for_s``: no page run, no visitor's job; 0: whenever the pool is
        idle): work a visitor may well not ask for waits until they are reading, so that a
        job of it is rarely under way when a visitor's call needs its worker.

    >>> import time
    >>> from rnnviz.serve.worker import WorkerPool
    >>> pool = WorkerPool(size=1)
    >>> prep = Preparer(pool, bool, "an example")  # bool("") is False: done after one job
    >>> prep.want("route", "")  # bool("")
    >>> for _ in range(40):
    ...     if prep.done_routes():
    ...         break
    ...     time.sleep(0.25)
    >>> prep.done_routes()
    ['route']
    >>> prep.stop(); pool.shutdown()
    """

    def __init__(
        self,
        pool: Any,
        job: Callable[..., Any],
        what: str,
        more: Callable[[Any], bool] = bool,
        keep: Callable[[str, Any], None] | None = None,
        turns_with: Preparer | None = None,
        max_wanted: int = MAX_WANTED,
        quiet_s: float = 0.0,
    ):
        self.pool, self.job, self.what = pool, job, what
        self.more, self.keep = more, keep
        self.turns_with, self.max_wanted, self.quiet_s = turns_with, max_wanted, quiet_s
        self.started = 0  # jobs started, all wishes together (what the other of a pair watches)
        self._other_seen = -1  # the other's `started` when this one last started a job
        if turns_with is not None:
            turns_with.turns_with = self
            self._other_seen = 0  # the other goes first
        self._wanted: collections.OrderedDict[str, tuple] = collections.OrderedDict()  # route -> args
        self._jobs: collections.Counter[str] = collections.Counter()
        # key -> the generation of the worker process that prepared it (None: given up on for
        # good): a successor or a replacement holds none of what its predecessor compiled
        self._done: collections.OrderedDict[str, int | None] = collections.OrderedDict()
        self._busy: set[str] = set()  # routes with a job under way
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()  # a job answered: look again now, not a poll later
        self._thread = threading.Thread(target=self._loop, daemon=True, name="idle-preparer")
        self._thread.start()

    def want(self, route: str, *args: Any, key: str | None = None) -> None:
        """Run ``job(*args)`` on ``route``'s worker when it is idle, until it is done: the wish
        ``key`` (default: the route), which replaces the route's older one (nothing when
        ``key`` was prepared already by the route's worker process as it is now, or given up on)."""
        key = route if key is None else key
        with self._lock:
            if key in self._done:
                if self._done[key] in (None, self._generation(route)):
                    return
                del self._done[key]  # prepared in a process that has since been replaced
            older = self._wanted.pop(route, None)
            if older is not None and older[0] != key:
                self._jobs.pop(older[0], None)
            self._wanted[route] = (key, args)  # newest last
            while len(self._wanted) > self.max_wanted:
                self._forget(next(iter(self._wanted)))
        self._wake.set()

    def pending(self) -> bool:
        """Whether any wish is left to prepare."""
        with self._lock:
            return bool(self._wanted)

    def ready(self) -> bool:
        """Whether a wish is left and the visitors have been quiet for :attr:`quiet_s` (what
        the other of a pair taking turns waits for)."""
        since = getattr(self.pool, "quiet_for_s", lambda: math.inf)
        return self.pending() and (self.quiet_s <= 0 or since() >= self.quiet_s)

    def done_routes(self) -> list[str]:
        """The wishes prepared (or given up on), oldest first: their keys."""
        with self._lock:
            return list(self._done)

    def stop(self) -> None:
        """End the thread (jobs under way finish in the pool)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def _generation(self, route: str) -> int:
        generation = getattr(self.pool, "generation", None)
        return 0 if generation is None else generation(route)

    def _forget(self, route: str) -> None:
        key, _ = self._wanted.pop(route, (None, None))
        self._jobs.pop(key, None)

    def _finish(self, route: str, key: str, generation: int | None) -> None:
        with self._lock:
            if self._wanted.get(route, (None,))[0] == key:  # not a newer wish for the route
                self._forget(route)
            self._jobs.pop(key, None)
            self._done[key] = generation
            self._done.move_to_end(key)
            while len(self._done) > MAX_DONE:
                self._done.popitem(last=False)

    def _answered(self, route: str, key: str, generation: int, status: str, answer: Any) -> None:
        with self._lock:
            self._busy.discard(route)
        if status == "ok" and self.keep is not None:
            try:
                self.keep(route, answer)
            except Exception:  # keeping is a bonus: the preparation goes on
                log.exception("keeping what preparing %s answered", route)
        if status != "ok":  # given up on for good: a job that fails would fail again
            log.debug("preparing %s stopped: %r", route, answer)
            self._finish(route, key, None)
        elif not self.more(answer):
            self._finish(route, key, generation)
        for preparer in (self, self.turns_with):  # the next job, of either, may start now
            if preparer is not None:
                preparer._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait(POLL_S)
            self._wake.clear()  # before looking: an answer from now on wakes the next look
            if self._stop.is_set():
                return
            if not self.ready():
                continue
            other = self.turns_with
            if other is not None and other.ready() and other.started == self._other_seen:
                continue  # its turn: it has not started a job since this one's last
            with self._lock:
                ready = [(r, k, a) for r, (k, a) in reversed(self._wanted.items()) if r not in self._busy]
            for route, key, args in ready:  # newest first
                if self._jobs[key] >= MAX_JOBS:
                    self._finish(route, key, None)
                    continue
                with self._lock:
                    self._busy.add(route)
                # the process the job runs in: known once it is sent (a successor takes over then),
                # and the same until the job has answered (the worker is held meanwhile)
                generation = [self._generation(route)]
                try:
                    started = self.pool.call_if_idle(
                        self.job,
                        *args,
                        route=route,
                        what=self.what,
                        on_answer=lambda status, more, route=route, key=key, gen=generation: self._answered(
                            route, key, gen[0], status, more
                        ),
                    )
                except Exception as err:  # the worker could not be started: try again later
                    log.debug("preparing %s: %s", route, err)
                    started = False
                if started:
                    generation[0] = self._generation(route)
                    with self._lock:
                        self.started += 1
                        if other is not None:
                            self._other_seen = other.started
                        if key not in self._done:  # (its answer may have finished it already)
                            self._jobs[key] += 1
                    if other is not None:
                        break  # one job a turn
                else:
                    with self._lock:
                        self._busy.discard(route)


__all__ = ["Preparer"]

"""The dashboard's worker processes: answers, errors, time limits, dead workers, abandoned
calls, routing, idle time, the shared result cache — and the dashboard's message when a
computation is stopped (pins and the URL kept).

Nothing here waits on wall time to synchronise: a job whose end the test decides waits on a
:class:`Gate`, the idle-time rules read a :class:`Clock` the test advances, and what another
thread or process does is polled with a generous deadline (:func:`_until`)."""

import math
import operator
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

import pytest

from rnnviz.config import FIELD_SPECS, ConfigError, check_field
from rnnviz.serve import worker
from rnnviz.serve.settings import IDLE_NICE, IDLE_S, MAX_GRACE_S, PAGE_DRAW_S, SPILL_S, VISIT_GRACE_S
from rnnviz.serve.worker import ComputationTimeout, ResultCache, WorkerDied, WorkerPool

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def nap(seconds: float) -> None:
    """A job that takes ``seconds`` of its worker's time: work, not the test's synchronisation."""
    time.sleep(seconds)


def held(gate: str) -> bool:
    """A job that runs until the test opens ``gate`` (:class:`Gate`); False after ten minutes."""
    for _ in range(60_000):
        if os.path.exists(gate):
            return True
        nap(0.01)
    return False


class Gate:
    """A file whose creation ends the :func:`held` jobs that wait on it."""

    def __init__(self, folder: Path, name: str = "gate"):
        self.path = str(folder / name)

    def open(self) -> None:
        Path(self.path).touch()


class Clock:
    """The pool's clock for its idle-time rules, advanced by the test alone."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _until(done: Callable[[], object], within_s: float = 60.0) -> bool:
    """Poll ``done`` until it holds, for at most ``within_s`` (generous: CI shares two cores);
    whether it held."""
    deadline = time.monotonic() + within_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _in_thread(fn: Callable, *args, **kwargs) -> Future:
    """``fn(*args, **kwargs)`` in a thread of its own: its result, or exception, to come."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as err:
            future.set_exception(err)

    threading.Thread(target=run, daemon=True).start()
    return future


def _waiting(event: threading.Event) -> Callable[[float, bool], None]:
    """An ``on_wait`` that sets ``event`` once its call waits for a busy worker."""
    return lambda elapsed, running: None if running else event.set()


def _held_back_for(pool: WorkerPool, clock: Clock, seconds: float) -> None:
    """Idle time is held back ``seconds`` from now, and no longer (the clock advances)."""
    clock.advance(seconds - 0.01)
    assert not pool.idle()
    clock.advance(0.02)
    assert pool.idle()


def _routes(pool: WorkerPool) -> tuple[str, str]:
    """Two routes that go to different workers."""
    first = pool.worker_for("a")
    other = next(r for r in (f"b{i}" for i in range(100)) if pool.worker_for(r) is not first)
    return "a", other


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def pool(clock):
    p = WorkerPool(size=2, time_limit_s=30, clock=clock)
    yield p
    p.shutdown()


def test_answers_and_errors_come_back_as_they_were(pool):
    assert pool.call(divmod, 17, 5, route="x", what="a division") == (3, 2)
    with pytest.raises(ZeroDivisionError):
        pool.call(operator.truediv, 1, 0, route="x", what="a division by zero")
    with pytest.raises(ConfigError, match=r"hidden_size=0 is not allowed: an integer in \[1, 2048\]") as err:
        pool.call(check_field, FIELD_SPECS["hidden_size"], 0, route="x", what="a check")
    assert err.value.field == "hidden_size" and err.value.value == 0
    # the same worker answered every time: a failing call does not cost the process
    assert pool.call(os.getpid, route="x", what="pid") == pool.call(os.getpid, route="x", what="pid")


def test_a_call_past_its_limit_is_stopped_its_worker_replaced_and_the_others_untouched(pool):
    stuck, free = _routes(pool)
    stuck_pid, free_pid = (
        pool.call(os.getpid, route=stuck, what="pid"),
        pool.call(os.getpid, route=free, what="pid"),
    )
    answers = {}

    def other_session():
        assert _until(lambda: pool.doing(stuck) == "a nap")
        answers["free"] = pool.call(divmod, 9, 4, route=free, what="another session's call")
        answers["at"] = time.perf_counter()

    other = _in_thread(other_session)
    with pytest.raises(
        ComputationTimeout, match=r"a nap did not finish within the 2 s limit \(stopped after \d+\.\d s\)"
    ) as err:
        pool.call(nap, 3600, route=stuck, what="a nap", time_limit_s=2)
    stopped_at = time.perf_counter()
    other.result(60)
    assert err.value.what == "a nap" and err.value.limit_s == 2 and err.value.elapsed_s >= 2
    assert answers["free"] == (2, 1) and answers["at"] < stopped_at  # answered while the other was stuck
    assert pool.restarts == 1
    new_pid = pool.call(os.getpid, route=stuck, what="pid")  # a fresh worker answers the next call
    assert new_pid != stuck_pid and pool.call(os.getpid, route=free, what="pid") == free_pid


def test_a_worker_that_dies_is_reported_and_replaced(pool):
    with pytest.raises(WorkerDied, match="exit code 3|ended before answering"):
        pool.call(os._exit, 3, route="x", what="an exit")
    assert pool.call(divmod, 7, 7, route="x", what="a division") == (1, 0)
    assert pool.generation("x") == 2  # the replacement is a second process


def test_an_abandoned_call_finishes_in_the_background_and_the_worker_serves_the_next(pool, tmp_path):
    class Rerun(Exception):
        """What Streamlit raises in the script thread when the user changes a widget."""

    def leave(elapsed, running):
        if running:
            raise Rerun

    pid, gate = pool.call(os.getpid, route="x", what="pid"), Gate(tmp_path)
    with pytest.raises(Rerun):
        pool.call(held, gate.path, route="x", what="a held job", on_wait=leave)
    assert pool.doing("x") == "a held job"  # it goes on; its answer is drained in the background
    # The next call waits for that job's answer (drained, dropped), then runs in the same worker.
    waiting = threading.Event()
    following = _in_thread(pool.call, divmod, 5, 2, route="x", what="next", on_wait=_waiting(waiting))
    assert waiting.wait(60)
    gate.open()
    assert following.result(60) == (2, 1)
    assert pool.call(os.getpid, route="x", what="pid") == pid and pool.restarts == 0


def test_a_pure_call_takes_a_free_worker_when_its_own_is_busy_and_a_stateful_one_waits(
    pool, clock, tmp_path, monkeypatch
):
    busy, free = _routes(pool)
    home, other = (pool.call(os.getpid, route=r, what="pid") for r in (busy, free))
    long_view = Gate(tmp_path, "long view")
    view = _in_thread(pool.call, held, long_view.path, route=busy, what="a long view")
    assert _until(lambda: pool.doing(busy) == "a long view")
    start = time.perf_counter()
    assert pool.call(os.getpid, route=busy, what="a light view", spill=True) == other
    assert time.perf_counter() - start >= SPILL_S  # it waited that long for its own worker first
    assert pool.doing(busy) == "a long view"  # not queued behind the long view
    waiting = threading.Event()
    step = _in_thread(pool.call, os.getpid, route=busy, what="a training step", on_wait=_waiting(waiting))
    assert waiting.wait(60) and pool.doing(busy) == "a long view"  # a stateful call waits ...
    long_view.open()
    assert step.result(60) == home and view.result(60) is True  # ... for its own worker
    # both busy: a spilling call takes whichever is free first
    gates = [Gate(tmp_path, "first"), Gate(tmp_path, "second")]
    naps = [_in_thread(pool.call, held, g.path, route=r, what="nap") for g, r in zip(gates, (busy, free))]
    assert _until(lambda: all(w.doing == "nap" for w in pool.workers))
    waiting = threading.Event()
    light_view = dict(route=busy, what="a light view", spill=True, on_wait=_waiting(waiting))
    light = _in_thread(pool.call, os.getpid, **light_view)
    assert waiting.wait(60)
    gates[1].open()
    assert light.result(60) == other and pool.doing(busy) == "nap"
    gates[0].open()
    assert [n.result(60) for n in naps] == [True, True]
    # its worker busy with idle-time work (nobody waits for it): another answers at once
    monkeypatch.setattr(worker, "SPILL_S", 3600.0)  # read when used: only that rule spills now
    clock.advance(IDLE_S)
    preparing = Gate(tmp_path, "preparing")
    assert pool.call_if_idle(held, preparing.path, route=busy, what="preparing")
    assert pool.call(os.getpid, route=busy, what="a light view", spill=True) == other
    preparing.open()


def _state(pid: int) -> str:
    """A process's state letter from ``/proc`` (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _niceness(pid: int) -> int:
    """A process's niceness from ``/proc`` (the 19th field of its stat line)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def _idle_pid(pool: WorkerPool) -> int:
    pool.idle_worker.lock.acquire()
    try:
        pool.idle_worker.ensure()
        return pool.idle_worker.process.pid
    finally:
        pool.idle_worker.lock.release()


@pytest.mark.slow
def test_idle_time_work_runs_in_its_own_lower_priority_process_and_a_visitor_never_waits_for_it(
    pool, clock, tmp_path
):
    """The tabs' idle-time work (``own``) runs in the pool's idle worker, whose niceness is
    IDLE_NICE: a visitor's job on any route starts at once beside it, and the idle job is
    never stopped (no SIGSTOP anywhere): it goes on and answers."""
    idle_pid = _idle_pid(pool)
    assert _until(lambda: _niceness(idle_pid) == IDLE_NICE)  # set as the process starts
    assert _niceness(idle_pid) == IDLE_NICE and IDLE_NICE > 0
    visitor_pids = {pool.call(os.getpid, route=r, what="pid") for r in _routes(pool)}
    assert {_niceness(p) for p in visitor_pids} == {0} and idle_pid not in visitor_pids
    clock.advance(IDLE_S)
    answers, done, gate = [], threading.Event(), Gate(tmp_path)
    work = dict(route="a", what="preparing", on_answer=lambda *a: (answers.append(a), done.set()), own=True)
    assert pool.call_if_idle(held, gate.path, **work)
    for route in _routes(pool):  # both visitor workers are free: neither waits for the idle job
        assert pool.call(divmod, 9, 2, route=route, what="a visitor's job") == (4, 1)
    assert not done.is_set()  # answered while the idle job runs (past its limit it would have ended)
    assert _state(idle_pid) != "T"
    gate.open()
    assert done.wait(60) and answers == [("ok", True)] and pool.restarts == 0


def test_a_page_run_holds_idle_time_back_until_its_grace_has_passed_and_stops_nothing(pool, clock, tmp_path):
    idle_pid = _idle_pid(pool)
    clock.advance(IDLE_S)
    answers, done, gate = [], threading.Event(), Gate(tmp_path)
    work = dict(route="a", what="preparing", on_answer=lambda *a: (answers.append(a), done.set()), own=True)
    before = pool.activity()
    assert pool.call_if_idle(held, gate.path, **work)
    pool.visit()  # a page run that calls no worker (its results are cached): the job goes on
    assert pool.activity() == before + 1  # a timing taken meanwhile is not kept (serve.idle)
    assert _state(idle_pid) != "T"
    gate.open()
    assert done.wait(60) and answers == [("ok", True)]
    assert not pool.idle()  # within the page's grace: nothing new starts
    clock.advance(VISIT_GRACE_S / 2)
    pool.visit()  # the next run: the grace counts from here
    _held_back_for(pool, clock, VISIT_GRACE_S)
    assert pool.call_if_idle(divmod, 7, 2, route="a", what="preparing", own=True)


@pytest.mark.slow
def test_a_visitors_compile_finishes_while_idle_time_holds_the_compilation_cache_lock(tmp_path, monkeypatch):
    """JAX's persistent compilation cache, held to a size cap, takes a file lock
    (``<cache>/.lockfile``, 10 s timeout) at each read and write. An idle-time job that holds
    it when a visitor arrives is never stopped, so it lets go: the visitor's job, which
    compiles a shape new to the cache (a read and a write), completes well within the lock's
    timeout, and its executable is in the cache afterwards."""
    cache = tmp_path / "jax-cache"
    monkeypatch.setenv("RNNVIZ_JAX_CACHE", str(cache))
    monkeypatch.setenv("RNNVIZ_JAX_CACHE_MB", "64")  # a cap: JAX's LRU cache, with its lock
    clock = Clock()
    pool = WorkerPool(size=1, setup="rnnviz.serve.jobs:setup", time_limit_s=120, clock=clock)
    try:
        pool.start()
        assert pool.call(os.getpid, route="a", what="ready") > 0  # set up: the default compiled
        clock.advance(IDLE_S)
        # the idle worker sets up at its lower priority, which a loaded machine may starve for
        # longer than an idle-time job's limit: this test is not about that limit
        monkeypatch.setattr(worker, "IDLE_LIMIT_S", 120.0)
        first: Future = Future()
        answer = dict(on_answer=lambda *a: first.set_result(a), own=True)
        assert pool.call_if_idle(nap, 0, route="a", what="a first job", **answer)
        assert first.result(120) == ("ok", None)  # set up, and this module imported there
        held, done, holds = [], threading.Event(), tmp_path / "holds"
        work = dict(route="a", what="holding the lock", on_answer=lambda *a: (held.append(a), done.set()))
        assert pool.call_if_idle(_hold_cache_lock, str(cache), 3.0, str(holds), **work, own=True)
        assert _until(holds.exists)
        pool.visit()  # a visitor arrives: nothing is stopped
        began = time.monotonic()
        key = _key(hidden_size=5, seq_len=7, batch_size=2, input_size=2)
        from rnnviz.serve import jobs

        a = pool.call(jobs.analysis, key, route="a", what="a visitor's analysis")
        took = time.monotonic() - began
        assert a.config.hidden_size == 5 and not a.timing.cache_hit
        assert took < 9.0, f"the visitor waited {took:.1f} s: the lock's 10 s timeout came near"
        assert done.wait(30.0) and held == [("ok", True)]
        stats = pool.call(jobs.compilation_cache_stats, route="a", what="cache events")
        assert stats.get("compile_requests_use_cache", 0) > 0
    finally:
        pool.shutdown()


def _key(**fields) -> str:
    import json

    from rnnviz import RunConfig

    return json.dumps(RunConfig(**fields).to_dict(), sort_keys=True)


def _hold_cache_lock(cache: str, seconds: float, holds: str) -> bool:
    """An idle-time job that takes the compilation cache's lock, as JAX does, for a while
    (creating the file ``holds`` once it has it)."""
    import filelock

    with filelock.FileLock(f"{cache}/.lockfile", timeout=30):
        Path(holds).touch()
        nap(seconds)
    return True


def test_a_fresh_pages_drawing_counts_from_its_runs_end_and_a_reruns_end_adds_nothing(pool, clock):
    clock.advance(IDLE_S)
    assert pool.idle()
    pool.visit()  # a fresh page whose run takes longer than the grace (it compiled, say)
    clock.advance(VISIT_GRACE_S + 1.0)
    assert pool.idle()  # its begin's grace is over
    pool.drawn(fresh=True)  # it ends: its browser draws the page it sent
    _held_back_for(pool, clock, PAGE_DRAW_S)
    pool.visit()  # a rerun as long: its end holds nothing back
    clock.advance(VISIT_GRACE_S + 1.0)
    pool.drawn()
    assert pool.idle()


def test_fresh_pages_add_up_their_grace_and_reruns_do_not(pool, clock):
    assert PAGE_DRAW_S < VISIT_GRACE_S < 4 * PAGE_DRAW_S < MAX_GRACE_S < 40 * PAGE_DRAW_S
    clock.advance(IDLE_S)
    pool.visit()
    pool.drawn(fresh=True)  # one fresh page, a quick run: its drawing ends within the grace
    _held_back_for(pool, clock, VISIT_GRACE_S)
    for _ in range(4):  # a class opening the page at once: their drawing, one after another
        pool.visit()
        pool.drawn(fresh=True)
    pool.visit()  # a rerun within that: it adds nothing (its own grace ends sooner)
    pool.drawn()
    _held_back_for(pool, clock, 4 * PAGE_DRAW_S)
    for _ in range(4):  # four reruns, a second apart: the grace counts from the last
        pool.visit()
        clock.advance(1.0)
        pool.drawn()
    _held_back_for(pool, clock, VISIT_GRACE_S - 1.0)
    for _ in range(40):  # a flood of fresh pages: their drawing held to the cap
        pool.drawn(fresh=True)
    _held_back_for(pool, clock, MAX_GRACE_S)


def test_an_idle_time_job_may_follow_another_at_once_but_waits_after_a_visitors_job(pool, clock):
    """IDLE_S is the gap between two calls of one script run: only a visitor's job starts it.
    Idle-time jobs come one after another (a step each), with no wait between them."""
    clock.advance(IDLE_S)  # the last visitor left that long ago; from here the clock stands still
    route, answers = "x", []
    work = dict(route=route, what="idle work", on_answer=lambda *a: answers.append(a))
    for n in range(3):
        assert pool.call_if_idle(divmod, 7, 2, **work)  # at once, the last one just answered
        assert _until(lambda: len(answers) == n + 1 and not pool.worker_for(route).lock.locked())
    assert answers == [("ok", (3, 1))] * 3
    assert pool.call(divmod, 9, 2, route=route, what="a visitor's job") == (4, 1)
    assert not pool.idle() and not pool.call_if_idle(divmod, 7, 2, **work)  # their next call may come


def test_start_starts_every_worker_before_any_call():
    pool = WorkerPool(size=2)
    try:
        assert pool.pids() == []
        pool.start()
        assert len(pool.pids()) == 3  # both and the idle worker set up while the server goes on
        a, b = _routes(pool)
        visitors = {pool.call(os.getpid, route=r, what="pid") for r in (a, b)}
        assert visitors | {pool.idle_worker.process.pid} == set(pool.pids()) and len(visitors) == 2
    finally:
        pool.shutdown()


def test_routes_are_stable_across_processes():
    a, b = WorkerPool(size=2), WorkerPool(size=2)
    assert [a.worker_for(r).index for r in "pqrstu"] == [b.worker_for(r).index for r in "pqrstu"]
    assert {a.worker_for(r).index for r in map(str, range(50))} == {0, 1}


def test_the_result_cache_computes_a_key_once_while_others_wait_and_forgets_failures():
    cache, calls, release, waiting = ResultCache(max_entries=2), [], threading.Event(), set()

    def slow():
        calls.append(1)
        assert release.wait(60)
        return 42

    def ask():
        return cache.get("k", slow, on_wait=lambda *_: waiting.add(threading.get_ident()))

    asks = [_in_thread(ask) for _ in range(3)]
    assert _until(lambda: len(waiting) == 2)  # one computes, the two others wait for it
    release.set()
    assert [a.result(60) for a in asks] == [42] * 3
    assert calls == [1] and cache.get("k", lambda: 0) == 42
    with pytest.raises(ZeroDivisionError):
        cache.get("bad", lambda: 1 / 0)
    assert not cache.peek("bad") and cache.get("bad", lambda: 7) == 7
    cache.get("third", lambda: 3)
    assert not cache.peek("k")  # least recently used, dropped past max_entries


def test_the_dashboard_says_what_was_stopped_and_keeps_pins_and_url(monkeypatch):
    from apptest_helpers import run_app

    from rnnviz.ui import calls

    real = WorkerPool(size=1, setup="rnnviz.serve.jobs:setup", time_limit_s=60)
    monkeypatch.setattr(calls, "pool", lambda: real)  # this test needs real worker processes
    try:
        at = run_app({"tab": "Compare", "seq_len": "21", "hidden_size": "5"})
        at.button(key="pin").click().run()
        pins = list(at.session_state["pins"])
        assert len(pins) == 1 and not at.exception and not at.error
        real.time_limit_s = 0.001  # every new computation is "too slow" now
        at.number_input(key="cfg_seq_len").set_value(23).run()  # a config not computed yet
        assert not at.exception
        text = " ".join(e.value for e in at.error)
        assert "the analysis of simple T=23 H=5" in text and "did not finish within 0.001 s" in text, text
        assert "Shrink the sequence length T" in text and "pins, trained runs and URL are kept" in text
        assert real.restarts == 1 and dict(at.query_params).get("seq_len") == "23"
        assert list(at.session_state["pins"]) == pins
        real.time_limit_s = 60
        at.number_input(key="cfg_seq_len").set_value(24).run()  # a fresh worker serves the next change
        assert not at.exception and not at.error and list(at.session_state["pins"]) == pins
    finally:
        real.shutdown()


def test_a_worker_keeps_its_executables_so_a_value_change_does_not_recompile(pool):
    import json

    from rnnviz import RunConfig
    from rnnviz.serve import jobs

    def ask(**values):
        cfg = RunConfig(hidden_size=6, input_size=3, seq_len=9, batch_size=2, **values)
        return pool.call(
            jobs.analysis, json.dumps(cfg.to_dict(), sort_keys=True), route="one shape", what="an analysis"
        )

    first = ask(seed=0)
    later = [ask(seed=1), ask(recurrent_gain=0.7), ask(input_scale=2.0)]
    # One compile, when the shape was first asked for: every later call reports that same one.
    assert first.timing.compile_s > 0 and all(
        a.timing.cache_hit and a.timing.compile_s == first.timing.compile_s for a in later
    )
    assert len({float(a.loss) for a in [first, *later]}) == 4  # each is its own computation


def test_a_stuck_worker_ends_when_its_server_is_gone(tmp_path):
    """A server killed outright (no clean-up) leaves no worker behind, even a stuck one."""
    import signal
    import subprocess
    import sys

    script = tmp_path / "server.py"
    script.write_text(
        "import signal\n"
        "from rnnviz.serve.worker import WorkerPool\n"
        "pool = WorkerPool(size=1)\n"
        "pool.call(divmod, 1, 1, route='r', what='start')\n"
        "print(pool.workers[0].process.pid, flush=True)\n"
        "said = []\n"
        "def inside(elapsed, running):\n"
        "    if running and not said:\n"
        "        said.append(print('inside', flush=True))\n"
        "pool.call(signal.pause, route='r', what='stuck', on_wait=inside)\n"  # it never returns
    )
    server = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    stuck = int(server.stdout.readline())
    assert server.stdout.readline() == "inside\n"  # the worker has had its endless call a while
    server.send_signal(signal.SIGKILL)
    server.wait(timeout=30)

    def ended() -> bool:
        try:  # gone, or ended and waiting for init to reap it
            return "\nState:\tZ" in Path(f"/proc/{stuck}/status").read_text()
        except FileNotFoundError:
            return True

    if not _until(ended, within_s=15.0):
        os.kill(stuck, signal.SIGKILL)
        pytest.fail("the stuck worker outlived its server by 15 s")


def test_a_job_runs_in_idle_time_only_and_a_visitor_waits_for_that_one_job_alone(pool, clock, tmp_path):
    answers = []
    on_answer = lambda status, value: answers.append((status, value))  # noqa: E731
    route = "x"
    pool.call(divmod, 1, 1, route=route, what="a visitor's call")
    # just used: not idle; nothing is started
    assert not pool.call_if_idle(divmod, 7, 2, route=route, what="idle work", on_answer=on_answer)
    clock.advance(IDLE_S)
    gate = Gate(tmp_path, "idle work")
    assert pool.call_if_idle(held, gate.path, route=route, what="idle work", on_answer=on_answer)
    assert not pool.call_if_idle(divmod, 7, 2, route=route, what="idle work")  # busy with it now
    assert pool.doing(route) == "idle work"  # what a visitor's waiting line names
    waiting = threading.Event()
    visitor = _in_thread(pool.call, divmod, 9, 4, route=route, what="a visit", on_wait=_waiting(waiting))
    assert waiting.wait(60)  # the visitor waits for that one job ...
    gate.open()
    assert visitor.result(60) == (2, 1) and pool.restarts == 0  # ... and no longer: nothing was stopped
    assert _until(lambda: len(answers) == 1)  # handed over as the worker was freed
    assert answers == [("ok", True)]
    # a visitor's job on the other worker: the cores are shared, so no idle-time job starts
    other = next(r for r in (f"b{i}" for i in range(100)) if pool.worker_for(r) is not pool.worker_for(route))
    clock.advance(IDLE_S)
    visit = Gate(tmp_path, "a visit")
    visitor = _in_thread(pool.call, held, visit.path, route=other, what="a visit")
    assert _until(lambda: pool.doing(other) == "a visit")
    assert not pool.idle() and not pool.call_if_idle(divmod, 7, 2, route=route, what="idle work")
    visit.open()
    assert visitor.result(60) is True
    assert not pool.idle()  # free for less than IDLE_S yet
    clock.advance(IDLE_S)
    assert pool.call_if_idle(operator.truediv, 1, 0, route=route, what="idle work", on_answer=on_answer)
    assert _until(lambda: len(answers) == 2)
    assert answers[1][0] == "error" and isinstance(answers[1][1], ZeroDivisionError)
    # a job past its limit: its worker is replaced, and the answer says so
    late = dict(route=route, what="idle work", time_limit_s=0.5, on_answer=on_answer)
    assert pool.call_if_idle(nap, 60, **late)
    assert pool.call(divmod, 5, 2, route=route, what="next") == (2, 1) and pool.restarts == 1
    assert _until(lambda: len(answers) == 3)
    assert answers[2][0] == "error" and isinstance(answers[2][1], ComputationTimeout)


def test_the_phase_job_at_a_small_shape_goes_through_the_pages_analysis_and_compiles_no_sweep():
    """After a page's analysis, the Phase diagram's job at a small shape (its sweep not
    compiled by idle time) runs the grid through that executable, point by point
    (:func:`rnnviz.studies.sweep.sweep_reusing`): no sweep is compiled, and its frame is the
    sweep's, part by part."""
    import json

    import numpy as np

    from rnnviz import RunConfig
    from rnnviz.serve import jobs
    from rnnviz.studies.sweep import sweep, sweep_executable

    cfg = RunConfig(cell="lstm", hidden_size=3, input_size=2, seq_len=6, batch_size=2, seed=2)
    key = json.dumps(cfg.to_dict(), sort_keys=True)
    jobs.analysis(key)
    compiled = sweep_executable.cache_info().misses
    parts = [jobs.phase(key, 0.5, 1.5, 5, 2, part, 2)[0] for part in range(2)]
    assert sweep_executable.cache_info().misses == compiled
    for part, gains in zip(parts, ([0.5, 1.0, 1.5], [0.75, 1.25]), strict=True):  # every 2nd gain
        want = sweep(cfg, {"recurrent_gain": gains, "seed": [2, 3]})
        assert list(part.columns) == list(want.columns) and len(part) == len(want)
        np.testing.assert_allclose(part.recurrent_gain, want.recurrent_gain)
        np.testing.assert_allclose(part.log10_grad_norm, want.log10_grad_norm, atol=1e-4)


def test_the_visitors_are_quiet_only_after_their_page_run_and_their_last_job(pool, clock, tmp_path):
    """quiet_for_s, what quiet_s waits for: 0 while a visitor's job runs (a long view being
    computed is not being read), and counted from its end or from a page run's begin."""
    assert pool.quiet_for_s() == math.inf
    gate = Gate(tmp_path)
    job = _in_thread(pool.call, held, gate.path, route="a", what="a view")
    assert _until(lambda: pool.quiet_for_s() == 0.0)
    clock.advance(5.0)
    assert pool.quiet_for_s() == 0.0
    gate.open()
    assert job.result(60) is True
    assert pool.quiet_for_s() == 0.0  # counted from the job's end (the clock stood still since)
    clock.advance(0.5)
    assert pool.quiet_for_s() == pytest.approx(0.5)
    pool.visit()
    assert pool.quiet_for_s() == 0.0


@pytest.mark.slow
def test_idle_time_compiles_the_other_cells_at_a_shape_in_every_worker():
    """calls.prepare_neighbours: each cell one switch away is compiled by every worker, the
    route's own first, so the page's analysis compiles nothing (a cache hit) in whichever
    worker takes it (its own, or another when its own is busy: spill)."""
    import json

    from rnnviz import RunConfig
    from rnnviz.engine.prepare import static_config
    from rnnviz.serve import jobs
    from rnnviz.serve.idle import Preparer
    from rnnviz.serve.requests import Request

    def key(cfg):
        return json.dumps(cfg.to_dict(), sort_keys=True)

    def route(cfg):  # requests.route without a data set: the static config's key
        return key(static_config(cfg))

    pool = WorkerPool(size=2, time_limit_s=30)  # the real clock: the preparer waits for idle time
    page = RunConfig(cell="lstm", hidden_size=5, input_size=2, seq_len=7, batch_size=2, forget_bias=1.0)
    others = [page.with_cell(c) for c in ("gru", "simple", "minlstm")]
    prep = Preparer(pool, None, "compiling a shape", max_wanted=6)
    try:
        for other in others:
            routes = pool.routes_to_each(route(other))
            assert routes[0] == route(other) and {pool.worker_for(r).index for r in routes} == {0, 1}
            for to in routes:  # a plan per worker (named by its route)
                compile_it = Request(jobs.compile_shape, (key(static_config(other)), False), to, "compiling")
                prep.want(to, lambda look_up, r=compile_it: [r])
        assert prep.drained.wait(180.0)
        for other in others:
            for to in pool.routes_to_each(route(other)):
                assert pool.call(jobs.is_compiled, key(other), route=to, what="a look-up")
                a = pool.call(jobs.analysis, key(other), route=to, what="the analysis")
                assert a.timing.cache_hit and a.config == other
    finally:
        prep.stop()
        pool.shutdown()


def test_idle_time_then_compiles_the_teaching_presets_shapes_each_in_its_own_worker(monkeypatch):
    """calls.prepare_neighbours after the other cells: one wish per teaching preset's shape
    (its static config), the page's own shape left out, each in the worker its route goes to;
    none with a data set. The wishes reach the preparer newest first, so the first one listed
    is served first (the cells, then the presets in their list's order)."""
    import json

    from rnnviz import RunConfig
    from rnnviz.base.presets import PRESETS
    from rnnviz.engine.prepare import static_config
    from rnnviz.ui import calls

    monkeypatch.setattr(
        calls, "session_route", lambda cfg: json.dumps(static_config(cfg).to_dict(), sort_keys=True)
    )
    page = RunConfig(cell="lstm", seq_len=100)  # the shape of "LSTM with forget bias 1" and "… 0"
    shapes = calls.preset_shapes(page)
    every = {static_config(p.config()) for p in PRESETS.values()}
    assert len(shapes) == len(every) - 1 and static_config(page) not in {static_config(c) for c in shapes}
    assert {static_config(c) for c in shapes} | {static_config(page)} == every
    assert len(calls.preset_shapes()) == len(every)  # one per shape, each preset's own config
    assert all(c in [p.config() for p in PRESETS.values()] for c in shapes)

    class Pool:  # two workers: a route and its twin
        def routes_to_each(self, route):
            return [route, route + "#twin"]

    wanted = []

    class Prep:
        def want(self, to, plan):
            (request,) = plan(None)
            assert request.route == to
            wanted.append((to, *request.args))

    monkeypatch.setattr(calls, "pool", Pool)
    monkeypatch.setattr(calls, "neighbour_preparer", Prep)
    monkeypatch.setattr(calls, "session_key", lambda cfg, trained=True: f"key of {calls.session_route(cfg)}")
    for source, with_presets in ((None, True), ("digits", False)):
        monkeypatch.setattr(calls.st, "session_state", {"data_source": source})
        wanted.clear()
        calls.prepare_neighbours(page)
        served = wanted[::-1]  # the newest wish is served first
        cells = calls.neighbours(static_config(page))
        twins = [
            (to, f"key of {calls.session_route(c)}", False)
            for c in cells
            for to in Pool().routes_to_each(calls.session_route(c))
        ]
        assert served[: 2 * len(cells)] == twins
        at_cells = {calls.session_route(c) for c in cells}  # here "Vanishing" is the simple cell's shape
        presets = [(calls.session_route(c), f"key of {calls.session_route(c)}", True) for c in shapes]
        presets = [p for p in presets if p[0] not in at_cells]
        assert len(presets) == len(shapes) - 1
        assert served[2 * len(cells) :] == (presets if with_presets else [])


def test_a_preset_prepared_in_idle_time_leaves_its_analysis_nothing_to_compile_log_pass_included():
    """jobs.compile_shape with ``run`` (the presets' wishes): a config whose float32 gradient
    underflows (gain 0.02 over 30 steps) gets its log-magnitude pass compiled too, so its
    analysis afterwards compiles nothing; without ``run`` only the analysis is compiled."""
    import json

    from rnnviz import RunConfig
    from rnnviz.analysis import compile_analysis, is_compiled
    from rnnviz.serve import jobs

    def key(cfg):
        return json.dumps(cfg.to_dict(), sort_keys=True)

    under = RunConfig(hidden_size=4, input_size=2, seq_len=30, batch_size=2, recurrent_gain=0.02)
    assert jobs.compile_shape(key(under), True) is False  # one call prepares it
    assert compile_analysis(under.replace(seed=5), log_pass=True) is False  # nothing left to compile
    assert jobs.analysis(key(under.replace(seed=5))).log10_grad_norms[0] < -30  # the log pass ran
    plain = under.replace(hidden_size=3)
    assert jobs.compile_shape(key(plain)) is False and is_compiled(plain)
    assert compile_analysis(plain, log_pass=True) is True  # the log pass was left to compile


@pytest.mark.slow
def test_a_stuck_idle_job_holds_its_worker_no_longer_than_the_pools_limit(clock):
    """A stuck worker took an idle-time job: the visitor who then asks waits for the pool's
    own limit at most, and is answered by a new worker."""
    pool = WorkerPool(size=1, time_limit_s=1.5, clock=clock)
    try:
        pool.call(divmod, 1, 1, route="x", what="a first call")
        clock.advance(IDLE_S)
        assert pool.call_if_idle(nap, 3600, route="x", what="idle work")  # no limit given
        start = time.perf_counter()
        assert pool.call(divmod, 9, 4, route="x", what="a visitor's call") == (2, 1)
        assert time.perf_counter() - start < 10 and pool.restarts == 1
    finally:
        pool.shutdown()


def test_the_devices_tab_reuses_the_strategies_rows_this_worker_just_timed(monkeypatch):
    """On a machine of one device, a strategy the Strategies tab timed at a key (with at least
    as many runs allowed, or fewer but already within the precision) is the Devices tab's live
    row, not timed again; one timed with fewer runs allowed and a wider interval, one not
    timed yet, and one whose timing a pause cut into are timed."""
    import json

    from rnnviz import RunConfig
    from rnnviz.serve import jobs

    cfg = RunConfig(cell="gru", hidden_size=4, input_size=2, seq_len=5, batch_size=2)
    key = json.dumps(cfg.to_dict(), sort_keys=True)
    timed = []
    real = jobs.run_on_devices

    def recorded(cfg, *, strategies, **kw):
        timed.append(tuple(strategies))
        return real(cfg, strategies=strategies, **kw)

    monkeypatch.setattr(jobs, "run_on_devices", recorded)
    row = jobs.strategies_table(key, 3, ("per_step",)).iloc[0]
    jobs.strategies_table(key, 1, ("fused",))  # fewer runs allowed than the Devices tab asks
    live = jobs.devices_live(key, 3, ("accumulate", "per_step", "fused"))
    assert timed == [("accumulate", "fused")]  # per_step is the Strategies row
    assert list(live["strategy"]) == ["accumulate", "per_step", "fused"]
    assert list(live.columns) == list(real(cfg, strategies=("accumulate",), repeats=1).columns)
    device = jobs.present_devices()[0]
    reused = live.iloc[1]
    assert (reused["device_kind"], reused["device_name"], reused["device_id"]) == (
        device.platform,
        str(device.device_kind),
        device.id,
    )
    for col in ("compile_s", "run_s", "run_halfwidth_s", "repeats", "peak_bytes", "loss", "quick_compiled"):
        assert reused[col] == row[col], col
    assert reused["max_grad_diff"] == row["max_abs_diff"]
    assert live.iloc[0]["loss"] == reused["loss"]  # the same analysis under another strategy
    # allowed fewer runs than the Devices tab asks: reused when its interval already met the
    # precision (more runs would have stopped there), timed again when it did not
    kept = jobs._TIMED_ROWS[key, "per_step"][1]
    kept.update(repeats=3, run_halfwidth_s=0.05 * kept["run_s"])
    timed.clear()
    assert jobs.devices_live(key, 5, ("per_step",)).iloc[0]["run_halfwidth_s"] == kept["run_halfwidth_s"]
    assert timed == []
    kept.update(run_halfwidth_s=0.5 * kept["run_s"])
    jobs.devices_live(key, 5, ("per_step",))
    assert timed == [("per_step",)]


def test_the_idle_worker_runs_its_own_setup_and_the_visitors_workers_theirs(tmp_path, monkeypatch):
    """``idle_setup`` runs in the idle worker instead of ``setup`` (the dashboard's compiles
    nothing there: no visitor's first call waits on it)."""
    monkeypatch.setenv("RNNVIZ_TEST_SETUP_DIR", str(tmp_path))
    pool = WorkerPool(size=2, setup="setups:visitors", idle_setup="setups:idle")
    try:
        pool.start()
        pids = {pool.call(os.getpid, route=r, what="pid") for r in _routes(pool)}
        idle = _idle_pid(pool)
        assert _until(lambda: len(list(tmp_path.iterdir())) == 3)
        assert {p.name for p in tmp_path.iterdir()} == {f"visitors-{p}" for p in pids} | {f"idle-{idle}"}
    finally:
        pool.shutdown()
    assert WorkerPool(size=1, setup="a:b").idle_worker.setup == "a:b"  # by default the same setup

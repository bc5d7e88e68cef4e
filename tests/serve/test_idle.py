"""Idle-time preparation (:mod:`rnnviz.serve.idle`): plans of requests, run one job at a time
in a pool's idle time, the answers kept where the tabs look; and the dashboard's plans,
which are exactly what its closed tabs declare (``requests(ctx)``).

The pools here are fakes that run a job at once in the calling thread: what is tested is
the order and the bookkeeping, each waited on by the preparer's ``drained`` event.
"""

from __future__ import annotations

import json
import operator
import threading
import types

import pandas as pd
import pytest
from apptest_helpers import fake_context
from streamlit.testing.v1 import AppTest

from rnnviz import RunConfig
from rnnviz.serve import idle
from rnnviz.serve.idle import Preparer
from rnnviz.serve.requests import Missing, Request, jobs
from rnnviz.serve.worker import ResultCache

WITHIN_S = 60.0


class _Pool:
    """A pool whose workers are idle once ``opened`` is set; it runs a job at once, as the
    worker would (an exception is answered as an error), and records each request's job."""

    def __init__(self, opened: bool = True):
        self.opened = threading.Event()
        if opened:
            self.opened.set()
        self.ran: list[tuple] = []
        self.generations: dict[str, int] = {}

    def generation(self, route: str) -> int:
        return self.generations.get(route, 1)

    def idle(self) -> bool:  # (call_if_idle decides)
        return True

    def activity(self) -> int:  # no visitor
        return 0

    def quiet_for_s(self) -> float:
        return float("inf")

    def call_if_idle(self, fn, *args, route, what, on_answer, own=False):
        if not self.opened.is_set():
            return False
        self.ran.append((fn.__name__, *args))
        try:
            answer = fn(*args)
        except Exception as err:
            on_answer("error", err)
        else:
            on_answer("ok", answer)
        return True


def _request(job, *args, route="r") -> Request:
    return Request(job, args, route, f"{job.__name__}{args}")


def _drained(*preparers: Preparer) -> None:
    for prep in preparers:
        assert prep.drained.wait(WITHIN_S), f"{prep.what}: plans left"


def test_a_plan_runs_each_missing_request_once_and_its_answers_are_kept_under_the_requests_keys():
    pool, cache = _Pool(), ResultCache()
    prep = Preparer(pool, cache, "negating")
    try:
        plan = [_request(operator.neg, n) for n in (1, 2, 3)]
        prep.want("shape", lambda look_up: plan)
        _drained(prep)
        assert pool.ran == [("neg", 1), ("neg", 2), ("neg", 3)]
        assert [cache.get(r.key, lambda: None) for r in plan] == [-1, -2, -3]
        prep.want("shape", lambda look_up: plan)  # asked again: nothing left to run
        _drained(prep)
        assert len(pool.ran) == 3
    finally:
        prep.stop()


def test_a_plan_that_needs_an_answer_to_decide_has_it_computed_first():
    """A tab's budget needs the shape's quiet timing: the plan raises Missing for it, that
    request runs, then the plan decides with its answer."""
    pool, cache = _Pool(), ResultCache()
    prep = Preparer(pool, cache, "planning")
    unit = _request(abs, -4)

    def plan(look_up) -> list[Request]:
        n = look_up(unit)  # Missing until it is there
        return [_request(operator.neg, i) for i in range(n)]

    try:
        prep.want("shape", plan)
        _drained(prep)
        assert pool.ran == [("abs", -4), ("neg", 0), ("neg", 1), ("neg", 2), ("neg", 3)]
    finally:
        prep.stop()


def test_a_route_holds_one_plan_the_newest_and_a_newer_one_replaces_it():
    """New values at a shape replace its older plan (its visitor moved on)."""
    pool, cache = _Pool(opened=False), ResultCache()
    prep = Preparer(pool, cache, "negating")
    try:
        prep.want("shape", lambda look_up: [_request(operator.neg, 1)])
        prep.want("shape", lambda look_up: [_request(operator.neg, 2)])  # before any worker was idle
        pool.opened.set()
        _drained(prep)
        assert pool.ran == [("neg", 2)]
    finally:
        prep.stop()


def test_a_wish_and_each_answer_start_the_next_job_at_once_not_a_poll_later(monkeypatch):
    """The loop looks for an idle worker every PREPARER_POLL_S, but a plan or an answer wakes it."""
    monkeypatch.setattr(idle, "PREPARER_POLL_S", 3600.0)  # no look would come by polling in this test
    pool, cache = _Pool(), ResultCache()
    first = Preparer(pool, cache, "tabs")
    second = Preparer(pool, None, "cells", turns_with=first)
    try:
        first.want("page", lambda look_up: [_request(operator.neg, n, route="page") for n in range(4)])
        second.want("cell", lambda look_up: [_request(operator.pos, 9, route="cell")])
        _drained(first, second)
        assert sorted(pool.ran) == [("neg", 0), ("neg", 1), ("neg", 2), ("neg", 3), ("pos", 9)]
    finally:
        first.stop()
        second.stop()


def test_two_preparers_take_turns_a_job_each_and_alone_each_runs_freely():
    """The tabs of the page (calls.preparer) and the cells a visitor may switch to
    (calls.neighbour_preparer) take turns, the tabs first: neither waits for all of the other."""
    pool = _Pool(opened=False)
    first = Preparer(pool, ResultCache(), "tabs")
    second = Preparer(pool, None, "cells", turns_with=first)
    try:
        for cell in ("d", "c", "b", "a"):  # the newest first: a, b, c, d
            second.want(cell, lambda look_up, cell=cell: [_request(str, cell, route=cell)])
        first.want("page", lambda look_up: [_request(operator.neg, n, route="page") for n in (1, 2, 3)])
        pool.opened.set()
        _drained(first, second)
        one = [("neg", 1), ("str", "a"), ("neg", 2), ("str", "b"), ("neg", 3), ("str", "c"), ("str", "d")]
        assert pool.ran == one  # the tabs done: the cells go on alone
        first.want("page", lambda look_up: [_request(operator.neg, n, route="page") for n in (4, 5, 6)])
        _drained(first)
        assert pool.ran[len(one) :] == [("neg", 4), ("neg", 5), ("neg", 6)]
    finally:
        first.stop()
        second.stop()


def test_a_preparer_with_quiet_s_waits_for_visitors_to_read_and_never_holds_up_its_partner():
    """The other cells (quiet_s) start only once no page has run for quiet_s; meanwhile the
    tabs' preparation, whose turn partner they are, runs alone."""
    pool = _Pool()
    pool.since = 1.0
    pool.quiet_for_s = lambda: pool.since
    first = Preparer(pool, ResultCache(), "tabs")
    second = Preparer(pool, None, "cells", turns_with=first, quiet_s=5.0)
    try:
        second.want("a", lambda look_up: [_request(str, "a", route="a")])
        first.want("page", lambda look_up: [_request(operator.neg, 1, route="page")])
        first.want("other page", lambda look_up: [_request(operator.neg, 2, route="other page")])
        _drained(first)
        assert pool.ran == [("neg", 2), ("neg", 1)] and second.pending() and not second.ready()
        pool.since = 6.0  # the visitors have been reading
        _drained(second)
        assert pool.ran[2:] == [("str", "a")]
    finally:
        first.stop()
        second.stop()


def test_without_kept_answers_a_request_runs_again_in_a_replaced_process_and_a_failed_one_never():
    """Compiling ahead leaves its executables in the process that ran it: once a successor
    or a replacement serves the route, a plan asking again runs it anew. A job that failed
    is not run again, whatever the process (it would fail again, or kill its worker)."""
    pool = _Pool()
    prep = Preparer(pool, None, "compiling")

    def broken():
        raise RuntimeError("no")

    plans = {
        "shape": lambda look_up: [_request(operator.neg, 1, route="shape")],
        "broken": lambda look_up: [_request(broken, route="broken")],
    }
    try:
        for route, plan in plans.items():
            prep.want(route, plan)
        _drained(prep)
        for route, plan in plans.items():  # the same processes: nothing to do
            prep.want(route, plan)
        _drained(prep)
        assert sorted(pool.ran) == [("broken",), ("neg", 1)]
        pool.generations = {"shape": 2, "broken": 2}  # both workers replaced
        for route, plan in plans.items():
            prep.want(route, plan)
        _drained(prep)
        assert sorted(pool.ran) == [("broken",), ("neg", 1), ("neg", 1)]
    finally:
        prep.stop()


def test_a_timed_answer_a_visitor_overlapped_is_run_again_and_a_plan_that_never_keeps_is_given_up(
    monkeypatch,
):
    """Run times measured while a visitor had the cores (a page ran, or a visitor's job) are
    not the executable's alone, so such an answer is dropped and its request run again (at
    most MAX_JOBS times per plan); an untimed answer is kept all the same."""
    count = iter(range(10**6))
    monkeypatch.setattr(idle, "MAX_JOBS", 3)
    pool, cache = _Pool(), ResultCache()
    pool.activity = lambda: next(count)  # a visitor did something during every job
    prep = Preparer(pool, cache, "timing")
    timed = Request(operator.neg, (1,), "r", "a timed row", timed=True)
    untimed = _request(operator.neg, 2)
    try:
        prep.want("r", lambda look_up: [timed])
        _drained(prep)
        assert pool.ran == [("neg", 1)] * 3 and not cache.peek(timed.key)  # given up after 3
        prep.want("r", lambda look_up: [untimed])
        _drained(prep)
        assert cache.get(untimed.key, lambda: None) == -2
        pool.activity = lambda: 7  # nobody else
        prep.want("r", lambda look_up: [timed])
        _drained(prep)
        assert cache.get(timed.key, lambda: None) == -1
    finally:
        prep.stop()


# ---- the dashboard's plans: what its closed tabs declare ------------------------------------


def _tab(title: str):
    from rnnviz.ui.tabs import TABS

    return next(t for t in TABS if t.TITLE == title)


def _render(tab, ctx):
    tab.render(ctx)


def _prepared(ctx, closed: tuple, declared: str, cache: ResultCache):
    """Idle time's plan of what the ``closed`` tabs declare (their ``declared`` function of an
    idle copy of ``ctx``, as :func:`rnnviz.ui.calls.prepare_tabs` makes it), run to the end on
    a fake pool: the pool (what ran) and whether ``cache`` holds a request's answer."""
    pool = _Pool()
    prep = Preparer(pool, cache, "preparing the other tabs")

    def has(request: Request) -> bool:
        return request.cached and cache.peek(request.key)

    def plan(look_up) -> list[Request]:
        idle_ctx = ctx._replace(get=look_up, has=has, idle=True)
        return [r for tab in closed for r in getattr(tab, declared)(idle_ctx)]

    try:
        prep.want("page", plan)
        _drained(prep)
    finally:
        prep.stop()
    return pool, has


@pytest.mark.slow
def test_idle_time_computes_what_the_closed_tabs_declare_and_then_the_tabs_compute_nothing():
    """What the budgets need first (the quiet timing: every budget counts in it), then each tab's requests
    in the tabs' order; opened afterwards, each tab draws from those answers alone (its
    look-up fails on anything idle time did not compute)."""
    cfg = RunConfig(
        cell="gru", hidden_size=4, input_size=2, seq_len=6, batch_size=2, seed=2, recurrent_gain=0.8
    )
    key = json.dumps(cfg.to_dict(), sort_keys=True)
    a = jobs.analysis(key)
    cache = ResultCache(max_bytes=2**26)
    ctx = fake_context(a, state={"phase_n": 3, "phase_seeds": 2, "jac_k": 2, "jac_example": 1})
    closed = tuple(_tab(t) for t in ("Strategies", "Phase diagram", "Jacobians", "Devices"))
    pool, has = _prepared(ctx, closed, "requests", cache)
    names = [r[0] for r in pool.ran]
    # what the Strategies tab's budget needs first: the strategies that apply, the quiet timing
    assert names[:2] == ["strategy_availability", "quiet_run_s"] and names.count("quiet_run_s") == 1
    assert names.index("strategies_table") < names.index("phase") < names.index("jacobians")
    assert names.index("jacobians") < names.index("lyapunov") < names.index("devices_live")
    assert (
        "phase",
        json.dumps(cfg.replace(recurrent_gain=1.0).to_dict(), sort_keys=True),
        0.5,
        1.5,
        3,
        2,
        0,
        1,
    ) in (pool.ran)
    assert len(pool.ran) == len(set(pool.ran))  # each once

    def cached_only(request: Request):
        return cache.get(request.key, lambda: pytest.fail(f"{request.what} was not computed ahead"))

    opened = ctx._replace(get=cached_only, has=has, recorded=lambda: (pd.DataFrame(), []))
    for tab in closed:
        at = AppTest.from_function(_render, args=(tab, opened), default_timeout=120)
        at.session_state["phase_n"], at.session_state["phase_seeds"] = 3, 2
        at.session_state["jac_k"], at.session_state["jac_example"] = 2, 1
        at.run()
        assert not at.exception, (tab.TITLE, [e.value for e in at.exception])
        assert at.get("plotly_chart"), tab.TITLE


def _render_block(tab, ctx):
    tab.render_block(ctx)


@pytest.mark.slow
def test_idle_time_computes_what_a_blocks_closed_tabs_declare_and_then_they_compute_nothing():
    """On a reference block's page: each closed tab's ``block_requests`` in the tabs' order,
    each job once; opened afterwards, each ``render_block`` draws from those answers alone."""
    from rnnviz.serve.requests import job_key
    from rnnviz.ui.tabs.context import BlockContext, Pins

    cfg = RunConfig(cell="gru", block="reference", layers=2, hidden_size=4, seq_len=6, batch_size=2)
    key = job_key(cfg)
    summary, a = jobs.block_analysis(key)
    cache = ResultCache(max_bytes=2**26)
    pins = Pins((), (), (), lambda: None, lambda i: None, lambda: None)
    state = {"block_phase_n": 3, "block_phase_seeds": 2}
    ctx = BlockContext(cfg, key, summary, a, None, None, pins, None, state=state)
    closed = tuple(
        _tab(t) for t in ("Gradients", "Carry", "Strategies", "Phase diagram", "Jacobians", "Devices")
    )
    pool, has = _prepared(ctx, closed, "block_requests", cache)
    assert [r[0] for r in pool.ran] == [
        "block_states",
        "block_strategies",
        "block_phase",
        "block_jacobians",
        "block_lyapunov",
        "block_devices",
    ]
    assert ("block_phase", key, 0.5, 2.0, 3, 2) in pool.ran  # torch's GRU: a gain from 0.5 to 2

    def cached_only(request: Request):
        return cache.get(request.key, lambda: pytest.fail(f"{request.what} was not computed ahead"))

    opened = ctx._replace(get=cached_only, has=has)
    for tab in closed:
        at = AppTest.from_function(_render_block, args=(tab, opened), default_timeout=120)
        at.session_state["block_phase_n"], at.session_state["block_phase_seeds"] = 3, 2
        at.run()
        assert not at.exception, (tab.TITLE, [e.value for e in at.exception])
        assert at.get("plotly_chart"), tab.TITLE


def test_the_jacobians_tab_declares_the_parts_it_draws_at_a_long_pass():
    """At LSTM H=128 T=1000 B=32 (the budget's unit as measured there) the tab declares its
    σ_i(J_t) in interleaved parts, the same for idle time as for its own drawing."""
    from rnnviz.serve.budget import JACOBIAN_PARTS

    jac = _tab("Jacobians")
    cfg = RunConfig(cell="lstm", hidden_size=128, seq_len=1000, batch_size=32)
    a = types.SimpleNamespace(config=cfg, timing=types.SimpleNamespace(run_s=0.38, compile_s=1.0))
    ctx = fake_context(a, state={}, quiet_run_s=lambda shape: 0.38)  # the quiet timing measured there
    asked = jac.requests(ctx)
    parts = [r.args for r in asked if r.job == jobs.jacobians]
    assert [p[-2:] for p in parts] == [
        (p, JACOBIAN_PARTS) for p in range(JACOBIAN_PARTS)
    ] and JACOBIAN_PARTS > 1
    assert {p[1:4] for p in parts} == {(8, 0, parts[0][3])}  # k = 8, example 0, one step count


def test_idle_time_planning_raises_missing_rather_than_computing():
    """In idle time a tab's look-up never computes: the first answer it needs is Missing."""
    a = types.SimpleNamespace(config=RunConfig(), timing=types.SimpleNamespace(run_s=0.01, compile_s=0.5))

    def look_up(request: Request):
        raise Missing(request)

    ctx = fake_context(a, state={})._replace(get=look_up, idle=True)
    with pytest.raises(Missing) as missing:
        _tab("Phase diagram").requests(ctx)
    assert missing.value.request.job == jobs.quiet_run_s

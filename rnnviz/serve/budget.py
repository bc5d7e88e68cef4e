"""What each dashboard tab may compute, decided before it starts.

A tab's work is counted in what this machine measured for the configuration itself
(:class:`Cost`: a run of its analysis, timed while nothing else ran, and its compile). When
the total is over the view budget (:data:`VIEW_BUDGET_S`) the tab shrinks what it computes
(fewer repeats, seeds, gains or exponents) and says so in one message; when even the
smallest version is over, it computes nothing until asked, with the estimate on the button.
The worker's time limit stays the last guard. The measurements behind the constants:
docs/dev/benchmarks.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, NamedTuple

from rnnviz.base.dynamics import choose_method
from rnnviz.base.timing import MIN_PRECISE_REPEATS
from rnnviz.config import REFERENCE_FLOPS_PER_S, RunConfig, carry_size, estimate_flops, param_count
from rnnviz.serve.settings import settings as server_settings
from rnnviz.tables.strategies import strategy_rules

if TYPE_CHECKING:
    from rnnviz.base.analysis import Analysis

#: Seconds one tab may take; None: the server's setting (``RNNVIZ_VIEW_BUDGET_S``,
#: :mod:`rnnviz.serve.settings`), read when a plan is made.
VIEW_BUDGET_S: float | None = None
#: The least seconds counted per executable to compile (a cached one costs nothing, so
#: counting every one is an upper bound).
MIN_COMPILE_S = 0.5
#: Seconds per float of a parameter-sized buffer a strategy holds beyond the accumulator's
#: (``param_copies`` of :mod:`rnnviz.tables.strategies`), written and read once per run.
BUFFER_S_PER_FLOAT = 5e-9
#: A phase-diagram point against one analysis (the sweep always runs the log-magnitude
#: pass), and its compile and the λ₁ one's against the analysis's.
PHASE_RUN, PHASE_COMPILE = 1.6, 2.0


class Cost(NamedTuple):
    """What one analysis of the configuration cost here: ``run_s`` (median run) and
    ``compile_s`` (compiling it; each tab's executables are counted at this, at least
    :data:`MIN_COMPILE_S`)."""

    run_s: float
    compile_s: float

    @classmethod
    def of(cls, a: Analysis) -> Cost:
        """What the analysis ``a`` cost here: the unit every tab's budget counts in."""
        return cls(a.timing.run_s, a.timing.compile_s)

    @property
    def compile(self) -> float:
        """``compile_s``, at least :data:`MIN_COMPILE_S`: the seconds counted per executable to compile."""
        return max(self.compile_s, MIN_COMPILE_S)


class Plan(NamedTuple):
    """What a tab will compute, and the estimated seconds for it and for what was asked."""

    settings: dict[str, int]  # the sizes it runs with ({"repeats": 2}, {"gains": 13, "seeds": 1}, …)
    estimate_s: float
    asked_estimate_s: float
    fits: bool  # whether the work (apart from compiling) fits its share of the budget (False: on request)
    note: str | None  # one sentence saying what changed and why, or None when nothing did
    work_s: float = 0.0  # of estimate_s, the seconds of work apart from compiling


def _plan(
    asked: dict[str, int],
    fixed: float,
    work: Callable[[dict[str, int]], float],
    budget: float | None,
    shrink: dict[str, tuple[int, str]],
) -> Plan:
    """Shrink the settings of ``shrink`` (``{name: (floor, label)}``, in order), each to the
    largest value that fits, until ``work(settings)`` fits what the budget leaves after the
    ``fixed`` compile seconds (at least a third of it); ``fits`` is False only when the work
    at its smallest is over that."""
    if budget is None:
        budget = server_settings().view_budget_s if VIEW_BUDGET_S is None else VIEW_BUDGET_S
    room = max(budget - fixed, budget / 3)
    settings = dict(asked)
    for name, (lo, _) in shrink.items():
        if work(settings) <= room:
            break
        hi = settings[name]
        while lo < hi:  # the largest value of this setting that fits, the others as they are
            mid = (lo + hi + 1) // 2
            if work({**settings, name: mid}) <= room:
                lo = mid
            else:
                hi = mid - 1
        settings[name] = lo
    asked_s, got_s = fixed + work(asked), fixed + work(settings)
    fits = work(settings) <= room
    note = None
    if not fits:
        note = (
            f"Even the smallest version takes ≈ {got_s:.0f} s here, over the {budget:g} s budget of a view "
            f"(what was asked: ≈ {asked_s:.0f} s). Shrink T, H or B, or run it on request below."
        )
    elif settings != asked:
        changed = ", ".join(
            f"{shrink[n][1]} {asked[n]} → {settings[n]}" for n in asked if settings[n] != asked[n]
        )
        note = f"Within the {budget:g} s budget of a view: what was asked would take ≈ {asked_s:.0f} s here, "
        note += f"so {changed} (≈ {got_s:.0f} s)."
    return Plan(settings, got_s, asked_s, fits, note, work(settings))


def _timed_runs(repeats: int) -> int:
    """Runs one timed measurement is counted at: the warm-up and the runs its precision rule
    usually stops at."""
    return 1 + min(repeats, MIN_PRECISE_REPEATS)


def strategy_compile_s(name: str, c: Cost) -> float:
    """Seconds to compile strategy ``name``'s analysis: its ``compile_cost`` (the table's,
    :class:`~rnnviz.tables.strategies.StrategyRules`) times the accumulator's compile."""
    return strategy_rules(name).compile_cost * c.compile


def strategy_run_s(cfg: RunConfig, name: str, c: Cost) -> float:
    """Seconds one run of strategy ``name``'s analysis of ``cfg`` takes: its ``run_cost``
    times the accumulator's run, plus writing and reading the parameter-sized buffers it
    holds beyond the accumulator's (``param_copies``, P floats each) at
    :data:`BUFFER_S_PER_FLOAT`: ``run_cost·r + (copies(T) − copies_acc(T))·P·s_float``."""
    rules, t = strategy_rules(name), cfg.seq_len
    extra = rules.param_copies(t) - strategy_rules("accumulate").param_copies(t)
    return rules.run_cost * c.run_s + max(extra, 0) * param_count(cfg) * BUFFER_S_PER_FLOAT


def strategies_plan(
    cfg: RunConfig,
    c: Cost,
    strategies: Sequence[str],
    repeats: int = 5,
    budget: float | None = None,
    compiled: Collection[str] = (),
) -> Plan:
    """The Strategies tab: each of ``strategies`` compiled (but the ``compiled`` ones, e.g. in
    idle time), warmed up and timed until its mean is known (at most ``repeats`` runs), plus
    the per-step contributions (one more analysis, compiled with the rest when they all are)."""
    to_compile = [s for s in strategies if s not in compiled]
    fixed = sum(strategy_compile_s(s, c) for s in to_compile) + (c.compile if to_compile else 0.0)
    one_each = sum(strategy_run_s(cfg, s, c) for s in strategies)
    work = lambda s: _timed_runs(s["repeats"]) * one_each + c.run_s  # noqa: E731
    return _plan({"repeats": repeats}, fixed, work, budget, {"repeats": (1, "runs per strategy")})


def devices_plan(
    cfg: RunConfig,
    c: Cost,
    strategies: Sequence[str],
    n_devices: int = 1,
    repeats: int = 5,
    budget: float | None = None,
    compiled: Collection[str] = (),
) -> Plan:
    """The Devices tab: each of ``strategies`` on each of ``n_devices`` devices, compiled (but
    the ``compiled`` ones, on the default device), warmed up and timed as in
    :func:`strategies_plan` (every device counted at this one's unit)."""
    fixed = sum(strategy_compile_s(s, c) * (n_devices - (s in compiled)) for s in strategies)
    one_each = n_devices * sum(strategy_run_s(cfg, s, c) for s in strategies)
    work = lambda s: _timed_runs(s["repeats"]) * one_each  # noqa: E731
    return _plan({"repeats": repeats}, fixed, work, budget, {"repeats": (1, "runs per device and strategy")})


def phase_plan(cfg: RunConfig, c: Cost, gains: int, seeds: int, budget: float | None = None) -> Plan:
    """The Phase diagram: gains × seeds points of the gradient sweep (each about one analysis)
    and of λ₁ (the QR method with one tangent, :func:`lyapunov_plan`'s count at k = 1),
    two compiles. Seeds go first, then gains (at least 2)."""
    steps = (cfg.batch_size or 1) * cfg.seq_len
    per_point = c.run_s * PHASE_RUN + steps * (2 * tangent_s(cfg, c) + _qr_s(carry_size(cfg), 1))
    work = lambda s: s["gains"] * s["seeds"] * per_point  # noqa: E731
    asked, shrink = {"gains": gains, "seeds": seeds}, {"seeds": (1, "seeds"), "gains": (2, "gains")}
    return _plan(asked, 2 * PHASE_COMPILE * c.compile, work, budget, shrink)


def block_phase_plan(c: Cost, values: int, seeds: int, budget: float | None = None) -> Plan:
    """A reference block's Phase diagram: values × seeds analyses of the block drawn anew at each
    knob value (each about one analysis, ``c`` the block's), one compile for them all. Seeds go
    first, then values (at least 2)."""
    work = lambda s: s["values"] * s["seeds"] * c.run_s * PHASE_RUN  # noqa: E731
    asked, shrink = {"values": values, "seeds": seeds}, {"seeds": (1, "seeds"), "values": (2, "values")}
    return _plan(asked, c.compile, work, budget, shrink)


#: The Phase diagram's gradient sweep comes in this many interleaved parts of one size (every
#: 8th gain, then the next, …) when its work is over :data:`PHASE_PARTS_OVER_S`: the whole
#: gain range is on the screen after an eighth of the work.
PHASE_PARTS, PHASE_PARTS_OVER_S = 8, 1.5


def phase_parts(plan: Plan) -> int:
    """How many parts the Phase diagram's gradient sweep is computed in under ``plan``."""
    long = plan.work_s > PHASE_PARTS_OVER_S  # compiling is done once, before the first part
    return PHASE_PARTS if long and plan.settings["gains"] >= PHASE_PARTS else 1


#: The Jacobians tab's σ_i(J_t) comes in this many interleaved parts (every 4th step each)
#: when its estimate (which counts the SVDs generously) is over :data:`JACOBIAN_PARTS_OVER_S`.
JACOBIAN_PARTS, JACOBIAN_PARTS_OVER_S = 4, 6.0


def jacobians_parts(plan: Plan) -> int:
    """How many parts the Jacobians tab's σ_i(J_t) is computed in under ``plan``."""
    long = plan.work_s > JACOBIAN_PARTS_OVER_S  # compiling is done once, before the first part
    return JACOBIAN_PARTS if long and plan.settings["steps"] >= 8 * JACOBIAN_PARTS else 1


#: The Jacobians tab takes J_t at up to this many steps (every ⌈T/400⌉-th; fewer when over
#: the budget, :func:`jacobians_plan`); the library, at every step.
JACOBIAN_STEPS = 400
#: FLOP rates of the factorisations the Jacobians tab runs at every step (rounded down): a
#: thin QR of ``[D, k]`` (≈ 4·D·k² FLOPs) and the SVD of a ``[D, D]`` step Jacobian (≈ 10·D³).
QR_FLOPS_PER_S, SVD_FLOPS_PER_S = 1e9, 5e9


def tangent_s(cfg: RunConfig, c: Cost) -> float:
    """Seconds of one tangent (a Jacobian-vector product through one step for one example) from
    the analysis's measured run, about three such products per step and example: measured,
    not counted in FLOPs, because a matrix memory's step costs far more than its matmuls say."""
    return c.run_s / (3.0 * (cfg.batch_size or 1) * max(cfg.seq_len, 1))


def _qr_s(dim: int, k: int) -> float:
    return 4.0 * dim * k * k / QR_FLOPS_PER_S


def lyapunov_plan(cfg: RunConfig, c: Cost, k: int, budget: float | None = None) -> Plan:
    """The Jacobians tab's Lyapunov spectrum by the QR method: at every step of every
    example, the step and k tangents through it, then a ``[D, k]`` QR; one compile."""
    steps, dim, tau = (cfg.batch_size or 1) * cfg.seq_len, carry_size(cfg), tangent_s(cfg, c)
    work = lambda s: steps * ((1 + s["k"]) * tau + _qr_s(dim, s["k"]))  # noqa: E731
    return _plan({"k": k}, c.compile, work, budget, {"k": (1, "exponents k")})


def jacobians_plans(cfg: RunConfig, c: Cost, k: int, budget: float | None = None) -> tuple[Plan, Plan]:
    """The Jacobians tab's two plans at ``k``: σ_i(J_t) at up to :data:`JACOBIAN_STEPS` steps
    (:func:`jacobians_plan`), and the Lyapunov spectrum (:func:`lyapunov_plan`)."""
    first = jacobians_plan(
        cfg, c, choose_method(carry_size(cfg)), k, min(cfg.seq_len, JACOBIAN_STEPS), budget=budget
    )
    return first, lyapunov_plan(cfg, c, k, budget)


def jacobians_plan(
    cfg: RunConfig,
    c: Cost,
    method: str,
    k: int,
    steps: int,
    iterations: int = 12,
    budget: float | None = None,
) -> Plan:
    """The Jacobians tab's singular values of J_t for one example at ``steps`` steps (fewer
    when over the budget, at least 10): ``exact``, D tangents (``jax.jacfwd``) and a
    ``[D, D]`` SVD per step; ``subspace``, block power iteration of ``iterations`` rounds
    with m = min(D, 2k) directions, each round m tangents and m transposed ones and a
    ``[D, m]`` QR. One compile."""
    dim, tau = carry_size(cfg), tangent_s(cfg, c)
    if method == "exact":
        per_step = dim * tau + 10.0 * dim**3 / SVD_FLOPS_PER_S
    else:
        m = min(dim, 2 * k)
        per_step = (2 * iterations + 1) * m * tau + (iterations + 1) * _qr_s(dim, m)
    work = lambda s: s["steps"] * per_step  # noqa: E731
    return _plan({"steps": steps}, c.compile, work, budget, {"steps": (min(steps, 10), "steps with J_t")})


def training_plan(cfg: RunConfig, chunk: int, budget: float | None = None) -> Plan:
    """One compiled training chunk (the unit the Training tab runs between redraws): about
    one gradient evaluation of the training config per step, at the reference FLOP rate
    (the training batch differs from the analysis's, so FLOPs, not the measured run)."""
    per_step = estimate_flops(cfg) / REFERENCE_FLOPS_PER_S
    work = lambda s: s["chunk"] * per_step  # noqa: E731
    plan = _plan({"chunk": chunk}, MIN_COMPILE_S, work, budget, {"chunk": (1, "steps per chunk")})
    return plan if math.isfinite(plan.estimate_s) else plan._replace(fits=False)


def model_refusal(n_params: int, batch: int, steps: int, limit_m: int | None = None) -> str | None:
    """Why the Your model tab will not analyse a model of ``n_params`` parameters (tied ones
    counted once) on ``batch`` (B) sequences of ``steps`` (T) tokens, in one message naming
    the work, the limit and the longest T that fits; or None when it may. The work of its
    forward and reverse pass grows as parameters × tokens, held to ``limit_m`` million (default:
    the server's ``model_work_m``, ``RNNVIZ_MODEL_WORK_M``, :mod:`rnnviz.serve.settings`)."""
    limit = (server_settings().model_work_m if limit_m is None else limit_m) * 10**6
    work = n_params * batch * steps
    if work <= limit:
        return None
    longest = limit // max(n_params * batch, 1)
    at = f" at B = {batch}" if batch > 1 else ""
    fits = (
        f"at most T = {longest}{at} here" if longest >= 2 else f"this model is too large for it{at} at any T"
    )
    return (
        f"{n_params:,} parameters × {batch} × {steps} tokens is {work / 1e6:,.0f} M parameter-tokens, over "
        f"this dashboard's limit of {limit / 1e6:,.0f} M (RNNVIZ_MODEL_WORK_M): {fits}. "
        "`rnnviz analyze --model` on the command line has no such limit."
    )

"""The benchmark's measurements: each suite run, printed as a table and returned as
schema-1 records (:mod:`rnnviz.base.measurements`). Ratios are to a baseline measured in the same
process, right before, on the same inputs; nothing here asserts a time."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

import jax
import numpy as np

from rnnviz.analysis import analyze, executables
from rnnviz.base.measurements import append_records
from rnnviz.bench.block_costs import block_costs, config_block_costs
from rnnviz.bench.data_cost import data_cost_bench
from rnnviz.bench.designs import (
    LONG_BASE,
    LONG_LENGTH,
    cost_suite,
    gradient_table,
    learning_table,
    long_suite,
)
from rnnviz.bench.designs import parallel_suite as designs_parallel_suite
from rnnviz.bench.gpu import gpu_suite
from rnnviz.bench.learning import block_learning_table, data_bench, train_bench
from rnnviz.bench.models import models_suite, parse_types
from rnnviz.bench.references import (
    gemm_flops_per_s,
    reference_lyapunov,
    torch_lstm_s,
    xla_lstm_floor,
)
from rnnviz.bench.suites import (
    BLOCK_DEPTHS,
    BLOCK_PARAMS,
    LONG,
    LONG_LENGTHS,
    SUITES,
)
from rnnviz.config import ConfigError, RunConfig
from rnnviz.engine.prepare import Values, resolve_device, seed_key, static_config
from rnnviz.studies.comparisons import available_strategies, label, measure, measure_interleaved
from rnnviz.studies.lyapunov import lyapunov
from rnnviz.studies.sweep import run_points, sweep_devices
from rnnviz.tables.blocks import BLOCK_DESIGNS


def lyapunov_bench(cfg: RunConfig, k: int = 16, repeats: int = 5, out=sys.stdout) -> dict[str, float]:
    """The QR method in one compiled scan against :func:`reference_lyapunov`, same run."""

    fast = lyapunov(cfg, k=k, warmup=0, measure_decay=False, repeats=repeats)
    reference_lyapunov(cfg.replace(seq_len=2), k)  # compiles its two jitted functions
    start = time.perf_counter()
    ref = reference_lyapunov(cfg, k)
    ref_s = time.perf_counter() - start
    diff = float(np.max(np.abs(np.sort(ref)[::-1] - fast.exponents)))
    print(f"Lyapunov spectrum, k={k}, {label(cfg)}", file=out)
    print(
        f"  compiled scan (rnnviz.studies.lyapunov): {fast.run_s * 1e3:9.1f} ms  (median of {repeats}; "
        f"compile "
        f"{fast.compile_s:.2f} s)",
        file=out,
    )
    print(f"  reference (jacfwd per step + NumPy QR, Python loop): {ref_s * 1e3:9.1f} ms", file=out)
    print(f"  speed-up ×{ref_s / fast.run_s:.1f}; max |Δλ| = {diff:.2e}; λ₁ = {fast.lambda1:+.5f}", file=out)
    return {"fast_s": fast.run_s, "reference_s": ref_s, "speedup": ref_s / fast.run_s, "max_abs_diff": diff}


def parallel_bench(
    configs: Iterable[RunConfig], repeats: int, out=sys.stdout, budget_s: float | None = None
) -> list[dict]:
    """``parallel`` against ``accumulate`` (the sequential scan), same process, same inputs:
    the parameter gradient alone and the full analysis; ratio = parallel / sequential time."""

    print(
        f"{'config':<40} {'seq grad ms':>11} {'par grad ms':>11} {'ratio':>6} {'seq anl ms':>11} "
        f"{'par anl ms':>11} {'ratio':>6}",
        file=out,
    )
    records = []
    for cfg in configs:
        row = {}
        for kind in ("grad", "analyze"):
            for strategy in ("accumulate", "parallel"):
                rec = measure(
                    cfg, measure=kind, strategy=strategy, repeats=repeats, suite="parallel", budget_s=budget_s
                )
                row[kind, strategy] = rec
                records.append(rec)
            row[kind, "parallel"]["ratio_to_plain_grad"] = None
        ms = {k: v["run_s"] * 1e3 for k, v in row.items()}
        text = f"{label(cfg):<40} {ms['grad', 'accumulate']:>11.2f} {ms['grad', 'parallel']:>11.2f} "
        text += (
            f"{ms['grad', 'parallel'] / ms['grad', 'accumulate']:>6.2f} {ms['analyze', 'accumulate']:>11.2f} "
        )
        text += (
            f"{ms['analyze', 'parallel']:>11.2f} "
            f"{ms['analyze', 'parallel'] / ms['analyze', 'accumulate']:>6.2f}"
        )
        print(text, file=out, flush=True)
    return records


def sweep_bench(cfg: RunConfig, n: int = 256, out=sys.stdout) -> dict[str, float]:
    """One vmapped sweep of ``n`` gains against ``n`` sequential analyses, same process.

    Sequential is measured two ways: ``analyze(cfg, repeats=1)`` per gain (what a user
    loop does) and the bare compiled prepare + analysis calls (no timing, no host copy)."""

    gains = [0.5 + i / (n - 1) for i in range(n)]
    points = [{"recurrent_gain": g} for g in gains]
    start = time.perf_counter()
    run_points(cfg, points)  # compiles
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    run_points(cfg, points)
    sweep_s = time.perf_counter() - start
    analyze(cfg, repeats=1)  # compile the single-config path outside the timing
    start = time.perf_counter()
    for g in gains:
        analyze(cfg.replace(recurrent_gain=g), repeats=1)
    loop_s = time.perf_counter() - start
    device = resolve_device(cfg)
    exe = executables(static_config(cfg), device)
    start = time.perf_counter()
    for g in gains:
        args = jax.device_put((seed_key(cfg.seed), Values.of(cfg.replace(recurrent_gain=g))), device)
        jax.block_until_ready(exe.analysis.fn(*exe.prepare(*args)))
    bare_s = time.perf_counter() - start
    print(
        f"config: {cfg.cell} T={cfg.seq_len} B={cfg.batch_size} H={cfg.hidden_size}; {n} gains; devices: "
        f"{len(sweep_devices(cfg))}",
        file=out,
    )
    print(f"sweep (one vmapped call): {sweep_s * 1e3:9.1f} ms   (compile {compile_s:.2f} s, once)", file=out)
    print(
        f"{n} × analyze(repeats=1): {loop_s * 1e3:9.1f} ms   → sweep is {loop_s / sweep_s:.1f}× faster",
        file=out,
    )
    print(
        f"{n} × bare compiled calls:{bare_s * 1e3:9.1f} ms   → sweep is {bare_s / sweep_s:.1f}× faster",
        file=out,
    )
    return {"sweep_s": sweep_s, "loop_s": loop_s, "bare_s": bare_s, "compile_s": compile_s}


def perf_bench(configs: list[RunConfig], repeats: int, budget_s: float | None, out=sys.stdout) -> list[dict]:
    """analyze with each exact strategy vs plain ``jax.grad``, achieved FLOP/s vs a GEMM, the
    PyTorch peer when installed, and T up to 100 000 with ``checkpoint`` — all in one run."""

    peak = gemm_flops_per_s()
    print(f"GEMM 6400×160·160×512, measured now: {peak / 1e9:.0f} GFLOP/s", file=out)
    strategies = ("accumulate", "fused", "checkpoint")
    print(
        f"{'config':<38} {'plain ms':>9} "
        + " ".join(f"{s + ' ×':>13}" for s in strategies)
        + f" {'best GFLOP/s':>13} {'% GEMM':>7} {'PyTorch ms':>11} {'best/PyTorch':>13} {'XLA floor ms':>13}",
        file=out,
    )
    records: list[dict] = []
    for cfg in configs:
        kw = dict(repeats=repeats, suite="perf", budget_s=budget_s)
        base = measure(cfg, measure="grad", strategy="plain_grad", **kw)
        base["ratio_to_plain_grad"] = 1.0
        row = {
            s: measure(cfg, measure="analyze", strategy=s, **kw)
            for s in strategies
            if s in available_strategies(cfg)
        }
        for rec in row.values():
            rec["ratio_to_plain_grad"] = rec["run_s"] / base["run_s"]
        records += [base, *row.values()]
        best = min(row.values(), key=lambda r: r["run_s"])
        torch_s = torch_lstm_s(cfg, repeats) if cfg.cell == "lstm" else None
        peer = (
            f"{torch_s * 1e3:>11.2f} {best['run_s'] / torch_s:>13.2f}" if torch_s else f"{'—':>11} {'—':>13}"
        )
        floor = (
            xla_lstm_floor(cfg.batch_size or 1, cfg.seq_len, cfg.hidden_size).total
            if cfg.cell == "lstm"
            else None
        )
        peer += f" {floor:>13.2f}" if floor else f" {'—':>13}"
        ratios = " ".join(
            f"{row[s]['ratio_to_plain_grad']:>13.2f}" if s in row else f"{'—':>13}" for s in strategies
        )
        print(
            f"{label(cfg):<38} {base['run_s'] * 1e3:>9.2f} {ratios} {best['flops_per_s'] / 1e9:>9.1f} "
            f"({best['strategy'][:3]})"
            f" {best['flops_per_s'] / peak:>7.0%} {peer}",
            file=out,
            flush=True,
        )
    print(f"\nlong sequences, {LONG}: run time per step and peak memory (compile-time estimate)", file=out)
    print(f"{'T':>7} {'strategy':<11} {'run s':>8} {'µs/step':>8} {'vs T=1000':>10} {'peak MB':>9}", file=out)
    first: dict[str, float] = {}
    for t in LONG_LENGTHS:
        for s in ("accumulate", "checkpoint"):
            try:
                cfg = RunConfig(**LONG, seq_len=t, strategy=s)
            except ConfigError as err:
                print(f"{t:>7} {s:<11} refused: {err}", file=out, flush=True)
                continue
            rec = measure(cfg, measure="analyze", repeats=min(repeats, 3), suite="perf", budget_s=budget_s)
            per_step = rec["run_s"] / t
            first.setdefault(s, per_step)
            records.append(rec)
            print(
                f"{t:>7} {s:<11} {rec['run_s']:>8.3f} {per_step * 1e6:>8.1f} {per_step / first[s]:>10.2f} "
                f"{rec['peak_bytes'] / 2**20:>9.0f}",
                file=out,
                flush=True,
            )
    return records


def run_suite(
    configs: Iterable[RunConfig],
    suite: str,
    repeats: int,
    devices=None,
    out=sys.stdout,
    budget_s: float | None = None,
) -> list[dict]:
    """Measure every config on every device; print one table row per (config, device).

    A row's functions (plain ``jax.grad``, each strategy's gradient, the analysis, the log
    pass) are timed in turn, one run of each per round
    (:func:`~rnnviz.studies.comparisons.measure_interleaved`): its ratios compare runs made
    under the same load.

    A strategy whose config is over the memory budget (per-step tangents at large T·P)
    is skipped and shown as "—"."""

    strategies = available_strategies()
    header = f"{'config':<42} {'device':<10} {'plain ms':>9} " + " ".join(
        f"{s[:9] + '×':>10}" for s in strategies
    )
    header += f" {'analyze×':>9} {'+log pass×':>10} {'compile s':>10} {'peak MB plain/acc/per/anl':>27}"
    print(header, file=out)
    records: list[dict] = []
    for cfg in configs:
        for device in devices or [resolve_device(cfg)]:
            wanted = [("grad", "plain_grad"), *(("grad", s) for s in strategies)]
            wanted += [("analyze", "accumulate"), ("log_pass", "accumulate")]
            got = measure_interleaved(
                cfg, wanted, repeats=repeats, device=device, suite=suite, budget_s=budget_s
            )
            if isinstance(got[0], ConfigError):
                raise got[0]  # the yardstick itself refused: nothing to compare against
            row = [r for r in got if not isinstance(r, ConfigError)]
            base = row[0]
            base["ratio_to_plain_grad"] = 1.0
            for rec in row[1:]:
                rec["ratio_to_plain_grad"] = rec["run_s"] / base["run_s"]
            records.extend(row)
            print(_row(cfg, device, row, strategies), file=out, flush=True)
    return records


def _row(cfg: RunConfig, device, row: list[dict], strategies) -> str:

    base, *per, anl, log_pass = row
    mb = lambda r: r["peak_bytes"] / 2**20  # noqa: E731
    by = {r["strategy"]: r for r in per}
    text = f"{label(cfg):<42} {device.platform + ':' + str(device.id):<10} {base['run_s'] * 1e3:>9.3f} "
    text += " ".join(
        f"{by[s]['ratio_to_plain_grad']:>10.2f}" if s in by else f"{'—':>10}" for s in strategies
    )
    text += (
        f" {anl['ratio_to_plain_grad']:>9.2f} {log_pass['ratio_to_plain_grad']:>10.2f} "
        f"{base['compile_s']:>4.2f}/{anl['compile_s']:<5.2f}"
    )
    per_step = f"{mb(by['per_step']):.1f}" if "per_step" in by else "—"
    text += f" {mb(base):>6.1f}/{mb(by['accumulate']):.1f}/{per_step}/{mb(anl):.1f}"
    return text


def run_bench(
    suite: str,
    repeats: int = 20,
    record: str | None = None,
    budget: float = 3.0,
    all_devices: bool = False,
    steps: int = 1500,
    sizes: str = "auto",
    types: str | None = None,
    skip_reference: bool = False,
    block: str = "cell",
    depths: tuple[int, ...] = BLOCK_DEPTHS,
    params: tuple[str, ...] = BLOCK_PARAMS,
) -> int:
    """Run one suite, print its table and append its records to ``record`` when given.

    Args:
        suite: a key of :data:`~rnnviz.bench.suites.SUITES`.
        repeats: timed runs per measurement after one warm-up.
        record: a JSON-lines file to append schema-1 records to (the gpu suite: a folder,
            :func:`~rnnviz.bench.gpu.gpu_suite`, which sizes its own repeats and budget).
        budget: seconds of timed runs per measurement (0: no limit).
        all_devices: measure on the first CPU and the first GPU (when present).
        steps: training steps per run of the train suite's learning table.
        sizes: the gpu suite's sizes: ``auto``, ``full`` or ``tiny``; the models suite's:
            ``real`` (``auto`` too) or ``tiny``.
        types: the models suite's model types, comma-separated (None: every one).
        skip_reference: the models suite without transformers' forward + backward.
        block: ``designs-learning``'s mode: ``cell`` (the bare cells) or ``reference`` (each
            design as its reference block, :func:`~rnnviz.bench.learning.block_learning_table`,
            over the cells ``types``, default all of them).
        depths, params: the block table's depths and parameter counts.

    Returns:
        The process exit status: 0, or 1 when a measurement of the gpu or models suite raised
        (or, for models, did not fit in memory).

    Raises:
        ConfigError: the models suite with ``sizes="full"`` or an unknown type, or without
            torch and transformers.
    """

    if suite == "gpu":
        return 1 if gpu_suite(record, sizes).errors else 0
    if suite == "models":
        if sizes == "full":
            raise ConfigError("sizes", sizes, "real or tiny for the models suite")
        records = models_suite("tiny" if sizes == "tiny" else "real", parse_types(types), skip_reference)
        if record:
            print(f"appended {append_records(record, records)} records to {record}")
        return 1 if any(r["kind"] == "error" for r in records) else 0
    configs = SUITES[suite]()
    budget_s = budget if budget > 0 else None
    if suite == "sweep":
        sweep_bench(configs[0])
        return 0
    if suite == "lyapunov":
        lyapunov_bench(configs[0], repeats=min(repeats, 5))
        return 0
    if block != "cell" and suite != "designs-learning":
        raise ConfigError("block", block, "'cell' except with --suite designs-learning")
    cells = tuple(BLOCK_DESIGNS) if types is None else parse_cells(types)
    run = SuiteRun(
        suite, configs, repeats, budget_s, steps, all_devices, block, cells, depths, params, record
    )
    records = RUNNERS.get(suite, _timed_suite)(run)
    if record and records:
        print(f"appended {append_records(record, records)} records to {record}")
    return 0


def designs_bench(repeats: int, budget_s: float | None, out=sys.stdout) -> list[dict]:
    """The designs suite (:mod:`rnnviz.bench.designs`): each new design's cost against plain
    ``jax.grad``, parallel against sequential for RG-LRU and Mamba at T = 1 000 and 10 000,
    each design's analysis at T = 100 000 under ``checkpoint`` (suite ``designs-long``), the
    gradient table at initialisation, and whole models of each design at two depths
    (:func:`~rnnviz.bench.block_costs.block_costs`, suite ``designs-blocks``)."""
    configs = cost_suite()
    print(f"suite designs: {len(configs)} configs; ratios are run time / plain jax.grad run time", file=out)
    records = run_suite(configs, "designs", repeats, out=out, budget_s=budget_s)
    print("\nparallel (associative scan) / sequential run time", file=out)
    records += parallel_bench(designs_parallel_suite(), repeats, out=out, budget_s=budget_s)
    b = LONG_BASE
    print(
        f"\nlong sequences, B={b.batch_size} I={b.input_size} H={b.hidden_size} {b.dtype} "
        f"under {b.strategy}, T = {LONG_LENGTH}: the analysis run once",
        file=out,
    )
    print(f"{'design':<40} {'run s':>8} {'µs/step':>8} {'peak MB':>9}", file=out)
    for cfg in long_suite():
        rec = measure(cfg, measure="analyze", repeats=1, suite="designs-long", budget_s=budget_s)
        records.append(rec)
        print(
            f"{label(cfg):<40} {rec['run_s']:>8.2f} {rec['run_s'] / cfg.seq_len * 1e6:>8.1f} "
            f"{rec['peak_bytes'] / 2**20:>9.0f}",
            file=out,
            flush=True,
        )
    print(file=out)
    records += gradient_table(out=out)
    print(file=out)
    records += config_block_costs(repeats=repeats, budget_s=budget_s, out=out)
    return records + block_costs(repeats=repeats, budget_s=budget_s, out=out)


class SuiteRun(NamedTuple):
    """What a suite's runner reads of the command line.

    Attributes:
        suite: its name (a key of :data:`~rnnviz.bench.suites.SUITES`).
        configs: the suite's configurations.
        repeats: timed runs per measurement.
        budget_s: seconds of timed runs per measurement (None: no limit).
        steps: training steps per run of a learning table.
        all_devices: measure on the first CPU and the first GPU.
        block: ``cell``, or ``reference``: the block learning table.
        cells, depths, params: that table's designs, depths and parameter counts.
        record: the file the records go to.
    """

    suite: str
    configs: list[RunConfig]
    repeats: int
    budget_s: float | None
    steps: int
    all_devices: bool
    block: str = "cell"
    cells: tuple[str, ...] = ()
    depths: tuple[int, ...] = BLOCK_DEPTHS
    params: tuple[str, ...] = BLOCK_PARAMS
    record: str | None = None


def _timed_suite(run: SuiteRun) -> list[dict]:
    """The strategies table (:func:`run_suite`) of the suite's configs: the default runner."""
    devices = None
    if run.all_devices:
        devices = [d for platform in ("cpu", "gpu") for d in _devices(platform)[:1]]
    print(
        f"suite {run.suite}: {len(run.configs)} configs, {run.repeats} timed runs each; ratios are run "
        "time / plain jax.grad run time"
    )
    return run_suite(run.configs, run.suite, run.repeats, devices, budget_s=run.budget_s)


def _parallel_suite(run: SuiteRun) -> list[dict]:
    """:func:`parallel_bench` of the parallel suite's configs."""
    print(
        f"suite parallel: {len(run.configs)} configs; ratio = parallel (associative scan) / "
        "accumulate (sequential scan) run time"
    )
    return parallel_bench(run.configs, run.repeats, budget_s=run.budget_s)


#: Each suite's runner, by name (the others: :func:`_timed_suite`); ``gpu``, ``models``,
#: ``sweep`` and ``lyapunov``, which record nothing here or answer an exit status of their own,
#: are run by :func:`run_bench` itself.
RUNNERS: dict[str, Callable[[SuiteRun], list[dict]]] = {
    "data-cost": lambda run: data_cost_bench(run.repeats),
    "designs": lambda run: designs_bench(run.repeats, run.budget_s),
    "designs-blocks": lambda run: (
        config_block_costs(repeats=run.repeats, budget_s=run.budget_s)
        + block_costs(repeats=run.repeats, budget_s=run.budget_s)
    ),
    "designs-learning": lambda run: LEARNING_TABLES[run.block](run),
    "train": lambda run: train_bench(run.configs[0], steps=run.steps),
    "data": lambda run: data_bench(run.configs[0], steps=run.steps),
    "perf": lambda run: perf_bench(run.configs, run.repeats, run.budget_s),
    "parallel": _parallel_suite,
}


#: ``--block`` → the designs' learning table: the bare cells', or their reference blocks'.
LEARNING_TABLES: dict[str, Callable[[SuiteRun], list[dict]]] = {
    "cell": lambda run: learning_table(steps=run.steps),
    "reference": lambda run: _block_learning(run),
}


def _block_learning(run: SuiteRun) -> list[dict]:
    """The block learning table; with ``--record`` it appends each row itself as the row is done
    (a table of hours resumes where it stopped), leaving nothing for :func:`run_bench` to append."""
    rows = block_learning_table(
        run.steps, cells=run.cells, depths=run.depths, params=run.params, record=run.record
    )
    return [] if run.record else rows


def parse_cells(text: str) -> tuple[str, ...]:
    """``--types`` of the block table: cells with a reference block, comma-separated.

    Raises:
        ConfigError: a cell without one (naming those that have one).
    """
    cells = tuple(c.strip() for c in text.split(",") if c.strip())
    for cell in cells:
        if cell not in BLOCK_DESIGNS:
            raise ConfigError("types", cell, "cells with a reference block: " + ", ".join(BLOCK_DESIGNS))
    if not cells:
        raise ConfigError("types", text, "cells with a reference block: " + ", ".join(BLOCK_DESIGNS))
    return cells


def _devices(platform: str) -> list:
    try:
        return jax.devices(platform)
    except RuntimeError:
        return []

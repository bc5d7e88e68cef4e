"""The benchmark's measurements: each suite run, printed as a table and returned as
schema-1 records (:mod:`rnnviz.records`). Ratios are to a baseline measured in the same
process, right before, on the same inputs; nothing here asserts a time."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable

import jax
import numpy as np

from rnnviz.analysis import Values, analyze, executables, resolve_device, seed_key, static_config
from rnnviz.bench.references import (
    gemm_flops_per_s,
    loop_steps_per_s,
    reference_lyapunov,
    torch_lstm_s,
    xla_lstm_floor,
)
from rnnviz.bench.suites import (
    DATA_LEARNING_CELLS,
    DIGIT_ORDERS,
    LEARNING_CELLS,
    LONG,
    LONG_LENGTHS,
    SUITES,
    TEXT_CELLS,
)
from rnnviz.comparisons import available_strategies, label, measure
from rnnviz.config import ConfigError, RunConfig
from rnnviz.exponents import lyapunov
from rnnviz.records import SCHEMA, append_records
from rnnviz.sources import load_dataset
from rnnviz.sweeps import run_points, sweep_devices
from rnnviz.timing import run_stamp
from rnnviz.training import train, train_many


def train_record(r, mode: str, suite: str = "train") -> dict:
    """A schema-1 ``kind: "train"`` record of one training run."""

    device = jax.devices()[0]
    final = r.final_loss()
    return {
        "schema": SCHEMA,
        "kind": "train",
        "suite": suite,
        "label": label(r.config),
        "config": r.config.to_dict(),
        "mode": mode,
        **run_stamp(device),
        "compile_s": r.timing.compile_s,
        "run_s": r.timing.run_s,
        "task": r.task,
        "lag": r.lag,
        "optimizer": r.optimizer,
        "learning_rate": r.learning_rate,
        "clip": r.clip,
        "steps": r.steps,
        "steps_run": r.steps_run,
        "baseline": r.baseline,
        "final_loss": final if final == final else None,
        "solved_step": r.solved_step,
        "nonfinite_step": r.nonfinite_step,
        "clip_count": r.clip_count,
        "steps_per_s": r.timing.steps_per_s,
        "ms_per_step": 1e3 / r.timing.steps_per_s,
    }


def train_bench(
    cfg: RunConfig, steps: int = 1500, seeds: int = 3, seq_lens=(50, 100, 200), out=sys.stdout
) -> list[dict]:
    """Speed (chunked scan vs a Python loop of one jitted step, same run) and the learning
    table (adding; cells × T × seeds, Adam 1e-3, clip 1, B = 64, H = 64, ``steps`` steps)."""

    print(f"speed: {_label_of(cfg)}, adding, Adam 1e-3, clip 1", file=out)
    train(cfg, "adding", steps=100, log_every=100)  # compiles the chunk
    chunked = train(cfg, "adding", steps=500, log_every=100)
    loop = loop_steps_per_s(cfg, 500)
    print(
        "  chunked lax.scan (100 steps per call, with a gradient profile per call): "
        f"{1e3 / chunked.timing.steps_per_s:6.2f} ms/step",
        file=out,
    )
    print(
        f"  Python loop over one jitted step:                                          {1e3 / loop:6.2f} "
        "ms/step",
        file=out,
    )
    print(f"  chunked is ×{chunked.timing.steps_per_s / loop:.2f} the loop's steps/s", file=out, flush=True)
    if cfg.cell == "lstm":
        floor = xla_lstm_floor(cfg.batch_size or 1, cfg.seq_len, cfg.hidden_size)
        print(
            f"  XLA:CPU floor of any LSTM step here (hand-written forward {floor.forward:.2f} + reverse "
            f"{floor.reverse:.2f}"
            f" + ∂L/∂W_h GEMM {floor.weight_gemm:.2f}): {floor.total:6.2f} ms/step",
            file=out,
            flush=True,
        )
    records = [train_record(chunked, "chunked")]
    print(
        f"\nlearning table: adding, B=64, H=64, {steps} steps, {seeds} seeds in one vmapped call per cell "
        "and T",
        file=out,
    )
    print(
        f"{'cell':<10} {'T':>4} {'final MSE/baseline':>24} {'solved':>7} {'solved step (mean, range)':>26} "
        f"{'diverged':>9} {'s per run':>10}",
        file=out,
        flush=True,
    )
    for name, fields in LEARNING_CELLS.items():
        for t in seq_lens:
            base = RunConfig(**{**dict(hidden_size=64, input_size=2, batch_size=64, seq_len=t), **fields})
            runs = train_many(
                base,
                {"seed": list(range(seeds))},
                task="adding",
                steps=steps,
                learning_rate=1e-3,
                clip=1.0,
                log_every=100,
            )
            ratios = [r.final_loss() / r.baseline for r in runs if r.nonfinite_step is None]
            solved = [r.solved_step for r in runs if r.solved_step is not None]
            diverged = [r.nonfinite_step for r in runs if r.nonfinite_step is not None]
            loss = (
                f"{sum(ratios) / len(ratios):>10.3f} ({min(ratios):.3f}–{max(ratios):.3f})"
                if ratios
                else f"{'—':>24}"
            )
            when = f"{sum(solved) / len(solved):.0f} ({min(solved)}–{max(solved)})" if solved else "—"
            nan = f"{len(diverged)} (step {min(diverged)})" if diverged else "0"
            per_run = runs[0].timing.run_s / len(runs)
            print(
                f"{name:<10} {t:>4} {loss} {len(solved)}/{len(runs):<5} {when:>26} {nan:>9} {per_run:>10.1f}",
                file=out,
                flush=True,
            )
            records += [train_record(r, "chunked", "train-learning") for r in runs]
    return records


#: Most steps of the text table (its LSTM runs' FLOPs stay inside the training budget).
TEXT_STEPS = 1000


def steps_to_fraction(steps: np.ndarray, metric: np.ndarray, fraction: float = 0.9) -> int | None:
    """The first profile step whose held-out metric reaches ``fraction`` of its final value."""
    if not metric.size or not np.isfinite(metric[-1]):
        return None
    hit = np.flatnonzero(metric >= fraction * metric[-1])
    return int(steps[hit[0]]) if hit.size else None


def data_bench(base: RunConfig, steps: int = 1500, seeds: int = 3, out=sys.stdout) -> list[dict]:
    """The real-data learning table: each design of ``DATA_LEARNING_CELLS`` on the digits
    pixel by pixel and permuted (T=64, I=1), ``seeds`` seeds in one vmapped call, Adam 1e-3,
    clip 1, ``steps`` steps: held-out accuracy (mean, range), steps to 90 % of the final
    accuracy, seconds per run; then :func:`text_table` with at most :data:`TEXT_STEPS`
    steps (three LSTM runs of T=100 at 2000 steps are over the training FLOP budget)."""
    print(
        f"learning table: digits, B={base.batch_size}, H={base.hidden_size}, {steps} steps, Adam 1e-3, "
        f"clip 1, {seeds} seeds in one vmapped call; held-out accuracy on the 359 test digits",
        file=out,
    )
    print(
        f"{'cell':<10} {'order':<9} {'accuracy (mean, range)':>24} {'90 % at step':>13} {'s/run':>7}",
        file=out,
    )
    records: list[dict] = []
    for order in DIGIT_ORDERS:
        ds = load_dataset("digits", order=order)
        for name, fields in DATA_LEARNING_CELLS.items():
            cfg = base.replace(**fields)
            runs = train_many(
                cfg, {"seed": list(range(seeds))}, task=ds, steps=steps, learning_rate=1e-3, log_every=100
            )
            acc = [float(r.held_out_metric[-1]) for r in runs]
            reach = [steps_to_fraction(r.held_out_steps, r.held_out_metric) for r in runs]
            reach = [s for s in reach if s is not None]
            when = f"{np.mean(reach):.0f}" if reach else "—"
            per_run = runs[0].timing.run_s / len(runs)
            print(
                f"{name:<10} {order:<9} {np.mean(acc):>10.3f} ({min(acc):.3f}–{max(acc):.3f}) "
                f"{when:>13} {per_run:>7.1f}",
                file=out,
                flush=True,
            )
            records += [_data_record(r, f"digits {order}") for r in runs]
    return records + text_table(min(steps, TEXT_STEPS), seeds, out)


def text_table(steps: int = 1000, seeds: int = 3, out=sys.stdout) -> list[dict]:
    """Held-out bits per character on the prose text (T=100, one-hot, H=128, B=32) after
    ``steps`` steps for each of ``TEXT_CELLS``, ``seeds`` seeds in one vmapped call."""
    records: list[dict] = []
    text = load_dataset("text", corpus="prose", seq_len=100)
    print(
        f"\ntext (prose, T=100, I={text.input_size}), H=128, B=32, {steps} steps: held-out bits/char",
        file=out,
    )
    for name in TEXT_CELLS:
        cfg = RunConfig(hidden_size=128, input_size=text.input_size, seq_len=100, batch_size=32)
        runs = train_many(
            cfg.replace(**DATA_LEARNING_CELLS[name]),
            {"seed": list(range(seeds))},
            task=text,
            steps=steps,
            learning_rate=1e-3,
            log_every=100,
        )
        bits = [float(r.held_out_metric[-1]) for r in runs]
        unigram = runs[0].baseline / np.log(2.0)
        print(
            f"{name:<10} {np.mean(bits):.3f} ({min(bits):.3f}–{max(bits):.3f}) bits/char "
            f"(unigram {unigram:.3f}); {runs[0].timing.run_s / len(runs):.1f} s per run",
            file=out,
            flush=True,
        )
        records += [_data_record(r, "text prose") for r in runs]
    return records


def _data_record(r, data: str) -> dict:
    """A ``kind: "train"`` record of a run on a data set, with its held-out curve."""
    return {
        **train_record(r, "chunked", "data-learning"),
        "data": data,
        "held_out_steps": r.held_out_steps.tolist(),
        "held_out_metric": r.held_out_metric.tolist(),
    }


def lyapunov_bench(cfg: RunConfig, k: int = 16, repeats: int = 5, out=sys.stdout) -> dict[str, float]:
    """The QR method in one compiled scan against :func:`reference_lyapunov`, same run."""

    fast = lyapunov(cfg, k=k, warmup=0, measure_decay=False, repeats=repeats)
    reference_lyapunov(cfg.replace(seq_len=2), k)  # compiles its two jitted functions
    start = time.perf_counter()
    ref = reference_lyapunov(cfg, k)
    ref_s = time.perf_counter() - start
    diff = float(np.max(np.abs(np.sort(ref)[::-1] - fast.exponents)))
    print(f"Lyapunov spectrum, k={k}, {_label_of(cfg)}", file=out)
    print(
        f"  compiled scan (rnnviz.exponents): {fast.run_s * 1e3:9.1f} ms  (median of {repeats}; compile "
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
        text = f"{_label_of(cfg):<40} {ms['grad', 'accumulate']:>11.2f} {ms['grad', 'parallel']:>11.2f} "
        text += (
            f"{ms['grad', 'parallel'] / ms['grad', 'accumulate']:>6.2f} {ms['analyze', 'accumulate']:>11.2f} "
        )
        text += (
            f"{ms['analyze', 'parallel']:>11.2f} "
            f"{ms['analyze', 'parallel'] / ms['analyze', 'accumulate']:>6.2f}"
        )
        print(text, file=out, flush=True)
    return records


def _label_of(cfg: RunConfig) -> str:

    return label(cfg)


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
            kw = dict(repeats=repeats, device=device, suite=suite, budget_s=budget_s)
            base = measure(cfg, measure="grad", strategy="plain_grad", **kw)
            base["ratio_to_plain_grad"] = 1.0
            row = [base]
            for s in strategies:
                try:
                    row.append(measure(cfg, measure="grad", strategy=s, **kw))
                except ConfigError:
                    continue
            row.append(measure(cfg, measure="analyze", strategy="accumulate", **kw))
            row.append(measure(cfg, measure="log_pass", strategy="accumulate", **kw))
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
) -> int:
    """Run one suite, print its table and append its records to ``record`` when given.

    Args:
        suite: a key of :data:`~rnnviz.bench.suites.SUITES`.
        repeats: timed runs per measurement after one warm-up.
        record: a JSON-lines file to append schema-1 records to.
        budget: seconds of timed runs per measurement (0: no limit).
        all_devices: measure on the first CPU and the first GPU (when present).
        steps: training steps per run of the train suite's learning table.

    Returns:
        The process exit status (0).
    """

    configs = SUITES[suite]()
    budget_s = budget if budget > 0 else None
    if suite == "sweep":
        sweep_bench(configs[0])
        return 0
    if suite == "lyapunov":
        lyapunov_bench(configs[0], repeats=min(repeats, 5))
        return 0
    if suite == "train":
        records = train_bench(configs[0], steps=steps)
    elif suite == "data":
        records = data_bench(configs[0], steps=steps)
    elif suite == "perf":
        records = perf_bench(configs, repeats, budget_s)
    elif suite == "parallel":
        print(
            f"suite parallel: {len(configs)} configs; ratio = parallel (associative scan) / "
            "accumulate (sequential scan) run time"
        )
        records = parallel_bench(configs, repeats, budget_s=budget_s)
    else:
        devices = None
        if all_devices:
            devices = [d for platform in ("cpu", "gpu") for d in _devices(platform)[:1]]
        print(
            f"suite {suite}: {len(configs)} configs, {repeats} timed runs each; ratios are run time / "
            "plain jax.grad run time"
        )
        records = run_suite(configs, suite, repeats, devices, budget_s=budget_s)
    if record:
        print(f"appended {append_records(record, records)} records to {record}")
    return 0


def _devices(platform: str) -> list:
    try:
        return jax.devices(platform)
    except RuntimeError:
        return []

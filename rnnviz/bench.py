"""``python -m rnnviz bench``: strategy and analysis cost as ratios to plain ``jax.grad``.

The "+log pass×" column is the log-magnitude reverse pass on its own (what ``analyze``
adds, only when float32 cannot hold every gradient norm).

Every ratio's baseline is measured in the same process, right before, on the same
inputs: absolute times vary across machines, ratios much less. Not a test: nothing here
asserts a time.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import NamedTuple

from rnnviz.config import RunConfig

SMALL = dict(batch_size=8, seq_len=50, input_size=8, hidden_size=32)
BIG = dict(batch_size=32, seq_len=200, input_size=32, hidden_size=128)


def strategies_suite() -> list[RunConfig]:
    """LSTM, GRU and simple cells at B=8·T=50·H=32 and B=32·T=200·I=32·H=128."""
    return [RunConfig(cell=c, **size) for size in (SMALL, BIG) for c in ("lstm", "gru", "simple")]


def devices_suite() -> list[RunConfig]:
    """T ∈ {50, 200, 1000} × H ∈ {32, 128, 512} × B ∈ {8, 64}, LSTM, I = 32."""
    return [
        RunConfig(cell="lstm", seq_len=t, hidden_size=h, batch_size=b, input_size=32)
        for b in (8, 64)
        for h in (32, 128, 512)
        for t in (50, 200, 1000)
    ]


def parallel_suite() -> list[RunConfig]:
    """mingru and lru, H=128, B=16, I=32, T ∈ {256, 1024, 4096, 16384}."""
    return [
        RunConfig(cell=c, hidden_size=128, batch_size=16, input_size=32, seq_len=t)
        for c in ("mingru", "lru")
        for t in (256, 1024, 4096, 16384)
    ]


def perf_suite() -> list[RunConfig]:
    """LSTM and GRU at B=32·T=200·I=32·H=128 and B=8·T=50·I=8·H=32."""
    return [RunConfig(cell=c, **size) for size in (BIG, SMALL) for c in ("lstm", "gru")]


#: The long-sequence rows of the perf suite: LSTM B=8·I=32·H=128 at T = 1000, 10 000 and
#: 100 000 (at 100 000 the accumulator is over the memory budget; checkpoint is not).
LONG = dict(cell="lstm", batch_size=8, input_size=32, hidden_size=128)
LONG_LENGTHS = (1000, 10_000, 100_000)

SUITES = {
    "strategies": strategies_suite,
    "perf": perf_suite,
    "devices": devices_suite,
    "sweep": lambda: [RunConfig(seq_len=100)],
    "parallel": parallel_suite,
    "lyapunov": lambda: [
        RunConfig(cell="simple", hidden_size=256, seq_len=1000, batch_size=None, input_size=32)
    ],
    "train": lambda: [
        RunConfig(cell="lstm", forget_bias=1.0, hidden_size=64, input_size=2, seq_len=100, batch_size=64)
    ],
}

#: The learning table's designs (Le, Jaitly & Hinton 2015): tanh RNN, IRNN (ReLU with an
#: identity recurrent init), LSTM with forget bias 1, GRU; all H = 64.
LEARNING_CELLS = {
    "tanh RNN": dict(cell="simple", activation="tanh"),
    "IRNN": dict(cell="simple", activation="relu", recurrent_init="identity"),
    "LSTM fb=1": dict(cell="lstm", forget_bias=1.0),
    "GRU": dict(cell="gru"),
}


def train_record(r, mode: str, suite: str = "train") -> dict:
    """A schema-1 ``kind: "train"`` record of one training run."""
    import jax

    from rnnviz.comparisons import _label
    from rnnviz.records import SCHEMA, environment, now_utc

    env = environment()
    device = jax.devices()[0]
    final = r.final_loss()
    return {
        "schema": SCHEMA,
        "kind": "train",
        "suite": suite,
        "label": _label(r.config),
        "config": r.config.to_dict(),
        "mode": mode,
        "device_kind": device.platform,
        "device_name": str(device.device_kind),
        "backend": jax.default_backend(),
        "jax_version": env["jax_version"],
        "jaxlib_version": env["jaxlib_version"],
        "flax_version": env["flax_version"],
        "cpu_count": env["cpu_count"],
        "allocator": env["allocator"],
        "timestamp": now_utc(),
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


def loop_steps_per_s(cfg: RunConfig, steps: int, task: str = "adding", log_every: int = 100) -> float:
    """Steps/s of a Python loop calling one jitted (donating) optimisation step — the same
    step the chunked scan runs, without its per-chunk probe profile."""
    import time

    import jax
    import numpy as np

    from rnnviz.analysis import Values, seed_key
    from rnnviz.train import Hyper, check_training, init_state, step_fn

    _, spec = check_training(cfg, task, steps, 1e-3, "adam", 1.0, log_every, 0)
    key, values, hyper = seed_key(cfg.seed), Values.of(cfg), Hyper(np.float32(1e-3), np.float32(1.0))
    state = jax.jit(init_state, static_argnums=(0, 1))(cfg, spec, key, values)
    one = jax.jit(lambda st, k, v, h, i: step_fn(cfg, spec, k, v, h)(st, i), donate_argnums=(0,))
    state, rec = one(state, key, values, hyper, np.int32(0))  # compile
    jax.block_until_ready(rec)
    start = time.perf_counter()
    for i in range(1, steps + 1):
        state, rec = one(state, key, values, hyper, np.int32(i))
    jax.block_until_ready((state, rec))
    return steps / (time.perf_counter() - start)


def train_bench(
    cfg: RunConfig, steps: int = 1500, seeds: int = 3, seq_lens=(50, 100, 200), out=sys.stdout
) -> list[dict]:
    """Speed (chunked scan vs a Python loop of one jitted step, same run) and the learning
    table (adding; cells × T × seeds, Adam 1e-3, clip 1, B = 64, H = 64, ``steps`` steps)."""
    from rnnviz.train import train, train_many

    print(f"speed: {_label_of(cfg)}, adding, Adam 1e-3, clip 1", file=out)
    train(cfg, "adding", steps=100, log_every=100)  # compiles the chunk
    chunked = train(cfg, "adding", steps=500, log_every=100)
    loop = loop_steps_per_s(cfg, 500)
    print(
        f"  chunked lax.scan (100 steps per call, with a gradient profile per call): {1e3 / chunked.timing.steps_per_s:6.2f} ms/step",
        file=out,
    )
    print(
        f"  Python loop over one jitted step:                                          {1e3 / loop:6.2f} ms/step",
        file=out,
    )
    print(f"  chunked is ×{chunked.timing.steps_per_s / loop:.2f} the loop's steps/s", file=out, flush=True)
    if cfg.cell == "lstm":
        floor = xla_lstm_floor(cfg.batch_size or 1, cfg.seq_len, cfg.hidden_size)
        print(
            f"  XLA:CPU floor of any LSTM step here (hand-written forward {floor.forward:.2f} + reverse {floor.reverse:.2f}"
            f" + ∂L/∂W_h GEMM {floor.weight_gemm:.2f}): {floor.total:6.2f} ms/step",
            file=out,
            flush=True,
        )
    records = [train_record(chunked, "chunked")]
    print(
        f"\nlearning table: adding, B=64, H=64, {steps} steps, {seeds} seeds in one vmapped call per cell and T",
        file=out,
    )
    print(
        f"{'cell':<10} {'T':>4} {'final MSE/baseline':>24} {'solved':>7} {'solved step (mean, range)':>26} {'diverged':>9} {'s per run':>10}",
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


def reference_lyapunov(cfg: RunConfig, k: int):
    """The straightforward way: a Python loop over steps, the explicit J_t from a jitted
    ``jax.jacfwd`` of one step, NumPy's QR. Same trajectory and start directions as
    :func:`rnnviz.lyapunov.lyapunov` (warm-up 0). Returns the k exponents, unsorted."""
    import jax
    import numpy as np

    from rnnviz.analysis import prepared_inputs
    from rnnviz.cells import make_cell
    from rnnviz.gradients import full_carry0
    from rnnviz.lyapunov import flat_step, initial_directions, pack, unpacker

    params, carry0, xs = prepared_inputs(cfg)
    carry0 = full_carry0(cfg, carry0)
    step = flat_step(make_cell(cfg), params, unpacker(carry0))
    advance = jax.jit(step)
    jacobian = jax.jit(jax.jacfwd(step))
    v = pack(carry0)
    q = np.asarray(
        initial_directions(jax.random.key_data(jax.random.key(cfg.seed)), v.shape[-1], k), np.float64
    )
    total = np.zeros(k)
    for t in range(cfg.seq_len):
        j = np.asarray(jacobian(v, xs[t]), np.float64)
        q, r = np.linalg.qr(j @ q)
        total += np.log(np.abs(np.diag(r)))
        v = advance(v, xs[t])
    return total / cfg.seq_len


def lyapunov_bench(cfg: RunConfig, k: int = 16, repeats: int = 5, out=sys.stdout) -> dict[str, float]:
    """The QR method in one compiled scan against :func:`reference_lyapunov`, same run."""
    import time

    import numpy as np

    from rnnviz.lyapunov import lyapunov

    fast = lyapunov(cfg, k=k, warmup=0, measure_decay=False, repeats=repeats)
    reference_lyapunov(cfg.replace(seq_len=2), k)  # compiles its two jitted functions
    start = time.perf_counter()
    ref = reference_lyapunov(cfg, k)
    ref_s = time.perf_counter() - start
    diff = float(np.max(np.abs(np.sort(ref)[::-1] - fast.exponents)))
    print(f"Lyapunov spectrum, k={k}, {_label_of(cfg)}", file=out)
    print(
        f"  compiled scan (rnnviz.lyapunov): {fast.run_s * 1e3:9.1f} ms  (median of {repeats}; compile {fast.compile_s:.2f} s)",
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
    from rnnviz.comparisons import measure

    print(
        f"{'config':<40} {'seq grad ms':>11} {'par grad ms':>11} {'ratio':>6} {'seq anl ms':>11} {'par anl ms':>11} {'ratio':>6}",
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
        text += f"{ms['analyze', 'parallel']:>11.2f} {ms['analyze', 'parallel'] / ms['analyze', 'accumulate']:>6.2f}"
        print(text, file=out, flush=True)
    return records


def _label_of(cfg: RunConfig) -> str:
    from rnnviz.comparisons import _label

    return _label(cfg)


def sweep_bench(cfg: RunConfig, n: int = 256, out=sys.stdout) -> dict[str, float]:
    """One vmapped sweep of ``n`` gains against ``n`` sequential analyses, same process.

    Sequential is measured two ways: ``analyze(cfg, repeats=1)`` per gain (what a user
    loop does) and the bare compiled prepare + analysis calls (no timing, no host copy)."""
    import time

    import jax

    from rnnviz.analysis import Values, analyze, executables, resolve_device, seed_key, static_config
    from rnnviz.sweeps import run_points, sweep_devices

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
        f"config: {cfg.cell} T={cfg.seq_len} B={cfg.batch_size} H={cfg.hidden_size}; {n} gains; devices: {len(sweep_devices(cfg))}",
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


def gemm_flops_per_s(repeats: int = 20) -> float:
    """FLOP/s of one large float32 GEMM (6400×160 · 160×512, the LSTM's input-and-recurrent
    product at B·T = 6400), measured now: the machine's practical peak for this work."""
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np

    a = jax.random.normal(jax.random.key(0), (6400, 160), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (160, 512), jnp.float32)
    f = jax.jit(jnp.dot)
    f(a, b).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    return 2.0 * 6400 * 160 * 512 / float(np.median(times))


class Floor(NamedTuple):
    """Milliseconds of the three pieces any LSTM forward + backward on XLA:CPU must run,
    each written by hand at its cheapest (see :func:`xla_lstm_floor`)."""

    forward: float
    reverse: float
    weight_gemm: float

    @property
    def total(self) -> float:
        return self.forward + self.reverse + self.weight_gemm


def xla_lstm_floor(batch: int, seq_len: int, hidden: int, repeats: int = 100) -> Floor:
    """The floor of an LSTM's parameter gradient built from XLA:CPU primitives, measured now.

    - forward: a ``lax.scan`` of ``h W_h`` (one product per gate: slicing four gates out of
      one ``[B, 4H]`` product costs XLA:CPU about 2× the element-wise step) and the gates,
      saving nothing;
    - reverse: a reverse ``lax.scan`` of the element-wise LSTM reverse and ``dz W_hᵀ``,
      storing dz — the least a reverse pass does;
    - weight GEMM: ∂L/∂W_h = ``[T·B, H]ᵀ · [T·B, 4H]`` once.

    Their sum leaves out the input projections, the loss, the optimiser and every
    residual store: an LSTM gradient built from the same primitives is not expected to
    be faster (each piece: the fastest of ``repeats`` timed runs, as every bench number)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from rnnviz.timing import time_runs

    keys = jax.random.split(jax.random.key(0), 4)
    w = tuple(jax.random.normal(k, (hidden, hidden), jnp.float32) / np.sqrt(hidden) for k in keys)
    wt = tuple(m.T for m in w)
    # Four separate [T, B, H] arrays: slicing gates out of one scanned block is XLA:CPU's slow path.
    zx = tuple(
        jax.random.normal(k, (seq_len, batch, hidden), jnp.float32)
        for k in jax.random.split(jax.random.key(1), 4)
    )
    sig = jax.nn.sigmoid

    def forward(w, zx):
        def step(carry, z):
            c, h = carry
            i, f, g, o = (z[k] + h @ w[k] for k in range(4))
            c = sig(f) * c + sig(i) * jnp.tanh(g)
            return (c, sig(o) * jnp.tanh(c)), None

        zeros = jnp.zeros((batch, hidden), jnp.float32)
        return jax.lax.scan(step, (zeros, zeros), zx)[0]

    res = tuple(sig(z) for z in zx)  # stands in for the saved gate activations i, f, g, o

    def reverse(wt, res, gh):
        def step(carry, inp):
            gc, gh_next = carry
            (i, f, g, o), c, gh_t = inp
            gh_all = gh_next + gh_t
            tc = jnp.tanh(c)
            gc = gc + gh_all * o * (1.0 - tc * tc)
            dz = (
                gc * g * i * (1.0 - i),
                gc * c * f * (1.0 - f),
                gc * i * (1.0 - g * g),
                gh_all * tc * o * (1.0 - o),
            )
            return (gc * f, sum(d @ m for d, m in zip(dz, wt))), dz

        zeros = jnp.zeros((batch, hidden), jnp.float32)
        return jax.lax.scan(step, (zeros, zeros), (res, zx[0], gh), reverse=True)

    a = jax.random.normal(jax.random.key(2), (seq_len * batch, hidden), jnp.float32)
    d = jax.random.normal(jax.random.key(3), (seq_len * batch, 4 * hidden), jnp.float32)

    def best(fn, *args) -> float:
        return 1e3 * time_runs(fn, args, repeats)[1].min_s

    return Floor(
        best(jax.jit(forward), w, zx),
        best(jax.jit(reverse), wt, res, zx[1]),
        best(jax.jit(lambda a, d: a.T @ d), a, d),
    )


def torch_lstm_s(cfg: RunConfig, repeats: int = 20) -> float | None:
    """Median seconds of PyTorch's fused ``nn.LSTM`` forward + backward (parameter
    gradients of ½‖h_T‖²) on ``cfg``'s shape, or None when PyTorch is not installed (it is
    an optional peer, never a dependency)."""
    try:
        import torch
    except ImportError:
        return None
    import time

    import numpy as np

    torch.manual_seed(cfg.seed)
    lstm = torch.nn.LSTM(cfg.input_size, cfg.hidden_size, batch_first=True)
    x = torch.randn(cfg.batch_size or 1, cfg.seq_len, cfg.input_size)

    def once() -> None:
        lstm.zero_grad(set_to_none=True)
        _, (h, _) = lstm(x)
        (0.5 * (h * h).sum()).backward()

    once()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def perf_bench(configs: list[RunConfig], repeats: int, budget_s: float | None, out=sys.stdout) -> list[dict]:
    """analyze with each exact strategy vs plain ``jax.grad``, achieved FLOP/s vs a GEMM, the
    PyTorch peer when installed, and T up to 100 000 with ``checkpoint`` — all in one run."""
    from rnnviz.comparisons import _label, available_strategies, measure
    from rnnviz.config import ConfigError

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
            f"{_label(cfg):<38} {base['run_s'] * 1e3:>9.2f} {ratios} {best['flops_per_s'] / 1e9:>9.1f} ({best['strategy'][:3]})"
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
                f"{t:>7} {s:<11} {rec['run_s']:>8.3f} {per_step * 1e6:>8.1f} {per_step / first[s]:>10.2f} {rec['peak_bytes'] / 2**20:>9.0f}",
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
    from rnnviz.analysis import resolve_device
    from rnnviz.comparisons import available_strategies, measure
    from rnnviz.config import ConfigError

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
    from rnnviz.comparisons import _label

    base, *per, anl, log_pass = row
    mb = lambda r: r["peak_bytes"] / 2**20  # noqa: E731
    by = {r["strategy"]: r for r in per}
    text = f"{_label(cfg):<42} {device.platform + ':' + str(device.id):<10} {base['run_s'] * 1e3:>9.3f} "
    text += " ".join(
        f"{by[s]['ratio_to_plain_grad']:>10.2f}" if s in by else f"{'—':>10}" for s in strategies
    )
    text += f" {anl['ratio_to_plain_grad']:>9.2f} {log_pass['ratio_to_plain_grad']:>10.2f} {base['compile_s']:>4.2f}/{anl['compile_s']:<5.2f}"
    per_step = f"{mb(by['per_step']):.1f}" if "per_step" in by else "—"
    text += f" {mb(base):>6.1f}/{mb(by['accumulate']):.1f}/{per_step}/{mb(anl):.1f}"
    return text


def cmd_bench(args: argparse.Namespace) -> int:
    import jax

    from rnnviz.records import append_records

    configs = SUITES[args.suite]()
    if args.suite == "sweep":
        sweep_bench(configs[0])
        return 0
    if args.suite == "lyapunov":
        lyapunov_bench(configs[0], repeats=min(args.repeats, 5))
        return 0
    if args.suite == "train":
        records = train_bench(configs[0], steps=args.steps)
        if args.record:
            print(f"appended {append_records(args.record, records)} records to {args.record}")
        return 0
    budget = args.budget if args.budget > 0 else None
    if args.suite == "perf":
        records = perf_bench(configs, args.repeats, budget)
        if args.record:
            print(f"appended {append_records(args.record, records)} records to {args.record}")
        return 0
    if args.suite == "parallel":
        print(
            f"suite parallel: {len(configs)} configs; ratio = parallel (associative scan) / accumulate (sequential scan) run time"
        )
        records = parallel_bench(configs, args.repeats, budget_s=budget)
        if args.record:
            print(f"appended {append_records(args.record, records)} records to {args.record}")
        return 0
    devices = None
    if args.all_devices:
        devices = [d for platform in ("cpu", "gpu") for d in _devices(jax, platform)[:1]]
    print(
        f"suite {args.suite}: {len(configs)} configs, {args.repeats} timed runs each; ratios are run time / plain jax.grad run time"
    )
    records = run_suite(configs, args.suite, args.repeats, devices, budget_s=budget)
    if args.record:
        n = append_records(args.record, records)
        print(f"appended {n} records to {args.record}")
    return 0


def _devices(jax, platform: str):
    try:
        return jax.devices(platform)
    except RuntimeError:
        return []


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmark strategies and analyze against plain jax.grad")
    p.add_argument(
        "--suite",
        choices=sorted(SUITES),
        default="strategies",
        help="which fixed suite to run (default: strategies)",
    )
    p.add_argument(
        "--repeats", type=int, default=20, help="timed runs per measurement after one warm-up (default 20)"
    )
    p.add_argument("--record", metavar="PATH", help="append one schema-1 JSON line per measurement to PATH")
    p.add_argument(
        "--budget",
        type=float,
        default=3.0,
        help="seconds of timed runs per measurement; slow ones get fewer runs, never under 3 (0: no limit; default 3)",
    )
    p.add_argument(
        "--all-devices", action="store_true", help="run on the first CPU and the first GPU (when present)"
    )
    p.add_argument(
        "--steps",
        type=int,
        default=1500,
        help="training steps per run in the train suite's learning table (default 1500)",
    )
    p.set_defaults(func=cmd_bench)

"""Command line: ``rnnviz analyze | sweep | lyapunov | train | bench | data | connectivity | compare |
explorable | app`` (or ``python -m rnnviz …``).

Every :class:`RunConfig` field is a flag (``--hidden-size``), with its range in
``--help``. Bad values print one line naming the field and what is allowed, exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rnnviz.base.formatting import finite_json, pow10_text
from rnnviz.base.readings import regime
from rnnviz.bench.suites import BLOCK_DEPTHS, BLOCK_PARAMS, SUITES
from rnnviz.cli.argtypes import bounded_int, count_list, finite_nonnegative, int_list, parameter_count
from rnnviz.cli.compare import add_parser as add_compare
from rnnviz.cli.explorable import add_parser as add_explorable
from rnnviz.cli.inputs import (
    add_config_flags,
    add_data_flag,
    add_data_options,
    add_weights_flag,
    config_and_data,
    data_options,
    parse_over,
)
from rnnviz.cli.launch import add_parser as add_app
from rnnviz.cli.model import add_model_flags, cmd_analyze_model
from rnnviz.cli.trained import add_connectivity, cmd_over_training
from rnnviz.config import FIELD_SPECS, ConfigError, RunConfig


def _summary_text(a) -> str:
    from rnnviz.frames.verdicts import verdict

    g = a.log10_grad_norms
    lines = [
        f"config: {a.config.to_dict()}",
        *([] if a.data is None else [f"data: a batch of {a.data} drawn by the seed, with its task loss"]),
        *([] if a.weights is None else [f"weights: {a.weights}"]),
        f"loss = {a.loss:.6g}",
        f"‖∂L/∂carry_t‖: t=0 {pow10_text(g[0])}  t=T/2 {pow10_text(g[len(g) // 2])}  t=T "
        f"{pow10_text(g[-1])}  (exact; from {a.log10_source})",
        f"verdict: {verdict(a).text}",
    ]
    zeros = np.flatnonzero(np.isneginf(g))
    if zeros.size:
        lines.append(
            f"‖∂L/∂carry_t‖ is exactly 0 (no dependence) at {zeros.size} steps (last at t={zeros[-1]})"
        )
    if a.nonfinite_carry_step is not None:
        lines.append(f"the carry overflows (NaN/Inf) at step {a.nonfinite_carry_step}")
    if a.nonfinite_grad_step is not None:
        lines.append(f"the gradient is NaN/Inf from step {a.nonfinite_grad_step} back to 0")
    t = a.timing
    lines.append(
        f"timing: compile {t.compile_s:.3f}s, run median {t.run_s * 1e3:.3f} ms over {t.repeats} ({t.device})"
        + (", a small shape compiled for compile speed (-O0)" if t.quick_compiled else "")
    )
    return "\n".join(lines)


def cmd_analyze(args: argparse.Namespace) -> int:
    """``rnnviz analyze``: print the summary (or ``--json``), and write ``--csv`` per-timestep rows.

    Returns:
        0.
    """
    if any(getattr(args, n) is not None for n in ("model", "design", "params")):
        return cmd_analyze_model(args)
    cfg, ds, weights = config_and_data(args)
    return ANALYZE[cfg.block](cfg, ds, weights, args)


def _analyze_cell(cfg: RunConfig, ds, weights, args: argparse.Namespace) -> int:
    """A bare cell's analysis: the summary or ``--json``, and ``--csv`` per-timestep rows."""
    from rnnviz.analysis import analyze  # jax is imported only once a command needs it
    from rnnviz.frames.gradients import timestep_frame

    a = analyze(cfg, repeats=args.repeats, data=ds, params=weights)
    if args.csv:
        timestep_frame(a).to_csv(args.csv, index=False)
    if args.json:
        print(json.dumps(a.to_json()))
    else:
        print(_summary_text(a))
    return 0


def _analyze_block(cfg: RunConfig, ds, weights, args: argparse.Namespace) -> int:
    """A reference block's analysis (:func:`~rnnviz.studies.block_models.analyze_block`) on
    ``--data``'s first B sequences or the bare cell's inputs, at ``--weights``' tensors when a
    block's run is given: the per-layer summary or ``--json``; ``--csv`` is a bare cell's."""
    from rnnviz.cli.model import summary_text
    from rnnviz.studies.block_models import analyze_block

    if args.csv is not None:
        raise ConfigError("csv", args.csv, "not with --block reference (a bare cell's per-step rows)")
    a = analyze_block(cfg, data=ds, tensors=weights)
    print(json.dumps(a.to_json()) if args.json else summary_text(a, cfg.layers))
    return 0


#: ``RunConfig.block`` → what ``rnnviz analyze`` runs: one line per kind of block.
ANALYZE = {"cell": _analyze_cell, "reference": _analyze_block}


def _add_analyze(sub) -> None:
    p = sub.add_parser("analyze", help="per-timestep gradient norms for one configuration")
    add_config_flags(p)
    p.add_argument("--json", action="store_true", help="print the analysis as JSON")
    p.add_argument("--csv", metavar="PATH", help="write the per-timestep table as CSV")
    p.add_argument("--repeats", type=_positive_int, default=10, help="timed runs (1..1000, default 10)")
    add_data_flag(p, "analyse a batch (B sequences drawn by the seed, with its task loss) of")
    add_weights_flag(p, "analyse")
    add_model_flags(p)
    p.set_defaults(func=cmd_analyze)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``rnnviz`` parser: one subcommand each, its handler in the ``func`` default.

    Args:
        only: build that subcommand alone (:func:`main`, once it knows which is asked for):
            the others' flags validate a default :class:`RunConfig`, which imports the cells
            and so JAX (slow to import), and ``rnnviz app`` needs none of it.
    """
    parser = argparse.ArgumentParser(
        prog="rnnviz", description="Gradient flow through time in recurrent networks."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, add in COMMANDS:
        if only is None or name == only:
            add(sub)
    return parser


_positive_int = bounded_int(1, 1000)


def _add_bench(sub) -> None:
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
    p.add_argument(
        "--record",
        metavar="PATH",
        nargs="?",
        const="",
        help="append one schema-1 JSON line per measurement to PATH (without PATH: "
        "data/runs/SUITE-PLATFORM.jsonl, where the dashboard reads recorded runs; --suite gpu: PATH "
        "is a folder, default data/runs, for devices-PLATFORM.jsonl and PLATFORM-cudnn.jsonl)",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=3.0,
        help="seconds of timed runs per measurement; slow ones get fewer runs, never under 3 "
        "(0: no limit; default 3)",
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
    p.add_argument(
        "--sizes",
        choices=("auto", "full", "tiny", "real"),
        default="auto",
        help="--suite gpu: full (the GPU's sizes, about 5 minutes on one GPU), tiny (about a "
        "minute on a CPU), auto (full when JAX sees a GPU; default); it sizes its own repeats and budget. "
        "--suite models: real (about 130M parameters at T=512; auto too) or tiny; it sizes its own repeats",
    )
    p.add_argument(
        "--types",
        metavar="T1,T2",
        help="--suite models: the model types, comma-separated (default: mamba, falcon_mamba, "
        "mamba2, recurrent_gemma, xlstm); --suite designs-learning --block reference: the cells (default: "
        "every cell with a reference block)",
    )
    p.add_argument(
        "--block",
        choices=("cell", "reference"),
        default="cell",
        help="--suite designs-learning: the bare cells (default) or each design as its reference block, "
        "over --depths and --params",
    )
    p.add_argument(
        "--depths",
        type=int_list,
        default=BLOCK_DEPTHS,
        metavar="L1,L2",
        help="--block reference: the depths (default 2,4)",
    )
    p.add_argument(
        "--params",
        type=count_list,
        default=BLOCK_PARAMS,
        metavar="N1,N2",
        help="--block reference: about how many parameters (default 100k,400k)",
    )
    p.add_argument(
        "--skip-reference",
        action="store_true",
        help="--suite models only: measure rnnviz alone, not transformers' forward + backward",
    )
    p.set_defaults(func=cmd_bench)


def _add_data(sub) -> None:
    p = sub.add_parser(
        "data",
        help="describe a data set (built-in or your file) and draw one sequence; a bad file gets one message",
    )
    p.add_argument("source", help="digits, text, or a .npz/.npy/.csv/.parquet file")
    add_data_options(p)
    p.add_argument(
        "--index", type=bounded_int(0, 10**9), default=0, help="which sequence to draw (default 0)"
    )
    p.add_argument("--json", action="store_true", help="print the facts as JSON")
    p.set_defaults(func=cmd_data)


def cmd_data(args: argparse.Namespace) -> int:
    """``rnnviz data``: describe a data set and preview sequence ``--index`` (or its facts as ``--json``).

    Returns:
        0.

    Raises:
        ConfigError: ``--index`` is not below the number of sequences.
    """
    from rnnviz.dataset import load_dataset
    from rnnviz.dataset.describe import describe, preview, summary

    ds = load_dataset(args.source, **data_options(args, args.source))
    if not args.index < ds.n_sequences:
        raise ConfigError("index", args.index, f"an integer in [0, {ds.n_sequences - 1}] ({ds.name})")
    if args.json:
        print(json.dumps(summary(ds)))
    else:
        print(describe(ds))
        print(preview(ds, args.index))
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """``rnnviz bench``: run a suite (:func:`~rnnviz.bench.measure.run_bench`); a bare ``--record``
    appends to ``runs_dir()/SUITE-BACKEND.jsonl`` (``--suite gpu``: to its two files in ``runs_dir()``).

    Returns:
        :func:`~rnnviz.bench.measure.run_bench`'s exit status.
    """
    from rnnviz.bench.measure import run_bench  # JAX and the suites load only for this command

    record = args.record
    if record == "" and args.suite == "gpu":
        from rnnviz.dataset import runs_dir

        record = str(runs_dir())
    elif record == "":
        import jax

        from rnnviz.dataset import runs_dir

        record = str(runs_dir() / f"{args.suite}-{jax.default_backend()}.jsonl")
        Path(record).parent.mkdir(parents=True, exist_ok=True)
    return run_bench(
        args.suite,
        args.repeats,
        record,
        args.budget,
        args.all_devices,
        args.steps,
        args.sizes,
        args.types,
        args.skip_reference,
        args.block,
        args.depths,
        args.params,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and run the subcommand.

    Args:
        argv: the arguments after the program name; unknown ones only where the command takes them (``app``).

    Returns:
        The command's exit status; 2 after printing ``error: …`` for a ConfigError.
    """
    from rnnviz.engine.allocator import keep_freed_buffers

    keep_freed_buffers()  # once per process, before the first executable runs
    argv = sys.argv[1:] if argv is None else list(argv)
    named = argv[0] if argv and argv[0] in dict(COMMANDS) else None
    parser = build_parser(only=named)
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_extra", False):
        parser.error("unrecognized arguments: " + " ".join(extra))
    args.extra = extra
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def cmd_sweep(args: argparse.Namespace) -> int:
    """``rnnviz sweep``: write the tidy sweep frame to ``--csv``, or print log₁₀ ‖∂L/∂carry‖ by lag
    (about ten rows) against the swept values.

    Returns:
        0.
    """
    from rnnviz.studies.sweep import sweep

    cfg, ds, weights = config_and_data(args)
    df = sweep(cfg, parse_over(args.over), data=ds, params=weights)
    if args.csv:
        df.to_csv(args.csv, index=False)
        print(f"wrote {len(df)} rows to {args.csv}")
    else:
        swept = [c for c in df.columns if c not in ("t", "lag", "component", "grad_norm", "log10_grad_norm")]
        table = df[df["component"] == "total"].pivot_table(
            index="lag", columns=swept, values="log10_grad_norm"
        )
        print("log10 ‖∂L/∂carry_{T−lag}‖ (exact)")
        print(table.iloc[:: max(1, cfg.seq_len // 10)].to_string(float_format="%.2f"))
    return 0


def _add_sweep(sub) -> None:
    p = sub.add_parser("sweep", help="gradient norms over a grid of values, one compiled call per shape")
    add_config_flags(p)
    p.add_argument(
        "--over",
        action="append",
        required=True,
        metavar="FIELD=VALUES",
        help="a field and its values: recurrent_gain=0.5:1.5:64 or seed=0,1,2 (repeatable)",
    )
    p.add_argument("--csv", metavar="PATH", help="write the tidy sweep table as CSV")
    add_data_flag(p, "each point on a batch (drawn by its seed) of")
    add_weights_flag(p, "every point runs (the swept gain scales their recurrence)")
    p.set_defaults(func=cmd_sweep)


def lyapunov_json(ly) -> dict[str, Any]:
    """The :class:`~rnnviz.studies.lyapunov.Lyapunov` ``ly`` as plain JSON values (NaN/Inf as null)."""
    decay = None if ly.decay is None else ly.decay._asdict()
    return finite_json(
        {
            "config": ly.config.to_dict(),
            "k": ly.k,
            "warmup": ly.warmup,
            "qr_every": ly.qr_every,
            "exponents": ly.exponents.astype(float).tolist(),
            "exponents_spread": ly.exponents_spread.astype(float).tolist(),
            "lambda1": ly.lambda1,
            "measured_decay": decay,
            "compile_s": ly.compile_s,
            "run_s": ly.run_s,
        }
    )


def cmd_lyapunov(args: argparse.Namespace) -> int:
    """``rnnviz lyapunov``: print the exponents (mean ± std), λ₁'s regime and the measured gradient decay,
    or ``--json``; ``--over-training`` hands over to :func:`~rnnviz.cli.trained.cmd_over_training`.

    Returns:
        0.
    """
    from rnnviz.studies.lyapunov import lyapunov

    if args.over_training:
        return cmd_over_training(args)
    cfg, ds, weights = config_and_data(args)
    ly = lyapunov(cfg, k=args.k, warmup=args.warmup, qr_every=args.qr_every, data=ds, params=weights)
    if args.json:
        print(json.dumps(lyapunov_json(ly)))
        return 0
    print(
        f"Lyapunov exponents of the {cfg.cell} cell (H={cfg.hidden_size}, T={cfg.seq_len}, gain "
        f"{cfg.recurrent_gain:g}{'' if ds is None else ', on ' + ds.label}), "
        f"natural log per step, mean ± std over {ly.example_exponents.shape[0]} example(s), after "
        f"{ly.warmup} warm-up steps:"
    )
    for i, (lam, sd) in enumerate(zip(ly.exponents, ly.exponents_spread), 1):
        print(
            f"  λ{i:<3} {lam:+.5f} ± {sd:.5f}   (×{math.exp(lam):.4f} per step)"
            if math.isfinite(lam)
            else f"  λ{i:<3} -inf"
        )

    print(f"λ₁ = {ly.lambda1:+.4f} → {regime(ly.lambda1)}")
    if ly.decay is not None:
        print(
            "gradient decay per step (slope of ln‖∂L/∂carry_(T−k)‖ over lags "
            f"{ly.decay.lag_lo}..{ly.decay.lag_hi}): "
            f"measured {ly.decay.slope:+.4f}, predicted by λ₁ {ly.lambda1:+.4f}"
        )
    print(f"compile {ly.compile_s:.2f} s, run {ly.run_s * 1e3:.1f} ms")
    return 0


def _add_lyapunov(sub) -> None:
    p = sub.add_parser("lyapunov", help="the leading Lyapunov exponents of the trajectory (QR method)")
    add_config_flags(p)
    p.add_argument(
        "--k",
        type=bounded_int(1, 2 * 2048),
        default=8,
        help="how many exponents (1..D, D = carry size; default 8)",
    )
    p.add_argument(
        "--warmup",
        type=bounded_int(0, 100_000),
        default=None,
        help="steps left out of the average (default T/10)",
    )
    p.add_argument(
        "--qr-every",
        dest="qr_every",
        type=bounded_int(1, 100_000),
        default=1,
        help="re-orthonormalise every N steps (default 1: every step)",
    )
    p.add_argument("--json", action="store_true", help="print the exponents as JSON")
    add_data_flag(p, "trajectories driven by a batch of")
    add_weights_flag(p, "the trajectories of")
    p.add_argument(
        "--over-training",
        dest="over_training",
        action="store_true",
        help="with --weights: the exponents and step-Jacobian spectrum at every kept step of the run",
    )
    p.set_defaults(func=cmd_lyapunov)


def cmd_train(args: argparse.Namespace) -> int:
    """``rnnviz train``: train on ``--task`` (default adding) or ``--data``, showing progress on stderr;
    then ``--save`` the run, write ``--csv`` per-step rows, and print a summary (or ``--json``).

    Returns:
        0.

    Raises:
        ConfigError: both ``--task`` and ``--data`` are given, or a config flag is not allowed.
    """
    import pandas as pd

    from rnnviz.dataset import load_dataset
    from rnnviz.studies.tasks.synthetic import get_task
    from rnnviz.studies.training import DATA_TASK, TrainSettings, train

    given = {name: getattr(args, name) for name in FIELD_SPECS if getattr(args, name, None) is not None}
    data = None
    if args.data is not None:
        if args.task is not None:
            raise ConfigError("task", args.task, "give --task or --data, not both")
        data = load_dataset(args.data, **data_options(args, args.data))
        given.setdefault("seq_len", data.seq_len)  # the data fix T and I; an explicit clash is an error
        given.setdefault("input_size", data.input_size)
    else:
        given.setdefault("input_size", get_task(args.task or "adding").input_size)  # the task fixes I
    given.setdefault("batch_size", 64)
    cfg = RunConfig.from_mapping(given)
    if args.params is not None:
        cfg = _sized(cfg, args.params)
    settings = TrainSettings(
        DATA_TASK if data is not None else args.task or "adding",
        steps=args.steps,
        learning_rate=args.learning_rate,
        optimizer=args.optimizer,
        clip=None if args.clip == 0 else args.clip,
        log_every=args.log_every,
        lag=args.lag,
    )

    def progress(done: int, steps: int, elapsed: float) -> None:
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (steps - done) / rate if rate > 0 else 0.0
        print(
            f"\r{done}/{steps} steps, {rate:.0f} steps/s, ETA {eta:.0f} s",
            end="",
            file=sys.stderr,
            flush=True,
        )

    r = train(cfg, settings=settings, data=data, progress=progress)
    print(file=sys.stderr)
    if args.save:
        print(
            f"saved the run and its weights at {r.weight_steps.size} steps to {r.save(args.save)}",
            file=sys.stderr,
        )
    if args.csv:
        pd.DataFrame(
            {
                "step": np.arange(r.steps_run),
                "loss": r.losses,
                r.metric_name.lower(): r.metric,
                "grad_norm": r.grad_norm,
                "clipped": r.clipped,
            }
        ).to_csv(args.csv, index=False)
    if args.json:
        print(json.dumps(r.to_json()))
        return 0
    print(
        f"{r.label}, {r.optimizer} lr={r.learning_rate:g}, "
        f"clip={r.clip}: "
        f"final loss {r.final_loss():.4g} (baseline {r.baseline:.4g}, ratio "
        f"{r.final_loss() / r.baseline:.3f})"
    )
    print(
        "solved at step " + str(r.solved_step)
        if r.solved_step is not None
        else "not solved (running mean loss never < 10 % of the baseline)"
    )
    if r.nonfinite_step is not None:
        print(f"stopped: NaN/Inf at step {r.nonfinite_step}")
    if r.held_out_metric is not None and r.held_out_metric.size:
        print(
            f"held-out {r.metric_name}: {r.held_out_metric[-1]:.4g} after step {int(r.held_out_steps[-1])} "
            f"(loss {r.held_out_loss[-1]:.4g})"
        )
    print(
        f"clipped {r.clip_count} of {r.steps_run} steps; {r.timing.steps_per_s:.0f} steps/s "
        f"({1e3 / r.timing.steps_per_s:.2f} ms/step), "
        f"compile {r.timing.compile_s:.2f} s"
    )
    return 0


def _sized(cfg: RunConfig, params: int) -> RunConfig:
    """``--params``: a reference block at the width whose drawn model is nearest ``params``
    parameters (:func:`~rnnviz.studies.block_models.sized_config`), said on stderr."""
    if cfg.block != "reference":
        raise ConfigError(
            "params", params, "with --block reference (a bare cell's size is its --hidden-size)"
        )
    from rnnviz.studies.block_models import block_param_count, sized_config

    cfg = sized_config(cfg, params)
    count = block_param_count(cfg)
    print(
        f"the {cfg.cell} block ×{cfg.layers} at H = {cfg.hidden_size}: {count:,} parameters "
        f"({(count - params) / params:+.1%} of {params:,})",
        file=sys.stderr,
    )
    return cfg


def _add_train(sub) -> None:
    from rnnviz.studies.tasks.synthetic import TASKS
    from rnnviz.studies.training import MAX_STEPS, OPTIMIZERS, TrainSettings

    default = TrainSettings()  # the library's defaults are the flags'
    p = sub.add_parser("train", help="train the cell on a long-range task and record the gradient profile")
    add_config_flags(p)
    p.add_argument(
        "--task",
        choices=sorted(TASKS),
        default=None,
        help="adding (I=2), copy (I=10) or recall (I=1); default adding",
    )
    p.add_argument(
        "--data",
        metavar="SOURCE",
        help="train on a data set instead: digits, text, or your file (T and I follow it)",
    )
    add_data_options(p, with_seq_len=False)
    p.add_argument(
        "--steps",
        type=bounded_int(1, MAX_STEPS),
        default=default.steps,
        help=f"optimisation steps (default {default.steps})",
    )
    p.add_argument(
        "--learning-rate",
        dest="learning_rate",
        type=finite_nonnegative,
        default=default.learning_rate,
        help="default 1e-3",
    )
    p.add_argument(
        "--optimizer",
        choices=OPTIMIZERS,
        default=default.optimizer,
        help="adam (default) or sgd with momentum 0.9",
    )
    p.add_argument(
        "--clip",
        type=finite_nonnegative,
        default=default.clip,
        help="global-norm clipping threshold; 0 turns clipping off (default 1)",
    )
    p.add_argument(
        "--log-every",
        dest="log_every",
        type=bounded_int(1, MAX_STEPS),
        default=default.log_every,
        help=f"steps per compiled chunk and between gradient profiles (default {default.log_every})",
    )
    p.add_argument(
        "--lag",
        type=bounded_int(0, 100_000),
        default=default.lag,
        help="the recall task's lag k (target x_(T−k))",
    )
    p.add_argument(
        "--params",
        type=parameter_count,
        metavar="N",
        help="with --block reference: the width whose block has about N parameters (100k, 1.5M)",
    )
    p.add_argument("--json", action="store_true", help="print the whole record as JSON")
    p.add_argument("--csv", metavar="PATH", help="write loss, metric, grad norm and clipped per step as CSV")
    p.add_argument(
        "--save",
        metavar="RUN.rnnviz",
        help="save the run with its weights at every log step (reopen: --weights, rnnviz.load_run)",
    )
    p.set_defaults(func=cmd_train)


#: The subcommands in ``--help``'s order, each with the function that adds its parser.
COMMANDS = (
    ("analyze", _add_analyze),
    ("sweep", _add_sweep),
    ("lyapunov", _add_lyapunov),
    ("train", _add_train),
    ("bench", _add_bench),
    ("data", _add_data),
    ("connectivity", add_connectivity),
    ("compare", add_compare),
    ("explorable", add_explorable),
    ("app", add_app),
)

"""``rnnviz compare``: several cell designs at one shape, side by side: a short table of the
numbers (λ₁, the decay per step, the gradient at both ends, the verdict), and with
``--report`` one self-contained HTML file to share (:mod:`rnnviz.report`).

The numbers need only JAX; the report draws with plotly, imported only when ``--report`` is
given (the rest of the command line runs without it)."""

from __future__ import annotations

import argparse
import json
import sys

from rnnviz.base.formatting import pow10_text
from rnnviz.cli.argtypes import bounded_int, finite_nonnegative
from rnnviz.cli.inputs import add_config_flags, add_data_flag, config_and_data
from rnnviz.config import ConfigError


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:+.4f}"


def summary_lines(c) -> list[str]:
    """The table ``rnnviz compare`` prints: one row per design of the
    :class:`~rnnviz.report.compare.Comparison` ``c``."""
    trained = any(d.training is not None for d in c.designs)
    width = max(6, *(len(d.label) for d in c.designs))
    head = f"{'design':<{width}}  {'λ₁':>8}  {'decay/step':>10}  {'‖∂L/∂carry_0‖':>13}  {'‖∂L/∂carry_T‖':>13}"
    head += f"  {'final loss':>10}" if trained else ""
    lines = [head + "  verdict"]
    for d in c.designs:
        logs = d.log10_grad_norms
        row = (
            f"{d.label:<{width}}  {_fmt(d.lambda1):>8}  {_fmt(d.decay_per_step):>10}  "
            f"{pow10_text(float(logs[0])):>13}  {pow10_text(float(logs[-1])):>13}"
        )
        if trained:
            row += f"  {d.training.final_loss():>10.4g}" if d.training is not None else f"  {'—':>10}"
        lines.append(f"{row}  {d.verdict}")
    return lines


def cmd_compare(args: argparse.Namespace) -> int:
    """``rnnviz compare``: compute every design of ``--cells`` (:func:`rnnviz.report.comparison`),
    print the table (or ``--json``), and write ``--report`` as one HTML file.

    Returns:
        0.

    Raises:
        ConfigError: ``--cell`` given (this command takes ``--cells``), an unknown cell, a bad
            ``--report`` path or a config a design cannot take; plotly missing with ``--report``.
    """
    from rnnviz.report.compare import comparison, comparison_json

    if args.cell is not None:
        raise ConfigError("cell", args.cell, "rnnviz compare takes --cells a,b,c (the designs to compare)")
    report = None
    if args.report is not None:
        try:  # the one command that draws: plotly is needed here only
            from rnnviz.report.html import report_path, write_report
        except ImportError as err:
            raise ConfigError("report", args.report, f"plotly installed ({err.name} is missing)") from None
        report = report_path(args.report)  # checked before minutes of computing
    cfg, ds, _ = config_and_data(args)
    c = comparison(
        args.cells,  # "lstm,gru,mamba": checked by the library, one message for a bad name
        cfg,
        data=ds,
        train_steps=args.train,
        task=args.task,
        learning_rate=args.learning_rate,
        progress=lambda line: print(f"computing {line}", file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(comparison_json(c)))
    else:
        print("\n".join(summary_lines(c)))
    if report is not None:
        path = write_report(c, report)
        line = f"wrote the report to {path} ({path.stat().st_size} bytes)"
        print(line, file=sys.stderr if args.json else sys.stdout)  # --json keeps stdout JSON
    return 0


def add_parser(sub) -> None:
    """Add the ``compare`` subcommand (``--cells``, the config and data flags, ``--train``,
    ``--report``) to ``sub``."""
    from rnnviz.studies.tasks.synthetic import TASKS
    from rnnviz.studies.training import MAX_STEPS

    p = sub.add_parser(
        "compare",
        help="compare cell designs at one shape: λ₁, gradient decay, learning; a shareable HTML report",
        description="Analyse every cell of --cells at the same shape (the config flags), fit the decay "
        "of ‖∂L/∂carry_t‖ per step and compute λ₁; --train also trains each; --report writes one "
        "self-contained HTML file (opens offline) with the figures, the numbers, the configs and versions.",
    )
    p.add_argument(
        "--cells",
        required=True,
        metavar="A,B,…",
        help="the registered cells to compare, comma-separated (e.g. lstm,gru,mamba,mlstm)",
    )
    add_config_flags(p)
    add_data_flag(p, "analyse and train every design on a batch (drawn by the seed, with its task loss) of")
    p.add_argument(
        "--train",
        metavar="STEPS",
        type=bounded_int(1, MAX_STEPS),
        default=None,
        help="also train each design for STEPS steps (Adam, clip 1) and draw the learning curves",
    )
    p.add_argument(
        "--task",
        choices=sorted(TASKS),
        default="adding",
        help="with --train and no --data: the task (it fixes --input-size); default adding",
    )
    p.add_argument(
        "--learning-rate", dest="learning_rate", type=finite_nonnegative, default=1e-3, help="default 1e-3"
    )
    p.add_argument("--report", metavar="PATH.html", help="write the self-contained HTML report here")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON (what the report embeds)")
    p.set_defaults(func=cmd_compare)

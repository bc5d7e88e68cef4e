"""``rnnviz compare``: several cell designs at one shape (``--cells``), your own models on
the same text (``--model``, once per model), or model designs drawn fresh at matched parameter
counts (``--design A,B,C --layers L --params N``) on the same random tokens, side by side: a
short table of the numbers (for cell designs λ₁, the decay per step, the gradient at both ends,
the verdict; for models the loss and how far back the gradient reaches), and with ``--report``
one self-contained HTML file to share (:mod:`rnnviz.report`).

The numbers need only JAX; the report draws with plotly, imported only when ``--report`` is
given (the rest of the command line runs without it)."""

from __future__ import annotations

import argparse
import json
import sys

from rnnviz.base.formatting import pow10_text
from rnnviz.cli.argtypes import bounded_int, finite_nonnegative
from rnnviz.cli.inputs import (
    add_config_flags,
    add_data_flag,
    add_design_flags,
    config_and_data,
    config_from_args,
    design_inputs,
    design_layers,
    design_line,
    design_settings,
    refuse_cells_as_designs,
)
from rnnviz.config import FIELD_SPECS, ConfigError


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


def model_summary_lines(c) -> list[str]:
    """The table ``rnnviz compare --model …`` prints: one row per model of the
    :class:`~rnnviz.report.models.ModelComparison` ``c`` (the reaches as
    :func:`~rnnviz.report.models.reach` reads them, in positions back)."""
    from rnnviz.report.models import REACH_FRACTION, reach_text

    width = max(5, *(len(r.label) for r in c.rows))
    cut = f"{REACH_FRACTION:.0%}"
    lines = [
        f"{'model':<{width}}  {'type':<15}  {'layers':>6}  {'params':>10}  {'T':>5}  {'loss':>9}  "
        f"{f'‖∂L/∂x_t‖ < {cut} from':>22}  ‖∂ℓ_p/∂x_t‖ < {cut} from (positions back)"
    ]
    for r in c.rows:
        loss_reach = reach_text(r.input_reach, r.loss_end)
        p_reach = reach_text(r.connectivity_reach, r.analysis.position)
        lines.append(
            f"{r.label:<{width}}  {r.model_type:<15}  {r.n_layers:>6}  {r.n_params:>10,}  "
            f"{r.steps:>5}  {r.analysis.loss:>9.5g}  {loss_reach:>22}  {p_reach}"
        )
    if not c.same_tokens:
        lines.append("the models tokenise the text differently: position t is not the same text in each")
    return lines


def _report_path(args: argparse.Namespace):
    """``--report``'s path checked (None without it), and the function that writes it.

    Raises:
        ConfigError: a bad path; plotly missing.
    """
    if args.report is None:
        return None, None
    try:  # the one command that draws: plotly is needed here only
        from rnnviz.report.html import report_path, write_report
    except ImportError as err:
        raise ConfigError("report", args.report, f"plotly installed ({err.name} is missing)") from None
    return report_path(args.report), write_report  # checked before minutes of computing


def _write(args: argparse.Namespace, write, report, c) -> None:
    path = write(c, report)
    line = f"wrote the report to {path} ({path.stat().st_size} bytes)"
    print(line, file=sys.stderr if args.json else sys.stdout)  # --json keeps stdout JSON


def _model_inputs(args: argparse.Namespace):
    """``--text``, or ``--tokens`` as ids ``[1, T]``.

    Raises:
        ConfigError: neither, both, or ids that are not integers.
    """
    import numpy as np

    if (args.text is None) == (args.tokens is None):
        raise ConfigError(
            "model", args.models, "the same inputs for every model: --text or --tokens, one of them"
        )
    if args.text is not None:
        return args.text
    try:
        return np.asarray([[int(t) for t in args.tokens.split(",")]], np.int32)
    except ValueError:
        raise ConfigError("tokens", args.tokens, "comma-separated integer ids") from None


def _refuse_design_flags(args: argparse.Namespace) -> None:
    """With ``--model`` the designs' flags mean nothing: name the first one given.

    Raises:
        ConfigError: ``--cells``, ``--data``, ``--train`` or a config flag other than ``--dtype``.
    """
    given = [name for name in ("cells", "data", "train") if getattr(args, name, None) is not None]
    given += [name for name in FIELD_SPECS if name != "dtype" and getattr(args, name, None) is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise ConfigError(
            given[0],
            getattr(args, given[0]),
            f"not with --model ({flag} sets up cell designs; with "
            "--model only --text or --tokens, --dtype, --report and --json apply)",
        )


def cmd_compare_models(args: argparse.Namespace) -> int:
    """``rnnviz compare --model A --model B``: every model on the same ``--text`` or
    ``--tokens`` (:func:`rnnviz.report.model_comparison`), the table (or ``--json``), and
    ``--report`` as one HTML file.

    Returns:
        0.

    Raises:
        ConfigError: a flag of the designs given, a checkpoint that does not load, inputs a
            model cannot read, or a bad ``--report`` path; plotly missing with ``--report``.
    """
    from rnnviz.report.models import model_comparison, model_comparison_json

    _refuse_design_flags(args)
    inputs = _model_inputs(args)
    report, write = _report_path(args)
    c = model_comparison(
        args.models,
        inputs,
        dtype=args.dtype or "float32",
        progress=lambda line: print(f"computing {line}", file=sys.stderr, flush=True),
    )
    print(json.dumps(model_comparison_json(c)) if args.json else "\n".join(model_summary_lines(c)))
    if report is not None:
        _write(args, write, report, c)
    return 0


def _design_types(args: argparse.Namespace) -> list[str]:
    """``--design``'s types, after refusing ``--model`` beside it and the torch stacks (they read
    vectors, the language models tokens: no inputs are common to both).

    Raises:
        ConfigError: either.
    """
    refuse_cells_as_designs(args.design, several=True)
    types = [t.strip() for t in args.design.split(",") if t.strip()]
    if args.models:
        raise ConfigError("design", args.design, "not with --model (designs drawn fresh, or your models)")
    stacks = [t for t in types if t in ("torch_lstm", "torch_gru")]
    if stacks:
        raise ConfigError(
            "design",
            args.design,
            f"language-model designs, which read the same tokens ({stacks[0]} reads vectors: "
            f"rnnviz analyze --design {stacks[0]})",
        )
    return types


def cmd_compare_designs(args: argparse.Namespace) -> int:
    """``rnnviz compare --design A,B,C --layers L --params N``: every design drawn fresh at
    matched sizes (:func:`rnnviz.studies.sizing.matched_configs`), each line of sizes, then
    every model on the same random tokens as ``--model`` compares them (or ``--json``, the
    sizes under ``"designs"``; ``--report``).

    Returns:
        0.

    Raises:
        ConfigError: a flag that does not apply, a torch stack, or sizes that cannot match.
    """
    from rnnviz.report.models import model_comparison, model_comparison_json
    from rnnviz.studies.models import fresh_model
    from rnnviz.studies.sizing import matched_configs, param_count

    types = _design_types(args)
    for name in ("cells", "train", "text"):
        if getattr(args, name) is not None:
            raise ConfigError(name, getattr(args, name), "not with --design (random tokens drawn by --seed)")
    cfg = design_settings(args)
    configs = matched_configs(types, params=args.params, layers=design_layers(args))
    models = [fresh_model(t, c, seed=cfg.seed, dtype=cfg.dtype) for t, c in configs.items()]
    counts = {t: param_count(t, c) for t, c in configs.items()}
    inputs = _model_inputs(args) if args.tokens is not None else design_inputs(models[0], cfg)
    report, write = _report_path(args)
    c = model_comparison(
        models, inputs, progress=lambda line: print(f"computing {line}", file=sys.stderr, flush=True)
    )
    if args.json:
        sizes = {t: {"config": configs[t], "params": counts[t]} for t in configs}
        print(json.dumps(model_comparison_json(c) | {"designs": sizes, "target": args.params}))
    else:
        lines = [design_line(t, configs[t], counts[t], args.params) for t in configs]
        print("\n".join(lines + model_summary_lines(c)))
    if report is not None:
        _write(args, write, report, c)
    return 0


def _block_configs(args: argparse.Namespace) -> list:
    """Each ``--cells`` cell's reference block at the config flags (the first cell's config
    validates them), at the width nearest ``--params`` where it is given.

    Raises:
        ConfigError: a flag that does not apply, a cell without a reference block, or a count
            more than :data:`~rnnviz.studies.sizing.TOLERANCE` from ``--params``
            (:func:`~rnnviz.studies.block_models.sized_block`).
    """
    from rnnviz.studies.block_models import sized_block

    if args.design is not None:
        refuse_cells_as_designs(args.design, several=True)
    for name in ("design", "models", "data", "weights", "train", "text", "tokens"):
        if getattr(args, name, None) not in (None, []):
            raise ConfigError(
                name,
                getattr(args, name),
                "not with --block reference (the cells' blocks on their inputs; --report, --json)",
            )
    if args.cell is not None or args.cells is None:
        raise ConfigError("cells", args.cells, "the cells whose reference blocks to compare (--cells a,b,c)")
    cells = [c.strip() for c in args.cells.split(",") if c.strip()]
    base = config_from_args(argparse.Namespace(**{**vars(args), "cell": cells[0]}))
    configs = [base.replace(cell=c) for c in cells]
    if args.params is None:
        return configs
    return [sized_block(cfg, args.params)[0] for cfg in configs]


def cmd_compare_blocks(args: argparse.Namespace) -> int:
    """``rnnviz compare --cells A,B --block reference --layers L [--params N]``: each cell's
    design as its reference block (at the width nearest N parameters, every count within
    :data:`~rnnviz.studies.sizing.TOLERANCE`), all on the bare cells' inputs of the config flags
    (:func:`rnnviz.report.models.block_comparison`); a line each (its size, loss, the
    gradient's reach back from the last step and its size there), or ``--json``; ``--report``
    as one HTML file.

    Returns:
        0.

    Raises:
        ConfigError: a flag that does not apply, sizes that cannot match, or a bad
            ``--report`` path; plotly missing with ``--report``.
    """
    from rnnviz.report.models import BLOCK_INPUTS, REACH_FRACTION, block_comparison, reach_text

    configs = _block_configs(args)
    report, write = _report_path(args)
    c = block_comparison(
        configs, progress=lambda line: print(f"computing {line}", file=sys.stderr, flush=True)
    )
    if args.json:
        records = [
            {"config": r.config.to_dict(), "params": r.n_params, "analysis": r.analysis.to_json()}
            for r in c.rows
        ]
        print(json.dumps(records))
    else:
        cut = f"{REACH_FRACTION:.0%}"
        print(
            f"{'cell':<15} {'block':<16} {'L':>2} {'H':>5} {'params':>9} {'loss':>10} "
            f"{f'‖∂L/∂x_t‖ < {cut} from':>22} ‖∂L/∂x_0‖"
        )
        for r in c.rows:
            a = r.analysis
            print(
                f"{r.label:<15} {a.model_type:<16} {r.n_layers:>2} {r.config.hidden_size:>5} "
                f"{r.n_params:>9,} {a.loss:>10.5g} {reach_text(r.input_reach, r.loss_end, BLOCK_INPUTS):>22} "
                f"{pow10_text(float(a.log10_grad_norms[0, 0]))}"
            )
    if report is not None:
        _write(args, write, report, c)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """``rnnviz compare``: compute every design of ``--cells`` (:func:`rnnviz.report.comparison`),
    print the table (or ``--json``), and write ``--report`` as one HTML file; with ``--model``,
    your own models instead (:func:`cmd_compare_models`).

    Returns:
        0.

    Raises:
        ConfigError: ``--cell`` given (this command takes ``--cells``), neither ``--cells`` nor
            ``--model``, an unknown cell, a bad ``--report`` path or a config a design cannot
            take; plotly missing with ``--report``.
    """
    if args.block == "reference":  # a config flag, still text: the designs' blocks side by side
        return cmd_compare_blocks(args)
    if any(getattr(args, n) is not None for n in ("design", "params")):
        return cmd_compare_designs(args)
    if args.models:
        return cmd_compare_models(args)
    from rnnviz.report.compare import comparison, comparison_json

    if args.cell is not None:
        raise ConfigError("cell", args.cell, "rnnviz compare takes --cells a,b,c (the designs to compare)")
    if args.cells is None:
        raise ConfigError(
            "cells", None, "the designs to compare (--cells a,b,c) or your models (--model PATH, each)"
        )
    if args.text is not None or args.tokens is not None:
        given = "text" if args.text is not None else "tokens"
        raise ConfigError(
            given, getattr(args, given), "only with --model (cell designs read synthetic inputs or --data)"
        )
    report, write = _report_path(args)
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
        _write(args, write, report, c)
    return 0


def add_parser(sub) -> None:
    """Add the ``compare`` subcommand (``--cells``, the config and data flags, ``--train``;
    or ``--model`` with ``--text``/``--tokens``; ``--report``, ``--json``) to ``sub``."""
    from rnnviz.studies.tasks.synthetic import TASKS
    from rnnviz.studies.training import MAX_STEPS

    p = sub.add_parser(
        "compare",
        help="compare cell designs at one shape, or your own models on one text; a shareable HTML report",
        description="Analyse every cell of --cells at the same shape (the config flags), fit the decay "
        "of ‖∂L/∂carry_t‖ per step and compute λ₁; --train also trains each. Or analyse every --model "
        "on the same --text (each through its own tokenizer.json) or --tokens: the gradient through "
        "every layer and step, and how far back it reaches. --report writes one self-contained HTML "
        "file (opens offline) with the figures, the numbers, the configs and versions.",
    )
    p.add_argument(
        "--cells",
        metavar="A,B,…",
        help="the registered cells to compare, comma-separated (e.g. lstm,gru,mamba,mlstm)",
    )
    models = p.add_argument_group("your own models side by side (instead of --cells)")
    models.add_argument(
        "--model",
        dest="models",
        action="append",
        metavar="PATH",
        help="a Hugging Face folder (mamba, mamba2, falcon_mamba, recurrent_gemma, qwen3_next, "
        "xlstm), or one in a .zip, .tar, .tar.gz or .tgz archive; once per model",
    )
    models.add_argument("--text", help="the text every model reads, through its own tokenizer.json")
    models.add_argument("--tokens", metavar="ID,ID,…", help="token ids every model reads (instead of --text)")
    designs = p.add_argument_group(
        "model designs drawn fresh at matched sizes (instead of --cells; they read --seq-len random "
        "tokens drawn by --seed, or --tokens)"
    )
    add_design_flags(designs, several=True)
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
    p.add_argument(
        "--report",
        "--out",  # as `rnnviz explorable` names its page
        dest="report",
        metavar="PATH.html",
        help="write the self-contained HTML report here (--out says the same)",
    )
    p.add_argument("--json", action="store_true", help="print the numbers as JSON (what the report embeds)")
    p.set_defaults(func=cmd_compare)

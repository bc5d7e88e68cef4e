"""The commands on a trained network: ``rnnviz connectivity`` (how strongly one output
depends on every earlier input of a sequence, or how far back it reaches over many) and
``rnnviz lyapunov --over-training`` (λ and the step-Jacobian spectrum at every kept step)."""

from __future__ import annotations

import argparse
import json

import numpy as np

from rnnviz.base.formatting import finite_json, pow10_text
from rnnviz.cli.argtypes import bounded_int
from rnnviz.cli.inputs import add_config_flags, add_data_flag, add_weights_flag, config_and_data
from rnnviz.config import ConfigError


def cmd_connectivity(args: argparse.Namespace) -> int:
    """``rnnviz connectivity``: print ‖∂(output at τ)/∂x_t‖ of one sequence and how far back it reaches
    (10 %, 1 % of its maximum), or with ``--count`` > 1 the reach over that many sequences.

    Returns:
        0.

    Raises:
        ConfigError: there is no data set (neither ``--data`` nor a run trained on one).
    """
    from rnnviz.studies.connectivity import connectivity  # jax only once a command needs it

    cfg, ds, weights = config_and_data(args)
    if ds is None:
        raise ConfigError("data", None, "a data set (--data, or a run trained on one: --weights)")
    if args.count > 1:
        return _reach_summary(args, cfg, ds, weights)
    c = connectivity(cfg, ds, args.index, params=weights, step=args.output_step, measure=args.measure)
    reach = {f: c.reach(f) for f in (0.1, 0.01)}
    if args.json:
        out = {
            "data": c.data,
            "weights": c.weights,
            "index": c.index,
            "step": c.step,
            "measure": c.measure,
            "target": c.target,
            "log_prob": c.log_prob,
            "log10": c.log10.tolist(),
            "text": c.text,
            "reach": {str(k): v for k, v in reach.items()},
        }
        print(json.dumps(finite_json(out)))
        return 0
    what = "∂ log p(target)" if c.measure == "target" else "∂y_τ"
    print(
        f"connectivity ‖{what}/∂x_t‖ of sequence {c.index} of {c.data} at τ={c.step} "
        f"({c.weights or 'initial weights'})"
    )
    if c.text is not None:
        print("text: " + c.text[: c.step].replace("\n", "⏎"))
    print(
        f"reaches back {reach[0.1]} steps above 10 % of its maximum, {reach[0.01]} steps above 1 % "
        f"(max at t={int(np.nanargmax(np.where(np.isfinite(c.log10), c.log10, -np.inf))) + 1})"
    )
    for t in range(c.step, 0, -max(1, c.step // 10)):
        print(f"  t={t:<6} lag {c.step - t:<6} {pow10_text(c.log10[t - 1])}")
    return 0


def _reach_summary(args: argparse.Namespace, cfg, ds, weights) -> int:
    """How far back the connectivity reaches over ``--count`` sequences from ``--index``."""
    from rnnviz.studies.connectivity import connectivity

    last = min(ds.n_sequences, args.index + args.count)
    runs = [
        connectivity(cfg, ds, i, params=weights, step=args.output_step, measure=args.measure)
        for i in range(args.index, last)
    ]
    reach = {f: np.array([c.reach(f) for c in runs]) for f in (0.1, 0.01)}
    if args.json:
        print(
            json.dumps(
                {
                    "data": runs[0].data,
                    "weights": runs[0].weights,
                    "measure": runs[0].measure,
                    "indices": list(range(args.index, last)),
                    "reach": {str(f): r.tolist() for f, r in reach.items()},
                }
            )
        )
        return 0
    print(f"{runs[0].weights or 'initial weights'} on {runs[0].data}, sequences {args.index}–{last - 1}:")
    for f, r in reach.items():
        q1, med, q3 = np.percentile(r, [25, 50, 75])
        print(
            f"  above {f:.0%} of its maximum: median {med:g} steps back "
            f"(quartiles {q1:g}–{q3:g}, max {r.max()})"
        )
    return 0


def add_connectivity(sub) -> None:
    """Add the ``connectivity`` subcommand (config, data, weights and its own flags) to ``sub``."""
    p = sub.add_parser(
        "connectivity",
        help="how strongly one output depends on every earlier input of a sequence (exact magnitudes)",
    )
    add_config_flags(p)
    add_data_flag(p, "a sequence of")
    add_weights_flag(p, "at")
    p.add_argument("--index", type=bounded_int(0, 10**9), default=0, help="which sequence (default 0)")
    p.add_argument(
        "--count",
        type=bounded_int(1, 10_000),
        default=1,
        help="summarise how far back it reaches over this many sequences from --index (default 1)",
    )
    p.add_argument(
        "--output-step",
        dest="output_step",
        type=bounded_int(1, 10**6),
        default=None,
        help="τ, the output step (default: the sequence's last real step)",
    )
    p.add_argument(
        "--measure",
        choices=("target", "output"),
        default=None,
        help="log p(target) through the trained readout, or ‖∂y_τ/∂x_t‖ (default: target where it can)",
    )
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.set_defaults(func=cmd_connectivity)


def cmd_over_training(args: argparse.Namespace) -> int:
    """``rnnviz lyapunov --over-training``: print loss, λ₁ and the median σ₁ of the step Jacobians at every
    kept step of the saved run (or ``--json``).

    Returns:
        0.

    Raises:
        ConfigError: no ``--weights`` run was given.
    """
    if args.weights is None:
        raise ConfigError("over_training", True, "a saved run to look at: --weights RUN.rnnviz")
    from rnnviz.studies.over_training import over_training  # jax only once a command needs it
    from rnnviz.studies.training import load_run

    run = load_run(args.weights)
    ot = over_training(run, k=args.k, warmup=args.warmup)
    if args.json:
        print(
            json.dumps(
                finite_json(
                    {
                        "run": run.label,
                        "steps": ot.steps.tolist(),
                        "loss": ot.loss.tolist(),
                        "exponents": ot.exponents.tolist(),
                        "median_singular_values": np.median(ot.singular_values, axis=1).tolist(),
                    }
                )
            )
        )
        return 0
    print(f"{run.label}, seed {run.config.seed}: λ per step on its {ot.probe} probe sequences")
    print(f"  {'step':>7} {'loss':>9} {'λ1':>9}  median σ1(J_t)")
    for s, loss, lam, sv in zip(
        ot.steps, ot.loss, ot.lambda1, np.median(ot.singular_values[:, :, 0], axis=1)
    ):
        print(f"  {int(s):>7} {loss:>9.4f} {lam:>+9.4f}  {sv:.4f}")
    return 0

"""What a command runs on: the config flags, ``--data`` and ``--weights`` (a saved run),
turned into ``(RunConfig, Dataset or None, Weights or None)`` by :func:`config_and_data`; and
a fresh design's flags (``--design``, ``--layers``, ``--params``) and random inputs."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from rnnviz.base.formatting import layers_text
from rnnviz.cli.argtypes import bounded_int, parameter_count
from rnnviz.config import FIELD_SPECS, ConfigError, RunConfig, coerce

DATA_OPTIONS = ("order", "permutation_seed", "corpus", "seq_len", "max_sequences")


def add_data_options(p: argparse.ArgumentParser, *, with_seq_len: bool = True) -> None:
    """The built-in data sets' options as flags (a file takes none)."""
    p.add_argument("--order", help="digits: pixels, rows or permuted")
    p.add_argument("--permutation-seed", dest="permutation_seed", type=bounded_int(0, 2**31 - 1))
    p.add_argument("--corpus", help="text: prose or code")
    if with_seq_len:  # elsewhere --seq-len is the config's, and the text's window follows it
        p.add_argument(
            "--seq-len", dest="seq_len", type=bounded_int(2, 10_000), help="text: characters per window"
        )
    p.add_argument(
        "--max-sequences", dest="max_sequences", type=bounded_int(1, 100_000), help="text: most windows"
    )


def data_options(args: argparse.Namespace, source: str) -> dict[str, Any]:
    """The data options given on the command line (the config's ``--seq-len`` is the text's window)."""
    options = {k: getattr(args, k, None) for k in DATA_OPTIONS if k != "seq_len"}
    if source == "text" and getattr(args, "seq_len", None) is not None:
        options["seq_len"] = int(args.seq_len)
    return {k: v for k, v in options.items() if v is not None}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per RunConfig field; values stay strings so RunConfig validates them."""
    defaults = RunConfig()
    group = parser.add_argument_group("run configuration")
    for spec in FIELD_SPECS.values():
        default = getattr(defaults, spec.name)
        group.add_argument(
            _flag(spec.name),
            dest=spec.name,
            default=None,
            metavar="|".join(spec.options()) if spec.choices else spec.kind.__name__.upper(),
            help=f"{spec.help}; {spec.allowed()} (default: {default})",
        )


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The :class:`RunConfig` of the config flags given (the others keep their defaults).

    Raises:
        ConfigError: a flag's value is not allowed for its field.
    """
    given = {name: getattr(args, name) for name in FIELD_SPECS if getattr(args, name, None) is not None}
    return RunConfig.from_mapping(given)


def config_and_data(args: argparse.Namespace):
    """``(RunConfig, Dataset or None, weights or None)``: the weights a bare cell's tree, a
    reference block's tensors (:data:`TRAINED`).

    With ``--weights`` the saved run's config is the base (flags override it), its weights
    at ``--step`` (default the last kept) are returned, and its data set is reloaded unless
    ``--data`` names one. With data, the config is fitted to it (its T, I and loss
    placement) where the flags leave them; a flag that clashes with the data is an error
    naming both."""
    # Imported here for start-up time: `rnnviz app` and `--help` need neither pandas nor jax.
    from rnnviz.dataset import check_data, fit_to_data, load_dataset
    from rnnviz.studies.training import load_run

    given = {name: getattr(args, name) for name in FIELD_SPECS if getattr(args, name, None) is not None}
    base: dict[str, Any] = {}
    weights = source = None
    if getattr(args, "weights", None) is not None:
        run = load_run(args.weights)
        if given.get("block", run.config.block) != run.config.block:
            why = f"{run.config.block!r}, the run's: its weights fit only that kind of model"
            raise ConfigError("block", given["block"], why)
        weights = TRAINED[run.config.block](run, args.step)
        base = {k: v for k, v in run.config.to_dict().items() if v is not None}
        source = run.data_source
    if getattr(args, "data", None) is None and source is None:
        return RunConfig.from_mapping({**base, **given}), None, weights
    if getattr(args, "data", None) is not None:
        ds = load_dataset(args.data, **data_options(args, args.data))
    else:
        ds = load_dataset(source[0], **dict(source[1]))
    fitted = fit_to_data(
        RunConfig.from_mapping({**base, **given, "seq_len": ds.seq_len, "input_size": ds.input_size}), ds
    )
    keep = {k: getattr(fitted, k) for k in ("seq_len", "input_size", "loss") if k not in given}
    cfg = RunConfig.from_mapping({**base, **given, **keep})
    check_data(cfg, ds)
    return cfg, ds, weights


#: ``RunConfig.block`` → what ``--weights`` hands a command: a bare cell's weights tree, or a
#: reference block's tensors by name.
TRAINED = {"cell": lambda run, step: run.weights(step), "reference": lambda run, step: run.tensors(step)}


def add_weights_flag(p: argparse.ArgumentParser, what: str) -> None:
    """``--weights RUN.rnnviz`` and ``--step S``."""
    p.add_argument(
        "--weights",
        metavar="RUN.rnnviz",
        help=f"{what} a saved run's trained weights (`rnnviz train --save`); its config, data and "
        "weights are the base, flags override",
    )
    p.add_argument(
        "--step",
        type=bounded_int(0, 10**9),
        default=None,
        help="with --weights: a kept step (default: the last)",
    )


def add_data_flag(p: argparse.ArgumentParser, what: str) -> None:
    """``--data NAME|PATH`` and the built-ins' options."""
    p.add_argument(
        "--data",
        metavar="NAME|PATH",
        help=f"{what} a data set: digits, text, or your .npz/.npy/.csv/.parquet file (T and I follow it)",
    )
    add_data_options(p, with_seq_len=False)


def parse_over(items: Sequence[str]) -> dict[str, list[str]]:
    """``field=a,b,c`` or ``field=start:stop:count`` (inclusive, evenly spaced) → values."""
    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, spec = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not spec:
            raise ConfigError("over", item, "FIELD=v1,v2,... or FIELD=start:stop:count")
        if spec.count(":") == 2:
            try:
                lo, hi, n = float(spec.split(":")[0]), float(spec.split(":")[1]), int(spec.split(":")[2])
            except ValueError:
                raise ConfigError(
                    "over", item, "start:stop:count with numbers and an integer count"
                ) from None
            if not 2 <= n <= 4096:
                raise ConfigError("over", item, "a count in [2, 4096]")
            out[name] = [repr(lo + (hi - lo) * i / (n - 1)) for i in range(n)]
        else:
            out[name] = [v for v in spec.split(",") if v.strip()]
    return out


#: The run configuration flags a design reads: the random inputs' length and seed, the weights' dtype.
DESIGN_FIELDS = ("seq_len", "seed", "dtype", "layers")


def add_design_flags(group, *, several: bool) -> None:
    """``--design`` (one type, or with ``several`` a comma-separated list), ``--layers`` and ``--params``."""
    from rnnviz.studies.sizing import TEMPLATES

    kinds = ", ".join(TEMPLATES)
    group.add_argument(
        "--design",
        metavar="A,B,…" if several else "TYPE",
        help=(
            f"designs drawn fresh at matched sizes, comma-separated ({kinds}): every count within 5 %% of "
            "--params and of their median"
            if several
            else f"a design drawn fresh ({kinds}) at the width whose parameter count is nearest --params"
        ),
    )
    group.add_argument(
        "--params",
        type=parameter_count,
        metavar="N",
        help="with --design: about N parameters (100k, 1.5M, 30000)",
    )


def refuse_cells_as_designs(design: str, *, several: bool) -> None:
    """Refuse the two kinds of design mixed up: a registered cell named where ``--design``
    takes model types.

    Raises:
        ConfigError: naming the model types, and the flags of the cells' reference blocks.
    """
    from rnnviz.studies.sizing import TEMPLATES
    from rnnviz.tables.cells import cell_names

    names = [t.strip() for t in design.split(",")]
    if any(t not in TEMPLATES and t in cell_names() for t in names):
        flag = "--cells" if several else "--cell"
        raise ConfigError(
            "design",
            design,
            f"--design takes model types ({', '.join(TEMPLATES)}); a cell's design is its reference "
            f"block: {flag} {design} --block reference",
        )


def design_settings(args: argparse.Namespace) -> RunConfig:
    """The run configuration a design reads (``--seq-len``, ``--seed``, ``--dtype``), after
    refusing ``--layers``/``--params`` without ``--design``, or ``--design`` without them, and
    every other configuration flag.

    Raises:
        ConfigError: naming the first flag that does not apply.
    """
    if args.design is None:
        if args.params is not None:
            raise ConfigError("params", args.params, "only with --design TYPE")
        raise ConfigError("design", None, "a design to draw (--design)")
    refuse_cells_as_designs(args.design, several=hasattr(args, "cells"))
    for name in ("layers", "params"):
        if getattr(args, name) is None:
            raise ConfigError(
                name, None, f"given with --design (--{name} {'L' if name == 'layers' else 'N'})"
            )
    others = [n for n in ("data", "weights") if getattr(args, n, None) is not None]
    others += [n for n in FIELD_SPECS if n not in DESIGN_FIELDS and getattr(args, n, None) is not None]
    if others:
        flag = _flag(others[0])
        raise ConfigError(
            others[0],
            getattr(args, others[0]),
            f"not with --design ({flag} sets up a cell design's run; a fresh design reads "
            "only --seq-len, --seed, --dtype and --layers of the run configuration)",
        )
    return config_from_args(argparse.Namespace(**{**vars(args), "layers": None}))  # the depth is the design's


def design_layers(args: argparse.Namespace) -> int:
    """``--layers`` (a config flag, given as text) as the design's depth L.

    Raises:
        ConfigError: not an integer in the field's range.
    """
    return coerce("layers", args.layers)


def design_inputs(model, cfg: RunConfig) -> Any:
    """Random inputs for a fresh design, drawn by ``cfg.seed``: ``cfg.seq_len`` token ids from
    the vocabulary ``<int32>[1, T]``, or for a torch stack normal features ``<float32>[1, T, I]``."""
    import numpy as np

    rng = np.random.default_rng(cfg.seed)
    if model.vocab_size:
        return rng.integers(0, model.vocab_size, size=(1, cfg.seq_len)).astype(np.int32)
    return rng.standard_normal((1, cfg.seq_len, model.spec.input_size)).astype(np.float32)


def design_line(model_type: str, config: dict[str, Any], count: int, target: int) -> str:
    """``"mamba: hidden_size 72, 2 layers, 99,576 parameters (−0.4 % from 100,000)"``."""
    from rnnviz.studies.sizing import TEMPLATES

    width = TEMPLATES[model_type].width
    layers = config.get("num_hidden_layers", config.get("num_layers"))
    return (
        f"{model_type}: {width} {config[width]}, {layers_text(layers)}, {count:,} parameters "
        f"({(count - target) / target:+.1%} from {target:,})"
    )

"""``rnnviz analyze --model PATH``: your own checkpoint's gradient through every layer and step
(``PATH`` a folder, a state dict file, or either in an archive: :func:`rnnviz.studies.models.load_model`);
``rnnviz analyze --design TYPE --layers L --params N``: a design drawn fresh at about N
parameters (:func:`rnnviz.studies.sizing.design_config`), on random inputs, analysed the same way."""

from __future__ import annotations

import argparse
import json

import numpy as np

from rnnviz.base.formatting import layers_text, pow10_text
from rnnviz.cli.inputs import add_design_flags, design_inputs, design_layers, design_line, design_settings


def add_model_flags(p: argparse.ArgumentParser) -> None:
    """``--model``, and what the model reads: ``--text`` or ``--tokens`` (or a stack's ``--model-inputs``);
    or ``--design`` with ``--layers`` and ``--params``."""
    group = p.add_argument_group(
        "your own model (--model; of the run configuration flags only --dtype applies), or a design drawn "
        "fresh (--design, --layers, --params; it reads --seq-len random inputs drawn by --seed)"
    )
    group.add_argument(
        "--model",
        metavar="PATH",
        help="a Hugging Face folder (mamba, mamba2, falcon_mamba, recurrent_gemma, qwen3_next, xlstm) or an "
        "nn.LSTM/nn.GRU state dict (.safetensors, .pt), or either in a .zip, .tar, .tar.gz or .tgz "
        "archive (judged by its directory, extracted into a temporary folder while it is read)",
    )
    group.add_argument("--text", help="text, tokenised by the tokenizer.json beside the model")
    group.add_argument("--tokens", help="token ids, comma-separated (instead of --text)")
    group.add_argument(
        "--model-inputs", dest="model_inputs", metavar="FILE.npy", help="a stack's inputs [B, T, I] (float)"
    )
    group.add_argument(
        "--jacobians",
        type=int,
        default=0,
        metavar="K",
        help="also the top K singular values of each recurrent layer's step Jacobian (default: 0, none)",
    )
    group.add_argument(
        "--position",
        type=int,
        default=None,
        help="the prediction whose connectivity is shown (default: last)",
    )
    group.add_argument(
        "--no-connectivity",
        dest="connectivity",
        action="store_false",
        help="leave the connectivity out where it needs a pull of its own (a language model's: its loss is "
        "the mean over positions), so the analysis is one forward and one reverse pass",
    )
    add_design_flags(group, several=False)


def _inputs(args: argparse.Namespace, model) -> tuple[np.ndarray, list[str] | None]:
    """The model's inputs from ``--text``, ``--tokens`` or ``--model-inputs``."""
    from rnnviz.config import ConfigError
    from rnnviz.studies.models import tokenize

    if args.text is not None:
        return tokenize(model, args.text)
    if args.tokens is not None:
        try:
            return np.asarray([[int(t) for t in args.tokens.split(",")]], np.int32), None
        except ValueError:
            raise ConfigError("tokens", args.tokens, "comma-separated integers") from None
    if args.model_inputs is not None:
        return np.load(args.model_inputs, allow_pickle=False), None
    what = "--model-inputs FILE.npy [B, T, I]" if not model.vocab_size else "--text or --tokens"
    raise ConfigError("model", args.model, f"needs its inputs: {what}")


def summary_text(a, n_layers: int) -> str:
    """A few lines: the loss, each row's gradient at the first, middle and last step, and the
    recurrent states'."""
    from rnnviz.frames.models import row_names

    t = a.grad_norms.shape[1]
    steps = (0, t // 2, t - 1)
    lines = [f"model: {a.model_type} ({a.source}), {layers_text(n_layers)}, T = {t}", f"loss = {a.loss:.6g}"]
    lines.append("‖∂L/∂x_t^(l)‖ at t = " + ", ".join(map(str, steps)) + ":")
    for name, row in zip(row_names(len(a.log10_grad_norms)), a.log10_grad_norms):
        lines.append(f"  {name:>15}: " + "  ".join(pow10_text(row[s]) for s in steps))
    for layer, leaves in a.log10_state_grad_norms.items():
        parts = [f"{leaf} " + "  ".join(pow10_text(v[s]) for s in steps) for leaf, v in leaves.items()]
        lines.append(f"  state of layer {layer + 1}: " + "; ".join(parts))
    states = [v for leaves in a.log10_state_grad_norms.values() for v in leaves.values()]
    zeros = any(np.isneginf(v).any() for v in (a.log10_grad_norms, *states))
    note = "; 0 is exactly 0: no path leads from there to the loss" if zeros else ""
    lines.append(f"the magnitudes computed in {a.log10_source}{note}")
    lines.append(f"timing: compile {a.compile_s:.2f} s, run {a.run_s * 1e3:.1f} ms")
    return "\n".join(lines)


def _jacobians_text(j) -> str:
    """One line per recurrent layer: its mean ln σ₁(J_t) and σ₁ … σ_k at the last step taken."""
    lines = [f"step Jacobians ({j.method}, D = {j.state_dim}, at {j.steps.size} steps):"]
    for layer, mean, last in zip(j.layers, j.mean_log_sigma1, j.singular_values[:, -1]):
        top = ", ".join(f"{v:.4g}" for v in last)
        lines.append(f"  layer {layer + 1}: mean ln σ1 = {mean:.4g}; σ at t = {j.steps[-1]}: {top}")
    return "\n".join(lines)


def _design(args: argparse.Namespace):
    """``--design``'s fresh model at about ``--params``, its inputs (``--tokens`` or
    ``--model-inputs`` where given, else random), and the line and record of its sizes."""
    from rnnviz.studies.models import fresh_model
    from rnnviz.studies.sizing import design_config, param_count

    cfg = design_settings(args)
    config = design_config(args.design, params=args.params, layers=design_layers(args))
    model = fresh_model(args.design, config, seed=cfg.seed, dtype=cfg.dtype)
    given = any(getattr(args, n) is not None for n in ("text", "tokens", "model_inputs"))
    inputs, tokens = _inputs(args, model) if given else (design_inputs(model, cfg), None)
    count = param_count(args.design, config)
    record = {"model_type": args.design, "config": config, "params": count, "target": args.params}
    return model, inputs, tokens, design_line(args.design, config, count, args.params), record


def cmd_analyze_model(args: argparse.Namespace) -> int:
    """Load ``--model`` (or draw ``--design`` at about ``--params``), analyse its inputs (and
    ``--jacobians K``: the step-Jacobian spectra), print the summary or ``--json``; a design's
    sizes first (its JSON under ``"design"``)."""
    from rnnviz.config import ConfigError
    from rnnviz.studies.model_jacobians import model_jacobians
    from rnnviz.studies.models import analyze_model, load_model

    if args.model is not None and args.design is not None:
        raise ConfigError(
            "design", args.design, "not with --model (one model: a checkpoint or a fresh design)"
        )
    line = record = None
    if args.model is not None:
        for name in ("layers", "params"):
            if getattr(args, name) is not None:
                raise ConfigError(name, getattr(args, name), "only with --design TYPE")
        model = load_model(args.model, dtype=args.dtype or "float32")
        inputs, tokens = _inputs(args, model)
    else:
        model, inputs, tokens, line, record = _design(args)
    try:
        a = analyze_model(
            model, inputs, position=args.position, connectivity=args.connectivity, tokens=tokens
        )
        j = None if not args.jacobians else model_jacobians(model, inputs, k=args.jacobians)
    except ValueError as err:
        raise ConfigError("inputs", args.model or args.design, str(err)) from None
    if args.json:
        extra = ({} if j is None else {"jacobians": j.to_json()}) | (
            {} if record is None else {"design": record}
        )
        print(json.dumps(a.to_json() | extra))
    else:
        head = "" if line is None else f"design {line}\nconfig: {json.dumps(record['config'])}\n"
        print(head + summary_text(a, model.n_layers) + ("" if j is None else "\n" + _jacobians_text(j)))
    return 0

"""What the chunked form saves a block in training (Gated DeltaNet's or the mLSTM's): the
learning table's training (3 seeds vmapped, digits by pixel, B = 64, T = 64, 20 steps) with the
layers step by step and chunked (:data:`~rnnviz.engine.blocks.vectors.CHUNKED_FORMS` emptied
and not), each in its own process (the training executables are cached by config, not by
form), A B A B; and, in one process, the gradient alone at each chunk length.

    .venv/bin/python scripts/chunked_training.py 100k 400k
    .venv/bin/python scripts/chunked_training.py --cell mlstm 100k 400k

A measurement script, not a test: the figures go in docs/dev/benchmarks.md.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import subprocess
import sys
import time

import jax
import jax.numpy as jnp

#: cell → the module and the name of its chunked rule (called with ``chunk=`` c).
RULES = {"gated_deltanet": ("gated_deltanet", "chunked_delta_rule"), "mlstm": ("xlstm", "chunked_mlstm")}


def train_ms(cell: str, target: str, form: str, steps: int = 20) -> float:
    """ms per optimisation step of the table's training in ``form`` (after its compile)."""
    from rnnviz.config import RunConfig
    from rnnviz.dataset import load_dataset
    from rnnviz.engine.blocks import vectors
    from rnnviz.studies.block_models import sized_config
    from rnnviz.studies.training import DATA_TASK, TrainSettings, train_many

    if form == "step by step":
        vectors.CHUNKED_FORMS = frozenset()
    data = load_dataset("digits", order="pixels")
    base = RunConfig(cell=cell, block="reference", layers=2, input_size=1, seq_len=64, batch_size=64)
    settings = TrainSettings(DATA_TASK, steps, learning_rate=1e-3, log_every=steps)
    runs = train_many(sized_config(base, target), {"seed": [0, 1, 2]}, settings=settings, data=data)
    return 1000 * runs[0].timing.run_s / steps


def train_forms(cell: str, target: str, rounds: int = 2) -> dict[str, float]:
    """The best of ``rounds`` of :func:`train_ms` per form, each a fresh process."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for form in ("step by step", "chunked"):
            code = (
                f"import sys; sys.path[:0] = {sys.path[:1]!r}; from chunked_training import train_ms; "
                f"print(train_ms({cell!r}, {target!r}, {form!r}))"
            )
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            best[form] = min(best.get(form, float("inf")), float(out.stdout.split()[-1]))
    return best


def rule_gradients(cell: str, target: str) -> dict[str, float]:
    """ms of the gradient of Σ o² through both layers' rules at the table's shapes, per chunk length."""
    from rnnviz.config import RunConfig
    from rnnviz.engine.blocks import vectors
    from rnnviz.studies.block_models import block_spec, sized_config

    module, name = RULES[cell]
    G = importlib.import_module(f"rnnviz.engine.blocks.{module}")
    cfg = sized_config(RunConfig(cell=cell, block="reference", layers=2, input_size=1, seq_len=64), target)
    spec, init = block_spec(cfg, output_size=10)
    params = vectors.init_params(spec, jax.random.key(0), settings=init)
    x = jax.random.normal(jax.random.key(1), (192, 64, 1))
    rule, fns = getattr(G, name), {}
    for chunk in (0, 8, 16, 32, 64):
        setattr(G, name, functools.partial(rule, chunk=chunk))
        loss = lambda p, x, c=chunk: jnp.sum(vectors.forward(spec, p, x, chunked=c > 0)[:, -1] ** 2)  # noqa: E731
        fns["step by step" if chunk == 0 else f"c={chunk}"] = (
            jax.jit(jax.grad(loss)).lower(params, x).compile()
        )
    setattr(G, name, rule)
    best = {}
    for _ in range(4):
        for name, fn in fns.items():
            jax.block_until_ready(fn(params, x))
            start = time.perf_counter()
            jax.block_until_ready(fn(params, x))
            best[name] = min(best.get(name, float("inf")), 1000 * (time.perf_counter() - start))
    return best


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cell", choices=sorted(RULES), default="gated_deltanet")
    parser.add_argument("targets", nargs="*", default=["100k"])
    args = parser.parse_args()
    for target in args.targets:
        grads = rule_gradients(args.cell, target)
        print(target, "gradient, B=192:", ", ".join(f"{k} {v:.0f} ms" for k, v in grads.items()), flush=True)
        train = train_forms(args.cell, target)
        print(target, "training:", ", ".join(f"{k} {v:.0f} ms/step" for k, v in train.items()), flush=True)

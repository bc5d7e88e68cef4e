"""What the Mamba block's hand-written reverse pass saves (``mamba._scan_backward``): the
gradient of the whole model, and the learning table's training (3 seeds vmapped, digits by
pixel, B = 64, T = 64, 20 steps after the compile), with the selective scan's reverse pass
written by hand and left to JAX's transpose of the plain steps (the test's oracle,
``tests/engine/test_blocks_mamba.py``). The gradient runs in one process, both forms
interleaved, the best of five; each training in a fresh process, A B A B, the best of two.

    .venv/bin/python scripts/mamba_scan.py 100k 400k
    .venv/bin/python scripts/mamba_scan.py --layers 4 100k

A measurement script, not a test: the figures go in docs/dev/benchmarks.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

FORMS = ("transposed by JAX", "by hand")


def _use(form: str) -> None:
    """Make ``form`` the blocks' selective scan."""
    if form == FORMS[0]:
        from rnnviz.engine.blocks import mamba

        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine"))
        from test_blocks_mamba import _scan_by_autodiff

        mamba.selective_scan = _scan_by_autodiff


def _config(target: str, layers: int):
    from rnnviz.config import RunConfig
    from rnnviz.studies.block_models import sized_config

    base = RunConfig(cell="mamba", block="reference", layers=layers, input_size=1, seq_len=64, batch_size=64)
    return sized_config(base, target)


def train_ms(target: str, layers: int, form: str, steps: int = 20) -> float:
    """ms per optimisation step of the table's training with the scan's reverse pass ``form``."""
    from rnnviz.dataset import load_dataset
    from rnnviz.studies.training import DATA_TASK, TrainSettings, train_many

    _use(form)
    settings = TrainSettings(DATA_TASK, steps, learning_rate=1e-3, log_every=steps)
    data = load_dataset("digits", order="pixels")
    runs = train_many(_config(target, layers), {"seed": [0, 1, 2]}, settings=settings, data=data)
    return 1000 * runs[0].timing.run_s / steps


def train_forms(target: str, layers: int, rounds: int = 2) -> dict[str, float]:
    """The best of ``rounds`` of :func:`train_ms` per form, each a fresh process."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for form in FORMS:
            code = (
                f"import sys; sys.path[:0] = {[str(Path(__file__).resolve().parent)]!r}; "
                "from mamba_scan import train_ms; "
                f"print(train_ms({target!r}, {layers}, {form!r}))"
            )
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            best[form] = min(best.get(form, float("inf")), float(out.stdout.split()[-1]))
    return best


def gradients(target: str, layers: int) -> dict[str, float]:
    """ms of ``jax.grad`` of Σ ŷ_T² through the whole model at B = 192, per form."""
    from rnnviz.engine.blocks import mamba, vectors
    from rnnviz.studies.block_models import block_spec

    spec, init = block_spec(_config(target, layers), output_size=10)
    params = vectors.init_params(spec, jax.random.key(0), settings=init)
    x = jax.random.normal(jax.random.key(1), (192, 64, 1))
    by_hand, fns = mamba.selective_scan, {}
    for form in FORMS:
        mamba.selective_scan = by_hand
        _use(form)
        loss = lambda p, x: jnp.sum(vectors.forward(spec, p, x)[:, -1] ** 2)  # noqa: E731
        fns[form] = jax.jit(jax.grad(loss)).lower(params, x).compile()
    mamba.selective_scan = by_hand
    best: dict[str, float] = {}
    for _ in range(5):
        for form, fn in fns.items():
            jax.block_until_ready(fn(params, x))
            start = time.perf_counter()
            jax.block_until_ready(fn(params, x))
            best[form] = min(best.get(form, float("inf")), 1000 * (time.perf_counter() - start))
    return best


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("targets", nargs="*", default=["100k"])
    args = parser.parse_args()
    for target in args.targets:
        for name, measure in (("gradient, B=192", gradients), ("training", train_forms)):
            ms = measure(target, args.layers)
            shown = ", ".join(f"{k} {v:.0f} ms" for k, v in ms.items())
            print(f"×{args.layers} {target} {name}: {shown}", flush=True)

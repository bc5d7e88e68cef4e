"""The designs suite (``python -m rnnviz bench --suite designs``): today's designs next to
the LSTM, the GRU and the LRU.

1. **Cost:** each new design's analysis against plain ``jax.grad`` of the same loss, at
   B=8·T=50·I=8·H=32 and B=16·T=200·I=32·H=64 (:func:`~rnnviz.bench.measure.run_suite`);
2. **Parallel against sequential** for the designs linear in a diagonal state (RG-LRU and
   Mamba) at T = 1 000 and 10 000 (:func:`~rnnviz.bench.measure.parallel_bench`);
3. **The gradient at initialisation** (:func:`gradient_table`), T = 1 000 and 10 000: the
   decay of ‖∂L/∂carry_t‖ per step and λ₁ per design (records of kind ``gradient``).

The learning table of the same designs is ``--suite designs-learning`` (:func:`learning_table`):
the digits by pixel and permuted, and the text in bits per character.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable

import jax

from rnnviz.analysis import analyze
from rnnviz.base.measurements import SCHEMA
from rnnviz.bench.learning import data_bench
from rnnviz.config import RunConfig
from rnnviz.engine.environment import run_stamp
from rnnviz.studies.comparisons import label
from rnnviz.studies.lyapunov import lyapunov

#: The new designs, by the name the tables print.
NEW_DESIGNS: dict[str, dict] = {
    "RG-LRU": dict(cell="rglru"),
    "sLSTM": dict(cell="slstm"),
    "mLSTM": dict(cell="mlstm"),
    "Mamba (S6)": dict(cell="mamba"),
    "Gated DeltaNet": dict(cell="gated_deltanet"),
    "DeltaNet": dict(cell="deltanet"),
}
#: The designs the tables put them next to.
BASELINES: dict[str, dict] = {
    "LSTM fb=1": dict(cell="lstm", forget_bias=1.0),
    "GRU": dict(cell="gru"),
    "LRU": dict(cell="lru"),
}
DESIGNS: dict[str, dict] = {**BASELINES, **NEW_DESIGNS}
#: The cost rows' sizes.
COST_SIZES = (
    dict(batch_size=8, seq_len=50, input_size=8, hidden_size=32),
    dict(batch_size=16, seq_len=200, input_size=32, hidden_size=64),
)
#: The designs the parallel strategy runs (linear in a diagonal state; the mLSTM given its
#: stabiliser), for parallel against sequential.
PARALLEL_DESIGNS = ("rglru", "mamba", "mlstm")
#: The gradient table's lengths and shape.
GRADIENT_LENGTHS = (1000, 10_000)
GRADIENT_BASE = RunConfig(hidden_size=64, input_size=8, batch_size=4)


def cost_suite() -> list[RunConfig]:
    """Each new design at the two :data:`COST_SIZES`."""
    return [RunConfig(**size, **fields) for size in COST_SIZES for fields in NEW_DESIGNS.values()]


def parallel_suite(lengths: Iterable[int] = (1000, 10_000)) -> list[RunConfig]:
    """RG-LRU, Mamba and the mLSTM, B=8·I=32·H=64, at each of ``lengths``."""
    return [
        RunConfig(cell=c, hidden_size=64, batch_size=8, input_size=32, seq_len=t)
        for c in PARALLEL_DESIGNS
        for t in lengths
    ]


#: The long-sequence rows: each new design at T = 100 000 under ``checkpoint``. B=2·I=8·H=32,
#: not the perf suite's B=8·H=128: a matrix memory's trajectory there, 100 001 × 8 × 4096
#: floats, is beyond the memory budget (which refuses it).
LONG_BASE = RunConfig(hidden_size=32, input_size=8, batch_size=2, strategy="checkpoint")
LONG_LENGTH = 100_000


def long_suite(length: int = LONG_LENGTH) -> list[RunConfig]:
    """Each new design at ``length`` steps under ``checkpoint`` (:data:`LONG_BASE`)."""
    return [LONG_BASE.replace(seq_len=length, **fields) for fields in NEW_DESIGNS.values()]


def gradient_record(cfg: RunConfig, name: str, out=sys.stdout) -> dict:
    """One design's gradient at initialisation over ``cfg.seq_len`` steps, as a schema-1
    ``kind: "gradient"`` record: the decay of ln‖∂L/∂carry_{T−k}‖ per step of lag k (least
    squares, :func:`~rnnviz.base.readings.decay_fit`), λ₁ (QR method), and the exact
    log₁₀‖∂L/∂carry_t‖ at both ends."""
    start = time.perf_counter()
    a = analyze(cfg, repeats=1)
    ly = lyapunov(cfg, k=1)
    run_s = time.perf_counter() - start
    decay = None if ly.decay is None else float(ly.decay.slope)
    rec = {
        "schema": SCHEMA,
        "kind": "gradient",
        "suite": "designs",
        "label": f"{name}: {label(cfg)}",
        "config": cfg.to_dict(),
        **run_stamp(jax.devices()[0]),
        "compile_s": float(a.timing.compile_s + ly.compile_s),
        "run_s": run_s,
        "decay_per_step": decay,
        "lambda1": float(ly.exponents[0]),
        "log10_first": float(a.log10_grad_norms[0]),
        "log10_last": float(a.log10_grad_norms[-1]),
    }
    per_step = "—" if decay is None else f"{decay / math.log(10):+.5f}"
    print(
        f"{name:<15} {cfg.seq_len:>6} {per_step:>13} {rec['lambda1']:>+10.5f} "
        f"{rec['log10_first']:>9.2f} {rec['log10_last']:>9.2f}",
        file=out,
        flush=True,
    )
    return rec


def gradient_table(
    lengths: Iterable[int] = GRADIENT_LENGTHS,
    base: RunConfig = GRADIENT_BASE,
    designs: dict[str, dict] = DESIGNS,
    out=sys.stdout,
) -> list[dict]:
    """:func:`gradient_record` for every design at each of ``lengths``, printed as a table
    (decay in log₁₀ per step, λ₁ in ln per step)."""
    print(
        f"gradient at initialisation, {label(base)} but T: decay of log10 ‖∂L/∂carry_t‖ per step, λ1 "
        "(ln per step), log10 ‖∂L/∂carry_t‖ at t = 0 and T",
        file=out,
    )
    print(f"{'design':<15} {'T':>6} {'decay/step':>13} {'λ1':>10} {'t = 0':>9} {'t = T':>9}", file=out)
    return [
        gradient_record(base.replace(seq_len=t, **fields), name, out)
        for name, fields in designs.items()
        for t in lengths
    ]


def learning_table(steps: int = 2000, seeds: int = 3, out=sys.stdout) -> list[dict]:
    """The learning table of the designs (:func:`~rnnviz.bench.learning.data_bench` with
    :data:`DESIGNS`): digits by pixel and permuted at H=64, B=64, then the text in bits per
    character at H=128 for the new designs and the LSTM."""
    base = RunConfig(hidden_size=64, input_size=1, seq_len=64, batch_size=64)
    text = ("LSTM fb=1", *NEW_DESIGNS)
    return data_bench(base, steps=steps, seeds=seeds, out=out, cells=DESIGNS, text_cells=text)


__all__ = [
    "BASELINES",
    "DESIGNS",
    "NEW_DESIGNS",
    "cost_suite",
    "gradient_record",
    "gradient_table",
    "learning_table",
    "parallel_suite",
]

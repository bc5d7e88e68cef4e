"""Whole models of today's designs (``python -m rnnviz bench --suite designs``, and alone as
``--suite designs-blocks``): the analysis :func:`~rnnviz.analyze_model` runs against plain
``jax.grad`` of the same loss, per design and depth.

Each design of :data:`DESIGNS` is drawn fresh (:func:`~rnnviz.fresh_model`) at about
:data:`PARAMS` parameters (:func:`~rnnviz.studies.sizing.design_config`) for each depth of
:data:`DEPTHS`, and fed B × T inputs from a seeded NumPy generator: token ids for a language
model, floats ``[B, T, I]`` for a torch stack. Its executables, each compiled once
beforehand (compile seconds recorded apart), are then timed in turn, one run of each per round
(:func:`~rnnviz.engine.timing.time_interleaved`), and their medians compared:

* **plain** — ``jax.jit(jax.value_and_grad(loss))`` with respect to the whole parameter dict,
  the loss computed by ``module.forward`` without probes
  (:func:`~rnnviz.studies.model_costs.plain_loss`);
* **the analysis** — the executable :func:`~rnnviz.analyze_model` compiles and runs for the loss
  alone (the float32 pass; the float64 pass runs only where a float32 norm underflows, and is
  not timed): every layer's and state's per-step gradient norms, in one forward and one reverse
  pass (:func:`~rnnviz.engine.blocks.gradients.model_gradients`, ``shared``);
* **the analysis with the connectivity** — for a language model only: the same and one
  position's connectivity, a second pull through the model (a stack's loss is its last
  position's own, and the one pass gives both), what :func:`~rnnviz.analyze_model` runs by
  default.

All compute the same loss; each record holds the value its function returned, so the rows can
be checked against each other. The records are schema-1 ``kind: "bench"`` records of suite
``designs-blocks``: ``strategy`` ``plain_grad`` with ``measure`` ``grad``, then ``accumulate``
(one reverse pass accumulating over the steps, as the bare cells' analysis) with ``measure``
``analyze`` and, for the third, ``connectivity``; ``config`` is the design's ``config.json``
with ``batch_size`` and ``seq_len``; ``flops`` is the GEMM floor's count, 6 · parameters · B ·
T, for each.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from rnnviz.base.measurements import SCHEMA
from rnnviz.config import RunConfig
from rnnviz.engine.compile import Compiled
from rnnviz.engine.environment import run_stamp
from rnnviz.engine.timing import RunTiming, time_interleaved
from rnnviz.studies import block_models
from rnnviz.studies.model_costs import (
    analysis_prepared,
    placed_inputs,
    plain_grad_executable,
    plain_loss,
    plain_prepared,
)
from rnnviz.studies.models import Model, fresh_model, shares_pass
from rnnviz.studies.sizing import design_config
from rnnviz.tables.blocks import BLOCK_DESIGNS

#: The designs measured: every family of blocks the analysis reads.
DESIGNS = ("mamba", "mamba2", "recurrent_gemma", "xlstm", "qwen3_next", "torch_lstm", "torch_gru")
#: The depths L each is measured at.
DEPTHS = (2, 4)
#: The parameters each model has (about: :func:`~rnnviz.studies.sizing.design_config`).
PARAMS = "100k"
#: B and T of the inputs.
BATCH_SIZE = 8
SEQ_LEN = 256


def block_inputs(model: Model, batch: int, seq_len: int, seed: int = 0) -> np.ndarray:
    """What ``model`` reads: ``<int32>[B, T]`` token ids uniform over its vocabulary, or for a
    stack without one ``<float32>[B, T, I]`` standard normal, from a NumPy generator of ``seed``."""
    rng = np.random.default_rng(seed)
    if model.vocab_size:
        return rng.integers(0, model.vocab_size, size=(batch, seq_len), dtype=np.int32)
    return rng.standard_normal((batch, seq_len, model.stream_widths[0]), dtype=np.float32)


class Timed(NamedTuple):
    """One timed function: its executable, the arguments it runs on, and the record's
    ``(strategy, measure)``."""

    compiled: Compiled
    args: tuple
    how: tuple[str, str]


def prepared_ways(model: Model, inputs: np.ndarray) -> tuple[list[Timed], jax.Device]:
    """The executables for ``model`` on ``inputs`` (compiled here, or the analysis's reused from
    :func:`~rnnviz.analyze_model`'s cache) with their arguments on the weights' device, and
    that device: plain ``jax.grad``; the analysis, one reverse pass of the model's loss; and,
    where one position's connectivity needs a pull of its own (a language model, whose loss is
    the mean over positions: :func:`~rnnviz.studies.models.shares_pass`), the analysis with it
    as :func:`~rnnviz.analyze_model` runs it by default, at the last position with a loss."""
    at = placed_inputs(model, inputs)
    steps = at.inputs.shape[1] - (1 if model.vocab_size else 0)
    plain = plain_prepared(model, at)
    ways = [
        Timed(plain.compiled, plain.args, ("plain_grad", "grad")),
        Timed(*analysis_prepared(model, at, True), ("accumulate", "analyze")),
    ]
    if not shares_pass(model, steps, steps - 1):
        ways.append(Timed(*analysis_prepared(model, at, False), ("accumulate", "connectivity")))
    return ways, at.device


def _record(
    model: Model,
    inputs: np.ndarray,
    config: dict[str, Any],
    device: jax.Device,
    way: Timed,
    timing: RunTiming,
    loss: float,
    plain_s: float,
) -> dict[str, Any]:
    """One schema-1 ``bench`` record of ``way``, its ratio to ``plain_s``."""
    exe = way.compiled
    batch, steps = inputs.shape[:2]
    flops = 6.0 * model.n_params * batch * steps
    return {
        "schema": SCHEMA,
        "kind": "bench",
        "suite": "designs-blocks",
        "label": f"{model.model_type} L={model.n_layers} B={batch} T={steps} ({model.n_params:,} params)",
        "config": {**config, "batch_size": batch, "seq_len": steps},
        "strategy": way.how[0],
        "measure": way.how[1],
        **run_stamp(device),
        "compile_s": exe.compile_s,
        "run_s": timing.median_s,
        "run_min_s": timing.min_s,
        "run_max_s": timing.max_s,
        "repeats": timing.repeats,
        "peak_bytes": int(exe.peak_bytes),
        "flops": flops,
        "flops_per_s": flops / timing.median_s if timing.median_s > 0 else 0.0,
        "ratio_to_plain_grad": timing.median_s / plain_s if plain_s > 0 else None,
        "n_params": model.n_params,
        "loss": loss,
    }


def block_cost_rows(
    config: dict[str, Any],
    *,
    batch: int = BATCH_SIZE,
    seq_len: int = SEQ_LEN,
    repeats: int = 10,
    budget_s: float | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """The records of :func:`model_cost_rows` for the model of ``config`` (drawn with ``seed``)
    on ``batch`` × ``seq_len`` inputs.

    Args:
        config: a design's config (:func:`~rnnviz.studies.sizing.design_config`).
        batch: B.
        seq_len: T.
        repeats: rounds of timed runs after one untimed run of each.
        budget_s: seconds of timed runs per function; a slow one gets fewer rounds (at least 3).
        seed: the weights' and the inputs' seed.
    """
    model = fresh_model(config["model_type"], config, seed=seed)
    return model_cost_rows(model, block_inputs(model, batch, seq_len, seed), config, repeats, budget_s)


def model_cost_rows(
    model: Model, inputs: np.ndarray, config: dict[str, Any], repeats: int = 10, budget_s: float | None = None
) -> list[dict[str, Any]]:
    """Each way of :func:`prepared_ways` timed in the same rounds, one record each, plain
    ``jax.grad``'s first (``config`` is what the records say it is).

    Returns:
        ``[plain, analysis]``, and ``connectivity`` (the analysis with one position's
        connectivity) for a language model; each with its ``ratio_to_plain_grad`` and
        ``loss``, the value its function returned.
    """
    ways, device = prepared_ways(model, inputs)
    # one untimed run each, for the loss it returns; time_interleaved runs its own warm-up
    outs = [way.compiled.fn(*way.args) for way in ways]
    losses = [float(outs[0][0]), *(float(out.loss) for out in outs[1:])]
    timings = time_interleaved([(way.compiled.fn, way.args) for way in ways], repeats, budget_s)
    row = functools.partial(_record, model, inputs, config, device)
    return [row(w, t, loss, timings[0].median_s) for w, t, loss in zip(ways, timings, losses)]


HEADER = (
    f"{'design':<16} {'L':>2} {'params':>8} {'plain ms':>9} {'analysis ×':>11} "
    f"{'+ connectivity ×':>17} {'compile s':>11}"
)


def table_row(rows: Sequence[dict[str, Any]]) -> str:
    """One printed row of :func:`model_cost_rows`' records: design, L, parameters, the plain
    gradient's median ms, the analysis's ratio to it and the analysis with the connectivity's
    (— where one pass gives both), and the compile seconds (plain / analysis)."""
    plain, analysis, *more = rows
    cfg = plain["config"]
    layers = cfg.get("num_hidden_layers", cfg.get("num_layers", cfg.get("layers")))
    with_connectivity = f"{more[0]['ratio_to_plain_grad']:.2f}" if more else "—"
    return (
        f"{cfg['model_type']:<16} {layers:>2} {plain['n_params']:>8,} {plain['run_s'] * 1e3:>9.2f} "
        f"{analysis['ratio_to_plain_grad']:>11.2f} {with_connectivity:>17} "
        f"{plain['compile_s']:>5.1f}/{analysis['compile_s']:<5.1f}"
    )


def block_costs(
    designs: Sequence[str] = DESIGNS,
    depths: Sequence[int] = DEPTHS,
    *,
    params: int | str = PARAMS,
    batch: int = BATCH_SIZE,
    seq_len: int = SEQ_LEN,
    repeats: int = 10,
    budget_s: float | None = None,
    seed: int = 0,
    out=sys.stdout,
) -> list[dict[str, Any]]:
    """:func:`block_cost_rows` for every design at every depth, printed as a table.

    Args:
        designs: model types (keys of :data:`~rnnviz.studies.sizing.TEMPLATES`).
        depths: the depths L.
        params: the parameter count each model is sized to.
        batch: B.
        seq_len: T.
        repeats: rounds of timed runs per row.
        budget_s: seconds of timed runs per function (None: no limit).
        seed: the weights' and the inputs' seed.
        out: where the table is printed.

    Returns:
        :func:`model_cost_rows`' records of each row in turn.
    """
    print(
        f"whole models at about {params} parameters, B={batch} T={seq_len}: the analysis "
        "(analyze_model's float32 pass; + one position's connectivity, its default) / plain jax.grad "
        "of the same loss",
        file=out,
    )
    print(HEADER, file=out)
    records: list[dict[str, Any]] = []
    for model_type in designs:
        for layers in depths:
            config = design_config(model_type, params=params, layers=layers)
            rows = block_cost_rows(
                config, batch=batch, seq_len=seq_len, repeats=repeats, budget_s=budget_s, seed=seed
            )
            records.extend(rows)
            print(table_row(rows), file=out, flush=True)
    return records


#: The cells whose reference blocks :func:`config_block_costs` measures (every one that has one).
BLOCK_CELLS = tuple(BLOCK_DESIGNS)


def sized_block(cell: str, layers: int, params: int | str, **fields: Any) -> RunConfig:
    """``RunConfig(block="reference")`` of ``cell`` at ``layers``, its width H the one whose
    drawn model's parameter count is nearest ``params`` (the count grows with H: bisection)."""
    base = RunConfig(cell=cell, block="reference", layers=layers, **fields)
    return block_models.sized_config(base, params)


def config_block_costs(
    cells: Sequence[str] = BLOCK_CELLS,
    depths: Sequence[int] = DEPTHS,
    *,
    params: int | str = PARAMS,
    batch: int = BATCH_SIZE,
    seq_len: int = SEQ_LEN,
    repeats: int = 10,
    budget_s: float | None = None,
    out=sys.stdout,
) -> list[dict[str, Any]]:
    """The designs as ``RunConfig(block="reference")`` builds them (models of vectors, I = 8,
    the bare cells' ``last`` loss on the readout: one reverse pass serves the loss and the
    connectivity), each at every depth and about ``params`` parameters, on the bare cells'
    inputs: :func:`model_cost_rows`' records (plain and the analysis), printed as a table."""
    print(
        f"reference blocks (RunConfig block='reference', I=8) at about {params} parameters, B={batch} "
        f"T={seq_len}: the analysis / plain jax.grad of the same loss",
        file=out,
    )
    print(HEADER, file=out)
    records: list[dict[str, Any]] = []
    for cell in cells:
        for layers in depths:
            cfg = sized_block(cell, layers, params, batch_size=batch, seq_len=seq_len)
            model = block_models.block_model(cfg)
            config = {"model_type": model.model_type, **cfg.to_dict()}
            rows = model_cost_rows(model, block_models.block_inputs(cfg), config, repeats, budget_s)
            records.extend(rows)
            print(table_row(rows), file=out, flush=True)
    return records


__all__ = [
    "BLOCK_CELLS",
    "config_block_costs",
    "model_cost_rows",
    "sized_block",
    "BATCH_SIZE",
    "DEPTHS",
    "DESIGNS",
    "PARAMS",
    "SEQ_LEN",
    "block_cost_rows",
    "block_costs",
    "block_inputs",
    "plain_grad_executable",
    "plain_loss",
    "prepared_ways",
    "table_row",
]

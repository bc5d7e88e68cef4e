"""The benchmark's learning measurements: training speed (the chunked scan against a Python
loop of one jitted step) and the learning tables — the adding problem over cells and T, and
real data (the digits in two orders, the prose text) — printed and returned as schema-1
``kind: "train"`` records."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import jax
import numpy as np

from rnnviz.base.connectivity import reach
from rnnviz.base.measurements import SCHEMA, append_records, load_records
from rnnviz.bench.references import (
    loop_steps_per_s,
    xla_lstm_floor,
)
from rnnviz.bench.suites import (
    BLOCK_DEPTHS,
    BLOCK_PARAMS,
    DATA_LEARNING_CELLS,
    DIGIT_ORDERS,
    LEARNING_CELLS,
    TEXT_CELLS,
)
from rnnviz.config import ConfigError, RunConfig
from rnnviz.dataset import fit_to_data, load_dataset
from rnnviz.engine.environment import run_stamp
from rnnviz.studies.block_models import block_param_count, sized_config
from rnnviz.studies.comparisons import label
from rnnviz.studies.connectivity import connectivity
from rnnviz.studies.training import DATA_TASK, Trainer, TrainSettings, train, train_many
from rnnviz.studies.training.blocks import block_connectivity
from rnnviz.tables.blocks import BLOCK_DESIGNS


def train_record(r, mode: str, suite: str = "train") -> dict:
    """A schema-1 ``kind: "train"`` record of one training run."""

    device = jax.devices()[0]
    whole = r.to_json()
    return {
        "schema": SCHEMA,
        "kind": "train",
        "suite": suite,
        "label": label(r.config),
        "config": whole["config"],
        "mode": mode,
        **run_stamp(device),
        **{f: whole[f] for f in _RECORDED},
        "ms_per_step": 1e3 / r.timing.steps_per_s,
    }


#: What a train record keeps of the run (:meth:`~rnnviz.studies.training.Training.to_json`), in order.
_RECORDED = (
    "compile_s", "run_s", "task", "lag", "optimizer", "learning_rate", "clip", "steps", "steps_run",
    "baseline", "final_loss", "solved_step", "nonfinite_step", "clip_count", "steps_per_s",
)  # fmt: skip


def train_bench(
    cfg: RunConfig, steps: int = 1500, seeds: int = 3, seq_lens=(50, 100, 200), out=sys.stdout
) -> list[dict]:
    """Speed (chunked scan vs a Python loop of one jitted step, same run) and the learning
    table (adding; cells × T × seeds, Adam 1e-3, clip 1, B = 64, H = 64, ``steps`` steps)."""

    print(f"speed: {label(cfg)}, adding, Adam 1e-3, clip 1", file=out)
    train(cfg, settings=TrainSettings("adding", steps=100, log_every=100))  # compiles the chunk
    chunked = train(cfg, settings=TrainSettings("adding", steps=500, log_every=100))
    loop = loop_steps_per_s(cfg, 500)
    print(
        "  chunked lax.scan (100 steps per call, with a gradient profile per call): "
        f"{1e3 / chunked.timing.steps_per_s:6.2f} ms/step",
        file=out,
    )
    print(
        f"  Python loop over one jitted step:                                          {1e3 / loop:6.2f} "
        "ms/step",
        file=out,
    )
    print(f"  chunked is ×{chunked.timing.steps_per_s / loop:.2f} the loop's steps/s", file=out, flush=True)
    if cfg.cell == "lstm":
        floor = xla_lstm_floor(cfg.batch_size or 1, cfg.seq_len, cfg.hidden_size)
        print(
            f"  XLA:CPU floor of any LSTM step here (hand-written forward {floor.forward:.2f} + reverse "
            f"{floor.reverse:.2f}"
            f" + ∂L/∂W_h GEMM {floor.weight_gemm:.2f}): {floor.total:6.2f} ms/step",
            file=out,
            flush=True,
        )
    records = [train_record(chunked, "chunked")]
    print(
        f"\nlearning table: adding, B=64, H=64, {steps} steps, {seeds} seeds in one vmapped call per cell "
        "and T",
        file=out,
    )
    print(
        f"{'cell':<10} {'T':>4} {'final MSE/baseline':>24} {'solved':>7} {'solved step (mean, range)':>26} "
        f"{'diverged':>9} {'s per run':>10}",
        file=out,
        flush=True,
    )
    for name, fields in LEARNING_CELLS.items():
        for t in seq_lens:
            base = RunConfig(**{**dict(hidden_size=64, input_size=2, batch_size=64, seq_len=t), **fields})
            runs = train_many(
                base,
                {"seed": list(range(seeds))},
                settings=TrainSettings("adding", steps, learning_rate=1e-3, clip=1.0, log_every=100),
            )
            ratios = [r.final_loss() / r.baseline for r in runs if r.nonfinite_step is None]
            solved = [r.solved_step for r in runs if r.solved_step is not None]
            diverged = [r.nonfinite_step for r in runs if r.nonfinite_step is not None]
            loss = (
                f"{sum(ratios) / len(ratios):>10.3f} ({min(ratios):.3f}–{max(ratios):.3f})"
                if ratios
                else f"{'—':>24}"
            )
            when = f"{sum(solved) / len(solved):.0f} ({min(solved)}–{max(solved)})" if solved else "—"
            nan = f"{len(diverged)} (step {min(diverged)})" if diverged else "0"
            per_run = runs[0].timing.run_s / len(runs)
            print(
                f"{name:<10} {t:>4} {loss} {len(solved)}/{len(runs):<5} {when:>26} {nan:>9} {per_run:>10.1f}",
                file=out,
                flush=True,
            )
            records += [train_record(r, "chunked", "train-learning") for r in runs]
    return records


#: Most steps of the text table (its LSTM runs' FLOPs stay inside the training budget).
TEXT_STEPS = 1000
#: Held-out text sequences whose connectivity gives a trained run's reach (:func:`text_reach`).
REACH_SEQUENCES = 8


def steps_to_fraction(steps: np.ndarray, metric: np.ndarray, fraction: float = 0.9) -> int | None:
    """The first profile step whose held-out metric reaches ``fraction`` of its final value."""
    if not metric.size or not np.isfinite(metric[-1]):
        return None
    hit = np.flatnonzero(metric >= fraction * metric[-1])
    return int(steps[hit[0]]) if hit.size else None


def data_bench(
    base: RunConfig,
    steps: int = 1500,
    seeds: int = 3,
    out=sys.stdout,
    cells: dict[str, dict] | None = None,
    text_cells: tuple[str, ...] | None = None,
) -> list[dict]:
    """The real-data learning table: each design of ``DATA_LEARNING_CELLS`` on the digits
    pixel by pixel and permuted (T=64, I=1), ``seeds`` seeds in one vmapped call, Adam 1e-3,
    clip 1, ``steps`` steps: held-out accuracy (mean, range), steps to 90 % of the final
    accuracy, seconds per run; then :func:`text_table` with at most :data:`TEXT_STEPS`
    steps (three LSTM runs of T=100 at 2000 steps are over the training FLOP budget).
    ``cells`` and ``text_cells`` name other designs (the designs suite's)."""
    cells = DATA_LEARNING_CELLS if cells is None else cells
    print(
        f"learning table: digits, B={base.batch_size}, H={base.hidden_size}, {steps} steps, Adam 1e-3, "
        f"clip 1, {seeds} seeds in one vmapped call; held-out accuracy on the 359 test digits",
        file=out,
    )
    print(
        f"{'cell':<10} {'order':<9} {'accuracy (mean, range)':>24} {'90 % at step':>13} {'s/run':>7}",
        file=out,
    )
    records: list[dict] = []
    for order in DIGIT_ORDERS:
        ds = load_dataset("digits", order=order)
        for name, fields in cells.items():
            cfg = base.replace(**fields)
            runs = train_many(
                cfg,
                {"seed": list(range(seeds))},
                settings=TrainSettings(DATA_TASK, steps, learning_rate=1e-3, log_every=min(100, steps)),
                data=ds,
            )
            acc = [float(r.held_out_metric[-1]) for r in runs]
            reach = [steps_to_fraction(r.held_out_steps, r.held_out_metric) for r in runs]
            reach = [s for s in reach if s is not None]
            when = f"{np.mean(reach):.0f}" if reach else "—"
            per_run = runs[0].timing.run_s / len(runs)
            print(
                f"{name:<10} {order:<9} {np.mean(acc):>10.3f} ({min(acc):.3f}–{max(acc):.3f}) "
                f"{when:>13} {per_run:>7.1f}",
                file=out,
                flush=True,
            )
            records += [data_record(r, f"digits {order}") for r in runs]
    return records + text_table(min(steps, TEXT_STEPS), seeds, out, cells, text_cells)


def text_table(
    steps: int = 1000,
    seeds: int = 3,
    out=sys.stdout,
    cells: dict[str, dict] | None = None,
    names: tuple[str, ...] | None = None,
) -> list[dict]:
    """Held-out bits per character on the prose text (T=100, one-hot, H=128, B=32) after
    ``steps`` steps for each of ``names`` (default ``TEXT_CELLS``) of ``cells`` (default
    ``DATA_LEARNING_CELLS``), ``seeds`` seeds in one vmapped call."""
    cells = DATA_LEARNING_CELLS if cells is None else cells
    names = TEXT_CELLS if names is None else names
    records: list[dict] = []
    text = load_dataset("text", corpus="prose", seq_len=100)
    print(
        f"\ntext (prose, T=100, I={text.input_size}), H=128, B=32, {steps} steps: held-out bits/char",
        file=out,
    )
    for name in names:
        cfg = RunConfig(hidden_size=128, input_size=text.input_size, seq_len=100, batch_size=32)
        runs = train_many(
            cfg.replace(**cells[name]),
            {"seed": list(range(seeds))},
            settings=TrainSettings(DATA_TASK, steps, learning_rate=1e-3, log_every=min(100, steps)),
            data=text,
        )
        bits = [float(r.held_out_metric[-1]) for r in runs]
        unigram = runs[0].baseline / np.log(2.0)
        reach = [text_reach(r, text) for r in runs]
        far, near = (np.mean([r[i] for r in reach]) for i in (0, 1))
        print(
            f"{name:<10} {np.mean(bits):.3f} ({min(bits):.3f}–{max(bits):.3f}) bits/char "
            f"(unigram {unigram:.3f}); reach {far:.1f} characters above 1 %, {near:.1f} above 10 %; "
            f"{runs[0].timing.run_s / len(runs):.1f} s per run",
            file=out,
            flush=True,
        )
        records += [
            {**data_record(r, "text prose"), "reach_1pct": one, "reach_10pct": ten}
            for r, (one, ten) in zip(runs, reach)
        ]
    return records


#: The block learning table's name of each cell's reference block (its rows in docs/guide/cells.md).
BLOCK_NAMES = {
    "lstm": "LSTM",
    "gru": "GRU",
    "rglru": "RG-LRU",
    "slstm": "sLSTM",
    "mlstm": "mLSTM",
    "mamba": "Mamba (S6)",
    "gated_deltanet": "Gated DeltaNet",
}
#: What one row's training may take: its seeds over the whole run (about 3 × 2000 steps of a
#: 400k-parameter block on the digits, 8e13 FLOPs); the dashboard keeps its own, smaller budget.
BLOCK_FLOP_BUDGET = 2e14
#: What one row's seeds may hold, by the estimate: the table runs alone on its machine, where
#: the dashboard's budget serves many visitors (the Mamba ×4 at 400 k needs just over 4 GiB).
BLOCK_MEMORY_BUDGET = 8 * 2**30
#: Seconds of training between two saves of a row's runs (:meth:`~rnnviz.studies.training.Trainer.save`):
#: a row takes up to hours, and a stopped table loses at most this much of one.
BLOCK_SAVE_EVERY_S = 300.0


def block_learning_table(
    steps: int = 2000,
    seeds: int = 3,
    cells: tuple[str, ...] = tuple(BLOCK_DESIGNS),
    depths: tuple[int, ...] = BLOCK_DEPTHS,
    params: tuple[str, ...] = BLOCK_PARAMS,
    out=sys.stdout,
    record: str | None = None,
) -> list[dict]:
    """The learning table of every design as its reference block (:mod:`rnnviz.studies.training.blocks`):
    for each cell, depth and parameter count (the width :func:`~rnnviz.studies.block_models.sized_config`
    picks for each data set's input size), the digits by pixel and permuted (T=64, I=1, B=64,
    ``steps`` steps) and the prose text (T=100, one-hot, B=32, at most :data:`TEXT_STEPS`
    steps; bits per character and reach), ``seeds`` seeds in one vmapped call, Adam 1e-3,
    clip 1, as the bare cells' table (:func:`data_bench`) trains them.

    With ``record``, each row's records are appended to that file as soon as the row is done,
    and a row the file already holds (:func:`recorded_rows`) is skipped; a row under way saves
    its runs every :data:`BLOCK_SAVE_EVERY_S` seconds beside it (``<record>.partial/``), and
    the next call resumes them there: a table of many hours resumes where it stopped, to within
    minutes. Returns the records of the rows run.

    Raises:
        ConfigError: ``record`` holds rows trained for another number of steps (one table, one
            setting: its rows would not compare).
    """
    done = recorded_rows(record, steps) if record else set()
    digits = {order: load_dataset("digits", order=order) for order in DIGIT_ORDERS}
    text = load_dataset("text", corpus="prose", seq_len=100)
    print(
        f"block learning table: {seeds} seeds in one vmapped call, Adam 1e-3, clip 1; digits B=64, {steps} "
        f"steps (held-out accuracy, 90 % at step); text B=32, {min(steps, TEXT_STEPS)} steps (bits/char, "
        "reach > 1 % / > 10 %)",
        file=out,
        flush=True,
    )
    records: list[dict] = []
    for cell in cells:
        for depth in depths:
            for target in params:
                for name, ds, batch, n in [
                    *((f"digits {o}", d, 64, steps) for o, d in digits.items()),
                    ("text prose", text, 32, min(steps, TEXT_STEPS)),
                ]:
                    if (cell, depth, target, name) in done:
                        print(f"{cell} block ×{depth} at {target}, {name}: recorded already", file=out)
                        continue
                    base = RunConfig(
                        cell=cell, block="reference", layers=depth, input_size=ds.input_size,
                        seq_len=ds.seq_len, batch_size=batch,
                    )  # fmt: skip
                    saved = None if not record else _partial(record, cell, depth, target, name)
                    row = _block_row(sized_config(base, target), ds, name, n, seeds, target, out, saved)
                    if record:
                        append_records(record, row)
                    records += row
    return records


def recorded_rows(path: str, steps: int) -> set[tuple[str, int, str, str]]:
    """``(cell, depth, target count, data set)`` of the block table's rows ``path`` holds (none
    when it does not exist), each digits row checked to be trained for ``steps`` steps (the
    text's follow from them).

    Raises:
        ConfigError: a row trained for another number of steps.
    """
    if not Path(path).exists():
        return set()
    rows = [r for r in load_records([path]).records if r.get("target_params") is not None]
    for r in rows:
        if r["data"].startswith("digits") and r["steps"] != steps:  # the text's follow the digits'
            held = f"{r['steps']}, as the rows {path} holds were trained (one table, one setting)"
            held += ", or another file"
            raise ConfigError("steps", steps, held)
    return {(r["config"]["cell"], r["config"]["layers"], r["target_params"], r["data"]) for r in rows}


def _partial(record: str, cell: str, depth: int, target: str, name: str) -> Path:
    """Where a row of :func:`block_learning_table` under way saves its runs, beside ``record``."""
    return Path(f"{record}.partial") / f"{cell}-x{depth}-{target}-{name.replace(' ', '-')}.npz"


def _block_row(
    cfg: RunConfig, ds, name: str, steps: int, seeds: int, target: str, out, saved: Path | None = None
) -> list[dict]:
    """One row of :func:`block_learning_table`: ``seeds`` runs of ``cfg`` on ``ds``, printed and
    recorded; with ``saved``, resumed from that file where it holds the runs, and saved there
    every :data:`BLOCK_SAVE_EVERY_S` seconds until they are done (then removed)."""
    trainer = Trainer(
        cfg,
        {"seed": list(range(seeds))},
        settings=TrainSettings(DATA_TASK, steps, learning_rate=1e-3, log_every=min(100, steps)),
        data=ds,
        flop_budget=BLOCK_FLOP_BUDGET,
        memory_budget=BLOCK_MEMORY_BUDGET,
    )
    if saved is not None and trainer.resume(saved):
        print(f"{label(cfg)}: {name} resumed at step {trainer.steps_done} from {saved}", file=out, flush=True)
    last = time.monotonic()
    while not trainer.done:
        trainer.advance()
        if saved is not None and not trainer.done and time.monotonic() - last >= BLOCK_SAVE_EVERY_S:
            saved.parent.mkdir(parents=True, exist_ok=True)
            trainer.save(saved)
            last = time.monotonic()
    runs = trainer.records()
    count = block_param_count(cfg)
    metric = [float(r.held_out_metric[-1]) for r in runs]
    extra: list[dict] = [{} for _ in runs]
    if ds.kind == "next-step":
        got = [block_reach(r, ds) for r in runs]
        extra = [{"reach_1pct": one, "reach_10pct": ten} for one, ten in got]
        what = "reach {:.1f} / {:.1f}".format(*(np.mean([g[i] for g in got]) for i in (0, 1)))
    else:
        reach = [
            s for s in (steps_to_fraction(r.held_out_steps, r.held_out_metric) for r in runs) if s is not None
        ]
        what = f"90 % at {np.mean(reach):.0f}" if reach else "90 % at —"
    print(
        f"{label(cfg):<44} {count:>8,} params  {name:<15} {runs[0].metric_name} {np.mean(metric):.3f} "
        f"({min(metric):.3f}–{max(metric):.3f}), {what}, {runs[0].timing.run_s / len(runs):.1f} s per run",
        file=out,
        flush=True,
    )
    rows = [
        {**data_record(r, name), "suite": "designs-learning", "params": count, "target_params": target, **e}
        for r, e in zip(runs, extra)
    ]
    if saved is not None:
        saved.unlink(missing_ok=True)  # the caller records the rows next
    return rows


def block_reach(run, text, sequences: int = REACH_SEQUENCES) -> tuple[float, float]:
    """:func:`text_reach` of a trained reference block: its prediction of each held-out sequence's
    last next character (:func:`~rnnviz.studies.training.blocks.block_connectivity`), at the
    final weights."""
    tensors = run.tensors()
    reaches = []
    for i in text.test[:sequences]:
        tau = int(text.lengths[i])
        c = block_connectivity(run.config, tensors, text.inputs[i], int(text.targets[i][tau - 1]), tau)
        reaches.append((reach(c, tau, 0.01), reach(c, tau, 0.1)))
    return float(np.mean([r[0] for r in reaches])), float(np.mean([r[1] for r in reaches]))


def text_reach(run, text, sequences: int = REACH_SEQUENCES) -> tuple[float, float]:
    """How far back a trained run's prediction of the next character reaches: the mean, over
    the first ``sequences`` held-out sequences of ``text``, of
    :meth:`~rnnviz.studies.connectivity.Connectivity.reach` at 1 % and at 10 % (steps back
    from the last character to the furthest input whose connectivity to the log-probability of
    the true next character is at least that fraction of the strongest), at the final weights."""
    weights = run.weights()
    cfg = fit_to_data(run.config, text)
    got = [connectivity(cfg, text, int(i), params=weights) for i in text.test[:sequences]]
    return float(np.mean([c.reach(0.01) for c in got])), float(np.mean([c.reach(0.1) for c in got]))


def data_record(r, data: str) -> dict:
    """A ``kind: "train"`` record of a run on a data set, with its held-out curve."""
    return {
        **train_record(r, "chunked", "data-learning"),
        "data": data,
        "held_out_steps": r.held_out_steps.tolist(),
        "held_out_metric": r.held_out_metric.tolist(),
    }

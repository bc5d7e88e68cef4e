"""The designs' tables in the docs and the README are the recorded runs they cite
(``rnnviz/data/runs/cpu-designs*.jsonl``): a new recording, or a table edited by hand, that
disagrees fails here. Plain reading, no JAX computation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from rnnviz.base.measurements import load_records
from rnnviz.bench.designs import DESIGNS, NEW_DESIGNS
from rnnviz.bench.learning import BLOCK_NAMES, steps_to_fraction

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "rnnviz" / "data" / "runs"
CELLS_DOC = (ROOT / "docs" / "guide" / "cells.md").read_text()
README = (ROOT / "README.md").read_text()


def _design(config: dict) -> str:
    """The table's name of a recorded config (the LSTM's row is the one with forget bias 1)."""
    return next(
        name
        for name, fields in DESIGNS.items()
        if all(config.get(k) == v for k, v in fields.items())
        and (fields.get("cell") != "lstm" or config["forget_bias"] == 1.0)
    )


def _learning() -> dict[tuple[str, str], list[dict]]:
    loaded = load_records([RUNS / "cpu-designs-learning.jsonl"])
    assert not loaded.skipped, loaded.skipped
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in loaded.records:
        groups.setdefault((_design(r["config"]), r["data"]), []).append(r)
    return groups


def _row(text: str, name: str, after: str = "") -> list[str]:
    """The cells of the first markdown table row after the line ``after`` that starts with ``name``."""
    lines = text.splitlines()
    start = lines.index(after) if after else 0
    line = next(line for line in lines[start:] if line.startswith(f"| {name} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def _digits_cell(runs: list[dict]) -> str:
    acc = [r["held_out_metric"][-1] for r in runs]
    reach = [steps_to_fraction(np.array(r["held_out_steps"]), np.array(r["held_out_metric"])) for r in runs]
    per_run = np.mean([r["run_s"] for r in runs]) / len(runs)  # one vmapped call holds the seeds
    return f"{np.mean(acc):.3f} ({min(acc):.3f}–{max(acc):.3f}), {np.mean(reach):.0f}, {per_run:.1f} s"


@pytest.mark.parametrize("name", list(DESIGNS))
def test_the_learning_table_in_the_docs_is_the_recorded_runs(name):
    groups = _learning()
    row = _row(CELLS_DOC, name, "### What the designs learn")
    for column, data in enumerate(("digits pixels", "digits permuted")):
        assert len(groups[name, data]) == 3, (name, data)  # 3 seeds
        assert row[column] == _digits_cell(groups[name, data]), (name, data)
    text = groups.get((name, "text prose"))
    if text is None:
        assert row[2:] == ["—", "—"]
        return
    bits = [r["held_out_metric"][-1] for r in text]
    assert row[2] == f"{np.mean(bits):.3f} ({min(bits):.3f}–{max(bits):.3f})"
    reach = [np.mean([r[k] for r in text]) for k in ("reach_1pct", "reach_10pct")]
    assert row[3] == f"{reach[0]:.1f} / {reach[1]:.1f}"


def test_the_readme_rows_are_the_recorded_runs():
    groups = _learning()
    header = next(line for line in README.splitlines() if line.startswith("| | LSTM fb=1 |"))
    names = [c.strip() for c in header.strip("|").split("|")][1:]
    short = {"Mamba": "Mamba (S6)"}
    digits, bits = _row(README, "digits"), _row(README, "bits/char")
    for i, name in enumerate(short.get(n, n) for n in names):
        acc = np.mean([r["held_out_metric"][-1] for r in groups[name, "digits pixels"]])
        assert digits[i] == f"{acc:.2f}", name
        text = groups.get((name, "text prose"))
        assert bits[i] == (f"{np.mean([r['held_out_metric'][-1] for r in text]):.2f}" if text else "—"), name


def test_the_readme_block_rows_are_the_recorded_runs():
    """The README's block rows: each column's design as its reference block, ×2 at 100k ("—"
    for the designs without one)."""
    header = next(line for line in README.splitlines() if line.startswith("| | LSTM fb=1 |"))
    names = [c.strip() for c in header.strip("|").split("|")][1:]
    cell_of = {"LSTM fb=1": "lstm", "Mamba": "mamba"} | {v: k for k, v in BLOCK_NAMES.items()}
    groups = _block_learning()
    digits, bits = _row(README, "block: digits"), _row(README, "block: bits/char")
    assert len(digits) == len(bits) == len(names)
    for i, name in enumerate(names):
        by_data = groups.get((cell_of.get(name), 2, "100k"))
        if by_data is None:
            assert name not in cell_of and digits[i] == bits[i] == "—", name
            continue
        for column, data in ((digits, "digits pixels"), (bits, "text prose")):
            assert column[i] == f"{np.mean([r['held_out_metric'][-1] for r in by_data[data]]):.2f}", name


def test_the_gradient_tables_are_the_recorded_runs():
    loaded = load_records([RUNS / "cpu-designs.jsonl"])
    gradient = {
        (_design(r["config"]), r["config"]["seq_len"]): r for r in loaded.records if r["kind"] == "gradient"
    }
    readme = next(
        line for line in README.splitlines() if re.fullmatch(r"\| [\d  ]+( \| [\d  ]+)+ \|", line.strip())
    )
    steps = [int(c.strip().replace(" ", "").replace(" ", "")) for c in readme.strip("|").split("|")]
    for name, want in zip(DESIGNS, steps):
        assert want == round(1 / abs(gradient[name, 10_000]["lambda1"])), name
        row = _row(CELLS_DOC, name, "### The gradient at initialisation")
        for column, key, length in (
            (0, "decay_per_step", 1000),
            (1, "decay_per_step", 10_000),
            (2, "lambda1", 1000),
        ):
            assert row[column] == f"{gradient[name, length][key]:.4f}".replace("-", "−"), (name, key, length)
        assert row[3] == f"{gradient[name, 10_000]['lambda1']:.4f}".replace("-", "−"), name


def test_the_cost_table_is_the_recorded_runs():
    loaded = load_records([RUNS / "cpu-designs.jsonl"])
    bench = [r for r in loaded.records if r["kind"] == "bench" and r["suite"] == "designs"]
    after = "### What each design costs"
    for name, fields in NEW_DESIGNS.items():
        row = _row(CELLS_DOC, name, after)
        mine = [r for r in bench if r["config"]["cell"] == fields["cell"]]
        for column, hidden in enumerate((32, 64)):
            (analysis,) = [
                r for r in mine if r["config"]["hidden_size"] == hidden and r["measure"] == "analyze"
            ]
            assert row[column] == f"{analysis['ratio_to_plain_grad']:.2f}×", (name, hidden)
        grads = [r for r in mine if r["config"]["hidden_size"] == 64 and r["measure"] == "grad"]
        best = min(
            (r for r in grads if r["strategy"] != "plain_grad"), key=lambda r: r["ratio_to_plain_grad"]
        )
        assert row[2] == f"`{best['strategy']}` {best['ratio_to_plain_grad']:.2f}×", name


def _block_cost_rows() -> tuple[list[list[dict]], list[list[dict]]]:
    """The designs-blocks records by row (design and depth), in the recording's order: the
    reference blocks' rows and the whole models'."""
    loaded = load_records([RUNS / "cpu-designs-blocks.jsonl"])
    assert not loaded.skipped, loaded.skipped
    rows: dict[str, list[dict]] = {}
    for rec in loaded.records:
        rows.setdefault(rec["label"] + str(rec["config"].get("block")), []).append(rec)
    reference = [r for r in rows.values() if r[0]["config"].get("block") == "reference"]
    return reference, [r for r in rows.values() if r[0]["config"].get("block") != "reference"]


def test_the_reference_blocks_cost_table_is_the_recorded_run():
    """docs/dev/benchmarks.md's reference-block rows: each recorded row's parameters and
    ratio, in the recording's order; and every ratio within the 1.5× the analysis is held to."""
    recorded, _ = _block_cost_rows()
    doc = (ROOT / "docs" / "dev" / "benchmarks.md").read_text()
    rows = re.findall(
        r"^\| (\w+) \| `(\w+)` \| (\d) \| (\d+) \| ([\d,]+) \| [\d.]+ \| ([\d.]+) \|", doc, re.M
    )
    assert len(rows) == len(recorded) == 14
    for (cell, _, layers, width, params, ratio), (plain, analysis) in zip(rows, recorded, strict=True):
        assert (cell, int(layers), int(width)) == tuple(
            plain["config"][k] for k in ("cell", "layers", "hidden_size")
        )
        assert int(params.replace(",", "")) == plain["n_params"]
        assert float(ratio) == pytest.approx(analysis["ratio_to_plain_grad"], abs=0.005)
        assert analysis["ratio_to_plain_grad"] <= 1.5


def test_the_whole_models_cost_table_is_the_recorded_run():
    """The whole models' rows: the analysis of the loss (every layer's and state's per-step
    norms) within 1.5× plain ``jax.grad`` for every design and depth; the connectivity's
    column recorded for each language model and — for a stack, whose one pass gives it."""
    _, recorded = _block_cost_rows()
    doc = (ROOT / "docs" / "dev" / "benchmarks.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| (\d) \| ([\d,]+) \| [\d.]+ \| ([\d.]+) \| ([\d.]+|—) \|", doc, re.M)
    assert len(rows) == len(recorded) == 14
    for (design, layers, params, ratio, with_connectivity), (plain, analysis, *more) in zip(
        rows, recorded, strict=True
    ):
        assert (design, int(params.replace(",", ""))) == (plain["config"]["model_type"], plain["n_params"])
        assert f"L={layers} " in plain["label"]
        assert (plain["measure"], analysis["measure"]) == ("grad", "analyze")
        assert float(ratio) == pytest.approx(analysis["ratio_to_plain_grad"], abs=0.005)
        assert analysis["ratio_to_plain_grad"] <= 1.5
        if more:
            assert more[0]["measure"] == "connectivity"
            assert float(with_connectivity) == pytest.approx(more[0]["ratio_to_plain_grad"], abs=0.005)
        else:
            assert with_connectivity == "—" and not plain["config"].get("vocab_size")


def _block_learning() -> dict[tuple[str, int, str], dict[str, list[dict]]]:
    """The block learning table's runs by (cell, depth, target count), then by data set."""
    loaded = load_records([RUNS / "cpu-designs-learning-blocks.jsonl"])
    assert not loaded.skipped, loaded.skipped
    groups: dict[tuple[str, int, str], dict[str, list[dict]]] = {}
    for r in loaded.records:
        key = (r["config"]["cell"], r["config"]["layers"], r["target_params"])
        groups.setdefault(key, {}).setdefault(r["data"], []).append(r)
    return groups


def test_the_block_learning_table_is_the_recorded_runs():
    """docs/guide/cells.md's reference-block rows, one per recorded design, depth and count: each
    data set's three seeds as the bare cells' table states them, "—" where none was recorded."""
    after = "### The same designs as their reference blocks"
    groups = _block_learning()
    lines = CELLS_DOC.splitlines()[CELLS_DOC.splitlines().index(after) :]
    header = next(i for i, line in enumerate(lines) if line.startswith("| design |"))
    body = lines[header + 2 :]
    rows = body[: next((i for i, line in enumerate(body) if not line.startswith("| ")), len(body))]
    assert len(rows) == len(groups) > 0
    for (cell, layers, target), by_data in groups.items():
        row = _row(CELLS_DOC, f"{BLOCK_NAMES[cell]} ×{layers}, {target}", after)
        counts = [by_data[d][0]["params"] for d in ("digits pixels", "text prose") if d in by_data]
        assert row[0] == " / ".join(f"{n:,}" for n in counts), (cell, layers, target)
        for column, data in enumerate(("digits pixels", "digits permuted"), start=1):
            runs = by_data.get(data)
            assert row[column] == (_digits_cell(runs) if runs else "—"), (cell, data)
            assert runs is None or len(runs) == 3
        text = by_data.get("text prose")
        if text is None:
            assert row[3:] == ["—", "—"], cell
            continue
        bits = [r["held_out_metric"][-1] for r in text]
        assert row[3] == f"{np.mean(bits):.3f} ({min(bits):.3f}–{max(bits):.3f})", cell
        reach = [np.mean([r[k] for r in text]) for k in ("reach_1pct", "reach_10pct")]
        assert row[4] == f"{reach[0]:.1f} / {reach[1]:.1f}", cell

"""The designs suite's pieces (rnnviz.bench.designs) at tiny sizes: the gradient record is a
valid schema-1 record whose numbers are the library's, and the suites hold every new design."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest

from rnnviz import (
    RunConfig,
    analyze,
    cell_names,
    connectivity,
    fit_to_data,
    load_dataset,
    lyapunov,
    train_many,
)
from rnnviz.base.measurements import load_records, validate
from rnnviz.bench.designs import NEW_DESIGNS, cost_suite, gradient_table, long_suite, parallel_suite
from rnnviz.bench.learning import REACH_SEQUENCES, text_table


def test_the_suites_cover_every_new_design_and_parallel_only_where_it_applies():
    cells = {c.cell for c in cost_suite()}
    assert cells == {f["cell"] for f in NEW_DESIGNS.values()} and cells <= set(cell_names())
    assert {(c.cell, c.seq_len) for c in parallel_suite()} == {
        (c, t) for c in ("rglru", "mamba", "mlstm") for t in (1000, 10_000)
    }
    long = long_suite()  # T = 100 000 under checkpoint, every design, within the memory budget
    assert {c.cell for c in long} == cells and {(c.seq_len, c.strategy) for c in long} == {
        (100_000, "checkpoint")
    }


@pytest.mark.parametrize("cell", ["rglru", "mlstm"])
def test_gradient_records_hold_the_librarys_numbers(cell, tmp_path):
    base = RunConfig(hidden_size=4, input_size=3, batch_size=2)
    out = io.StringIO()
    (rec,) = gradient_table(lengths=(30,), base=base, designs={cell: dict(cell=cell)}, out=out)
    assert validate(rec) is None, validate(rec)
    cfg = base.replace(cell=cell, seq_len=30)
    a, ly = analyze(cfg, repeats=1), lyapunov(cfg, k=1)
    assert rec["lambda1"] == pytest.approx(float(ly.exponents[0]), abs=1e-6)
    assert rec["decay_per_step"] == pytest.approx(float(ly.decay.slope), abs=1e-6)
    np.testing.assert_allclose(
        [rec["log10_first"], rec["log10_last"]], a.log10_grad_norms[[0, -1]], atol=1e-5
    )
    assert f"{rec['decay_per_step'] / math.log(10):+.5f}" in out.getvalue()
    # they are read back like any other record
    path = tmp_path / "designs.jsonl"
    path.write_text(__import__("json").dumps(rec) + "\n")
    assert load_records([path]).records == [rec]


def test_the_text_rows_reach_is_the_connectivity_of_the_trained_run():
    """The learning table's text rows carry each run's reach: the mean over held-out sequences
    of Connectivity.reach at 1 % and 10 %, at the final weights, as the library computes it."""
    text = load_dataset("text", corpus="prose", seq_len=100)  # what text_table reads
    cfg = RunConfig(cell="mlstm", hidden_size=4, input_size=text.input_size, seq_len=100, batch_size=4)
    out = io.StringIO()
    records = text_table(steps=4, seeds=2, out=out, cells={"m": cfg.to_dict()}, names=("m",))
    runs = train_many(cfg, {"seed": [0, 1]}, task=text, steps=4, learning_rate=1e-3, log_every=4)
    fitted = fit_to_data(cfg, text)
    for rec, run in zip(records, runs):
        assert validate(rec) is None, validate(rec)
        got = [connectivity(fitted, text, int(i), params=run.weights()) for i in text.test[:REACH_SEQUENCES]]
        assert rec["reach_1pct"] == pytest.approx(np.mean([c.reach(0.01) for c in got]))
        assert rec["reach_10pct"] == pytest.approx(np.mean([c.reach(0.1) for c in got]))
        assert 0 <= rec["reach_10pct"] <= rec["reach_1pct"] <= 99
    assert "characters above 1 %" in out.getvalue()


def test_the_block_learning_table_records_each_design_at_its_sized_width(tmp_path, capsys):
    """``bench --suite designs-learning --block reference``: one row per data set of each cell,
    depth and count, at the width whose drawn block is within 5 % of the count; schema-valid
    records of the block's config, the text rows with their reach; a cell without a block refused."""
    from rnnviz.cli.main import main
    from rnnviz.studies.block_models import block_param_count

    path = tmp_path / "blocks.jsonl"
    flags = [
        "bench",
        "--suite",
        "designs-learning",
        "--block",
        "reference",
        "--depths",
        "2",
        "--params",
        "10k",
    ]
    assert main([*flags, "--types", "gru", "--steps", "2", "--record", str(path)]) == 0
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["data"] for r in records] == ["digits pixels"] * 3 + ["digits permuted"] * 3 + [
        "text prose"
    ] * 3
    for rec in records:
        assert validate(rec) is None, validate(rec)
        cfg = RunConfig.from_mapping(rec["config"])
        assert (cfg.cell, cfg.block, cfg.layers) == ("gru", "reference", 2)
        assert rec["params"] == block_param_count(cfg) and abs(rec["params"] - 10_000) <= 500
        assert rec["label"].startswith("gru block ×2")
    assert all(0 <= r["reach_10pct"] <= r["reach_1pct"] <= 99 for r in records[6:])
    capsys.readouterr()
    # run again: every row is in the file already, so none is trained or written twice
    assert main([*flags, "--types", "gru", "--steps", "2", "--record", str(path)]) == 0
    assert path.read_text().count("\n") == 9
    # the same file at another number of steps: refused, nothing trained or written
    assert main([*flags, "--types", "gru", "--steps", "3", "--record", str(path)]) == 2
    assert "steps=3 is not allowed: 2, as the rows" in capsys.readouterr().err
    assert path.read_text().count("\n") == 9
    assert main([*flags, "--types", "lru"]) == 2
    assert "cells with a reference block" in capsys.readouterr().err


def test_a_block_row_stopped_midway_resumes_from_its_saved_runs(tmp_path, monkeypatch):
    """A row's runs saved after one chunk of two (as the table saves them while it trains) are
    resumed by the next call: its records equal a row that ran through, and the file is gone."""
    import io

    from rnnviz.bench import learning
    from rnnviz.dataset import load_dataset
    from rnnviz.studies.training import DATA_TASK, Trainer, TrainSettings

    ds = load_dataset("digits", order="pixels")
    cfg = RunConfig(
        cell="gru", block="reference", layers=1, hidden_size=6, input_size=1, seq_len=64, batch_size=64
    )
    row = lambda saved=None, out=None: learning._block_row(  # noqa: E731
        cfg, ds, "digits pixels", 200, 2, "1k", out or io.StringIO(), saved
    )
    through = row()
    saved = tmp_path / "partial" / "row.npz"
    saved.parent.mkdir()
    settings = TrainSettings(DATA_TASK, 200, learning_rate=1e-3, log_every=100)
    first = Trainer(cfg, {"seed": [0, 1]}, settings=settings, data=ds)
    first.advance()
    first.save(saved)
    out = io.StringIO()
    resumed = row(saved, out)
    assert "resumed at step 100" in out.getvalue() and not saved.exists()
    assert len(resumed) == len(through) == 2
    for a, b in zip(resumed, through, strict=True):
        for name in ("final_loss", "clip_count", "held_out_steps", "held_out_metric", "steps_run"):
            assert a[name] == b[name], name


def test_the_largest_block_row_fits_the_tables_budgets():
    """Mamba ×4 at 400 k on the digits, the grid's largest row by the memory estimate, is over
    the dashboard's training budget and within the block table's own."""
    from rnnviz.bench.learning import BLOCK_FLOP_BUDGET, BLOCK_MEMORY_BUDGET
    from rnnviz.config import BudgetError
    from rnnviz.dataset import load_dataset
    from rnnviz.studies.block_models import sized_config
    from rnnviz.studies.training import DATA_TASK, TrainSettings
    from rnnviz.studies.training.loop import check_training

    base = RunConfig(cell="mamba", block="reference", layers=4, input_size=1, seq_len=64, batch_size=64)
    cfg, data = sized_config(base, "400k"), load_dataset("digits", order="pixels")
    settings = TrainSettings(DATA_TASK, 2000, learning_rate=1e-3)
    with pytest.raises(BudgetError, match="over the 4 GiB budget"):
        check_training(cfg, settings, 3, data, BLOCK_FLOP_BUDGET)
    check_training(cfg, settings, 3, data, BLOCK_FLOP_BUDGET, BLOCK_MEMORY_BUDGET)

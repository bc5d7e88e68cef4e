"""The whole-model rows of the designs suite (rnnviz.bench.block_costs) at tiny sizes: valid
schema-1 records per design and depth (plain, the analysis, and for a language model the
analysis with the connectivity), their ratios recomputed from their own times, and every timed
function computing the same loss, which is the model's own. No time is asserted."""

from __future__ import annotations

import io
import json

import jax
import numpy as np
import pytest

from rnnviz import analyze_model, fresh_model
from rnnviz.base.measurements import load_records, validate
from rnnviz.bench import block_costs as bc
from rnnviz.bench import measure
from rnnviz.bench.suites import SUITES
from rnnviz.engine.blocks.registry import BLOCKS
from rnnviz.studies.sizing import design_config, param_count

#: A language model and a torch stack: both losses of plain_loss.
TWO = ("mamba", "torch_lstm")
TINY = dict(params="2k", batch=2, seq_len=16, repeats=1)


@pytest.fixture(scope="module")
def measured() -> tuple[list[dict], str]:
    out = io.StringIO()
    records = bc.block_costs(TWO, (1,), out=out, **TINY)
    return records, out.getvalue()


def _rows(records: list[dict]) -> list[list[dict]]:
    """The records grouped by row (design and depth), in order."""
    rows: dict[str, list[dict]] = {}
    for rec in records:
        rows.setdefault(rec["label"], []).append(rec)
    return list(rows.values())


def test_valid_records_per_design_named_by_their_config(measured, tmp_path):
    """Mamba, a language model, has the connectivity's row too; the stack's pass gives both."""
    records, table = measured
    ways = (("plain_grad", "grad"), ("accumulate", "analyze"))
    assert [(r["config"]["model_type"], r["strategy"], r["measure"]) for r in records] == [
        ("mamba", *w) for w in (*ways, ("accumulate", "connectivity"))
    ] + [("torch_lstm", *w) for w in ways]
    for rec in records:
        assert validate(rec) is None, validate(rec)
        assert (rec["kind"], rec["suite"], rec["repeats"]) == ("bench", "designs-blocks", 1)
        config = design_config(rec["config"]["model_type"], params="2k", layers=1)
        assert rec["config"] == {**config, "batch_size": 2, "seq_len": 16}
        assert rec["n_params"] == param_count(config["model_type"], config)
        assert rec["flops"] == 6 * rec["n_params"] * 2 * 16
        assert rec["run_min_s"] <= rec["run_s"] <= rec["run_max_s"]
    lines = table.splitlines()
    for (plain, *analyses), line in zip(_rows(records), lines[-2:], strict=True):
        assert plain["ratio_to_plain_grad"] == 1.0
        for analysis in analyses:
            assert analysis["ratio_to_plain_grad"] == pytest.approx(analysis["run_s"] / plain["run_s"])
            assert f"{analysis['ratio_to_plain_grad']:.2f}" in line
        assert line.split()[5] == ("—" if len(analyses) == 1 else f"{analyses[1]['ratio_to_plain_grad']:.2f}")
    path = tmp_path / "designs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert load_records([path]).records == records


def test_every_function_computes_the_models_own_loss(measured):
    records, _ = measured
    for plain, *analyses in _rows(records):
        config = {k: v for k, v in plain["config"].items() if k not in ("batch_size", "seq_len")}
        model = fresh_model(config["model_type"], config, seed=0)
        inputs = bc.block_inputs(model, 2, 16, seed=0)
        for analysis in analyses:
            assert analysis["loss"] == pytest.approx(plain["loss"], rel=1e-5)
            # what analyze_model reports for the same model and inputs
            assert analyze_model(model, inputs).loss == pytest.approx(analysis["loss"], rel=1e-6)


def test_the_plain_loss_is_the_reference_definition():
    """Cross entropy written out with NumPy for a language model; ½‖y_{T−1}‖² for a stack."""
    for model_type in TWO:
        model = fresh_model(model_type, design_config(model_type, params="2k", layers=1), seed=1)
        inputs = bc.block_inputs(model, 3, 8, seed=1)
        out = np.asarray(model(inputs), np.float64)
        if model.vocab_size:
            logits = out[:, :-1]
            logz = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
            picked = np.take_along_axis(logits, inputs[:, 1:, None], axis=-1)[..., 0]
            expected = float(np.mean(logz - picked))
        else:
            expected = 0.5 * float(np.sum(out[:, -1] ** 2))
        got = bc.plain_loss(BLOCKS[model_type], model.spec, model.params, jax.numpy.asarray(inputs))
        assert float(got) == pytest.approx(expected, rel=1e-5)


def test_the_rows_run_alone_and_in_the_designs_suite(monkeypatch):
    """``--suite designs-blocks`` runs them with the command line's repeats and budget, and
    ``--suite designs`` appends them to its other parts' records (stubbed here: minutes each)."""
    calls = []

    def rows(kind):
        def made(**kwargs):
            calls.append(kwargs)
            return [{kind: len(calls)}]

        return made

    monkeypatch.setattr(measure, "config_block_costs", rows("block"))
    monkeypatch.setattr(measure, "block_costs", rows("model"))
    for part in ("run_suite", "parallel_bench"):
        monkeypatch.setattr(measure, part, lambda *args, **kwargs: [{"part": True}])
    monkeypatch.setattr(measure, "long_suite", lambda: [])
    monkeypatch.setattr(measure, "gradient_table", lambda out: [])
    run = measure.SuiteRun("designs-blocks", SUITES["designs-blocks"](), 7, 2.0, 10, False)
    assert measure.RUNNERS["designs-blocks"](run) == [{"block": 1}, {"model": 2}]
    got = measure.designs_bench(5, None, out=io.StringIO())
    assert got == [{"part": True}] * 2 + [{"block": 3}, {"model": 4}]
    assert [(c["repeats"], c["budget_s"]) for c in calls] == [(7, 2.0)] * 2 + [(5, None)] * 2


def test_reference_blocks_of_a_config_are_timed_at_about_their_count():
    """The RunConfig blocks' rows: the width bisected to the count, both functions' loss the
    same, and the analysis one shared reverse pass (a stack's loss is its last position's)."""
    from rnnviz.bench.block_costs import config_block_costs

    plain, analysis = config_block_costs(
        cells=("gru",), depths=(1,), params=3000, batch=2, seq_len=8, repeats=1, out=io.StringIO()
    )
    assert abs(plain["n_params"] - 3000) <= 300 and plain["config"]["block"] == "reference"
    assert analysis["loss"] == pytest.approx(plain["loss"], rel=1e-5)
    assert analysis["ratio_to_plain_grad"] == analysis["run_s"] / plain["run_s"]

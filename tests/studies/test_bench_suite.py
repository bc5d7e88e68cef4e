"""The strategies table of ``rnnviz bench`` (``run_suite``): one row of records per config,
its functions timed in turn against plain ``jax.grad``."""

import io

import pytest

from rnnviz import RunConfig
from rnnviz.bench.measure import run_suite
from rnnviz.config import ConfigError
from rnnviz.studies.comparisons import available_strategies, measure_interleaved


def test_a_row_times_every_function_in_turn_and_divides_by_plain_grad():
    cfg = RunConfig(cell="simple", hidden_size=4, input_size=2, seq_len=5, batch_size=2)
    out = io.StringIO()
    records = run_suite([cfg], "strategies", repeats=3, out=out)
    base, *rest = records
    assert (base["strategy"], base["measure"], base["ratio_to_plain_grad"]) == ("plain_grad", "grad", 1.0)
    runnable = [s for s in available_strategies() if s != "parallel"]  # simple is not linear
    assert [r["strategy"] for r in rest[:-2]] == runnable
    assert [(r["measure"], r["strategy"]) for r in rest[-2:]] == [
        ("analyze", "accumulate"),
        ("log_pass", "accumulate"),
    ]
    for r in records:
        assert r["repeats"] == 3  # every function got its 3 rounds
        assert r["ratio_to_plain_grad"] == pytest.approx(r["run_s"] / base["run_s"])
    assert "simple B=2 T=5" in out.getvalue()


def test_interleaved_measurements_name_what_was_refused():
    cfg = RunConfig(cell="lstm", hidden_size=4, input_size=2, seq_len=5, batch_size=2)
    got = measure_interleaved(cfg, [("grad", "parallel"), ("grad", "plain_grad")], repeats=2)
    assert isinstance(got[0], ConfigError) and "parallel" in str(got[0])
    assert got[1]["strategy"] == "plain_grad" and got[1]["repeats"] == 2

"""The models suite (``rnnviz bench --suite models``) at its tiny size: its rows hold every number
their ratios are computed from, a type that fails or does not fit is recorded and the others
still run, and without torch it says what it needs. No time is asserted."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

from rnnviz.base.measurements import load_records, validate
from rnnviz.bench import models
from rnnviz.cli.main import main
from rnnviz.config import ConfigError

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TWO = ("mamba", "xlstm")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[list[dict], str]:
    """The command line's run of two types at the tiny size: its records, read back, and its table."""
    path = tmp_path_factory.mktemp("models") / "models.jsonl"
    out = io.StringIO()
    argv = ["bench", "--suite", "models", "--sizes", "tiny", "--types", ",".join(TWO), "--record", str(path)]
    with contextlib.redirect_stdout(out):
        status = main(argv)
    assert status == 0, out.getvalue()
    loaded = load_records([path])
    assert loaded.skipped == []
    return loaded.records, out.getvalue()


def _stored_params(model_type: str) -> int:
    """The transformers model's parameters at the tiny size, each tied tensor once."""
    config_cls, model_cls = (getattr(transformers, n) for n in models.CLASSES[model_type])
    with torch.device("meta"):
        model = model_cls(config_cls(**models.TINY[model_type].config))
    return sum({id(p): p.numel() for p in model.parameters()}.values())


def test_one_row_per_type_with_the_size_it_was_built_at(recorded):
    records, table = recorded
    assert [(r["kind"], r["suite"], r["model_type"], r["size"]) for r in records] == [
        ("model", "models", t, "tiny") for t in TWO
    ]
    for rec in records:
        size = models.TINY[rec["model_type"]]
        assert validate(rec) is None
        assert rec["config"] == {"model_type": rec["model_type"], **size.config}
        assert (rec["seq_len"], rec["batch_size"], rec["dtype"]) == (size.seq_len, size.batch_size, "float32")
        assert rec["n_params"] == _stored_params(rec["model_type"])
        assert rec["threads"] == len(os.sched_getaffinity(0)) == torch.get_num_threads()
        assert rec["repeats"] == models.PROFILES["tiny"].repeats
        assert rec["reference_repeats"] == models.PROFILES["tiny"].reference_repeats
        assert "transformers" in rec["reference"] and models.CLASSES[rec["model_type"]][1] in rec["reference"]
        assert rec["run_min_s"] <= rec["run_s"] <= rec["run_max_s"]
        assert 0 < rec["estimated_bytes"] <= models.MEMORY_SHARE * rec["available_bytes"]
        assert 0 < rec["start_rss_bytes"] <= rec["peak_rss_bytes"]
        assert 0 < rec["reference_start_rss_bytes"] <= rec["reference_peak_rss_bytes"]
        assert rec["model_type"] in table and rec["rss_note"].startswith(("VmHWM", "ru_maxrss"))


def test_every_ratio_is_recomputed_from_the_rows_own_numbers(recorded):
    for rec in recorded[0]:
        assert rec["reference_first_s"] == pytest.approx(
            rec["reference_first_forward_s"] + rec["reference_first_backward_s"]
        )
        # two steady calls: the median of their sums is the sum of the medians (both means)
        assert rec["reference_run_s"] == pytest.approx(
            rec["reference_forward_s"] + rec["reference_backward_s"]
        )
        assert rec["ratio_to_reference"] == pytest.approx(rec["run_s"] / rec["reference_run_s"])
        assert rec["cpu_ratio_to_reference"] == pytest.approx(rec["run_cpu_s"] / rec["reference_run_cpu_s"])
        assert rec["floor_flops"] == 6 * rec["n_params"] * rec["batch_size"] * rec["seq_len"]
        m, k, n = rec["gemm_shape"]
        assert (m, k, n) == models.PROFILES["tiny"].gemm
        assert rec["floor_s"] == pytest.approx(rec["floor_flops"] / rec["gemm_flops_per_s"])
        assert rec["ratio_to_floor"] == pytest.approx(rec["run_s"] / rec["floor_s"])


def test_skip_reference_measures_rnnviz_alone():
    (rec,) = models.models_suite("tiny", ("mamba",), skip_reference=True, out=io.StringIO())
    assert validate(rec) is None and rec["run_s"] > 0
    none = ("reference_run_s", "ratio_to_reference", "cpu_ratio_to_reference", "reference_peak_rss_bytes")
    assert all(rec[k] is None for k in none) and rec["reference_repeats"] == 0
    assert rec["reference"] == "not measured (--skip-reference)"


def test_the_estimate_holds_the_weights_and_halves_them_in_bfloat16():
    size = models.TINY["mamba"]
    config = {"model_type": "mamba", **size.config}
    f32, bf16 = (
        models.estimate_bytes("mamba", config, size.batch_size, size.seq_len, d)
        for d in ("float32", "bfloat16")
    )
    weights = 4 * _stored_params("mamba")
    assert f32 > weights > f32 - bf16 > 0  # every weight an argument, 4 bytes; fewer in bfloat16
    longer = models.estimate_bytes("mamba", config, size.batch_size, 4 * size.seq_len, "float32")
    assert longer > f32  # the activations grow with T


def test_bfloat16_when_float32_does_not_fit_and_nothing_when_neither_does():
    asked = []

    def estimate(dtype):
        asked.append(dtype)
        return {"float32": 100, "bfloat16": 60}[dtype]

    assert models.choose_dtype(estimate, 1000)[:2] == ("float32", 100) and asked == ["float32"]
    dtype, estimated, why = models.choose_dtype(estimate, 100)  # 80 % of it: 80 bytes
    assert (dtype, estimated) == ("bfloat16", 60) and "float32 weights would not fit" in why
    dtype, _, why = models.choose_dtype(estimate, 50)
    assert dtype is None and why.startswith("not run")


def test_a_type_that_fails_or_does_not_fit_is_recorded_and_the_others_run(monkeypatch):
    real = models.measure_type

    def flaky(model_type, *args, **kwargs):
        if model_type == "xlstm":
            raise RuntimeError("fell over")
        return real(model_type, *args, **kwargs)

    monkeypatch.setattr(models, "measure_type", flaky)
    got = models.models_suite("tiny", ("xlstm", "mamba"), skip_reference=True, out=io.StringIO())
    assert [r["kind"] for r in got] == ["error", "model"]
    assert got[0]["error"] == "RuntimeError: fell over" and validate(got[0]) is None

    monkeypatch.setattr(models, "measure_type", real)
    monkeypatch.setattr(models, "available_bytes", lambda: 1000)
    (rec,) = models.models_suite("tiny", ("mamba",), skip_reference=True, out=io.StringIO())
    assert rec["kind"] == "error" and rec["error"].startswith("not run: estimated") and validate(rec) is None


def test_without_torch_the_suite_says_what_it_needs(monkeypatch):
    def no_torch(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(models.importlib, "import_module", no_torch)
    with pytest.raises(ConfigError, match="install torch and transformers"):
        models.models_suite("tiny", ("mamba",), out=io.StringIO())


def test_unknown_types_are_refused():
    assert models.parse_types(None) == models.TYPES
    assert models.parse_types(" xlstm,mamba ") == ("xlstm", "mamba")
    with pytest.raises(ConfigError, match="comma-separated list of mamba"):
        models.parse_types("mamba,gpt2")


def test_the_real_size_is_mamba_130ms_shape():
    size = models.REAL["mamba"]
    assert (size.seq_len, size.batch_size) == (512, 1)
    assert size.config == dict(
        vocab_size=50280, hidden_size=768, state_size=16, num_hidden_layers=24, expand=2, conv_kernel=4
    )
    for model_type, size in models.REAL.items():
        config_cls, model_cls = (getattr(transformers, n) for n in models.CLASSES[model_type])
        with torch.device("meta"):
            model = model_cls(config_cls(**size.config))
        n = sum({id(p): p.numel() for p in model.parameters()}.values())
        assert 100e6 <= n <= 150e6, (model_type, n)


def table_row(rec: dict) -> str:
    """The row of ``docs/dev/benchmarks.md``'s models table for one recorded ``kind: "model"`` record."""

    def ref(total, forward, backward) -> str:
        return "—" if total is None else f"{total:.0f} ({forward:.1f} + {backward:.0f})"

    ratio = rec["ratio_to_reference"]
    cells = [
        rec["model_type"],
        f"{rec['n_params'] / 1e6:.1f} M",
        f"{rec['compile_s']:.1f}",
        f"{rec['run_s']:.2f} ({rec['run_cpu_s']:.1f})",
        ref(rec["reference_first_s"], rec["reference_first_forward_s"], rec["reference_first_backward_s"]),
        ref(rec["reference_run_s"], rec["reference_forward_s"], rec["reference_backward_s"]),
        "—" if ratio is None else f"{ratio:.3f} ({rec['cpu_ratio_to_reference']:.3f})",
        f"{rec['gemm_flops_per_s'] / 1e9:.0f}",
        f"{rec['floor_s']:.2f}",
        f"{rec['ratio_to_floor']:.1f}",
        f"{rec['estimated_bytes'] / 1e9:.1f}",
        f"{rec['peak_rss_bytes'] / 1e9:.2f}",
        "—" if rec["reference_peak_rss_bytes"] is None else f"{rec['reference_peak_rss_bytes'] / 1e9:.2f}",
        f"{rec['load_average']:.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def test_the_benchmarks_table_is_the_recorded_rows():
    root = Path(__file__).resolve().parents[2]
    loaded = load_records([root / "rnnviz" / "data" / "runs" / "cpu-models.jsonl"])
    assert loaded.skipped == []
    doc = (root / "docs" / "dev" / "benchmarks.md").read_text()
    rows = [r for r in loaded.records if r["kind"] == "model"]
    assert {r["model_type"] for r in rows} | {
        r["part"] for r in loaded.records if r["kind"] == "error"
    } == set(models.TYPES)
    for rec in rows:
        assert rec["size"] == "real" and table_row(rec) in doc.splitlines(), rec["model_type"]

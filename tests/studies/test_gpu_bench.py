"""The GPU suite (``rnnviz bench --suite gpu``) on this CPU: the one command with core
dependencies only, its records, a crash recorded while the rest runs, cuDNN's reference scan
against a loop, and its records drawn by the Devices tab next to a GPU's."""

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CELLS

from rnnviz import RunConfig
from rnnviz.base.measurements import SCHEMA, load_dir, validate
from rnnviz.bench import gpu
from rnnviz.bench.cudnn import PeerRun, cudnn_unavailable, lstm_inputs, lstm_loss_and_grad, time_peer
from rnnviz.engine.compile import Compiled
from rnnviz.engine.environment import run_stamp
from rnnviz.engine.timing import RunTiming
from rnnviz.studies.comparisons import available_strategies, label

ROOT = Path(__file__).resolve().parents[2]
CPU = jax.devices("cpu")[0]

#: Runs ``python -m rnnviz ARGS`` with streamlit, plotly and scikit-learn unimportable (the
#: lent GPU machine has none of them) and every DeprecationWarning an error (a newer jax
#: removes what this one deprecates); each blocked import attempt is logged to stderr.
CORE_ONLY = textwrap.dedent("""
    import importlib.abc, runpy, sys, warnings
    BLOCKED = ("streamlit", "plotly", "sklearn")
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                print(f"blocked import: {name}", file=sys.stderr)
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Block())
    warnings.simplefilter("error", DeprecationWarning)
    sys.argv = ["rnnviz", *sys.argv[1:]]
    runpy.run_module("rnnviz", run_name="__main__")
""")


def _core_only(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", CORE_ONLY, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.slow  # ~40 s on 2 cores: a fresh JAX and about a dozen compiles
def test_the_gpu_suite_runs_here_with_core_dependencies_only(tmp_path):
    out = _core_only("bench", "--suite", "gpu", "--record", str(tmp_path))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "blocked import" not in out.stderr
    table = out.stdout
    assert "sizes tiny (JAX sees no GPU" in table and "keeps no allocator statistics" in table
    for part in ("devices", "cudnn", "parallel"):
        assert any(line.startswith(f"{part} ") for line in table.splitlines()), part
    assert "cuDNN not measured: cuDNN's LSTM needs a CUDA GPU" in table
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cpu-cudnn.jsonl", "devices-cpu.jsonl"]

    loaded = load_dir(tmp_path)
    assert loaded.skipped == [] and all(r["schema"] == SCHEMA for r in loaded.records)
    kinds = {(r["kind"], r["suite"]) for r in loaded.records}
    assert kinds == {("bench", "gpu-devices"), ("bench", "gpu-parallel"), ("peer", "gpu-cudnn")}
    bench = {(r["label"], r["strategy"]): r for r in loaded.records if r["suite"] == "gpu-devices"}
    sizes = [label(RunConfig(cell="lstm", **s)) for s in gpu.TINY.sizes]
    assert set(bench) == {(n, s) for n in sizes for s in ("plain_grad", *gpu.TINY.strategies)}
    for rec in loaded.records:
        if rec["kind"] != "peer" and rec["suite"] != "gpu-parallel":
            base = bench[rec["label"], "plain_grad"]["run_s"]
            assert rec["ratio_to_plain_grad"] == pytest.approx(rec["run_s"] / base)
        assert rec["device_kind"] == "cpu" and rec["device_peak_bytes"] is None
        assert "no allocator statistics" in rec["device_peak_note"]
    for peer in (r for r in loaded.records if r["kind"] == "peer"):
        assert peer["peer"] == "lstm_ref" and "needs a CUDA GPU" in peer["note"]
        assert peer["ratio_plain_grad"] == pytest.approx(
            bench[peer["label"], "plain_grad"]["run_s"] / peer["run_s"]
        )
        assert peer["ratio_analyze"] == pytest.approx(
            bench[peer["label"], "accumulate"]["run_s"] / peer["run_s"]
        )
    lengths = {r["config"]["seq_len"] for r in loaded.records if r["suite"] == "gpu-parallel"}
    assert lengths == set(gpu.TINY.parallel_lengths)


def test_the_linear_cells_are_the_built_in_cells_parallel_can_run():
    linear = {c for c in CELLS if "parallel" in available_strategies(RunConfig(cell=c))}
    assert set(gpu.LINEAR_CELLS) == linear


#: One size, one strategy, one cell: the suite's machinery without its breadth.
MICRO = gpu.TINY._replace(
    sizes=(dict(batch_size=2, seq_len=4, input_size=3, hidden_size=4),),
    strategies=("accumulate",),
    parallel_lengths=(4,),
)


def _fake_measure(cfg, *, measure, strategy, device, suite, **_):
    """A valid bench record without running anything (the machinery under test is the suite's)."""
    run_s = {"plain_grad": 2e-3, "accumulate": 3e-3, "per_step": 1.5e-3, "parallel": 1e-3}[strategy]
    return {
        "schema": SCHEMA,
        "kind": "bench",
        "suite": suite,
        "label": label(cfg),
        "config": cfg.to_dict(),
        "strategy": strategy,
        "measure": measure,
        **run_stamp(device),
        **dict(compile_s=0.0, run_s=run_s, run_min_s=run_s, run_max_s=run_s, repeats=1, peak_bytes=0),
        **dict(flops=1.0, flops_per_s=1.0, ratio_to_plain_grad=None),
    }


def _fake_peer(cfg, peer, device, repeats, budget_s=None):
    return PeerRun(peer, Compiled(None, 0.0, 0), RunTiming(1e-3, 1e-3, 1e-3, 1))


@pytest.fixture
def no_compiles(monkeypatch):
    monkeypatch.setattr(gpu, "measure", _fake_measure)
    monkeypatch.setattr(gpu, "measured_executable", lambda *a, **k: type("E", (), {"peak_bytes": 0})())
    monkeypatch.setattr(gpu, "prepared_batch", lambda *a, **k: None)


def test_a_crash_in_one_part_is_recorded_and_the_others_still_run(tmp_path, monkeypatch, no_compiles):
    def boom(*args, **kwargs):
        raise RuntimeError("cuDNN fell over")

    monkeypatch.setattr(gpu, "time_peer", boom)
    result = gpu.gpu_suite(tmp_path, MICRO, out=io.StringIO())
    assert result.errors == 1
    errors = [r for r in load_dir(tmp_path).records if r["kind"] == "error"]
    assert [(e["part"], e["error"]) for e in errors] == [("cudnn", "RuntimeError: cuDNN fell over")]
    assert all(validate(r) is None for r in errors) and errors[0]["label"] == label(
        RunConfig(cell="lstm", **MICRO.sizes[0])
    )
    assert [r["strategy"] for r in result.records["devices"]] == ["plain_grad", "accumulate"]
    assert [r["strategy"] for r in result.records["parallel"]] == ["accumulate", "parallel"]
    assert result.files["cudnn"].name == "cpu-cudnn.jsonl"  # the error record went to its part's file


def test_the_peer_ratios_are_rnnvizs_run_times_over_the_peers(tmp_path, monkeypatch, no_compiles):
    monkeypatch.setattr(gpu, "time_peer", _fake_peer)
    out = io.StringIO()
    result = gpu.gpu_suite(tmp_path, MICRO._replace(strategies=("accumulate", "per_step")), out=out)
    (peer,) = result.records["cudnn"]
    assert validate(peer) is None and peer["peer"] == "lstm_ref" and "needs a CUDA GPU" in peer["note"]
    assert peer["ratio_plain_grad"] == pytest.approx(2.0) and peer["ratio_analyze"] == pytest.approx(3.0)
    assert (peer["best_strategy"], peer["ratio_best_analyze"]) == ("per_step", pytest.approx(1.5))
    rows = [_cells(line) for line in out.getvalue().splitlines() if line.startswith("cudnn ")]
    assert [(r["measured"], r["run ms"], r["ratio"], r["of"]) for r in rows] == [
        ("lstm_ref fwd+bwd", "1.000", "1.00", "lstm_ref"),
        ("grad · plain_grad", "2.000", "2.00", "lstm_ref"),
        ("analyze · accumulate", "3.000", "3.00", "lstm_ref"),
        ("analyze · per_step (fastest)", "1.500", "1.50", "lstm_ref"),
    ]


def _cells(row: str) -> dict[str, str]:
    """A printed table row, cut at the column widths."""
    cells, at = {}, 0
    for name, width, _ in gpu.COLUMNS:
        cells[name] = (row[at : at + width] if width else row[at:]).strip()
        at += width + 1
    return cells


def test_what_the_time_budget_leaves_unstarted_is_recorded(tmp_path, no_compiles):
    result = gpu.gpu_suite(tmp_path, MICRO._replace(deadline_s=-1.0), out=io.StringIO())
    errors = [r for r in load_dir(tmp_path).records if r["kind"] == "error"]
    assert result.errors == 0 and result.not_run == len(errors) == 3  # one per part, none started
    assert {e["part"] for e in errors} == {"devices", "cudnn", "parallel"}
    assert all(e["error"].startswith("not started: the suite's") for e in errors)


class _Device:
    """A stand-in device whose allocator reports the statistics given, one per call."""

    platform = "gpu"

    def __init__(self, *stats):
        self._stats = list(stats)

    def memory_stats(self):
        return self._stats.pop(0)


def test_device_peak_reads_the_rise_over_the_bytes_in_use_or_says_why_not():
    _, peak, note = gpu.device_peak(CPU, lambda: 1)
    assert peak is None and "cpu keeps no allocator statistics" in note
    rose = _Device({"peak_bytes_in_use": 100, "bytes_in_use": 40}, {"peak_bytes_in_use": 250})
    assert gpu.device_peak(rose, lambda: "out")[:2] == ("out", 210)
    under = _Device(
        {"peak_bytes_in_use": 100 * 2**20, "bytes_in_use": 40 * 2**20}, {"peak_bytes_in_use": 100 * 2**20}
    )
    _, peak, note = gpu.device_peak(under, lambda: None)
    assert peak is None and "under an earlier peak of this process (60.0 MB" in note


def _lstm_loop(weights, x, h0, c0, i_size, h_size):
    """½‖h_T‖² of one LSTM layer written from cuDNN's equations (gate order i, f, g, o; an input
    and a recurrent bias; weights packed W_ih, W_hh, b_ih, b_hh), a Python loop over steps."""
    g4 = 4 * h_size
    w_ih = weights[: g4 * i_size].reshape(g4, i_size)
    w_hh = weights[g4 * i_size : g4 * (i_size + h_size)].reshape(g4, h_size)
    b_ih, b_hh = weights[g4 * (i_size + h_size) :].reshape(2, g4)
    h, c = h0[0], c0[0]
    for t in range(x.shape[1]):
        z = x[:, t] @ w_ih.T + b_ih[None] + h @ w_hh.T + b_hh[None]
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return 0.5 * jnp.sum(h * h)


def test_the_reference_scan_is_cudnns_lstm_written_as_a_loop():
    cfg = RunConfig(cell="lstm", batch_size=2, seq_len=5, input_size=3, hidden_size=4)
    args = lstm_inputs(cfg, CPU)
    loss, grad = jax.jit(lstm_loss_and_grad("lstm_ref", 3, 4))(*args)
    want, want_grad = jax.value_and_grad(_lstm_loop)(*args[:4], 3, 4)
    np.testing.assert_allclose(loss, want, rtol=1e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=1e-6)


def test_cudnn_needs_cuda_and_says_so_on_a_cpu():
    why = cudnn_unavailable(CPU)
    assert why is not None and "needs a CUDA GPU" in why and "cpu has neither" in why
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        time_peer(RunConfig(cell="lstm", hidden_size=4, seq_len=3), "cudnn", CPU, repeats=1)


def test_cudnn_agrees_with_the_reference_scan_on_a_gpu():
    gpus = [d for d in jax.devices() if d.platform == "gpu"]
    if not gpus or cudnn_unavailable(gpus[0]):
        pytest.skip(f"cuDNN's LSTM cannot run here: {cudnn_unavailable(gpus[0] if gpus else CPU)}")
    cfg = RunConfig(cell="lstm", batch_size=4, seq_len=20, input_size=8, hidden_size=16)
    args = lstm_inputs(cfg, gpus[0])
    with jax.default_matmul_precision("highest"):  # cuDNN without TF32 against a float32 scan
        got = jax.jit(lstm_loss_and_grad("cudnn", 8, 16))(*args)
        want = jax.jit(lstm_loss_and_grad("lstm_ref", 8, 16))(*args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-3, atol=1e-5)


def test_a_gpu_record_is_drawn_next_to_the_cpu_one(tmp_path, monkeypatch):
    """The devices part's own records on this CPU, and the same code's records stamped as a GPU's
    (no GPU here: only the stamp is the fixture's), read as the Devices tab reads a folder."""
    from rnnviz import charts
    from rnnviz.frames.costs import recorded_selection, recorded_times_frame, records_frame, speedup_frame

    profile = MICRO._replace(sizes=(*MICRO.sizes, dict(MICRO.sizes[0], seq_len=8)), parallel_cells=())
    monkeypatch.setattr(gpu, "cudnn_part", lambda run, device, devices: [])  # not drawn by the tab
    devnull = io.StringIO()
    gpu.gpu_suite(tmp_path, profile._replace(deadline_s=1e9), out=devnull)

    def gpu_stamp(device):
        return {
            **run_stamp(device),
            "device_kind": "gpu",
            "device_name": "NVIDIA H200 (fixture)",
            "backend": "gpu",
        }

    monkeypatch.setattr("rnnviz.studies.comparisons.run_stamp", gpu_stamp)  # measure() stamps its records
    monkeypatch.setattr(gpu, "run_stamp", gpu_stamp)
    fixture = tmp_path / "fixture"
    gpu.gpu_suite(fixture, profile, out=devnull)  # the executables are cached: no compile
    (tmp_path / "devices-gpu.jsonl").write_bytes((fixture / "devices-cpu.jsonl").read_bytes())

    loaded = load_dir(tmp_path)
    assert loaded.skipped == []
    recorded = records_frame(loaded.records)
    sel = recorded_selection(recorded, "gpu-devices", "analyze", "accumulate")
    assert set(sel["device_kind"]) == {"cpu", "gpu"}
    lines = charts.line_figure(recorded_times_frame(sel), "Recorded run time", "ms", x="seq_len")
    names = {t.name for t in lines.data}
    assert names == {"cpu · cpu · H=4 B=2", "gpu · NVIDIA H200 (fixture) · H=4 B=2"}
    for t in lines.data:
        assert list(t.x) == [4, 8]  # run time against T, one line per device
    rec = recorded[(recorded["suite"] == "gpu-devices") & (recorded["strategy"] != "plain_grad")]
    sp = speedup_frame(rec, "seq_len")
    assert list(sp["seq_len"]) == [4, 8] and (sp["speedup"] > 0).all()
    assert [t.name for t in charts.speedup_figure(sp, "seq_len", "speed-up").data] == ["accumulate"]


def test_the_record_files_are_named_for_their_part_and_backend():
    files = {part: str(path) for part, path in gpu.record_files("runs", "gpu").items()}
    assert files == {
        "devices": "runs/devices-gpu.jsonl",
        "parallel": "runs/devices-gpu.jsonl",
        "cudnn": "runs/gpu-cudnn.jsonl",
    }

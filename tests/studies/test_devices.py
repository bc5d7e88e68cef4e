"""Device selection, runs on every device, and the Devices view with recorded data."""

import textwrap
from pathlib import Path

import numpy as np
import pytest
from apptest_helpers import decode, figure_by_title, run_app
from device_helpers import on_two_cpus

from rnnviz import RunConfig
from rnnviz.base.measurements import append_records
from rnnviz.frames.costs import records_frame, speedup_frame
from rnnviz.studies.comparisons import measure, present_devices, run_on_devices


def test_two_forced_cpu_devices_give_one_row_each_with_identical_gradients():
    script = textwrap.dedent("""
        import json, jax
        from rnnviz import RunConfig, analyze
        from rnnviz.studies.comparisons import run_on_devices
        devs = jax.devices("cpu")
        assert len(devs) == 2, devs
        cfg = RunConfig(cell="gru", seq_len=12, hidden_size=6)
        df = run_on_devices(cfg, devices=devs, strategies=("accumulate", "per_step"), repeats=2)
        a0 = analyze(cfg, device=devs[0], repeats=1)
        a1 = analyze(cfg, device=devs[1], repeats=1)
        print(json.dumps({"rows": df[["device_id", "strategy", "max_grad_diff"]].to_dict("records"),
                          "same_norms": bool((a0.grad_norms == a1.grad_norms).all()),
                          "devices": [a0.timing.device, a1.timing.device]}))
    """)
    got = on_two_cpus(script)
    assert [(r["device_id"], r["strategy"]) for r in got["rows"]] == [
        (0, "accumulate"),
        (0, "per_step"),
        (1, "accumulate"),
        (1, "per_step"),
    ]
    assert all(r["max_grad_diff"] < 1e-6 for r in got["rows"])
    assert got["same_norms"] and got["devices"] == ["cpu:0 cpu", "cpu:1 cpu"]


def test_run_on_devices_defaults_to_present_devices():
    df = run_on_devices(RunConfig(seq_len=5, hidden_size=4), repeats=1)
    assert list(df["device_kind"]) == [d.platform for d in present_devices()]
    assert set(df.columns) >= {"device_name", "compile_s", "run_s", "peak_bytes"}


def _fake_gpu(rec: dict, speedup: float) -> dict:
    """A synthetic GPU twin of a CPU record (test data only, clearly named)."""
    return {
        **rec,
        "device_kind": "gpu",
        "device_name": "Synthetic test GPU",
        "run_s": rec["run_s"] / speedup,
        "run_min_s": rec["run_min_s"] / speedup,
        "run_max_s": rec["run_max_s"] / speedup,
    }


def _records(tmp_path, with_gpu: bool) -> Path:
    runs = tmp_path / "runs"
    recs = []
    for t_len, speed in ((10, 0.5), (40, 4.0)):  # GPU loses small, wins large
        cpu = measure(
            RunConfig(seq_len=t_len, hidden_size=4),
            measure="grad",
            strategy="accumulate",
            repeats=1,
            suite="devices",
        )
        recs.append(cpu)
        if with_gpu:
            recs.append(_fake_gpu(cpu, speed))
    append_records(runs / "a.jsonl", recs)
    (runs / "b.jsonl").write_text('{"schema": 99}\nnot json\n')
    return runs


def test_speedup_frame_finds_the_crossover(tmp_path):
    from rnnviz.base.measurements import load_dir

    df = records_frame(load_dir(_records(tmp_path, with_gpu=True)).records)
    sp = speedup_frame(df, "seq_len")
    assert list(sp["seq_len"]) == [10, 40]
    np.testing.assert_allclose(sp["speedup"], [0.5, 4.0], rtol=1e-9)
    assert speedup_frame(df[df.device_kind == "cpu"], "seq_len").empty


@pytest.mark.parametrize("with_gpu", [False, True])
def test_devices_view_renders_with_cpu_only_and_with_recorded_gpu(tmp_path, monkeypatch, with_gpu):
    monkeypatch.setenv("RNNVIZ_RUNS_DIR", str(_records(tmp_path, with_gpu)))
    at = run_app({"tab": "Devices"})
    assert not at.exception and not at.error
    figure_by_title(at, "This configuration, live")
    if not any(d.platform == "gpu" for d in present_devices()):
        assert at.selectbox(key="cfg_device").options == ["auto", "cpu"]
        assert any("GPU unavailable" in c.value for c in at.caption)
    assert any("Skipped 2 unreadable record lines" in w.value for w in at.warning)
    analyses = {t["name"] for t in figure_by_title(at, "Recorded run time")["data"]}
    assert analyses and not any(
        "H=4 B=4" in n for n in analyses
    )  # shipped runs only: the fixture recorded no full analyses
    at.radio(key="devices_measure").set_value("grad").run()
    recorded = figure_by_title(at, "Recorded run time vs sequence length (grad, accumulate)")
    devices = {
        t["name"] for t in recorded["data"] if t["name"].endswith("H=4 B=4")
    }  # the operator's folder, next to the shipped runs
    for t in recorded["data"]:
        if t["name"].endswith("H=4 B=4"):
            assert list(decode(t["x"])) == [10, 40]  # run time against T, one line per device and size
    if with_gpu:
        assert devices == {"cpu · cpu · H=4 B=4", "gpu · Synthetic test GPU · H=4 B=4"}
        figure_by_title(at, "GPU speed-up over CPU vs seq_len")
    else:
        assert devices == {"cpu · cpu · H=4 B=4"}
        with pytest.raises(AssertionError):
            figure_by_title(at, "GPU speed-up")


def test_gpu_in_the_url_without_a_gpu_warns_and_runs_on_cpu():
    if any(d.platform == "gpu" for d in present_devices()):
        pytest.skip("a GPU is present")
    at = run_app({"device": "gpu"})
    assert not at.exception and not at.error
    assert any("no GPU" in w.value for w in at.sidebar.warning)
    assert at.session_state["cfg_device"] == "auto"

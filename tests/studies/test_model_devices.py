"""A reference block's ways of computing its gradients on each device
(rnnviz.studies.model_costs.block_on_devices): a group of rows per device, its weights and
inputs put there, the same losses on every device as block_strategies's where the block
stands, and, with two forced CPU devices, each group run on its own device. No time is
asserted."""

from __future__ import annotations

import json
import textwrap

import jax
import pytest
from device_helpers import on_two_cpus

from rnnviz.charts.models import device_way_bars
from rnnviz.config import RunConfig
from rnnviz.engine.environment import device_label
from rnnviz.frames.models import device_way_frame
from rnnviz.studies.block_models import block_inputs, block_model
from rnnviz.studies.comparisons import present_devices
from rnnviz.studies.model_costs import WAYS, block_on_devices, block_strategies, on_device, placed_inputs

MAMBA = RunConfig(cell="mamba", block="reference", layers=2, hidden_size=8, seq_len=6, batch_size=2)
NAMES = [w.name for w in WAYS]


@pytest.fixture(scope="module")
def block():
    return block_model(MAMBA), block_inputs(MAMBA)


def test_by_default_a_group_of_every_way_per_device_jax_sees(block):
    d = block_on_devices(*block, repeats=1)
    assert [r.device for r in d.runs] == [device_label(x) for x in present_devices()]
    assert all([w.name for w in r.ways] == NAMES for r in d.runs)
    gpus = [device_label(x) for x in present_devices() if x.platform == "gpu"]
    assert list(d.gpus) == gpus and (d.gpu_reason is None) == bool(gpus)
    assert json.loads(json.dumps(d.to_json()))["runs"][0]["device"] == d.runs[0].device


def test_the_same_device_twice_gives_block_strategies_losses_twice(block):
    model, inputs = block
    cpu = jax.devices("cpu")[0]
    d = block_on_devices(model, inputs, devices=[cpu, cpu], repeats=2)
    alone = block_strategies(model, inputs, repeats=1)
    assert len(d.runs) == 2 and all(r.device == device_label(cpu) for r in d.runs)
    for r in d.runs:
        assert [w.loss for w in r.ways] == [w.loss for w in alone.ways]
        assert r.n_params == model.n_params and (r.batch, r.steps) == inputs.shape[:2]
    f = device_way_frame(d)
    assert f["device"].tolist() == [device_label(cpu)] * 6 and f["way"].tolist() == NAMES * 2
    assert (f["device_kind"] == "cpu").all() and (f["device_name"] == "cpu").all()
    assert f["speedup"].iloc[:3].tolist() == [1.0] * 3 and (f["speedup"] > 0).all()
    assert f["agrees"].all() and (f["loss_vs_first"] == 0).all()
    fig = device_way_bars(f)
    assert [t.name for t in fig.data] == NAMES * 3  # a bar per way in each of the three panels
    assert all(list(t.x) == [device_label(cpu)] * 2 for t in fig.data)


def test_on_device_puts_the_weights_and_so_the_inputs_and_outputs_there(block):
    model, inputs = block
    cpu = jax.devices("cpu")[-1]
    moved = on_device(model, cpu)
    assert sorted(moved.params) == sorted(model.params)
    assert {x for w in moved.params.values() for x in w.devices()} == {cpu}
    at = placed_inputs(moved, inputs)
    p = WAYS[0].prepare(moved, at)
    loss, grads = p.compiled.fn(*p.args)
    assert at.device == cpu and at.placed.devices() == {cpu}
    assert loss.devices() == {cpu} and all(g.devices() == {cpu} for g in grads.values())


@pytest.mark.slow
def test_two_forced_cpu_devices_each_run_their_own_group_with_the_same_losses():
    script = textwrap.dedent("""
        import json, jax
        from rnnviz import RunConfig
        from rnnviz.studies.block_models import block_inputs, block_model
        from rnnviz.studies.model_costs import block_on_devices
        devs = jax.devices("cpu")
        assert len(devs) == 2, devs
        cfg = RunConfig(cell="mamba", block="reference", layers=1, hidden_size=8, seq_len=6, batch_size=2)
        m, x = block_model(cfg), block_inputs(cfg)
        both = block_on_devices(m, x, repeats=1)
        second = block_on_devices(m, x, devices=devs[1:], repeats=1)
        print(json.dumps({"both": [[r.device, [w.loss for w in r.ways]] for r in both.runs],
                          "second": [r.device for r in second.runs]}))
    """)
    got = on_two_cpus(script)
    assert [device for device, _ in got["both"]] == ["cpu:0 cpu", "cpu:1 cpu"]
    assert got["second"] == ["cpu:1 cpu"]
    (_, first), (_, other) = got["both"]
    assert len(first) == len(NAMES) and other == pytest.approx(first, rel=1e-6)

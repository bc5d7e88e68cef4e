"""The Devices tab of a reference block (AppTest): each way of computing the block's gradients
on every device JAX sees, as bars (a bar per way in each device's group), a table with a row
per device × way, and a caption naming the devices and, without a GPU, why there is none."""

from __future__ import annotations

import pytest
from apptest_helpers import figures, run_app

from rnnviz.engine.environment import device_label
from rnnviz.studies.comparisons import present_devices
from rnnviz.studies.model_costs import WAYS

URL = {"cell": "mamba", "block": "reference", "layers": "3", "hidden_size": "16", "seq_len": "12"}


@pytest.mark.slow
def test_the_devices_tab_times_each_way_on_every_device():
    at = run_app({**URL, "tab": "Devices"})
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    assert not [i.value for i in at.info if "reads a bare cell" in i.value]
    ways = [w.name for w in WAYS]
    devices = [device_label(d) for d in present_devices()]  # the workers' JAX sees the same
    (fig,) = [f for f in figures(at) if "on each device" in str(f["layout"].get("title"))]
    bars = [t for t in fig["data"] if t.get("type") == "bar"]
    assert [t["name"] for t in bars] == ways * 3  # compile, run, ratio: a bar per way in each
    assert all(list(t["x"]) == devices for t in bars)
    (table,) = [d.value for d in at.dataframe]
    assert list(zip(table["device"], table["way"], strict=True)) == [(d, w) for d in devices for w in ways]
    assert (table["× plain jax.grad"] > 0).all() and table["agrees"].all()
    assert (table.loc[table["way"] == ways[0], "× plain jax.grad"] == 1.0).all()
    (caption,) = [c.value for c in at.caption if c.value.startswith("Devices JAX sees:")]
    assert all(d in caption for d in devices)
    assert ("No GPU here" in caption) == all(not d.startswith("gpu") for d in devices)
    assert "csv_block_devices" in {b.key for b in at.get("download_button")}

"""Today's designs in every tab (AppTest): each of RG-LRU, sLSTM, mLSTM, Mamba's selective SSM,
Gated DeltaNet and DeltaNet opens every tab at a small size with no exception and no error box,
and its header's total gradient is the library's."""

from __future__ import annotations

import numpy as np
import pytest
from apptest_helpers import run_app, total_gradient

from rnnviz import RunConfig, analyze
from rnnviz.ui.tabs import TABS

DESIGNS = ("rglru", "slstm", "mlstm", "mamba", "gated_deltanet", "deltanet")
SMALL = {"hidden_size": "8", "seq_len": "20", "batch_size": "2"}


def _clean(at, where):
    assert not at.exception, (where, [e.value for e in at.exception])
    assert not at.error, (where, [e.value for e in at.error])


@pytest.mark.slow
@pytest.mark.parametrize("cell", DESIGNS)
def test_every_tab_opens_on_the_design(cell):
    at = run_app({"cell": cell, **SMALL})
    _clean(at, "page")
    cfg = RunConfig(cell=cell, hidden_size=8, seq_len=20, batch_size=2)
    np.testing.assert_allclose(total_gradient(at), np.log10(analyze(cfg, repeats=1).grad_norms), atol=1e-4)
    for tab in TABS:
        page = run_app({"cell": cell, "tab": tab.TITLE, **SMALL})
        _clean(page, tab.TITLE)
        if tab.TITLE == "Phase diagram":  # what the gain means for this design, said on the tab
            assert any(f"For the {cell} cell the gain" in c.value for c in page.caption), cell

"""The memory estimate that the budgets refuse configs by (:func:`rnnviz.config.estimate_memory_bytes`)
against what the cells and XLA say: one example's carry counted as ``initialize_carry`` makes
it (a matrix memory's heads·d², Mamba's H·N), and the estimate above the compiled analysis's
own peak (``memory_analysis()``) for every registered cell and both kinds of strategy. Before
the carry was counted, an mLSTM or DeltaNet analysis needed 14 to 60 times its estimate."""

from __future__ import annotations

import math

import jax
import pytest

from rnnviz import cell_names
from rnnviz.analysis import executables
from rnnviz.config import RunConfig, estimate_memory_bytes
from rnnviz.engine.cells import make_cell
from rnnviz.engine.prepare import resolve_device, static_config
from rnnviz.tables.cells import cell_spec

CELLS = cell_names()


@pytest.mark.parametrize("cell", CELLS)
def test_the_cost_model_counts_the_carry_that_initialize_carry_makes(cell):
    for hidden in (6, 8, 64):  # 6: two heads of 3; 8 and 64: four heads
        cfg = RunConfig(cell=cell, hidden_size=hidden, input_size=3, batch_size=None, seq_len=4)
        cell_module = make_cell(cfg)
        carry = jax.eval_shape(lambda key: cell_module.initialize_carry(key, (3,)), jax.random.key(0))
        true = sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(carry))
        assert cell_spec(cell).cost.carry_size(hidden, len(cfg.carry_components)) == true, (cell, hidden)


#: The accumulator's reverse pass keeps every step's residuals; checkpoint keeps 2·⌈√T⌉ steps'
#: and so leans most on the trajectory term. Every cell under checkpoint; under the
#: accumulator the cells whose residuals are carry-sized or complex (one compile each: the
#: executables are compiled, never run).
CASES = [(cell, "checkpoint") for cell in CELLS]
CASES += [(c, "accumulate") for c in ("lstm", "lru", "mamba", "mlstm", "gated_deltanet", "deltanet")]


@pytest.mark.parametrize(("cell", "strategy"), CASES)
def test_the_estimate_is_above_the_compiled_analysis_peak(cell, strategy):
    # T large enough that the per-step terms outweigh XLA's constant buffers
    cfg = RunConfig(cell=cell, hidden_size=64, input_size=8, batch_size=8, seq_len=1000, strategy=strategy)
    peak = executables(static_config(cfg), resolve_device(cfg)).analysis.peak_bytes
    estimate = estimate_memory_bytes(cfg)
    assert peak <= estimate, f"peak {peak / 2**20:.2f} MiB > estimate {estimate / 2**20:.2f} MiB"

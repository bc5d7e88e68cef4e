"""The explorable grid against independent paths: every point equals :func:`rnnviz.analyze`
(magnitudes, verdict, loss), :func:`rnnviz.jacobians` and :func:`rnnviz.lyapunov` at that
point's configuration."""

from __future__ import annotations

import numpy as np
import pytest

from rnnviz import RunConfig, analyze, jacobians, lyapunov
from rnnviz.config import ConfigError
from rnnviz.frames.explorable import point_view
from rnnviz.frames.verdicts import verdict
from rnnviz.studies.explorable import explorable_grid, grid_index, product_of

BASE = RunConfig(hidden_size=6, input_size=3, seq_len=12, batch_size=2)
OVER = {"cell": ["simple", "lstm"], "recurrent_gain": [0.6, 1.4], "seed": [0, 3]}


@pytest.fixture(scope="module")
def grid():
    return explorable_grid(BASE, OVER, k=3)


def test_every_point_equals_analyze_jacobians_and_lyapunov_at_its_config(grid):
    assert len(grid.points) == 8
    for values, point in zip(product_of(grid.over), grid.points):
        cfg = BASE.replace(**values)
        assert point.config == cfg
        a = analyze(cfg, repeats=1)
        np.testing.assert_allclose(point.analysis.log10_grad_norms, a.log10_grad_norms, atol=1e-5)
        np.testing.assert_allclose(point.analysis.loss, a.loss, rtol=1e-5)
        for c in cfg.carry_components:
            np.testing.assert_allclose(point.analysis.carries[c], a.carries[c], rtol=1e-5, atol=1e-6)
        assert verdict(point.analysis).text == verdict(a).text
        j = jacobians(cfg, k=3)
        np.testing.assert_array_equal(point.jacobian_steps, j.steps)
        np.testing.assert_allclose(point.singular_values, j.singular_values, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(point.lyapunov, lyapunov(cfg, k=1).lambda1, rtol=1e-4, atol=1e-6)


def test_views_carry_each_component_the_bound_where_the_cell_has_one_and_the_first_units(grid):
    simple = point_view(grid.at(cell="simple", recurrent_gain=0.6, seed=0))
    lstm = point_view(grid.at(cell="lstm", recurrent_gain=0.6, seed=0))
    assert set(simple.grad) == {"total"} and set(lstm.grad) == {"total", "c", "h"}
    assert simple.bound is not None and lstm.bound is None  # Pascanu's bound: the simple cell's
    assert simple.bound_label.startswith("bound (σ₁·γ)")
    np.testing.assert_allclose(simple.bound[-1], simple.grad["total"][-1])  # anchored at T
    a = grid.at(cell="lstm", recurrent_gain=0.6, seed=0).analysis
    np.testing.assert_array_equal(lstm.units, np.asarray(a.carries["h"])[:, 0, :3].T)
    assert lstm.log10_singular_values.shape == (3, 12)


def test_grid_index_is_row_major_and_names_what_is_not_on_the_grid(grid):
    assert grid_index(grid.over, {"cell": "lstm", "recurrent_gain": 0.6, "seed": 3}) == 5
    assert grid.at(cell="lstm", recurrent_gain=0.6, seed=3) is grid.points[5]
    with pytest.raises(ConfigError, match="one of the grid's values: 0.6, 1.4"):
        grid.at(cell="lstm", recurrent_gain=1.0, seed=3)
    with pytest.raises(ConfigError, match="a value for each swept field"):
        grid.at(cell="lstm")


def test_a_combination_that_is_no_config_is_refused_before_computing():
    with pytest.raises(ConfigError, match="forget_bias"):
        explorable_grid(BASE, {"cell": ["simple", "lstm"], "forget_bias": [0.0, 1.0]})

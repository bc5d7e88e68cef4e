"""The JAX compatibility module, and no deprecated JAX API on the analysis's path (a newer jax
removes what this one deprecates)."""

import importlib.metadata

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz import RunConfig, analyze
from rnnviz.engine import compat
from rnnviz.tables.strategies import strategy_names


def test_scan_without_split_transpose_is_lax_scan():
    def step(c, x):
        return c * 0.5 + x, c

    xs = jnp.arange(5.0, dtype=jnp.float32)
    got = compat.scan(step, jnp.float32(1), xs)
    want = jax.lax.scan(step, jnp.float32(1), xs)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_array_equal(a, b)


def test_split_transpose_gives_the_same_gradient_where_available():
    if not compat.split_transpose_available():
        pytest.skip("this jax cannot differentiate lax.scan(_split_transpose=True)")

    def loss(w, split):
        step = lambda c, x: (jnp.tanh(w * c + x), None)  # noqa: E731
        return compat.scan(step, jnp.float32(0), jnp.ones(4, jnp.float32), split_transpose=split)[0]

    np.testing.assert_allclose(
        jax.grad(loss)(jnp.float32(0.7), True), jax.grad(loss)(jnp.float32(0.7), False)
    )


def test_versions_and_modules_are_found_here():
    assert compat.jaxlib_version() == importlib.metadata.version("jaxlib")
    assert hasattr(compat.persistent_cache_module(), "LRUCache")  # what the cache's seal patches
    assert compat.experimental_rnn() is not None
    assert compat.memory_stats(jax.devices("cpu")[0]) is None  # XLA:CPU keeps no allocator statistics


@pytest.mark.filterwarnings("error::DeprecationWarning")
@pytest.mark.parametrize("strategy", strategy_names())
def test_an_analysis_reaches_no_deprecated_api(strategy):
    cell = "mingru" if strategy == "parallel" else "lstm"
    a = analyze(
        RunConfig(cell=cell, strategy=strategy, hidden_size=4, input_size=3, seq_len=5, batch_size=2),
        repeats=1,
    )
    assert np.isfinite(a.log10_grad_norms).all()


def test_the_suite_turns_a_jax_deprecation_into_an_error():
    # pyproject.toml's filterwarnings: any test that reaches a deprecated jax API fails
    import warnings

    with pytest.raises(DeprecationWarning, match="jax"):
        warnings.warn("jax.tree_map is deprecated: use jax.tree.map", DeprecationWarning, stacklevel=1)

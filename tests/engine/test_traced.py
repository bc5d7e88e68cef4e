"""The traced pass (rnnviz.engine.strategies.traced): the zero-perturbation definition's
numbers without storing a per-step gradient, and where the analysis takes it."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CELLS, MATRIX_CARRIES

from rnnviz import RunConfig, analyze
from rnnviz.engine.cells import make_cell
from rnnviz.engine.compile import compile_for
from rnnviz.engine.gradients import (
    analysis_outputs,
    step_gradients,
    summarize,
    traced_gradients,
    traced_pays,
)
from rnnviz.engine.prepare import prepared_inputs, resolve_device, static_config


def _flat(tree):
    return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(tree)])


def _both(cfg):
    cfg = static_config(cfg)
    cell = make_cell(cfg)
    args = prepared_inputs(cfg)
    traced = jax.jit(functools.partial(traced_gradients, cfg, cell))(*args)
    sg = jax.jit(functools.partial(step_gradients, cfg, cell))(*args)
    return traced, (sg, summarize(cfg, sg))


def _assert_same(traced, reference, rtol):
    (t_sg, t_sum), (sg, summary) = traced, reference
    assert t_sg.carry_grads is None and t_sg.input_grads is None  # nothing per step is kept
    for name, got, want in zip(summary._fields, t_sum, summary):
        assert got.shape == want.shape
        # a component whose gradient is 0 analytically (the sLSTM's stabiliser m) holds
        # rounding only: compared against the largest norm of its kind
        scale = float(np.max(np.asarray(want)))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=name)
    ref = _flat(sg.param_grads)
    assert np.linalg.norm(_flat(t_sg.param_grads) - ref) <= rtol * np.linalg.norm(ref)
    # the same steps (one rounding apart where XLA fuses the loop's body differently)
    np.testing.assert_allclose(_flat(t_sg.carries), _flat(sg.carries), rtol=rtol, atol=rtol * 1e-2)
    np.testing.assert_allclose(t_sg.loss, sg.loss, rtol=1e-6)
    if sg.learned_carry_grads is not None:
        ref = _flat(sg.learned_carry_grads)
        assert np.linalg.norm(_flat(t_sg.learned_carry_grads) - ref) <= rtol * np.linalg.norm(ref)


@pytest.mark.parametrize("cell", CELLS)
def test_the_traced_pass_equals_the_zero_perturbation_gradients(cell):
    """Every cell (the pass is generic; the analysis takes it for the matrix memories):
    a loss on the last output only, so every earlier ∂L/∂carry_t comes through the recomputed
    steps' VJPs, batched; the unbatched case for a vector and a matrix state."""
    _assert_same(*_both(RunConfig(cell=cell, hidden_size=8, input_size=4, seq_len=9, batch_size=3)), 1e-5)


@pytest.mark.parametrize("cell", ["lstm", "mlstm"])
def test_the_traced_pass_reads_every_output_unbatched(cell):
    _assert_same(*_both(RunConfig(cell=cell, hidden_size=8, input_size=4, seq_len=9, loss="all")), 1e-5)


@pytest.mark.parametrize("cell", ["mamba", "lru"])  # a matrix state; a complex one
def test_the_traced_pass_with_a_learned_carry_and_a_loss_on_every_output(cell):
    cfg = RunConfig(
        cell=cell, hidden_size=8, input_size=4, seq_len=9, batch_size=3, loss="all", carry_init="learned"
    )
    _assert_same(*_both(cfg), 1e-5)


def test_the_traced_pass_in_bfloat16_is_within_its_rounding():
    cfg = RunConfig(
        cell="gated_deltanet", hidden_size=8, input_size=4, seq_len=9, batch_size=3, dtype="bfloat16"
    )
    _assert_same(*_both(cfg), 2e-2)


def test_the_analysis_takes_the_traced_pass_for_the_matrix_memories_under_the_accumulator():
    for cell in CELLS:
        assert traced_pays(RunConfig(cell=cell)) == (cell in MATRIX_CARRIES), cell
        assert not traced_pays(RunConfig(cell=cell, strategy="checkpoint"))
    # the analysis' executable is the traced one: the same function, one cache entry
    cfg = RunConfig(cell="deltanet", hidden_size=8, input_size=4, seq_len=9, batch_size=3)
    a = analyze(cfg, repeats=1, log_pass=False)
    (t_sg, t_sum), _ = _both(cfg)
    np.testing.assert_allclose(a.example_grad_norms, np.asarray(t_sum.example_grad_norms), rtol=1e-6)
    np.testing.assert_allclose(_flat(a.param_grads), _flat(t_sg.param_grads), rtol=1e-6, atol=1e-9)


def test_the_traced_pass_keeps_no_per_step_gradient_in_memory():
    """The compiled analysis of a matrix memory holds less than the zero-perturbation pass:
    that pass stores ∂L/∂carry_t for every t, [T+1, B, heads, d, d], and autodiff's copy of
    the trajectory besides the one it returns (XLA's memory analysis, not a timing)."""
    cfg = static_config(RunConfig(cell="mlstm", hidden_size=32, input_size=4, seq_len=64, batch_size=4))
    cell, device = make_cell(cfg), resolve_device(cfg)
    args = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in jax.tree.leaves(prepared_inputs(cfg)))
    args = jax.tree.unflatten(jax.tree.structure(prepared_inputs(cfg)), args)

    def eps_pass(*a):
        sg = step_gradients(cfg, cell, *a)
        return sg._replace(carry_grads=None, input_grads=None), summarize(cfg, sg)

    def temp(fn):
        return compile_for(fn, args, device).fn.memory_analysis().temp_size_in_bytes

    trajectory = sum(
        np.prod(x.shape) * x.dtype.itemsize
        for x in jax.tree.leaves(jax.eval_shape(lambda *a: step_gradients(cfg, cell, *a).carries, *args))
    )
    traced = temp(functools.partial(analysis_outputs, cfg, cell))
    assert traced_pays(cfg)
    assert temp(eps_pass) - traced >= trajectory  # at least one trajectory-sized buffer fewer


@pytest.mark.parametrize("scale", [1.0, 1e-25, 1e-35, 1e25, 0.0, np.inf, np.nan])
def test_the_one_pass_norms_equal_the_scaled_norms_at_every_scale(scale):
    """The traced pass's per-step norms take a plain sum of squares where it is exact and the
    scaled norm elsewhere: equal to the scaled norm from float32's smallest to its largest
    magnitudes, per example, with a complex leaf and a leaf that is all 0 beside them."""
    from rnnviz.engine.strategies.traced import _norms, leaf_norms

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        x = x * np.float32(scale) if np.isfinite(scale) and scale else np.full_like(x, scale)
        z = (x[..., :2] + 1j * x[..., 2:4]).astype(np.complex64)
    tree = {"real": jnp.asarray(x), "complex": jnp.asarray(z), "zero": jnp.zeros((3, 2))}
    got = jax.jit(lambda t: _norms(t, 1))(tree)
    for name, leaf in tree.items():
        want = leaf_norms(leaf, 1)
        np.testing.assert_allclose(got[name], want, rtol=2e-6, err_msg=name)
        assert got[name].shape == (3,)

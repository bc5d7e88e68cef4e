"""A config's design as its reference block (rnnviz.studies.block_models): what the config
refuses and why, the block table's sizes against the models drawn, the bare cell's inputs, and
the analysis against jax.grad of the same loss."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rnnviz
from rnnviz.config import BudgetError, ConfigError, RunConfig, param_count
from rnnviz.engine.blocks.dispatch import module_of
from rnnviz.studies.block_models import analyze_block, block_inputs, block_model
from rnnviz.tables.blocks import BLOCK_DESIGNS


def _block(cell: str, **fields) -> RunConfig:
    return RunConfig(
        cell=cell, block="reference", **({"layers": 2, "hidden_size": 16, "seq_len": 10} | fields)
    )


@pytest.mark.parametrize(
    "fields, field, words",
    [
        (dict(cell="lstm", layers=3), "layers", "block='reference'"),
        (dict(cell="deltanet", block="reference"), "block", "gated_deltanet"),
        (dict(cell="simple", block="reference"), "block", "no reference block"),
        (dict(cell="lstm", block="reference", carry_init="normal"), "carry_init", "zero state"),
        (
            dict(cell="lstm", block="reference", recurrent_gain=2.0),
            "recurrent_gain",
            "as its reference draws",
        ),
        (dict(cell="mamba", block="reference", strategy="fused"), "strategy", "probes"),
        (dict(cell="mamba", block="reference", dtype="float16"), "dtype", "bfloat16"),
        (dict(cell="mamba", block="reference", loss="all"), "loss", "last step"),
        (dict(cell="mamba", block="reference", layers=0), "layers", "[1, 32]"),
        (dict(cell="mamba", block="stacked"), "block", "cell, reference"),
    ],
)
def test_the_config_names_what_a_block_refuses(fields, field, words):
    with pytest.raises(ConfigError) as err:
        RunConfig(**fields)
    assert err.value.field == field and words in str(err.value)


def test_a_block_too_big_for_the_budget_is_refused():
    with pytest.raises(BudgetError, match="over the"):
        RunConfig(
            cell="mamba", block="reference", layers=32, hidden_size=2048, seq_len=100_000, batch_size=64
        )


@pytest.mark.parametrize("cell", list(BLOCK_DESIGNS))
def test_the_table_counts_the_parameters_drawn(cell):
    """config.param_count (the budgets' estimate, from tables/blocks.py) within 20 % below and
    60 % above the model drawn, at two widths and depths (a torch stack's first layer reads
    I < H features, which the estimate counts as H: budgets err on the safe side)."""
    for width, layers in ((32, 1), (96, 3)):
        cfg = _block(cell, hidden_size=width, layers=layers)
        drawn = block_model(cfg).n_params
        assert 0.8 * drawn <= param_count(cfg) <= 1.6 * drawn, (width, layers, param_count(cfg), drawn)


@pytest.mark.parametrize("cell", list(BLOCK_DESIGNS))
def test_every_design_analyses_with_its_layers_and_states(cell):
    cfg = _block(cell)
    model = block_model(cfg)
    a = analyze_block(cfg)
    assert (a.model_type, model.n_layers) == (BLOCK_DESIGNS[cell].design, 2)
    assert a.grad_norms.shape == (3, 10) and sorted(a.state_grad_norms) == [0, 1]
    y = np.asarray(model(block_inputs(cfg)), np.float64)
    assert a.loss == pytest.approx(0.5 * np.sum(y[:, -1] ** 2), rel=1e-5)


def test_the_block_reads_the_bare_cells_inputs():
    """The same inputs as the bare cell's analysis draws (an unbatched config's as one example),
    and the seed draws both the inputs and the weights."""
    bare = RunConfig(cell="lstm", seq_len=12, batch_size=None)
    a = rnnviz.analyze(bare)
    block = bare.replace(block="reference")
    x = block_inputs(block)
    assert x.shape == (1, 12, bare.input_size)
    np.testing.assert_allclose(x[0], np.asarray(a.inputs), rtol=0, atol=0)
    other = block.replace(seed=1)
    assert not np.allclose(block_inputs(other), x)
    w0, w1 = (block_model(c).params["weight_hh_l0"] for c in (block, other))
    assert not np.allclose(w0, w1)


@pytest.mark.parametrize("cell", ["lstm", "gru", "mamba", "gated_deltanet"])
def test_the_first_row_is_the_input_gradient_of_jax_grad(cell):
    """Row 0 is ‖∂L/∂x_t‖ of the inputs themselves (before a design's projection, as a torch
    stack reads them), here against jax.grad of the model's loss with respect to the inputs,
    and the loss is its value."""
    cfg = _block(cell, layers=3, batch_size=3)
    model, x = block_model(cfg), block_inputs(cfg)
    module = module_of(model.model_type, model.spec)

    def loss(inputs):
        y = module.forward(model.spec, model.params, inputs)
        return 0.5 * jnp.sum(y[:, -1] ** 2)

    value, g = jax.jit(jax.value_and_grad(loss))(jnp.asarray(x))
    a = analyze_block(cfg)
    assert a.loss == pytest.approx(float(value), rel=1e-5)
    expected = np.sqrt(np.sum(np.asarray(g, np.float64) ** 2, axis=(0, 2)))
    np.testing.assert_allclose(a.grad_norms[0], expected, rtol=1e-4)


def test_a_trained_runs_tensors_are_the_model_the_analysis_reads():
    """A block trained on the recall task, read at its last kept step: the model holds the
    run's tensors; the loss and row 0 are those of the training's own forward
    (its readout at T) under jax.grad; the analysis differs from the seed's
    draw; tensors of another block are refused by name."""
    from rnnviz.engine.blocks import vectors
    from rnnviz.studies.tasks.synthetic import get_task
    from rnnviz.studies.training import train
    from rnnviz.studies.training.blocks import model_spec

    task = get_task("recall")
    cfg = _block("mamba", hidden_size=8, seq_len=10, input_size=task.input_size, batch_size=4)
    run = train(cfg, "recall", steps=6, log_every=3)
    tensors = run.tensors()
    model, x = block_model(cfg, tensors), jnp.asarray(block_inputs(cfg))
    assert model.spec.output_size == task.out_features and "trained" in model.source
    for name, t in tensors.items():
        np.testing.assert_array_equal(np.asarray(model.params[name]), t)

    def loss(inputs):
        y = vectors.forward(model_spec(cfg, task)[0], tensors, inputs)  # as the training reads it
        return 0.5 * jnp.sum(y[:, -1] ** 2)

    value, g = jax.jit(jax.value_and_grad(loss))(x)
    a = analyze_block(cfg, tensors=tensors)
    assert a.loss == pytest.approx(float(value), rel=1e-5)
    expected = np.sqrt(np.sum(np.asarray(g, np.float64) ** 2, axis=(0, 2)))
    np.testing.assert_allclose(a.grad_norms[0], expected, rtol=1e-4)
    assert not np.allclose(a.grad_norms, analyze_block(cfg).grad_norms, rtol=1e-2)
    with pytest.raises(ConfigError, match="weights=.*not allowed: the .* tensors of gru block"):
        block_model(cfg.replace(cell="gru"), tensors)


def test_layers_over_training_is_each_kept_steps_lambda1_on_the_runs_probe_batch():
    """λ₁ per layer at the kept steps it picks (first and last always), each equal to
    model_lyapunov of the block at that step's tensors on the run's probe batch; the loss is
    over_training's; a bare cell's run is refused, naming over_training."""
    import dataclasses

    from rnnviz.studies.model_lyapunov import model_lyapunov
    from rnnviz.studies.over_training import layers_over_training, probe_inputs
    from rnnviz.studies.training import train

    cfg = _block("mamba", hidden_size=8, seq_len=10, input_size=1, batch_size=4)
    run = train(cfg, "recall", steps=6, log_every=2)
    ot = layers_over_training(run, max_points=3)
    assert run.weight_steps.tolist() == [0, 2, 4, 6] and ot.steps.tolist() == [0, 4, 6]
    assert ot.layers == (0, 1) and ot.lambda1.shape == (3, 2) and ot.loss.shape == (3,)
    xs = np.asarray(probe_inputs(run))
    for step, lam in zip(ot.steps, ot.lambda1):
        want = model_lyapunov(block_model(cfg, run.tensors(int(step))), xs).lambda1
        np.testing.assert_allclose(lam, want, rtol=1e-6)
    assert ot.loss[0] == pytest.approx(float(run.losses[0]))  # step 0: the first step's own loss
    bare = dataclasses.replace(run, config=cfg.replace(block="cell", layers=1))
    with pytest.raises(ConfigError, match="over_training reads a bare cell's"):
        layers_over_training(bare)


def test_a_deeper_stack_sees_the_gradient_fall_through_its_layers():
    """Rows ordered by depth: row L (the top's output) reads step T − 1 only, and each row below
    reaches further back than the row above, as a stack of causal layers must."""
    a = analyze_block(_block("lstm", layers=4, seq_len=20))
    reach = [int(np.count_nonzero(row)) for row in a.grad_norms]
    assert reach[-1] == 1 and reach[0] == 20
    assert all(lower >= upper for lower, upper in zip(reach, reach[1:]))
    assert math.isfinite(a.loss)


@pytest.mark.parametrize(
    "call",
    [
        lambda cfg: rnnviz.analyze(cfg, repeats=1),
        lambda cfg: rnnviz.lyapunov(cfg),
        lambda cfg: rnnviz.jacobians(cfg),
    ],
    ids=["analyze", "lyapunov", "jacobians"],
)
def test_a_bare_cells_computation_names_where_a_block_is_read(call):
    with pytest.raises(ConfigError) as err:
        call(_block("lstm"))
    assert err.value.field == "block" and "analyze_block" in str(err.value)


@pytest.mark.parametrize("cell", ["mamba", "lstm"])
def test_one_reverse_pass_serves_the_loss_and_the_last_positions_connectivity(cell):
    """A stack's loss is its last position's own: the shared pass (one cotangent) gives what two
    vmapped cotangents give, and analyze_model takes it at its default position."""
    from rnnviz.engine.blocks.gradients import model_gradients
    from rnnviz.studies.models import shares_pass

    cfg = _block(cell, layers=2, seq_len=9)
    model, x = block_model(cfg), jnp.asarray(block_inputs(cfg))
    module = module_of(model.model_type, model.spec)
    args = (module, model.spec, model.stream_widths, jnp.float32)
    one, two = (
        jax.jit(lambda p, x, s=shared: model_gradients(*args, p, x, jnp.int32(8), shared=s))(model.params, x)
        for shared in (True, False)
    )
    np.testing.assert_allclose(one.loss, two.loss, rtol=1e-6)
    np.testing.assert_allclose(one.stream, two.stream, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(one.states), jax.tree.leaves(two.states)):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    np.testing.assert_allclose(one.connectivity, two.connectivity, rtol=1e-5)
    assert shares_pass(model, 9, 8) and not shares_pass(model, 9, 7)
    a = rnnviz.analyze_model(model, np.asarray(x))
    np.testing.assert_allclose(a.connectivity, a.grad_norms[0], rtol=1e-6)


@pytest.mark.parametrize("cell", list(BLOCK_DESIGNS))
def test_sized_config_takes_the_width_nearest_the_count(cell):
    """At 100k parameters and L = 2 every design's drawn count lies within 2 % of the target, and
    no width within ±6 of the chosen one comes nearer: the sLSTM's, whose count jumps with its
    heads (4, 2 or 1 as divide H), included."""
    from rnnviz.studies.block_models import block_param_count, sized_config

    cfg = sized_config(_block(cell, layers=2), "100k")
    drawn = block_param_count(cfg)
    assert abs(drawn - 100_000) <= 0.02 * 100_000, (cfg.hidden_size, drawn)
    for width in range(max(1, cfg.hidden_size - 6), cfg.hidden_size + 7):
        other = block_param_count(cfg.replace(hidden_size=width))
        assert abs(drawn - 100_000) <= abs(other - 100_000), (width, other, cfg.hidden_size, drawn)


def test_the_block_table_says_which_designs_project_their_inputs():
    """BLOCK_DESIGNS' ``projects`` (what the page says, without JAX) is what the drawn spec does."""
    from rnnviz.studies.block_models import block_spec

    for cell, design in BLOCK_DESIGNS.items():
        spec, _ = block_spec(RunConfig(cell=cell, block="reference", layers=1, hidden_size=16))
        assert spec.projects == design.projects, cell

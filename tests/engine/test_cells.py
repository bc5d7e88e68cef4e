"""The cell registry: a cell registered in a test, a plugin discovered through its entry
point, the modern built-in cells' closed forms, and the app listing them."""

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from apptest_helpers import figure_by_title, run_app, total_gradient

from rnnviz import CellSpec, ConfigError, RunConfig, analyze, cell_names, register_cell
from rnnviz.base.presets import config_from_params
from rnnviz.frames.gradients import bound_frame
from rnnviz.tables.cells import (
    PARTS,
    CarryLayout,
    CostModel,
    Display,
    Lazy,
    ParamRules,
    cell_spec,
    unregister_cell,
)

ROOT = Path(__file__).resolve().parents[2]


class ScaledCell(nn.RNNCellBase):
    """h' = a·h + W x, with the scalar a a parameter (0.7 at init): ∂h'/∂h = a·I exactly."""

    features: int
    dtype: object = None
    param_dtype: object = jnp.float32
    carry_init: object = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, carry, x):
        a = self.param("a", nn.initializers.constant(0.7), (), self.param_dtype)
        h = a.astype(carry.dtype) * carry + nn.Dense(
            self.features, use_bias=False, dtype=self.dtype, param_dtype=self.param_dtype, name="w"
        )(x)
        return h, h

    @nn.nowrap
    def initialize_carry(self, rng, input_shape):
        return self.carry_init(rng, tuple(input_shape[:-1]) + (self.features,), self.param_dtype)

    @property
    def num_feature_axes(self):
        return 1


def _build_scaled(cfg, o):
    return ScaledCell(o["features"], o["dtype"], o["param_dtype"], o["carry_init"])


def _only_a(path):
    return path == ("a",)


@pytest.fixture
def scaled():
    spec = CellSpec(
        _build_scaled,
        params=ParamRules(recurrent=_only_a),
        display=Display(description="h' = a·h + W x (test)"),
    )
    register_cell("scaled_test", spec)
    yield "scaled_test"
    unregister_cell("scaled_test")


@pytest.mark.parametrize("batch", [None, 3])
def test_registered_cell_has_the_closed_form_ratio(scaled, batch):
    for gain in (1.0, 0.5):
        a = analyze(
            RunConfig(cell=scaled, seq_len=40, batch_size=batch, carry_init="normal", recurrent_gain=gain),
            repeats=1,
        )
        ratios = np.diff(a.log10_grad_norms)  # log10 ‖∂L/∂h_t‖ − log10 ‖∂L/∂h_{t−1}‖ = −log10(a·g)
        np.testing.assert_allclose(ratios, -np.log10(0.7 * gain), atol=1e-4)
        assert float(a.params["a"]) == pytest.approx(0.7 * gain)  # the gain scaled the recurrent part


def test_registered_cell_matches_a_python_loop_and_finite_differences(scaled):
    cfg = RunConfig(
        cell=scaled, seq_len=6, hidden_size=4, input_size=3, batch_size=2, carry_init="normal", loss="all"
    )
    a = analyze(cfg, repeats=1)
    from rnnviz.engine.cells import make_cell
    from rnnviz.engine.gradients import loss_from_outputs, time_major
    from rnnviz.engine.prepare import prepared_inputs
    from rnnviz.engine.rollout import reference_loop, rollout

    params, carry0, xs = prepared_inputs(cfg)
    cell = make_cell(cfg)
    loop = reference_loop(cell, params, carry0, time_major(cfg, xs))
    np.testing.assert_allclose(a.carries["h"], loop, rtol=1e-6, atol=1e-6)

    def loss(eps):
        return loss_from_outputs(cfg, rollout(cell, params, carry0, time_major(cfg, xs), eps)[1:])

    zeros = jnp.zeros((cfg.seq_len + 1,) + carry0.shape, jnp.float32)
    for t in (0, 3, 6):
        h = 1e-2
        e = zeros.at[t, 1, 2].set(h)
        fd = (float(loss(e)) - float(loss(-e))) / (2 * h)
        grad = jax.grad(loss)(zeros)[t, 1, 2]
        assert fd == pytest.approx(float(grad), rel=1e-3, abs=1e-5)
    assert a.grad_norms[-1] > 0


def test_registry_rejects_bad_registrations_and_unknown_cells(scaled):
    with pytest.raises(ValueError, match="already registered"):
        register_cell(scaled, CellSpec(lambda c, o: None))
    with pytest.raises(ValueError, match="lower-case"):
        register_cell("Bad Name", CellSpec(lambda c, o: None))
    with pytest.raises(ValueError, match="CarryLayout.output 'h' must be one of its components"):
        CarryLayout(components=("c",), output="h")
    with pytest.raises(ValueError, match="CarryLayout: give both pack and unpack"):
        CarryLayout(pack=lambda carry: carry)
    with pytest.raises(ValueError, match="Display.group must be one of"):
        Display(group="modern")
    with pytest.raises(ValueError, match="Display.activations needs at least one"):
        Display(activations=())
    with pytest.raises(TypeError, match="CellSpec.carry must be a CarryLayout"):
        CellSpec(lambda c, o: None, carry=("c", "h"))
    with pytest.raises(TypeError, match="CellSpec.build must be callable"):
        CellSpec(None)
    with pytest.raises(ConfigError, match="one of simple, lstm"):
        RunConfig(cell="not_a_cell")
    assert scaled in cell_names() and cell_names()[:4] == ("simple", "lstm", "gru", "mgu")


def test_a_flat_cellspec_of_0_2_still_registers_analyses_and_warns():
    # A 0.2 plugin passes every field flat; it must build the same spec as the grouped form,
    # say which grouped form to write, register, and analyse with its rules applied.
    with pytest.warns(DeprecationWarning) as caught:
        flat = CellSpec(
            _build_scaled,
            components=("h",),
            output="h",
            recurrent=_only_a,
            matmuls=1,
            residuals=3,
            description="h' = a·h + W x (0.2 form)",
        )
    (message,) = [str(w.message) for w in caught]
    for grouped_form in (
        "carry=CarryLayout(components=…, output=…)",
        "params=ParamRules(recurrent=…)",
        "cost=CostModel(matmuls=…, residuals=…)",
        "display=Display(description=…)",
    ):
        assert grouped_form in message
    assert caught[0].filename == __file__  # the warning points at the plugin's line
    assert flat == CellSpec(
        _build_scaled,
        carry=CarryLayout(components=("h",), output="h"),
        params=ParamRules(recurrent=_only_a),
        cost=CostModel(matmuls=1, residuals=3),
        display=Display(description="h' = a·h + W x (0.2 form)"),
    )
    assert (flat.components, flat.output, flat.group, flat.description) == (
        ("h",),
        "h",
        "plugin",
        "h' = a·h + W x (0.2 form)",
    )  # the flat names still read, for the callers of 0.2
    register_cell("flat_test", flat)
    try:
        a = analyze(
            RunConfig(cell="flat_test", seq_len=20, carry_init="normal", recurrent_gain=0.5), repeats=1
        )
        np.testing.assert_allclose(np.diff(a.log10_grad_norms), -np.log10(0.7 * 0.5), atol=1e-4)
        assert float(a.params["a"]) == pytest.approx(0.35)  # its flat `recurrent` rule took the gain
    finally:
        unregister_cell("flat_test")
    with pytest.warns(DeprecationWarning, match="cost=CostModel"):  # a flat keyword overrides its part
        mixed = CellSpec(_build_scaled, cost=CostModel(matmuls=4, vectors=2), matmuls=2)
    assert mixed.cost == CostModel(matmuls=2, vectors=2)
    with pytest.raises(TypeError, match="componets"):
        CellSpec(_build_scaled, componets=("h",))


def test_every_built_in_cell_says_what_the_gain_does_to_it():
    # the Phase diagram tab's caption: "For the <cell> cell the gain <gain_meaning()>."
    built_in = [c for c in cell_names() if cell_spec(c).display.group != "plugin"]
    assert {"lstm", "mamba", "mlstm", "deltanet"} <= set(built_in)
    missing = [c for c in built_in if not cell_spec(c).display.gain_note]
    assert not missing, missing
    assert "time constant" in cell_spec("mamba").display.gain_meaning()
    assert "ParamRules.recurrent" in Display().gain_meaning()  # a plugin's default, in words


def _lazy_parts(x):
    """Every Lazy in a spec's parts (records, tuples of records)."""
    if isinstance(x, Lazy):
        yield x
    elif dataclasses.is_dataclass(x):
        for f in dataclasses.fields(x):
            yield from _lazy_parts(getattr(x, f.name))
    elif isinstance(x, tuple):
        for y in x:
            yield from _lazy_parts(y)


def test_every_part_a_built_in_row_names_is_a_function_that_exists():
    # the rows of rnnviz/tables/builtin_cells.py name their Flax and JAX parts by module and
    # function: a renamed or moved part must fail here, not on the first run of that cell
    named = {}
    for name in cell_names():
        spec = cell_spec(name)
        for part in _lazy_parts((spec.build, *(getattr(spec, p) for p in PARTS))):
            named[part.target] = part.function
    assert len(named) > 40 and all(callable(f) and not isinstance(f, Lazy) for f in named.values())
    assert cell_spec("lstm").build == Lazy("rnnviz.engine.cells.builtin:lstm_build")  # equal by name


def test_the_cell_table_and_a_config_need_no_jax():
    # validation and the dashboard's server read every built-in cell's row without JAX
    code = textwrap.dedent(
        """
        import sys
        from rnnviz.config import RunConfig, carry_size, estimate_memory_bytes
        from rnnviz.tables.cells import cell_names, cell_spec
        for name in cell_names():
            cfg = RunConfig(cell=name, hidden_size=8)
            spec = cell_spec(name)
            assert carry_size(cfg) > 0 and estimate_memory_bytes(cfg) > 0 and spec.display.description
        assert not {"jax", "flax", "optax"} & set(sys.modules), sorted(m for m in sys.modules if "jax" in m)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_plugin_installed_from_a_folder_is_discovered(tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(ROOT / "examples" / "custom_cell"),
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    code = textwrap.dedent("""
        from rnnviz import RunConfig, analyze, cell_names
        from rnnviz.tables.cells import cell_spec
        assert "leaky" in cell_names(), cell_names()
        assert cell_spec("leaky").display.group == "plugin"
        a = analyze(RunConfig(cell="leaky", seq_len=30), repeats=1)
        # a plugin with a matrix memory: S [B, H, H], its gradient the Frobenius norm of ∂L/∂S_t
        import jax, numpy as np
        from rnnviz import lyapunov
        from rnnviz.engine.gradients import step_gradients, time_major
        from rnnviz.engine.cells import make_cell
        from rnnviz.engine.prepare import prepared_inputs
        cfg = RunConfig(cell="fastweights", hidden_size=4, seq_len=12, batch_size=2)
        m = analyze(cfg, repeats=1)
        params, carry0, xs = prepared_inputs(cfg)
        sg = step_gradients(cfg, make_cell(cfg), params, carry0, xs)
        (grads,) = jax.tree.leaves(sg.carry_grads)
        assert grads.shape == (13, 2, 4, 4), grads.shape
        want = np.sqrt((np.asarray(grads, np.float64) ** 2).sum(axis=(1, 2, 3)))
        np.testing.assert_allclose(m.grad_norms, want, rtol=1e-5)
        np.testing.assert_allclose(10.0 ** m.log10_grad_norms, want, rtol=1e-4)
        assert lyapunov(cfg, k=3).exponents.shape == (3,)
        # the memory estimate counts its carry as H² per example (the budget sees the matrix)
        assert cell_spec("fastweights").cost.carry_size(4, 1) == grads[0, 0].size == 16
        print(a.log10_grad_norms[0] - a.log10_grad_norms[-1])
    """)
    env = {**os.environ, "PYTHONPATH": f"{target}{os.pathsep}{ROOT}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert np.isfinite(float(out.stdout))
    cli = subprocess.run(
        [sys.executable, "-m", "rnnviz", "analyze", "--cell", "leaky", "--seq-len", "10", "--repeats", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert cli.returncode == 0 and "verdict" in cli.stdout, cli.stderr


@pytest.mark.parametrize(
    "cfg",
    [
        RunConfig(cell="indrnn", activation="identity", seq_len=60, batch_size=3),
        RunConfig(cell="indrnn", activation="relu", seq_len=60, batch_size=3),
        RunConfig(cell="indrnn", activation="tanh", seq_len=60, batch_size=None, recurrent_gain=0.8),
        RunConfig(cell="mingru", seq_len=300, batch_size=3, recurrent_gain=0.95),
        RunConfig(cell="minlstm", seq_len=300, batch_size=2, forget_bias=2.0),
        RunConfig(cell="lru", seq_len=400, batch_size=2, recurrent_gain=0.99),
        RunConfig(cell="lru", seq_len=100, batch_size=None, hidden_size=16),
    ],
    ids=["indrnn-identity", "indrnn-relu", "indrnn-tanh", "mingru", "minlstm", "lru", "lru-unbatched"],
)
def test_diagonal_cells_follow_their_closed_form(cfg):
    a = analyze(cfg, repeats=1)
    bound = bound_frame(a)
    assert bound is not None and "closed form" in bound["label"].iloc[0]
    finite = np.isfinite(a.log10_grad_norms)
    np.testing.assert_allclose(bound["log10_value"].to_numpy()[finite], a.log10_grad_norms[finite], atol=1e-4)


def test_indrnn_identity_decays_by_u_per_step():
    a = analyze(
        RunConfig(
            cell="indrnn", activation="identity", recurrent_init="identity", recurrent_gain=0.9, seq_len=50
        ),
        repeats=1,
    )
    np.testing.assert_allclose(np.asarray(a.params["u"]), 0.9)  # identity init u = 1, times the gain
    np.testing.assert_allclose(np.diff(a.log10_grad_norms), -np.log10(0.9), atol=1e-4)


def test_lru_gain_scales_the_modulus_and_its_ring():
    a = analyze(RunConfig(cell="lru", seq_len=10, hidden_size=64, recurrent_gain=0.5), repeats=1)
    modulus = np.exp(-np.exp(np.asarray(a.params["nu_log"], np.float64)))
    assert modulus.min() >= 0.9 - 1e-6 and modulus.max() <= 0.999 + 1e-6  # the ring initialisation
    assert float(a.params["a"]) == pytest.approx(0.5)  # |λ| = a·exp(−exp(ν)): the gain halves it
    assert a.config.carry_components == ("re", "im")


def test_new_cells_fields_apply_as_documented():
    assert (
        cell_spec("minlstm").params.forget_bias is not None and cell_spec("mingru").params.forget_bias is None
    )
    with pytest.raises(ConfigError, match="forget_bias"):
        RunConfig(cell="mingru", forget_bias=1.0)
    with pytest.raises(ConfigError, match="activation"):
        RunConfig(cell="mingru", activation="relu")
    base = analyze(RunConfig(cell="minlstm", seq_len=5), repeats=1).params
    biased = analyze(RunConfig(cell="minlstm", seq_len=5, forget_bias=1.5), repeats=1).params
    np.testing.assert_allclose(
        np.asarray(biased["if"]["bias"]) - np.asarray(base["if"]["bias"]), 1.5, rtol=1e-6
    )


def test_app_lists_every_registered_cell_and_renders_every_tab_for_a_new_one():
    at = run_app()
    assert list(at.selectbox(key="cfg_cell").options) == [
        f"{n} · {cell_spec(n).display.group}" for n in cell_names()
    ]
    for tab in ("Gradients", "Carry", "Strategies", "Phase diagram", "Compare"):
        at = run_app({"cell": "mingru", "seq_len": "40", "tab": tab})
        assert not at.exception and not at.error, (tab, [e.value for e in at.error])
    at = run_app({"cell": "mingru", "seq_len": "40"})
    fig = figure_by_title(at, "‖∂L/∂carry_t‖")
    assert any(t["name"].startswith("closed form") for t in fig["data"])
    assert len(total_gradient(at)) == 41


def test_url_naming_an_unregistered_cell_falls_back_with_a_warning():
    cfg, warnings = config_from_params({"cell": "os.system", "seq_len": "30"})
    assert cfg.cell == "simple" and cfg.seq_len == 30
    assert len(warnings) == 1 and "cell='os.system'" in warnings[0]


@pytest.mark.parametrize("cell", ["mingru", "minlstm", "lru"])
@pytest.mark.parametrize("batch", [None, 3])
def test_parallel_equals_the_sequential_scan(cell, batch):
    import jax

    cfg = RunConfig(cell=cell, seq_len=37, batch_size=batch, loss="all", carry_init="normal", hidden_size=16)
    seq = analyze(cfg, repeats=1)
    par = analyze(cfg.replace(strategy="parallel"), repeats=1)
    for s, p in zip(jax.tree.leaves(seq.param_grads), jax.tree.leaves(par.param_grads)):
        np.testing.assert_allclose(p, s, rtol=1e-5, atol=1e-5 * float(np.abs(s).max()))
    for comp in cfg.carry_components:
        np.testing.assert_allclose(par.component_grad_norms[comp], seq.component_grad_norms[comp], rtol=1e-5)
        np.testing.assert_allclose(par.carries[comp], seq.carries[comp], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(par.input_grad_norms, seq.input_grad_norms, rtol=1e-5)


def test_parallel_is_refused_for_nonlinear_cells_and_hidden_in_the_app():
    with pytest.raises(ConfigError, match="not linear in its carry"):
        RunConfig(cell="gru", strategy="parallel")
    from rnnviz.studies.comparisons import available_strategies

    assert "parallel" not in available_strategies(RunConfig(cell="lstm"))
    assert "parallel" in available_strategies(RunConfig(cell="lru"))
    at = run_app({"cell": "gru"})
    assert "parallel" not in at.selectbox(key="cfg_strategy").options
    assert any("parallel" in c.value and "not linear" in c.value for c in at.sidebar.caption)
    at = run_app({"cell": "mingru", "strategy": "parallel", "tab": "Strategies"})
    assert not at.exception and not at.error
    assert "parallel" in {t["name"] for t in figure_by_title(at, "Cost of each strategy")["data"]}

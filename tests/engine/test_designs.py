"""The modern cells (RG-LRU, sLSTM, mLSTM, Mamba's selective SSM, (Gated) DeltaNet) against
independent per-step references written from the papers' equations (designs_reference.py):
outputs, every carry component and every gradient; bfloat16 within 2 %; the xLSTM stabiliser
against the unstabilised recurrence and the stored-vs-true gradients; the closed-form Jacobians;
the RG-LRU's bounded square root; the initialisations.

Compilation is what these tests spend their time on, so each computation is one jitted call
(the references jit their step, once per step function and shape), compiled with LLVM at -O0
(``ref.jit``: the same HLO, half the compile time), the random numbers come from NumPy, and
each cell is initialised once."""

from __future__ import annotations

import functools

import designs_reference as ref
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rnnviz.engine.cells.deltanet import GatedDeltaNetCell, delta_rule_inputs
from rnnviz.engine.cells.init import recurrent_init
from rnnviz.engine.cells.mamba import SelectiveSSMCell, selective_ssm_log_decay
from rnnviz.engine.cells.rglru import RGLRUCell, bounded_sqrt, rglru_log_a
from rnnviz.engine.cells.xlstm import MLSTMCell, SLSTMCell, mlstm_true_state, slstm_true_state

H, IN, T, BATCH = 8, 3, 8, 3
# The reference tests draw the sLSTM's recurrent blocks from a normal (rnnviz's "normal"
# recurrent init): the orthogonal draw (plain-JAX Householder) takes seconds to compile, and the
# values are perturbed anyway. The per-head draw is checked in test_xlstm_inits.
NORMAL = recurrent_init("normal")

# name -> (the cell, the reference step, the kind of carry, the case whose params it shares)
CASES = {
    "rglru": (RGLRUCell(features=H), ref.rglru, "plain", None),
    "slstm": (SLSTMCell(features=H, num_heads=2, recurrent_kernel_init=NORMAL), ref.slstm, "slstm", None),
    "slstm_exp_forget": (
        SLSTMCell(features=H, num_heads=2, exponential_forget=True, recurrent_kernel_init=NORMAL),
        ref.STEPS["slstm_exp"],
        "slstm",
        "slstm",
    ),
    "mlstm": (MLSTMCell(features=H, num_heads=2), ref.mlstm, "mlstm", None),
    "mlstm_ogate_eps": (
        MLSTMCell(features=H, num_heads=2, output_gate=True, eps=1e-6),
        ref.STEPS["mlstm_eps"],
        "mlstm",
        None,
    ),
    "mamba": (SelectiveSSMCell(features=H, state_size=4), ref.selective_ssm, "plain", None),
    "mamba_low_rank": (
        SelectiveSSMCell(features=H, state_size=4, dt_rank=2),
        ref.selective_ssm,
        "plain",
        None,
    ),
    "gated_deltanet": (GatedDeltaNetCell(features=H, num_heads=2), ref.gated_deltanet, "plain", None),
    "deltanet": (
        GatedDeltaNetCell(features=H, num_heads=2, gated=False),
        ref.gated_deltanet,
        "plain",
        "gated_deltanet",
    ),
}
MAIN = ["rglru", "slstm", "mlstm", "mamba", "gated_deltanet"]  # one per cell
VARIANTS = ["slstm_exp_forget", "mlstm_ogate_eps", "mamba_low_rank", "deltanet"]  # their options


# ---- set-up -----------------------------------------------------------------------------------


def _random_carry(kind, template, rng, from_start=False):
    """A random carry of the template's shapes: n > 0 for the sLSTM (h divides by it), moderate m;
    with ``from_start``, the mLSTM's n and m as it starts them (zero), C random."""
    leaves, tree = jax.tree.flatten(template)
    draws = [rng.standard_normal(leaf.shape) for leaf in leaves]
    if kind == "slstm":  # (c, n, m, h)
        draws = [draws[0], 0.5 + np.abs(draws[1]), 0.5 * draws[2], 0.5 * draws[3]]
    elif kind == "mlstm":  # (C, n, m)
        draws = [draws[0], 0 * draws[1], 0 * draws[2]] if from_start else [draws[0], draws[1], 0.5 * draws[2]]
    else:
        draws = [0.5 * d for d in draws]
    return jax.tree.unflatten(tree, [jnp.asarray(d.astype(leaf.dtype)) for d, leaf in zip(draws, leaves)])


def _initial_params(cell, key):
    x = jnp.zeros((IN,))
    return cell.init(key, cell.initialize_carry(key, x.shape), x)["params"]


def _init(cell):
    """The cell's initial params, by one jitted init (NumPy arrays)."""
    return jax.tree.map(np.asarray, ref.jit(functools.partial(_initial_params, cell))(jax.random.key(0)))


def _param_shapes(cell):
    """The cell's params as shapes (``jax.eval_shape``: nothing compiled)."""
    return jax.eval_shape(functools.partial(_initial_params, cell), jax.random.key(0))


@functools.cache
def _float32_params(name):
    """The initial params plus N(0, 0.2²) noise, so that zero-initialised gate kernels read the
    input too; a variant that has a subset of another case's params takes that case's."""
    cell, _, _, shared = CASES[name]
    if shared is not None:
        return {k: v for k, v in _float32_params(shared).items() if k in _param_shapes(cell)}
    rng = np.random.default_rng(0)
    return jax.tree.map(lambda p: p + 0.2 * rng.standard_normal(p.shape), _init(cell))


def _setup(name, batch, dtype=jnp.float32, seed=0, from_start=False):
    """(cell, reference step, params, carry_0, xs [T, (B,) I]), all rounded to ``dtype`` (the
    carry to the cell's carry dtype); ``from_start`` as :func:`_random_carry`."""
    cell, step, kind, _ = CASES[name]
    if dtype != jnp.float32:
        cell = cell.clone(dtype=dtype, param_dtype=dtype)
    rng = np.random.default_rng(seed)
    lead = () if batch is None else (batch,)
    xs = jnp.asarray(rng.standard_normal((T,) + lead + (IN,)).astype(dtype))
    template = jax.eval_shape(lambda: cell.initialize_carry(jax.random.key(0), xs.shape[1:]))
    carry0 = _random_carry(kind, template, rng, from_start)
    params = jax.tree.map(lambda p: jnp.asarray(p.astype(dtype)), _float32_params(name))
    return cell, step, params, carry0, xs


def _scan(cell, params, carry0, xs):
    """Every carry ``[T, …]`` and every output ``[T, …]`` of a lax.scan of the cell."""

    def body(carry, x):
        carry, y = cell.apply({"params": params}, carry, x)
        return carry, (carry, y)

    _, (carries, ys) = jax.lax.scan(body, carry0, xs)
    return carries, ys


def _weights(template_carry, ys_shape, seed=1):
    """Fixed random weights (w_y, w_c) of L = Σ_t ⟨w_y[t], y_t⟩ + ⟨w_c, carry_T⟩."""
    rng = np.random.default_rng(seed)
    w_c = jax.tree.map(lambda leaf: jnp.asarray(rng.standard_normal(leaf.shape), jnp.float32), template_carry)
    return jnp.asarray(rng.standard_normal(ys_shape), jnp.float32), w_c


def _loss(run, weights, params, carry0, xs):
    """(L, (carries, ys)) of a run, for value_and_grad(has_aux=True)."""
    carries, ys = run(params, carry0, xs)
    w_y, w_c = weights
    total = jnp.sum(w_y * ys.astype(jnp.float32))
    for w, c in zip(jax.tree.leaves(w_c), jax.tree.leaves(carries)):
        total = total + jnp.sum(w * c[-1].astype(jnp.float32))
    return total, (carries, ys)


def _close(got, want, rtol, what):
    """‖got − want‖ ≤ rtol·‖want‖ (in float64)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    err, scale = np.linalg.norm(got - want), np.linalg.norm(want)
    assert err <= rtol * scale + 1e-30, f"{what}: ‖Δ‖ = {err:.3g} > {rtol}·‖ref‖ = {rtol * scale:.3g}"


def _f32(tree):
    """As float32 NumPy arrays (converted on the host: no per-shape convert to compile)."""
    return jax.tree.map(lambda a: np.asarray(a).astype(np.float32), tree)


# ---- against the references -------------------------------------------------------------------


def _compare(name, dtype=jnp.float32, rtol=1e-5, grad_rtol=None, unbatched=True, from_start=False):
    """The cell's lax.scan against the reference's Python loop, batched: outputs, every carry
    leaf at every step and ∂L/∂(every param, carry_0) of the same scalar loss, each leaf within
    ``rtol`` of its norm; with ``grad_rtol``, the gradient as one vector (all leaves) within
    ``grad_rtol`` of its norm. The reference runs in float32 on the same numbers. With
    ``unbatched``, in the same compiled call the cell runs unbatched too (``[I]`` inputs, carries
    without the batch axis) on batch row 0, which must give row 0 of the batched run;
    ``from_start`` as :func:`_random_carry`."""
    cell, step, params, carry0, xs = _setup(name, BATCH, dtype, from_start=from_start)
    run_cell = functools.partial(_scan, cell)
    weights = _weights(carry0, jax.eval_shape(run_cell, params, carry0, xs)[1].shape)
    of_cell = jax.value_and_grad(functools.partial(_loss, run_cell, weights), (0, 1), has_aux=True)
    row0 = jax.tree.map(lambda c: c[0], carry0), xs[:, 0]

    @ref.jit
    def cell_side(params, carry0, xs):
        return of_cell(params, carry0, xs), run_cell(params, *row0) if unbatched else None

    ((_, (carries, ys)), got), row0_run = cell_side(params, carry0, xs)
    want_carries, want_ys, *want = ref.loop_gradients(step, *_f32((params, carry0, xs)), *weights)
    _close(ys, want_ys, rtol, "outputs")
    for i, (g, w) in enumerate(zip(jax.tree.leaves(carries), jax.tree.leaves(want_carries))):
        assert g.dtype == jax.tree.leaves(carry0)[i].dtype  # the carry keeps its dtype through the scan
        _close(g, w, rtol, f"carry leaf {i}")
    if unbatched:
        carries_row0, ys_row0 = row0_run
        _close(ys_row0, ys[:, 0], 1e-6, "unbatched outputs")
        for i, (g, g0) in enumerate(zip(jax.tree.leaves(carries), jax.tree.leaves(carries_row0))):
            _close(g0, g[:, 0], 1e-6, f"unbatched carry leaf {i}")
    if grad_rtol is not None:
        flat = [np.concatenate([np.ravel(a) for a in jax.tree.leaves(t)]) for t in (got, want)]
        _close(*flat, grad_rtol, "∂L/∂(params, carry_0)")
        return
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(want)[0]]
    for path, g, w in zip(paths, jax.tree.leaves(got), jax.tree.leaves(want)):
        _close(g, w, rtol, f"∂L/∂{path}")


@pytest.mark.parametrize("name", MAIN + VARIANTS)
def test_cell_equals_reference_loop(name):
    """Outputs, every carry leaf at every step, and ∂L/∂(every param, carry_0) of a lax.scan of the
    cell equal the reference's loop (backpropagated through by hand), to 1e-5 of the norm; the
    unbatched cell gives the batched cell's row."""
    _compare(name)


@pytest.mark.parametrize("name", MAIN)
def test_bfloat16_within_two_percent(name):
    """bfloat16 params and compute against the float32 reference on the same (rounded) numbers:
    outputs and every carry leaf within 2 % of their norms, the whole gradient within 2 % of its
    norm. The mLSTM (its memory C, n, m in float32, its default) from the state it starts from:
    n_0 = 0, m_0 = 0, C_0 random; from any state, the next test."""
    _compare(name, jnp.bfloat16, 2e-2, grad_rtol=2e-2, unbatched=False, from_start=name == "mlstm")


def test_bfloat16_mlstm_from_any_state_within_four_percent():
    """From a random (n_0, m_0), bfloat16 against float32 as above: outputs and carries within 2 %,
    the gradient within 4 %. The readout C q / max(|nᵀq|, e^{−m}) is unchanged by the scale of q,
    so ∂L/∂(W_q, k, gates, n_0) are differences of nearly equal terms, and where |nᵀq| is small
    bfloat16's rounding of q and k (projected in bfloat16, as the reference's are) is amplified.
    Measured over seeds 0–5 of this test: the whole gradient within 0.7–3.8 % with the state in
    float32 (the default), 1.2–5.0 % with it in bfloat16 (``state_dtype=bfloat16``); from the
    starting state 0.5–0.9 %; every other design 0.6–1.2 % from random states."""
    _compare("mlstm", jnp.bfloat16, 2e-2, grad_rtol=4e-2, unbatched=False)


@pytest.mark.parametrize("batch", [None, BATCH])
def test_mlstm_prefix_scan_equals_the_reference_loop_with_perturbed_carries(batch):
    """The parallel strategy's form of the mLSTM (the stabiliser by a (max, +) scan, then C and
    n by a linear one), with both scans (blocked on a CPU, the full tree on a GPU): every
    carry equals the reference loop's when a random perturbation is added to the carry
    handed on at every step (as the per-step gradients' zeros are), at T = 40 with gates
    that move the stabiliser both ways."""
    from rnnviz.engine.cells.xlstm import mlstm_prefix_scan
    from rnnviz.engine.strategies.parallel import blocked_scan, full_scan

    cell, step, params, carry0, _ = _setup("mlstm", batch)
    rng = np.random.default_rng(3)
    lead = () if batch is None else (batch,)
    xs = jnp.asarray(2.0 * rng.standard_normal((40,) + lead + (IN,)), jnp.float32)
    eps = jax.tree.map(lambda c: jnp.asarray(0.3 * rng.standard_normal((40,) + c.shape), c.dtype), carry0)
    want, carry = [], carry0
    for t in range(40):  # the reference step, its carry perturbed before it is handed on
        carry, _ = ref._jitted(step)(params, carry, xs[t])
        carry = jax.tree.map(lambda c, e: c + e[t], carry, eps)
        want.append(carry)
    want = jax.tree.map(lambda *c: np.stack(c), *want)
    assert np.ptp(np.asarray(want[2])) > 1.0  # the stabiliser moved
    for scan in (blocked_scan, full_scan):
        got = ref.jit(functools.partial(mlstm_prefix_scan, scan=scan))(params, carry0, eps, xs)
        for label, g, w in zip("Cnm", got, want):
            _close(g, w, 1e-5, f"{label} ({scan.__name__})")


# ---- xLSTM: the stabiliser ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["slstm", "slstm_exp_forget", "mlstm_ogate_eps"])
def test_stabilised_equals_unstabilised(name):
    """From m_0 = 0 (stored = true), the stored trajectory mapped by true_state equals the
    paper's recurrence without a stabiliser (plain exp gates), and so do the outputs."""
    cell, _, params, carry0, xs = _setup(name, BATCH)
    if name.startswith("mlstm"):
        cell = cell.clone(eps=0.0)  # ε is added on the stored scale: only ε = 0 is invariant
    carry0 = carry0[:2] + (jnp.zeros_like(carry0[2]),) + carry0[3:]
    carries, ys = ref.jit(functools.partial(_scan, cell))(params, carry0, xs)
    if name.startswith("slstm"):
        step = ref.STEPS["slstm_exp_unstabilised" if cell.exponential_forget else "slstm_unstabilised"]
        true0 = (carry0[0], carry0[1], carry0[3])
        true = slstm_true_state(carries)
        pairs = {"c": true[0], "n": true[1], "h": true[3]}
    else:
        step, true0 = ref.mlstm_unstabilised, carry0[:2]
        true = mlstm_true_state(carries)
        pairs = {"C": true[0], "n": true[1]}
    want_carries, want_ys = ref.loop(step, params, true0, xs)
    assert float(jnp.max(jnp.abs(carries[2]))) > 0.1  # the stabiliser did move
    _close(ys, want_ys, 1e-5, "outputs")
    for (label, got), want in zip(pairs.items(), want_carries):
        _close(got, want, 1e-5, label)


@pytest.mark.parametrize("name", ["slstm", "mlstm"])
def test_true_state_gradient_is_stored_gradient_times_exp_minus_m(name):
    """For a stored carry (m ≠ 0) and L a loss of what follows that does not depend on how the
    state is stored (the outputs, and the true state at T): ∂L/∂(true c, n) = e^{−m} ∂L/∂(stored
    c, n), the true state fed back as the carry true_state(carry) (m = 0); and the cell continues
    from true_state(carry) to the same outputs."""
    cell, _, params, carry, xs = _setup(name, None)
    run = functools.partial(_scan, cell)
    true_state = slstm_true_state if name == "slstm" else mlstm_true_state
    w_y, w_c = _weights(carry, jax.eval_shape(run, params, carry, xs)[1].shape)

    def loss(carry0):
        carries, ys = run(params, carry0, xs)
        last = true_state(jax.tree.map(lambda c: c[-1], carries))
        return jnp.sum(w_y * ys) + sum(jnp.sum(w * c) for w, c in zip(jax.tree.leaves(w_c), last))

    @ref.jit
    def check(carry):
        true = true_state(carry)
        g_stored = jax.grad(lambda c, n: loss((c, n) + carry[2:]), (0, 1))(carry[0], carry[1])
        g_true = jax.grad(lambda c, n: loss((c, n) + true[2:]), (0, 1))(true[0], true[1])
        return g_stored, g_true, run(params, true, xs)[1], run(params, carry, xs)[1]

    g_stored, g_true, ys_true, ys_stored = check(carry)
    m = carry[2]
    assert float(jnp.max(jnp.abs(m))) > 0.1 and not bool(jnp.any(true_state(carry)[2]))
    _close(ys_true, ys_stored, 1e-5, "outputs")
    e_minus_m = jnp.exp(-m) if name == "slstm" else jnp.exp(-m)[..., None]  # per unit / per head
    _close(g_true[1], g_stored[1] * e_minus_m, 1e-5, "∂L/∂n")
    e_minus_m = e_minus_m if name == "slstm" else e_minus_m[..., None]
    _close(g_true[0], g_stored[0] * e_minus_m, 1e-5, "∂L/∂c")


# ---- diagonal and delta-rule Jacobians --------------------------------------------------------


@pytest.mark.parametrize("name", ["rglru", "mamba"])
def test_jacobian_is_diagonal_with_the_decays(name):
    """∂h_t/∂h_{t−1} (jax.jacobian) is diag(a_t), with ln a_t from the cell's gates (RG-LRU:
    −c r_t softplus(Λ); Mamba: Δ_t A) as the reference's gates give it; along the trajectory
    ∂h_T/∂h_0 = diag(∏_t a_t), so (1/T) ln of its diagonal is the time average of ln a_t."""
    cell, _, params, carry0, xs = _setup(name, None)
    log_a_fn = rglru_log_a if name == "rglru" else selective_ssm_log_decay
    ref_log_a = ref.rglru_log_a if name == "rglru" else ref.selective_ssm_log_decay
    size = carry0.size

    def step(h, x):
        return cell.apply({"params": params}, h, x)[0]

    @ref.jit
    def jacobians(h0):
        def body(h, x):
            return step(h, x), (jax.jacobian(step)(h, x), log_a_fn(params, x))

        _, (per_step, log_a) = jax.lax.scan(body, h0, xs)
        whole = jax.jacobian(lambda h: jax.lax.scan(lambda h, x: (step(h, x), None), h, xs)[0])(h0)
        return per_step, log_a, whole

    per_step, log_a, whole = (np.asarray(a) for a in jacobians(carry0))
    _close(log_a, jax.vmap(functools.partial(ref_log_a, params))(xs), 1e-5, "ln a_t")
    for t in range(T):
        np.testing.assert_allclose(
            per_step[t].reshape(size, size), np.diag(np.exp(log_a[t].ravel())), rtol=1e-5, atol=1e-7
        )
    whole = whole.reshape(size, size)
    np.testing.assert_array_equal(whole - np.diag(np.diag(whole)), 0.0)
    mean_log_a = log_a.mean(axis=0).ravel()
    np.testing.assert_allclose(np.log(np.diag(whole)) / T, mean_log_a, rtol=1e-4, atol=1e-6)
    assert mean_log_a.max() < 0.0  # every unit decays


@pytest.mark.parametrize("gated", [True, False])
def test_delta_rule_jacobian(gated):
    """∂vec(S_t)/∂vec(S_{t−1}) = α_t (I_{d_v} ⊗ (I − β_t k_t k_tᵀ)) per head (vec row-major over
    [d_v, d_k]), block-diagonal over heads, with α, β, k from the reference; DeltaNet: α = 1."""
    cell, _, params, carry0, xs = _setup("gated_deltanet" if gated else "deltanet", None)
    heads, d = carry0.shape[0], carry0.shape[-1]

    def step(S, x):
        return cell.apply({"params": params}, S, x)[0]

    @ref.jit
    def jacobians(S0):
        return jax.lax.scan(lambda S, x: (step(S, x), jax.jacobian(step)(S, x)), S0, xs[:3])[1]

    gates = ref.jit(jax.vmap(functools.partial(ref.deltanet_gates, params)))(xs[:3])
    alphas, betas, _, ks, _ = (np.asarray(a) for a in gates)
    if not gated:
        np.testing.assert_array_equal(alphas, 1.0)
    for t, jac in enumerate(np.asarray(jacobians(carry0))):
        jac = jac.reshape(heads, d * d, heads, d * d)
        for g in range(heads):
            M = np.eye(d) - betas[t, g] * np.outer(ks[t, g], ks[t, g])
            np.testing.assert_allclose(
                jac[g, :, g, :], alphas[t, g] * np.kron(np.eye(d), M), rtol=1e-5, atol=1e-6
            )
            for other in set(range(heads)) - {g}:
                np.testing.assert_array_equal(jac[g, :, other, :], 0.0)


# ---- the RG-LRU's bounded square root ---------------------------------------------------------


def test_bounded_sqrt_gradient_is_finite_where_autodiff_is_not():
    """At a_t → 1 (softplus(Λ) ≈ 0, so 1 − a_t² = 0 in float32) ∂L/∂params stays finite with the
    bound and is not with plain autodiff (the reference run with jnp.sqrt); the bound is 1000."""
    _, _, params, carry0, xs = _setup("rglru", None)
    params = {**params, "a_param": jnp.full_like(params["a_param"], -100.0)}

    def of_cell(p):
        return jnp.sum(_scan(RGLRUCell(features=H), p, carry0, xs)[1])

    def of_plain(p):
        return jnp.sum(jax.lax.scan(lambda h, x: ref.rglru(p, h, x, bounded=False), carry0, xs)[1])

    u = np.linspace(0.0, 1.0, 101, dtype=np.float32)

    @ref.jit
    def run(p):
        one_minus_a2 = 1.0 - jnp.exp(2.0 * rglru_log_a(p, xs[0]))
        return jax.grad(of_cell)(p), jax.grad(of_plain)(p), one_minus_a2, jax.vmap(jax.grad(bounded_sqrt))(u)

    bounded, plain, one_minus_a2, slopes = run(params)
    assert float(np.max(one_minus_a2)) == 0.0
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(bounded))
    assert not np.all(np.isfinite(plain["a_param"]))
    np.testing.assert_allclose(float(slopes[0]), 1000.0, rtol=1e-6)  # the bound, reached at u = 0
    assert float(np.max(slopes)) <= 1000.0 * (1 + 1e-6)
    np.testing.assert_allclose(slopes[1:], 0.5 / np.sqrt(u[1:]), rtol=1e-6)  # plain √'s above 1/(4·1000²)


# ---- initialisations --------------------------------------------------------------------------


def test_rglru_init_a_squared_on_the_ring():
    p = _init(RGLRUCell(features=256))
    a2 = np.exp(-2 * 8.0 * np.log1p(np.exp(p["a_param"])))  # a_t at r_t = 1, squared
    assert a2.min() >= 0.9**2 - 1e-6 and a2.max() <= 0.999**2 + 1e-6
    assert a2.max() - a2.min() > 0.1  # spread over the ring, not a point


def test_mamba_init_a_and_delta():
    p = _init(SelectiveSSMCell(features=64, state_size=5))
    np.testing.assert_allclose(-np.exp(p["A_log"]), -np.tile(np.arange(1.0, 6.0), (64, 1)), rtol=1e-6)
    delta = np.log1p(np.exp(p["dt_proj"]["bias"]))
    assert delta.min() >= 1e-3 * (1 - 1e-5) and delta.max() <= 1e-1 * (1 + 1e-5)
    assert np.log(delta.max() / delta.min()) > 3.0  # log-uniform over the two decades
    np.testing.assert_array_equal(p["D"], 1.0)
    assert np.abs(p["dt_proj"]["kernel"]).max() <= 64**-0.5
    low = _param_shapes(SelectiveSSMCell(features=64, state_size=5, dt_rank=4))
    assert low["x_proj"]["kernel"].shape == (64, 4 + 10) and low["dt_proj"]["kernel"].shape == (4, 64)


def test_xlstm_inits():
    """sLSTM: NX-AI's powerlaw_blockdependent forget bias (one block), per head 5 − 12 (j/(d−1))^0.3,
    other biases 0, recurrent blocks drawn per head; mLSTM: forget bias linspace(3, 6) over heads,
    zero gate kernels, input bias N(0, 0.1²)."""
    p = _init(SLSTMCell(features=8, num_heads=2, recurrent_kernel_init=recurrent_init("identity")))
    j = np.arange(4) / 3
    np.testing.assert_allclose(p["if"]["bias"], np.tile(5 - 12 * j**0.3, 2), rtol=1e-6, atol=1e-6)
    for g in "izo":
        np.testing.assert_array_equal(p["i" + g]["bias"], 0.0)
    # each head its own draw: identity blocks (a [8, 4] identity cut in two would leave a zero block)
    np.testing.assert_array_equal(p["hf"]["kernel"], np.stack([np.eye(4)] * 2))
    q = _init(MLSTMCell(features=64, num_heads=64))
    np.testing.assert_allclose(q["fgate"]["bias"], np.linspace(3.0, 6.0, 64), rtol=1e-6)
    np.testing.assert_array_equal(q["fgate"]["kernel"], 0.0)
    np.testing.assert_array_equal(q["igate"]["kernel"], 0.0)
    assert 0.06 < float(np.std(q["igate"]["bias"])) < 0.14
    assert "ogate" not in q


def test_deltanet_init_and_gates_in_range():
    p = _init(GatedDeltaNetCell(features=64, num_heads=16))
    a = np.exp(p["A_log"])
    assert a.min() > 0 and a.max() <= 16
    dt = np.log1p(np.exp(p["dt_bias"]))
    assert dt.min() >= 1e-3 * (1 - 1e-5) and dt.max() <= 1e-1 * (1 + 1e-5)
    x = np.random.default_rng(0).standard_normal(IN).astype(np.float32)
    g = jax.tree.map(np.asarray, ref.jit(delta_rule_inputs)(p, x))  # the cell's own gates
    assert np.all((g["alpha"] > 0) & (g["alpha"] <= 1) & (g["beta"] > 0) & (g["beta"] < 1))
    for unit in ("q", "k"):
        np.testing.assert_allclose(np.linalg.norm(g[unit], axis=-1), 1.0, rtol=1e-3)
    assert set(_param_shapes(GatedDeltaNetCell(features=8, gated=False))) == {"q", "k", "v", "b"}


@pytest.mark.parametrize("name", ["mlstm", "mamba", "gated_deltanet", "deltanet"])
def test_an_input_of_zeros_reads_the_memory(name):
    """These cells' output multiplies a projection of the current input (q; Mamba's C_t and
    u_t), so those projections have biases, as the papers' convolutions give them: at an input
    of zeros the output is then a function of the state (two states, two outputs), and with the
    biases at zero it is 0 whatever the state (why digits by pixel, which mostly end in zeros,
    stayed at chance). The biases start at zero: the cell at initialisation is the paper's."""
    cell, _, params, carry0, _ = _setup(name, None)
    projections = ("in_proj",) if name == "mamba" else ("q", "k", "v")
    for proj in projections:
        np.testing.assert_array_equal(_init(cell)[proj]["bias"], 0.0)
    _, _, kind, _ = CASES[name]
    other = _random_carry(kind, carry0, np.random.default_rng(7))
    unbiased = {k: ({**v, "bias": 0 * v["bias"]} if k in projections else v) for k, v in params.items()}

    @ref.jit
    def outputs(params, unbiased, a, b):
        x = jnp.zeros((IN,))
        return [cell.apply({"params": p}, c, x)[1] for p in (params, unbiased) for c in (a, b)]

    y_a, y_b, zero_a, zero_b = (np.asarray(y, np.float64) for y in outputs(params, unbiased, carry0, other))
    assert np.linalg.norm(y_a - y_b) > 0.1 * np.linalg.norm(y_a) > 0
    np.testing.assert_array_equal(zero_a, 0.0)
    np.testing.assert_array_equal(zero_b, 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["mlstm", "deltanet"])
def test_a_100_000_step_checkpointed_analysis_runs_for_a_matrix_memory(cell):
    # T = 100 000 under checkpoint (2·⌈√T⌉ steps of residuals) for the two cheapest matrix
    # memories (60-80 s each here beside another suite; the six designs took 16 min so: they are
    # the designs bench's long rows, rnnviz.bench.designs.long_suite). Small H and
    # B: at the perf suite's B=8, H=128 a matrix memory's trajectory alone is 100 001 × 8 × 4096
    # floats, beyond the 4 GiB budget, which says so.
    from rnnviz import RunConfig, analyze
    from rnnviz.config import BudgetError

    cfg = RunConfig(
        cell=cell, hidden_size=8, input_size=4, batch_size=2, seq_len=100_000, strategy="checkpoint"
    )
    a = analyze(cfg, repeats=1)
    assert a.log10_grad_norms.shape == (100_001,)
    assert np.isfinite(a.log10_grad_norms).all(), cell  # exact magnitudes: no underflow to -inf
    if cell in ("mlstm", "deltanet"):
        with pytest.raises(BudgetError, match="over the 4 GiB budget"):
            RunConfig(
                cell=cell,
                hidden_size=128,
                input_size=32,
                batch_size=8,
                seq_len=100_000,
                strategy="checkpoint",
            )


def test_on_a_scalar_input_the_mlstm_memory_is_three_sums_per_head():
    """With I = 1, v_t = w_v x_t + b_v and k_t ∝ w_k x_t + b_k, so every write v_t k_tᵀ is
    x_t² w_v w_kᵀ + x_t (w_v b_kᵀ + b_v w_kᵀ) + b_v b_kᵀ: the d×d memory C_T of any sequence lies
    in the span of three fixed matrices (its gates only weight the three sums). Why the mLSTM
    learns the digits by pixel slowly (docs: what the designs learn), checked as a rank over
    many sequences; the (Gated) DeltaNet's SiLU and delta rule are not confined so."""
    cell = MLSTMCell(features=16, num_heads=2)
    rng = np.random.default_rng(0)
    x0 = jnp.zeros((1,))  # I = 1 (the other tests' cells read I = 3)
    zero = jax.tree.map(jnp.zeros_like, cell.initialize_carry(jax.random.key(0), x0.shape))
    init = jax.tree.map(np.asarray, ref.jit(lambda k: cell.init(k, zero, x0)["params"])(jax.random.key(0)))
    params = jax.tree.map(lambda p: p + 0.3 * rng.standard_normal(p.shape), init)
    xs = jnp.asarray(rng.standard_normal((40, 100, 1)), jnp.float32)  # [T, sequences, I = 1]

    @ref.jit
    def memories(params, xs):
        def body(carry, x):
            return cell.apply({"params": params}, carry, x)[0], None

        batch = jax.tree.map(lambda c: jnp.broadcast_to(c, (xs.shape[1],) + c.shape), zero)
        return jax.lax.scan(body, batch, xs)[0][0]  # C_T [sequences, heads, d, d]

    c = np.asarray(memories(params, xs), np.float64)
    for head in range(c.shape[1]):
        s = np.linalg.svd(c[:, head].reshape(c.shape[0], -1), compute_uv=False)
        assert s[2] > 1e-4 * s[0] and s[3] < 1e-5 * s[0], s[:5] / s[0]

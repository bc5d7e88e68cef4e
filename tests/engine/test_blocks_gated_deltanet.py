"""The Gated DeltaNet layer (rnnviz.engine.blocks.gated_deltanet) against transformers'
``Qwen3NextGatedDeltaNet`` module with random weights: its output (transformers' chunked rule,
T across and not a multiple of its 64-step chunks), every gradient (parameters and input), the
state after every step against ``torch_recurrent_gated_delta_rule`` run one step at a time, and
the state gradients against torch's autograd through that loop; ``layer_step`` against the
trajectory; a step's Jacobian against its closed form α (I − β k kᵀ)."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gated_delta_reference import stepwise_rule

from rnnviz.engine.blocks import gated_deltanet

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
qwen3_next = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")

B, D = 2, 16
CASES = {  # name: (linear sizes, T)
    # 2 key heads of 4 serving 4 value heads of 6 (r = 2); 70 steps: one chunk of 64 and 6 more
    "grouped_heads": (
        dict(
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=4,
            linear_value_head_dim=6,
            linear_conv_kernel_dim=3,
        ),
        70,
    ),
    # one value head per key head, d_k > d_v, the default 4 taps, fewer steps than taps × 3
    "one_to_one": (
        dict(
            linear_num_key_heads=3,
            linear_num_value_heads=3,
            linear_key_head_dim=8,
            linear_value_head_dim=4,
            linear_conv_kernel_dim=4,
        ),
        11,
    ),
}


def _rel(a, b) -> float:
    """‖a − b‖ / ‖b‖."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def _module(sizes: dict, seed: int = 0):
    """transformers' layer at its initialisation, every parameter then moved by N(0, 0.3²) so
    that the unit norm weight and the dt bias of ones matter."""
    torch.manual_seed(seed)
    config = qwen3_next.Qwen3NextConfig(
        hidden_size=D, num_hidden_layers=1, layer_types=["linear_attention"], **sizes
    )
    module = qwen3_next.Qwen3NextGatedDeltaNet(config, 0).eval()
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))
    spec = SimpleNamespace(**sizes, rms_norm_eps=config.rms_norm_eps)
    return module, spec


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    """One configuration: torch's answers (chunked and step by step) and JAX's."""
    sizes, steps = CASES[request.param]
    module, spec = _module(sizes)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(B, steps, D)).astype(np.float32)
    weights = rng.normal(size=(B, steps, D)).astype(np.float32)  # the loss Σ out ⊙ W

    with torch.no_grad():
        chunked = module(torch.from_numpy(x)).numpy()
    states, zeros = [], []
    patch = pytest.MonkeyPatch()
    patch.setattr(qwen3_next, "torch_chunk_gated_delta_rule", stepwise_rule(states, zeros))
    xt = torch.from_numpy(x).requires_grad_(True)
    try:
        out = module(xt)
        (out * torch.from_numpy(weights)).sum().backward()
    finally:
        patch.undo()

    params = {k: jnp.asarray(v.detach().numpy()) for k, v in module.state_dict().items()}
    probe = jnp.zeros(
        (B, steps, spec.linear_num_value_heads, spec.linear_key_head_dim, spec.linear_value_head_dim)
    )

    def loss(params, x, probe):
        out, trajectory = gated_deltanet.layer(spec, params, x, probe)
        return jnp.sum(out * jnp.asarray(weights)), (out, trajectory)

    grads, (out_jax, trajectory) = jax.jit(jax.grad(loss, (0, 1, 2), has_aux=True))(
        params, jnp.asarray(x), probe
    )

    def loss_unprobed(params, x):  # what training runs: no probe, no states, the chunked form
        out, trajectory = gated_deltanet.layer(spec, params, x, None, chunked=True)
        assert trajectory is None
        return jnp.sum(out * jnp.asarray(weights)), out

    unprobed_grads, unprobed_out = jax.jit(jax.grad(loss_unprobed, (0, 1), has_aux=True))(
        params, jnp.asarray(x)
    )
    return SimpleNamespace(
        name=request.param,
        spec=spec,
        steps=steps,
        chunked=chunked,
        stepwise=out.detach().numpy(),
        states=torch.stack(states, dim=1).numpy(),  # [B, T, n_v, d_k, d_v]
        state_grads=torch.stack([z.grad for z in zeros], dim=1).numpy(),
        param_grads={name: p.grad.numpy() for name, p in module.named_parameters()},
        x_grad=xt.grad.numpy(),
        params=params,
        out=out_jax,
        trajectory=trajectory,
        grads=grads,
        unprobed_out=unprobed_out,
        unprobed_grads=unprobed_grads,
    )


def test_output_matches_transformers_chunked_layer(case):
    err = _rel(case.out, case.chunked)
    print(
        f"{case.name}: output rel {err:.2e}, max abs {np.abs(np.asarray(case.out) - case.chunked).max():.2e}"
    )
    assert err < 1e-4
    assert _rel(case.stepwise, case.chunked) < 1e-4  # the stand-in computes the same layer


def test_the_chunked_form_matches_transformers_layer_and_its_gradients(case):
    """Without a probe or states the layer runs :func:`chunked_delta_rule`: the same output and
    gradients as transformers' module and torch's autograd."""
    errs = {name: _rel(case.unprobed_grads[0][name], case.param_grads[name]) for name in case.param_grads}
    errs["x"] = _rel(case.unprobed_grads[1], case.x_grad)
    errs["out"] = _rel(case.unprobed_out, case.chunked)
    worst = max(errs, key=errs.get)
    print(f"{case.name}: chunked form, worst {worst} rel {errs[worst]:.2e}")
    assert errs[worst] < 1e-4, worst


@pytest.mark.parametrize("steps, chunk", [(1, 4), (7, 4), (16, 16), (33, 16), (70, 64)])
def test_the_chunked_rule_is_the_step_by_step_rule_in_float64(steps, chunk):
    """Outputs and every input's gradient equal :func:`delta_rule`'s to rounding, T a
    multiple of the chunk or not, one chunk or several, α near 0 (long memory cut) and near 1."""
    with jax.enable_x64():
        keys = jax.random.split(jax.random.key(steps), 6)
        shape = (2, steps, 3)
        inputs = {
            "alpha": jax.nn.sigmoid(4 * jax.random.normal(keys[0], shape, jnp.float64)),
            "beta": jax.nn.sigmoid(jax.random.normal(keys[1], shape, jnp.float64)),
            "k": gated_deltanet.l2_normalised(jax.random.normal(keys[2], shape + (5,), jnp.float64)),
            "v": jax.random.normal(keys[3], shape + (4,), jnp.float64),
        }
        q = gated_deltanet.l2_normalised(jax.random.normal(keys[4], shape + (5,), jnp.float64)) / 5**0.5
        w = jax.random.normal(keys[5], shape + (4,), jnp.float64)
        stepwise = lambda i, q: jnp.sum(gated_deltanet.delta_rule(i, q, None)[0] * w)  # noqa: E731
        chunked = lambda i, q: jnp.sum(gated_deltanet.chunked_delta_rule(i, q, chunk) * w)  # noqa: E731
        want = jax.jit(lambda i, q: gated_deltanet.delta_rule(i, q, None)[0])(inputs, q)
        got = jax.jit(gated_deltanet.chunked_delta_rule, static_argnums=2)(inputs, q, chunk)
        assert got.dtype == jnp.float64
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        grads_want = jax.jit(jax.grad(stepwise, (0, 1)))(inputs, q)
        grads_got = jax.jit(jax.grad(chunked, (0, 1)))(inputs, q)
        for a, b in zip(jax.tree.leaves(grads_got), jax.tree.leaves(grads_want)):
            np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)  # 1/α of near-0 α: rounding grows


def test_the_chunked_rule_is_finite_where_a_decay_underflows_to_zero():
    """α = 0 (exp of a large negative exponent in float32) wipes the state at once, in both forms."""
    keys = jax.random.split(jax.random.key(3), 5)
    shape = (2, 20, 2)
    alpha = jax.nn.sigmoid(jax.random.normal(keys[0], shape)).at[:, 5].set(0.0).at[0, 12].set(0.0)
    inputs = {
        "alpha": alpha,
        "beta": jax.nn.sigmoid(jax.random.normal(keys[1], shape)),
        "k": gated_deltanet.l2_normalised(jax.random.normal(keys[2], shape + (4,))),
        "v": jax.random.normal(keys[3], shape + (3,)),
    }
    q = gated_deltanet.l2_normalised(jax.random.normal(keys[4], shape + (4,))) / 2
    got = jax.jit(gated_deltanet.chunked_delta_rule, static_argnums=2)(inputs, q, 16)
    grads = jax.jit(jax.grad(lambda i: jnp.sum(gated_deltanet.chunked_delta_rule(i, q, 16) ** 2)))(inputs)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
    want = jax.jit(lambda i, q: gated_deltanet.delta_rule(i, q, None)[0])(inputs, q)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_unit_lower_inverse_inverts():
    m = jnp.tril(jax.random.normal(jax.random.key(0), (3, 16, 16)), -1) + jnp.eye(16)[None]
    np.testing.assert_allclose(
        gated_deltanet.unit_lower_inverse(m) @ m, np.broadcast_to(np.eye(16), m.shape), atol=1e-4
    )


def test_unit_lower_inverse_has_the_gradient_of_the_inverse():
    """In float64, the hand-written reverse pass against NumPy's inverse of the strict lower
    triangle by central differences: M's entries on and above the diagonal are not read, so
    they get no gradient."""
    with jax.enable_x64():
        key = jax.random.split(jax.random.key(1), 2)
        m = jnp.tril(jax.random.normal(key[0], (2, 8, 8), jnp.float64) / 3, -1) + jnp.eye(8)[None]
        weights = jax.random.normal(key[1], (2, 8, 8), jnp.float64)
        grad = np.asarray(jax.grad(lambda m: jnp.sum(weights * gated_deltanet.unit_lower_inverse(m)))(m))
        assert np.all(np.triu(grad) == 0.0)

        def loss(m: np.ndarray) -> float:
            full = np.tril(m, -1) + np.eye(8)  # as the inverse reads it
            return float(np.sum(np.asarray(weights) * np.linalg.inv(full)))

        eps, m0 = 1e-6, np.asarray(m)
        for b, i, j in [(0, 1, 0), (0, 7, 3), (1, 5, 4), (1, 7, 0)]:
            up, down = m0.copy(), m0.copy()
            up[b, i, j] += eps
            down[b, i, j] -= eps
            fd = (loss(up) - loss(down)) / (2 * eps)
            assert abs(grad[b, i, j] - fd) <= 1e-7 * max(1.0, abs(fd)), (b, i, j)


def test_state_after_every_step_matches_the_reference_recurrence(case):
    states = case.trajectory.states["S"]
    assert states.shape == case.states.shape
    errs = [_rel(states[:, t], case.states[:, t]) for t in range(case.steps)]
    print(f"{case.name}: worst state rel {max(errs):.2e} at step {int(np.argmax(errs))}")
    assert max(errs) < 1e-4
    assert np.abs(case.states[:, -1]).max() > 0.1  # the state holds something worth comparing


def test_state_gradients_match_torch_autograd(case):
    got, want = case.grads[2], case.state_grads
    errs = [_rel(got[:, t], want[:, t]) for t in range(case.steps)]
    print(f"{case.name}: worst state gradient rel {max(errs):.2e} at step {int(np.argmax(errs))}")
    assert max(errs) < 1e-4
    assert np.abs(want[:, 0]).max() > 0  # the first step reaches the loss through every later one


def test_parameter_and_input_gradients_match_torch(case):
    errs = {name: _rel(case.grads[0][name], case.param_grads[name]) for name in case.param_grads}
    errs["x"] = _rel(case.grads[1], case.x_grad)
    worst = max(errs, key=errs.get)
    print(f"{case.name}: worst gradient {worst} rel {errs[worst]:.2e}")
    assert set(case.grads[0]) == set(case.param_grads)
    assert errs[worst] < 1e-4, worst


def test_layer_step_reproduces_the_trajectory(case):
    states, inputs = case.trajectory.states["S"], case.trajectory.inputs
    previous = jnp.concatenate([jnp.zeros_like(states[:, :1]), states[:, :-1]], axis=1)
    stepped = jax.vmap(lambda s, i: gated_deltanet.layer_step({"S": s}, i)["S"], in_axes=(1, 1), out_axes=1)(
        previous, inputs
    )
    assert _rel(stepped, states) < 1e-6


def test_a_steps_jacobian_is_the_closed_form(case):
    """∂S_t/∂S_{t−1} = α_t (I − β_t k_t k_tᵀ) on the key axis of every column, per head: not diagonal."""
    t, inputs = case.steps // 2, case.trajectory.inputs
    at = {name: value[:1, t] for name, value in inputs.items()}
    s = case.trajectory.states["S"][:1, t - 1]
    jac = jax.jacobian(lambda s: gated_deltanet.layer_step({"S": s}, at)["S"])(s)[0, :, :, :, 0]
    alpha, beta, k = (np.asarray(at[n][0], np.float64) for n in ("alpha", "beta", "k"))
    coupling = 0.0
    for h in range(k.shape[0]):
        block = np.eye(k.shape[1]) - beta[h] * np.outer(k[h], k[h])
        for col in range(s.shape[-1]):
            got = np.asarray(jac[h, :, col, h, :, col], np.float64)
            np.testing.assert_allclose(got, alpha[h] * block, rtol=1e-5, atol=1e-6 * alpha[h])
        coupling = max(coupling, np.abs(block - np.diag(np.diag(block))).max())
    assert coupling > 1e-2  # keys mix: the Jacobian is not diagonal

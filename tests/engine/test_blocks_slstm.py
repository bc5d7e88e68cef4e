"""The sLSTM block (rnnviz.engine.blocks.slstm) against NX-AI's ``xlstm`` package's own
``sLSTMBlock`` with the vanilla backend, weights copied from its state dict: its output, every
gradient (parameters and input), the state (c, n, m, h) after every step and its gradient
through torch's autograd (the package's step run one step at a time); ``layer_step`` against
the trajectory; the state dict's two layouts; and ``init`` against the module's own
initialisation, tensor by tensor over seeds."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from slstm_reference import STATES, assert_same_init, package_configs, rel, stepwise_forward, to_heads

from rnnviz.engine.blocks import slstm

torch = pytest.importorskip("torch")
block_module = pytest.importorskip("xlstm.blocks.slstm.block")
cell_module = pytest.importorskip("xlstm.blocks.slstm.cell")

B, D = 2, 16
CASES = {  # name: (spec, T); T prime, not a multiple of the heads, the taps or the batch
    "one_head_no_conv": (slstm.SLSTMSpec(D, num_heads=1, conv1d_kernel_size=0), 13),
    "four_heads_conv": (slstm.SLSTMSpec(D, num_heads=4, conv1d_kernel_size=4, num_blocks=3, block_idx=1), 13),
    "four_heads_no_conv": (slstm.SLSTMSpec(D, num_heads=4, conv1d_kernel_size=0, proj_factor=4 / 3), 11),
    # fewer steps than twice the taps; no feed-forward branch
    "one_head_conv_no_ffn": (slstm.SLSTMSpec(D, num_heads=1, conv1d_kernel_size=4, proj_factor=None), 7),
}


def _module(spec: slstm.SLSTMSpec):
    """The package's block with the vanilla backend at its own initialisation (float32)."""
    layer, ffn = package_configs(spec)
    config = block_module.sLSTMBlockConfig(
        slstm=layer, feedforward=ffn, _num_blocks=spec.num_blocks, _block_idx=spec.block_idx
    )
    return block_module.sLSTMBlock(config)


def _state(module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    """One configuration: the package's answers (the block as it runs, and step by step) and JAX's.
    Every parameter is moved by N(0, 0.3²) from the initialisation, so that the recurrent kernel
    (0 at init) and the norms' weights (0: a scale of 1) matter."""
    spec, steps = CASES[request.param]
    torch.manual_seed(0)
    module = _module(spec)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))
    rng = np.random.default_rng(1)
    x = rng.normal(size=(B, steps, D)).astype(np.float32)
    weights = rng.normal(size=(B, steps, D)).astype(np.float32)  # the loss Σ out ⊙ W

    xt = torch.from_numpy(x).requires_grad_(True)
    out = module(xt)
    (out * torch.from_numpy(weights)).sum().backward()
    param_grads = {name: p.grad.numpy().copy() for name, p in module.named_parameters()}
    module.zero_grad()

    states, zeros = [], []
    patch = pytest.MonkeyPatch()
    patch.setattr(cell_module, "slstm_forward", stepwise_forward(states, zeros))
    try:
        stepped = module(torch.from_numpy(x))
        (stepped * torch.from_numpy(weights)).sum().backward()
    finally:
        patch.undo()

    params = slstm.params_from_state_dict(spec, _state(module))
    d = D // spec.num_heads
    probe = {name: jnp.zeros((B, steps, spec.num_heads, d)) for name in STATES}

    def loss(params, x, probe):
        out, trajectory = slstm.block(spec, params, x, probe)
        return jnp.sum(out * jnp.asarray(weights)), (out, trajectory)

    grads, (out_jax, trajectory) = jax.jit(jax.grad(loss, (0, 1, 2), has_aux=True))(
        params, jnp.asarray(x), probe
    )
    return SimpleNamespace(
        name=request.param,
        spec=spec,
        steps=steps,
        reference=out.detach().numpy(),
        stepped=stepped.detach().numpy(),
        states=to_heads(torch.stack(states, dim=1).numpy(), spec.num_heads),
        state_grads=to_heads(torch.stack([z.grad for z in zeros], dim=1).numpy(), spec.num_heads),
        param_grads=slstm.params_from_state_dict(spec, param_grads),
        x_grad=xt.grad.numpy(),
        params=params,
        out=out_jax,
        trajectory=trajectory,
        grads=grads,
    )


def test_output_matches_the_reference_block(case):
    err = rel(case.out, case.reference)
    print(f"{case.name}: output rel {err:.2e}")
    assert err < 1e-4
    assert rel(case.stepped, case.reference) < 1e-6  # the stand-in computes the same block


def test_parameter_and_input_gradients_match_torch(case):
    errs = {name: rel(case.grads[0][name], case.param_grads[name]) for name in case.param_grads}
    errs["x"] = rel(case.grads[1], case.x_grad)
    worst = max(errs, key=errs.get)
    print(f"{case.name}: input gradient rel {errs['x']:.2e}, worst {worst} rel {errs[worst]:.2e}")
    assert set(case.grads[0]) == set(case.param_grads) == set(case.params)
    assert errs[worst] < 1e-4, worst


def test_state_after_every_step_matches_the_reference(case):
    """c, n, m and h after every step; m after the first is ĩ₀ (the reference's n = 0 branch)."""
    states = case.trajectory.states
    errs = {
        name: max(rel(states[name][:, t], case.states[name][:, t]) for t in range(case.steps))
        for name in STATES
    }
    print(f"{case.name}: worst state rel {errs}")
    assert max(errs.values()) < 1e-4
    first_input = case.trajectory.inputs["x"][:, 0, 0] + case.params["xlstm.slstm_cell.bias"][None, :, 0]
    np.testing.assert_allclose(states["m"][:, 0], first_input, rtol=1e-6, atol=1e-6)
    assert np.abs(case.states["m"][:, -1]).max() > 0.1  # the stabiliser moves


def test_state_gradients_match_torch_autograd(case):
    for name in STATES:
        got, want = case.grads[2][name], case.state_grads[name]
        errs = [rel(got[:, t], want[:, t]) for t in range(case.steps)]
        print(f"{case.name}: worst ∂L/∂{name} rel {max(errs):.2e} at step {int(np.argmax(errs))}")
        assert max(errs) < 1e-4, name
    assert np.abs(case.state_grads["c"][:, 0]).max() > 0  # the first step reaches the loss


def test_layer_step_reproduces_the_trajectory(case):
    states, inputs = case.trajectory.states, case.trajectory.inputs
    cell = {
        "recurrent_kernel": case.params["xlstm.slstm_cell.recurrent_kernel"],
        "bias": case.params["xlstm.slstm_cell.bias"],
    }
    previous = {k: jnp.concatenate([jnp.zeros_like(v[:, :1]), v[:, :-1]], axis=1) for k, v in states.items()}
    stepped = jax.vmap(lambda s, i: slstm.layer_step(cell, s, i), in_axes=(1, 1), out_axes=1)(
        previous, inputs
    )
    for name in STATES:
        assert rel(stepped[name], states[name]) < 1e-6, name


def test_the_state_dict_reads_as_the_reference_proxies():
    """The vanilla layouts read as ``recurrent_kernel[h, in, gate, out]`` and ``bias[h, gate, j]``
    (the module's ``ParameterProxy`` views), and so do the cuda backend's (``cell.py``,
    ``sLSTMCell_cuda._recurrent_kernel_ext2int`` and ``_bias_ext2int``: plain reshapes)."""
    spec = slstm.SLSTMSpec(D, num_heads=4, recurrent_weight_init="standard", bias_init="standard")
    torch.manual_seed(0)
    module, d = _module(spec), D // spec.num_heads
    cell = module.xlstm.slstm_cell
    kernel, bias = cell.recurrent_kernel[:].numpy(), cell.bias[:].numpy()
    assert kernel.shape == (4, d, 4, d) and bias.shape == (4, 4, d)
    state = _state(module)
    params = slstm.params_from_state_dict(spec, state)
    np.testing.assert_array_equal(params["xlstm.slstm_cell.recurrent_kernel"], kernel)
    np.testing.assert_array_equal(params["xlstm.slstm_cell.bias"], bias)
    cuda = {**state, "xlstm.slstm_cell._recurrent_kernel_": kernel.reshape(4, d, 4 * d)}
    cuda["xlstm.slstm_cell._bias_"] = bias.reshape(-1)
    from_cuda = slstm.params_from_state_dict(spec, cuda)
    assert all(np.array_equal(from_cuda[k], params[k]) for k in params)


INIT_SPECS = {
    # the reference's defaults in a stack: power-law forget bias of block 1 of 3, zero recurrence
    "powerlaw": slstm.SLSTMSpec(64, num_heads=4, conv1d_kernel_size=4, num_blocks=3, block_idx=1),
    "standard": slstm.SLSTMSpec(
        64, num_heads=2, conv1d_kernel_size=3, bias_init="standard", recurrent_weight_init="standard"
    ),
    "small_init": slstm.SLSTMSpec(
        32, num_heads=4, conv1d_kernel_size=0, bias_init="small_init", proj_factor=None
    ),
}
SEEDS = 12


@pytest.mark.parametrize("name", list(INIT_SPECS))
def test_init_matches_the_reference_initialisation(name):
    """Per tensor, over SEEDS draws pooled (``slstm_reference.assert_same_init``)."""
    spec = INIT_SPECS[name]
    theirs = []
    for seed in range(SEEDS):
        torch.manual_seed(seed)
        theirs.append(slstm.params_from_state_dict(spec, _state(_module(spec))))
    keys = jax.random.split(jax.random.key(0), SEEDS)
    assert_same_init(jax.jit(jax.vmap(lambda k: slstm.init(spec, key=k)))(keys), theirs)

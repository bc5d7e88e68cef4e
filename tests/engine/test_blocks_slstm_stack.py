"""The stack of sLSTM blocks (rnnviz.engine.blocks.slstm_stack) against NX-AI's ``xlstm``
package's own ``xLSTMBlockStack`` (every block an sLSTM block, vanilla backend, float32),
weights copied from its state dict: the output, every parameter's and the input's gradient;
the stream probes' gradients against zeros added before each block and the final norm
(forward pre-hooks); each block's state (c, n, m, h) after every step and its gradient through
torch's autograd (the package's step run one step at a time); ``layer_step`` against each
trajectory; ``init_params`` against the stack's own initialisation over seeds, the forget bias by
depth; and ``analyze_model`` on the family, registered, against ``jax.grad`` of the probes."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from slstm_reference import STATES, assert_same_init, package_configs, rel, stepwise_forward, to_heads

from rnnviz.engine.blocks import Probes, slstm_stack
from rnnviz.engine.blocks.registry import BLOCKS
from rnnviz.engine.blocks.slstm_stack import SLSTMStackSpec

torch = pytest.importorskip("torch")
cell_module = pytest.importorskip("xlstm.blocks.slstm.cell")
from xlstm.blocks.slstm.block import sLSTMBlockConfig  # noqa: E402
from xlstm.xlstm_block_stack import xLSTMBlockStack, xLSTMBlockStackConfig  # noqa: E402

B, D = 2, 16
STEPS = {1: 13, 2: 7, 3: 11}  # prime: not a multiple of the heads, the taps, the blocks or the batch
VARIANTS = {  # (blocks, heads, taps): what else differs from the defaults
    # fewer steps than twice the taps; no feed-forward branch and no post-blocks norm
    (2, 1, 4): {"proj_factor": None, "add_post_blocks_norm": False},
    (2, 4, 0): {"proj_factor": 4 / 3},
}
CASES = {  # name: (spec, T), every number of blocks with one and four heads, with and without the conv
    f"{blocks}_blocks_{heads}_heads_{'conv' if taps else 'no_conv'}": (
        SLSTMStackSpec(D, blocks, heads, taps, **VARIANTS.get((blocks, heads, taps), {})),
        STEPS[blocks],
    )
    for blocks in (1, 2, 3)
    for heads in (1, 4)
    for taps in (0, 4)
}


def _module(spec: SLSTMStackSpec, steps: int = 16) -> xLSTMBlockStack:
    """The package's stack with the vanilla backend at its own initialisation (float32)."""
    layer, ffn = package_configs(spec)
    config = xLSTMBlockStackConfig(
        slstm_block=sLSTMBlockConfig(slstm=layer, feedforward=ffn),
        slstm_at="all",
        num_blocks=spec.num_blocks,
        embedding_dim=spec.embedding_dim,
        context_length=steps,
        add_post_blocks_norm=spec.add_post_blocks_norm,
    )
    return xLSTMBlockStack(config)


def _state(module) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy() for k, v in module.state_dict().items()}


def _stream_zeros(module: xLSTMBlockStack, shape: tuple) -> tuple[list, list]:
    """Zeros ``[B, T, D]`` (to be differentiated) added to each block's input and to the final
    norm's, by forward pre-hooks: ``(zeros, hook handles)``."""
    zeros, handles = [], []
    for target in [*module.blocks, module.post_blocks_norm]:
        zeros.append(torch.zeros(shape, requires_grad=True))
        handles.append(target.register_forward_pre_hook(lambda _, args, z=zeros[-1]: (args[0] + z,)))
    return zeros, handles


def _torch_answers(spec: SLSTMStackSpec, module, x: np.ndarray, weights: np.ndarray) -> SimpleNamespace:
    """The package's stack as it runs (output, every gradient), then stepped with zeros on the
    stream and the states (their gradients, the states after every step)."""
    xt = torch.from_numpy(x).requires_grad_(True)
    out = module(xt)
    (out * torch.from_numpy(weights)).sum().backward()
    param_grads = {name: p.grad.numpy().copy() for name, p in module.named_parameters()}
    module.zero_grad()

    states, zeros = [], []
    stream, handles = _stream_zeros(module, x.shape)
    patch = pytest.MonkeyPatch()
    patch.setattr(cell_module, "slstm_forward", stepwise_forward(states, zeros))
    try:
        stepped = module(torch.from_numpy(x))
        (stepped * torch.from_numpy(weights)).sum().backward()
    finally:
        patch.undo()
        for handle in handles:
            handle.remove()
    steps, heads = x.shape[1], spec.num_heads
    per_block = [slice(k * steps, (k + 1) * steps) for k in range(spec.num_blocks)]  # blocks run in turn
    return SimpleNamespace(
        out=out.detach().numpy(),
        stepped=stepped.detach().numpy(),
        param_grads=slstm_stack.params_from_state_dict(spec, param_grads),
        x_grad=xt.grad.numpy(),
        stream_grads=[z.grad.numpy() for z in stream],
        states=[to_heads(torch.stack(states[s], dim=1).numpy(), heads) for s in per_block],
        state_grads=[
            to_heads(torch.stack([z.grad for z in zeros[s]], dim=1).numpy(), heads) for s in per_block
        ],
    )


def _zero_probes(spec: SLSTMStackSpec, steps: int) -> Probes:
    stream = tuple(jnp.zeros((B, steps, D)) for _ in range(spec.num_blocks + 1))
    states = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), slstm_stack.state_shapes(spec, B, steps))
    return Probes(stream, states)


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    """One configuration: the package's answers and JAX's. Every parameter is moved by
    N(0, 0.3²) from the initialisation, so that the recurrent kernels (0 at init) and the norms'
    weights (0: a scale of 1) matter."""
    spec, steps = CASES[request.param]
    torch.manual_seed(0)
    module = _module(spec, steps)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.3 * torch.randn_like(p))
    rng = np.random.default_rng(1)
    x = rng.normal(size=(B, steps, D)).astype(np.float32)
    weights = rng.normal(size=(B, steps, D)).astype(np.float32)  # the loss Σ out ⊙ W
    theirs = _torch_answers(spec, module, x, weights)

    params = slstm_stack.params_from_state_dict(spec, _state(module))

    def loss(params, x, probes):
        out, trajectories = slstm_stack.forward(spec, params, x, probes, with_states=True)
        return jnp.sum(out * jnp.asarray(weights)), (out, trajectories)

    grads, (out, trajectories) = jax.jit(jax.grad(loss, (0, 1, 2), has_aux=True))(
        params, jnp.asarray(x), _zero_probes(spec, steps)
    )
    return SimpleNamespace(
        name=request.param,
        spec=spec,
        steps=steps,
        theirs=theirs,
        params=params,
        out=out,
        trajectories=trajectories,
        grads=grads,
    )


def test_output_matches_the_reference_stack(case):
    err = rel(case.out, case.theirs.out)
    print(f"{case.name}: output rel {err:.2e}")
    assert case.out.shape == (B, case.steps, D) and case.out.dtype == jnp.float32
    assert err < 1e-4
    assert rel(case.theirs.stepped, case.theirs.out) < 1e-6  # the stand-in computes the same stack


def test_parameter_and_input_gradients_match_torch(case):
    theirs = case.theirs
    errs = {name: rel(case.grads[0][name], theirs.param_grads[name]) for name in theirs.param_grads}
    errs["x"] = rel(case.grads[1], theirs.x_grad)
    worst = max(errs, key=errs.get)
    print(f"{case.name}: input gradient rel {errs['x']:.2e}, worst {worst} rel {errs[worst]:.2e}")
    assert set(case.grads[0]) == set(theirs.param_grads) == set(case.params)
    assert errs[worst] < 1e-4, worst


def test_stream_probe_gradients_match_torch(case):
    """Row ℓ: ∂L/∂x^{(ℓ)} entering block ℓ; row L: the final norm's input (row 0 is ∂L/∂inputs)."""
    stream = case.grads[2].stream
    errs = [rel(stream[k], case.theirs.stream_grads[k]) for k in range(case.spec.num_blocks + 1)]
    print(f"{case.name}: stream probe gradients rel {[f'{e:.1e}' for e in errs]}")
    assert max(errs) < 1e-4
    assert rel(stream[0], case.grads[1]) < 1e-6  # the probe on the inputs is the inputs' gradient


def test_states_and_their_gradients_match_the_stepped_reference(case):
    """Each block's c, n, m and h after every step, and ∂L/∂state_t (the state probes), per step."""
    worst = {}
    for k in range(case.spec.num_blocks):
        ours, theirs = case.trajectories[k].states, case.theirs.states[k]
        got, want = case.grads[2].states[k], case.theirs.state_grads[k]
        for name in STATES:
            worst[f"{k}.{name}"] = max(rel(ours[name][:, t], theirs[name][:, t]) for t in range(case.steps))
            worst[f"∂{k}.{name}"] = max(rel(got[name][:, t], want[name][:, t]) for t in range(case.steps))
        assert np.abs(want["c"][:, 0]).max() > 0  # the first step reaches the loss
    name = max(worst, key=worst.get)
    print(f"{case.name}: worst state or state-gradient rel {worst[name]:.2e} ({name})")
    assert worst[name] < 1e-4, name


def test_layer_step_reproduces_each_trajectory(case):
    for k, (states, inputs) in enumerate(case.trajectories):
        previous = {
            n: jnp.concatenate([jnp.zeros_like(v[:, :1]), v[:, :-1]], axis=1) for n, v in states.items()
        }
        stepped = jax.vmap(
            lambda s, i, k=k: slstm_stack.layer_step(case.spec, case.params, k, s, i),
            in_axes=(1, 1),
            out_axes=1,
        )(previous, inputs)
        for name in STATES:
            assert rel(stepped[name], states[name]) < 1e-6, (k, name)


def test_names_are_the_reference_state_dicts():
    """Every tensor named as the stack's ``state_dict`` names it, the cell's two as its proxies."""
    spec = SLSTMStackSpec(D, 2, num_heads=4)
    module = _module(spec)
    cells = {n for n in module.state_dict() if ".slstm_cell._" in n}
    proxies = {
        n.replace("._recurrent_kernel_", ".recurrent_kernel").replace("._bias_", ".bias") for n in cells
    }
    assert set(slstm_stack.init_params(spec, jax.random.key(0))) == set(module.state_dict()) - cells | proxies
    proxy = module.blocks[1].xlstm.slstm_cell.recurrent_kernel[:].detach().numpy()
    read = slstm_stack.params_from_state_dict(spec, _state(module))
    np.testing.assert_array_equal(read["blocks.1.xlstm.slstm_cell.recurrent_kernel"], proxy)


INIT_SPECS = {
    # the reference's defaults: a power-law forget bias growing with depth, zero recurrence
    "powerlaw": SLSTMStackSpec(64, 3, num_heads=4, conv1d_kernel_size=4),
    "standard": SLSTMStackSpec(
        32, 2, num_heads=2, conv1d_kernel_size=3, bias_init="standard", recurrent_weight_init="standard"
    ),
}
SEEDS = 12


@pytest.mark.parametrize("name", list(INIT_SPECS))
def test_init_matches_the_stacks_own_initialisation(name):
    """Per tensor of every block and the final norm, over SEEDS draws pooled
    (``slstm_reference.assert_same_init``)."""
    spec = INIT_SPECS[name]
    theirs = []
    for seed in range(SEEDS):
        torch.manual_seed(seed)
        theirs.append(slstm_stack.params_from_state_dict(spec, _state(_module(spec))))
    keys = jax.random.split(jax.random.key(0), SEEDS)
    assert_same_init(jax.jit(jax.vmap(lambda k: slstm_stack.init_params(spec, k)))(keys), theirs)


def test_the_forget_bias_grows_sharper_with_depth():
    """``powerlaw_blockdependent``: block ℓ's forget bias over a head's units j is
    −(−5 + 12 (j/(d−1))^{0.3 + 1.3 ℓ/(L−1)}), the reference's for each block; the deeper the
    block, the longer its units remember (the bias falls later across the units)."""
    spec = SLSTMStackSpec(32, 3, num_heads=2)
    params = slstm_stack.init_params(spec, jax.random.key(0))
    reference = _state(_module(spec))
    ramp = np.linspace(0.0, 1.0, 16)
    biases = []
    for k, power in enumerate((0.3, 0.95, 1.6)):
        bias = np.asarray(params[f"blocks.{k}.xlstm.slstm_cell.bias"])[:, 1]  # [N, d], the forget gate
        np.testing.assert_allclose(bias, np.broadcast_to(-(-5 + 12 * ramp**power), bias.shape), atol=1e-5)
        theirs = slstm_stack.params_from_state_dict(spec, reference)[f"blocks.{k}.xlstm.slstm_cell.bias"]
        np.testing.assert_allclose(bias, np.asarray(theirs)[:, 1], atol=1e-6)
        biases.append(bias[0])
    assert np.all(biases[0][1:-1] < biases[1][1:-1]) and np.all(biases[1][1:-1] < biases[2][1:-1])


def _model(spec: SLSTMStackSpec):
    """A ``Model`` of the registered family: the stack's init moved by N(0, 0.3²)."""
    from rnnviz.studies.models import Model

    params = slstm_stack.init_params(spec, jax.random.key(0))
    keys = dict(zip(params, jax.random.split(jax.random.key(1), len(params))))
    params = {n: v + 0.3 * jax.random.normal(keys[n], v.shape) for n, v in params.items()}
    return Model("slstm_stack", spec, params, "fresh")


def test_analyze_model_reads_the_probes_gradients():
    """``analyze_model`` on the registered family: its stream norms ``[L + 1, T]`` and state norms
    per block and leaf are those of ``jax.grad`` of full probes under the stack's loss
    ½ Σ_b ‖y_{b,T−1}‖²; its float64 pass (below float32's range) runs the family too."""
    from rnnviz.studies import models

    spec, steps = SLSTMStackSpec(D, 2, num_heads=4, conv1d_kernel_size=4), 9
    model = _model(spec)
    params = model.params
    inputs = np.random.default_rng(0).normal(size=(B, steps, D)).astype(np.float32)
    assert BLOCKS["slstm_stack"] is slstm_stack
    analysis = models.analyze_model(model, inputs, exact=False)

    def loss(probes):
        y = slstm_stack.forward(spec, params, jnp.asarray(inputs), probes)
        return 0.5 * jnp.sum(y[:, -1] ** 2)

    grads = jax.grad(loss)(_zero_probes(spec, steps))
    norms = lambda g: np.sqrt(np.sum(np.asarray(g, np.float64) ** 2, axis=(0, *range(2, g.ndim))))  # noqa: E731
    assert analysis.grad_norms.shape == (spec.num_blocks + 1, steps)
    np.testing.assert_allclose(analysis.grad_norms, np.stack([norms(g) for g in grads.stream]), rtol=1e-5)
    assert sorted(analysis.state_grad_norms) == [0, 1]
    for k, leaves in analysis.state_grad_norms.items():
        assert sorted(leaves) == sorted(STATES)
        for name, got in leaves.items():
            np.testing.assert_allclose(got, norms(grads.states[k][name]), rtol=1e-5, atol=1e-30)
    assert analysis.grad_norms[0, 0] > 0 and analysis.state_grad_norms[0]["c"][0] > 0
    wide = models._wide_pass(model, inputs, analysis.position, True)  # a stack at its last step: one pass
    assert wide.stream.dtype == np.float64
    np.testing.assert_allclose(wide.stream, analysis.grad_norms, rtol=2e-4, atol=1e-30)


def test_model_jacobians_takes_each_blocks_step():
    """``model_jacobians``' singular values of J_t = ∂s_t/∂s_{t−1} (the state's four leaves
    flattened) are those of ``jax.jacfwd`` of ``layer_step`` on the trajectory, block by block."""
    from rnnviz.studies.model_jacobians import model_jacobians

    spec = SLSTMStackSpec(8, 2, num_heads=2, conv1d_kernel_size=0)
    model = _model(spec)
    inputs = np.random.default_rng(2).normal(size=(1, 6, 8)).astype(np.float32)
    got = model_jacobians(model, inputs, k=3, steps=[2, 5], method="exact")
    assert got.layers == (0, 1) and got.state_dim == 4 * 8
    _, trajectories = slstm_stack.forward(spec, model.params, jnp.asarray(inputs), with_states=True)
    for k, (states, step_inputs) in enumerate(trajectories):
        for i, t in enumerate((2, 5)):
            before = {n: v[:, t - 1] for n, v in states.items()}

            def step(flat, k=k, t=t, before=before):
                parts = dict(zip(STATES, jnp.split(flat, 4)))
                state = {n: parts[n].reshape(before[n].shape) for n in STATES}
                new = slstm_stack.layer_step(spec, model.params, k, state, {"x": step_inputs["x"][:, t]})
                return jnp.concatenate([new[n].reshape(-1) for n in STATES])

            flat = jnp.concatenate([before[n].reshape(-1) for n in STATES])
            want = np.linalg.svd(np.asarray(jax.jacfwd(step)(flat)), compute_uv=False)[:3]
            np.testing.assert_allclose(got.singular_values[k, i], want, rtol=1e-4)

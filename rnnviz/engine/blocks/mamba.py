r"""Mamba and FalconMamba language models as transformers computes them, in JAX, with probes.

Follows transformers' ``models/mamba/modeling_mamba.py`` (``MambaForCausalLM``, ``MambaModel``,
``MambaBlock``, ``MambaRMSNorm``, ``MambaMixer.forward`` and its sequential scan
``mamba_selective_scan``) and ``models/falcon_mamba/modeling_falcon_mamba.py``
(``FalconMambaMixer``, ``FalconMambaWeightlessRMSNorm``). Each block is pre-norm and residual,
x ← x + Mixer(RMSNorm(x)); the mixer, over inner width I and state size N:

.. math::
    [u; z] = W_{in} x + b_{in},\quad u ← \mathrm{SiLU}(\mathrm{conv}_K(u) + b_{conv}),\quad
    [δ; B; C] = W_x u,

    Δ = \mathrm{softplus}(W_Δ δ + b_Δ),\quad A = −\exp(A_{log}),\quad
    h_t = \exp(Δ_t A) ⊙ h_{t−1} + (Δ_t B_t) ⊙ u_t,

    y_t = (h_t C_t + D ⊙ u_t) ⊙ \mathrm{SiLU}(z_t),\quad \mathrm{out} = W_{out} y + b_{out}

with conv_K depthwise and causal (K − 1 zeros in front, the first T outputs kept) and h ``[I, N]``
per example. FalconMamba normalises δ, B and C by their RMS, without weights, before use.

Subtleties kept from the reference:

* RMSNorm is ``w · x / sqrt(mean x² + ε)`` with w itself (not 1 + w), the normalisation in
  float32 and cast back to the input's dtype before the weight multiplies.
* Each block's norm reads the stream cast to the norm weight's dtype, while the residual is
  kept in float32 (``residual_in_fp32``); the final norm reads the float32 stream itself.
* The bias b_Δ is added inside the softplus, after the bias-free W_Δ δ, in the weights' dtype;
  then Δ widens, and exp(ΔA), ΔBu and the state are float32 whatever the weights. The readout
  h·C is computed in the weights' dtype, D·u in float32, the gate multiplies in float32, and
  ``out_proj`` reads the product cast back.

No attention mask: transformers' ``attention_mask`` zeroes padded positions' inputs to the mixer
and its convolution; here every position of ``inputs`` is a token.

In float32 every cast is the identity; in bfloat16 the casts follow the reference's. Float64
weights compute in float64 throughout (the reference's float32 steps widen with them), which is
what a finite-difference check needs.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from rnnviz.checkpoints.families.mamba import MambaInit, tensors, tied
from rnnviz.engine.blocks import Probes, Trajectory, init, probed, promoted, wide_dtype
from rnnviz.engine.blocks.backbone import language_model, linear, row
from rnnviz.engine.norms import robust_norm

if TYPE_CHECKING:
    from rnnviz.checkpoints.families.mamba import MambaSpec

#: Whether a step's Jacobian in the state is diagonal: ∂h_t/∂h_{t−1} = diag(exp(Δ_t A)): Δ_t reads the
#: layer's input, never its state.
STATE_IS_DIAGONAL = True


Params = dict[str, jax.Array]


def rms_norm(x: jax.Array, weight: jax.Array | None, eps: float) -> jax.Array:
    r"""RMS norm over the last axis: :math:`w ⊙ \hat x`, :math:`\hat x = x / \sqrt{\mathrm{mean}(x^2) + ε}`.

    :math:`\hat x` is computed in float32 (float64 for float64 input) and cast back to x's dtype;
    then w (if any) multiplies, in the wider of the two dtypes, as ``MambaRMSNorm``.
    FalconMamba's weight-free norm is ``weight=None``.

    Args:
        x: ``[..., D]``.
        weight: ``[D]``, or None.
        eps: ε.

    Returns:
        ``[..., D]`` in the promoted dtype of x and the weight.
    """
    xf = x.astype(wide_dtype(x.dtype))
    normed = (xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)).astype(x.dtype)
    if weight is None:
        return normed
    dtype = promoted(weight.dtype, x.dtype)
    return row(weight.astype(dtype), x.ndim) * normed.astype(dtype)


def causal_conv(u: jax.Array, weight: jax.Array, bias: jax.Array | None) -> jax.Array:
    r"""Depthwise causal convolution, torch's ``conv1d(padding=K − 1)[..., :T]``:
    :math:`c_t = \sum_{k=0}^{K−1} w_k ⊙ u_{t+k−K+1} + b` with u = 0 before t = 0.

    Args:
        u: ``[B, T, I]``.
        weight: ``[I, 1, K]`` (torch's depthwise layout).
        bias: ``[I]``, or None.

    Returns:
        ``[B, T, I]`` in u's dtype.
    """
    k_size, seq_len = weight.shape[-1], u.shape[1]
    padded = jnp.pad(u, ((0, 0), (k_size - 1, 0), (0, 0)))
    w = weight[:, 0, :].astype(u.dtype)  # [I, K]
    out = sum(padded[:, k : k + seq_len, :] * row(w[:, k], 3) for k in range(k_size))
    return out if bias is None else out + row(bias.astype(u.dtype), 3)


def ssm_step(a: jax.Array, h: jax.Array, inputs: dict[str, jax.Array]) -> jax.Array:
    r"""One step of the SSM, :math:`h_t = \exp(Δ_t A) ⊙ h_{t−1} + Δ_t u_t B_t`, with the state laid
    out ``[..., N, I]`` (the transpose of its public ``[..., I, N]``: :func:`selective_scan`).

    Args:
        a: Aᵀ = −exp(A_log)ᵀ ``[N, I]``.
        h: h_{t−1} ``[B, N, I]``.
        inputs: step t's ``delta`` Δ ``[B, I]``, ``b`` B_t ``[B, N]`` and ``u`` ``[B, I]``, in h's dtype.

    Returns:
        h_t ``[B, N, I]``.
    """
    delta, b_t, u = inputs["delta"], inputs["b"], inputs["u"]
    return jnp.exp(delta[:, None, :] * a[None]) * h + (delta * u)[:, None, :] * b_t[..., None]


def selective_scan(
    a: jax.Array, inputs: dict[str, jax.Array], c_t: jax.Array, probe: jax.Array | None, dtype: Any
) -> tuple[jax.Array, jax.Array]:
    r"""The SSM over a sequence from h₋₁ = 0, one :func:`ssm_step` at a time (plus the state
    probe p_t), and its readout C_t · h_t, with a reverse pass written by hand
    (:func:`_scan_backward`).

    Inside the scan the state is held ``[B, N, I]``: the readout's sum over N and the
    broadcasts of Δ and u then run along contiguous memory, which XLA:CPU's loops vectorise; in
    the ``[B, I, N]`` layout the same step's reverse pass ran several times slower.

    Args:
        a: Aᵀ ``[N, I]``.
        inputs: ``delta``, ``b``, ``u`` of every step, ``[B, T, I]``, ``[B, T, N]``, ``[B, T, I]``.
        c_t: C_t ``[B, T, N]``.
        probe: ``[B, T, I, N]`` added to h_t, a norm probe ``[B, T]``
            (:func:`~rnnviz.engine.blocks.probed`), or None.
        dtype: the readout's dtype (h is cast to it before the product, as transformers does).

    Returns:
        ``(readout [B, T, I], h [B, T, I, N])``, both in the state's dtype.
    """
    wide = inputs["delta"].dtype
    swap = functools.partial(jnp.swapaxes, axis1=0, axis2=1)
    if probe is None or probe.ndim == 2:  # none, or a norm probe [B, T]
        probe_t = None if probe is None else swap(probe).astype(wide)
    else:
        probe_t = jnp.transpose(probe, (1, 0, 3, 2)).astype(wide)
    steps = jax.tree.map(swap, inputs)
    readout, hs = _scan(a, steps["delta"], steps["b"], steps["u"], swap(c_t), probe_t, jnp.dtype(dtype))
    return swap(readout), jnp.transpose(hs, (1, 0, 3, 2))


@functools.partial(jax.custom_vjp, nondiff_argnums=(6,))
def _scan(a, delta, b, u, c, probe, dtype) -> tuple[jax.Array, jax.Array]:
    """:func:`selective_scan` time-major: Δ, u ``[T, B, I]``, B_t, C_t ``[T, B, N]``, the probe
    ``[T, B, N, I]``, ``[T, B]`` or None; returns the readout ``[T, B, I]`` and h ``[T, B, N, I]``."""
    return _scan_forward(a, delta, b, u, c, probe, dtype)[0]


def _scan_forward(a, delta, b, u, c, probe, dtype):
    wide = delta.dtype

    def step(h: jax.Array, xs: tuple) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        d, b_t, u_t, c_t, p = xs
        h = ssm_step(a, h, {"delta": d, "b": b_t, "u": u_t})
        h = h if p is None else probed(h, p)
        readout = jnp.sum(h.astype(dtype).astype(wide) * c_t.astype(wide)[..., None], axis=1)
        return h, (readout, h)

    h0 = jnp.zeros(c.shape[1:2] + a.shape, wide)
    _, (readout, hs) = jax.lax.scan(step, h0, (delta, b, u, c, probe))
    return (readout, hs), (a, delta, b, u, c, probe, hs)


def _scan_backward(dtype, res: tuple, cotangents: tuple) -> tuple:
    r"""The reverse pass of :func:`_scan`: one reverse scan carries the state's cotangent

    .. math::
        G_t = \bar h_t + C_t \bar r_t^\top + \exp(Δ_{t+1} A) ⊙ G_{t+1}

    (\bar r_t the readout's cotangent, \bar h_t the states'), and each step's gradients
    follow from G_t, h_{t−1} and its inputs: with D_t = G_t ⊙ h_{t−1} ⊙ exp(Δ_t A),
    ∂Δ_t = Σ_N D_t ⊙ A + u_t ⊙ Σ_N G_t B_t, ∂u_t = Δ_t ⊙ Σ_N G_t B_t,
    ∂B_t = Σ_I G_t ⊙ Δ_t u_t, ∂C_t = Σ_I h_t \bar r_t, ∂A = Σ_{t,B} D_t ⊙ Δ_t, and a probe
    receives G_t (a norm probe ‖G_t‖ per example). XLA's transpose of the forward scan computes
    the same sums; it kept more per step and ran slower (``docs/dev/benchmarks.md``).
    """
    return _reverse_for(dtype)(res, cotangents)


#: The most members of a ``jax.vmap`` whose reverse scans run one after the other, each its own
#: copy in the program; a wider batch (a sweep's points) is vmapped, which compiles once.
IN_TURN = 8


@functools.cache
def _reverse_for(dtype: Any) -> Any:
    """:func:`_reverse` for the readout's ``dtype``, batched its own way: a ``jax.vmap`` of up
    to :data:`IN_TURN` members (training's seeds, two cotangents through one VJP) runs as that
    many reverse scans one after the other, which XLA:CPU runs faster than their ``jax.vmap``
    (``docs/dev/benchmarks.md``); a wider one as ``jax.vmap`` makes it."""

    @jax.custom_batching.custom_vmap
    def reverse(res: tuple, cotangents: tuple) -> tuple:
        return _reverse(dtype, res, cotangents)

    @reverse.def_vmap
    def batched(axis_size: int, in_batched: tuple, res: tuple, cotangents: tuple) -> tuple:
        plain = functools.partial(_reverse, dtype)
        if axis_size > IN_TURN:
            axes = jax.tree.map(lambda b: 0 if b else None, in_batched)
            out = jax.vmap(plain, in_axes=tuple(axes))(res, cotangents)
            return out, jax.tree.map(lambda _: True, out)
        leaves, tree = jax.tree.flatten((res, cotangents))
        flags = jax.tree.leaves(in_batched)

        def member(i: int) -> tuple:  # a batched leaf's slice, an unbatched leaf as it is
            return jax.tree.unflatten(tree, [x[i] if f else x for x, f in zip(leaves, flags)])

        out = jax.tree.map(lambda *xs: jnp.stack(xs), *(plain(*member(i)) for i in range(axis_size)))
        return out, jax.tree.map(lambda _: True, out)

    return reverse


def _reverse(dtype: Any, res: tuple, cotangents: tuple) -> tuple:
    a, delta, b, u, c, probe, hs = res
    d_readout, d_hs = cotangents
    wide = delta.dtype

    def step(carry: tuple, t: jax.Array) -> tuple[tuple, tuple]:
        g_next, decay_next, d_a = carry
        d, b_t, u_t, dr = delta[t], b[t], u[t], d_readout[t]
        decay = jnp.exp(d[:, None, :] * a[None])
        # the readout reads h cast to its dtype: the cotangent passes the same casts back
        from_readout = (c[t].astype(wide)[..., None] * dr[:, None, :]).astype(dtype).astype(wide)
        g = from_readout + d_hs[t] + decay_next * g_next
        d_decay = g * jnp.where(t > 0, hs[jnp.maximum(t - 1, 0)], 0.0) * decay
        g_b = jnp.sum(g * b_t[..., None], axis=1)
        grads = (
            jnp.sum(d_decay * a[None], axis=1) + u_t * g_b,  # Δ
            jnp.sum(g * (d * u_t)[:, None, :], axis=2),  # B
            d * g_b,  # u
            jnp.sum(hs[t].astype(dtype).astype(wide) * dr[:, None, :], axis=2),  # C
            None if probe is None else g if probe.ndim == g.ndim + 1 else robust_norm(g, axis=(1, 2)),
        )
        return (g, decay, d_a + jnp.sum(d_decay * d[:, None, :], axis=0)), grads

    zero = jnp.zeros_like(hs[0])
    steps = jnp.arange(delta.shape[0])
    (_, _, d_a), (d_delta, d_b, d_u, d_c, d_probe) = jax.lax.scan(
        step, (zero, zero, jnp.zeros_like(a)), steps, reverse=True
    )
    return d_a, d_delta, d_b, d_u, d_c.astype(c.dtype), None if probe is None else d_probe.astype(probe.dtype)


_scan.defvjp(_scan_forward, _scan_backward)


def _selection(spec: MambaSpec, p: Params, u: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Δ ``[B, T, I]`` (float32), B_t and C_t ``[B, T, N]`` (u's dtype) from the convolved u."""
    rank, n = spec.time_step_rank, spec.state_size
    x_dbl = linear(u, p["mixer.x_proj.weight"])
    low, b_t, c_t = x_dbl[..., :rank], x_dbl[..., rank : rank + n], x_dbl[..., rank + n :]
    if spec.mixer_rms_eps is not None:  # FalconMamba
        low, b_t, c_t = (rms_norm(v, None, spec.mixer_rms_eps) for v in (low, b_t, c_t))
    # the bias joins in u's dtype (transformers casts it to the time step's), then Δ widens
    dt_raw = linear(low, p["mixer.dt_proj.weight"], p["mixer.dt_proj.bias"])
    return jax.nn.softplus(dt_raw).astype(wide_dtype(u.dtype)), b_t, c_t


def mixer(
    spec: MambaSpec, p: Params, x: jax.Array, state_probe: jax.Array | None
) -> tuple[jax.Array, Trajectory]:
    """``MambaMixer`` (or ``FalconMambaMixer``) on the normed stream.

    Args:
        spec: the model's sizes.
        p: the layer's tensors, named after ``backbone.layers.{l}.``.
        x: ``[B, T, H]``, the block norm's output.
        state_probe: ``[B, T, I, N]`` added to the state after each step, a norm probe
            ``[B, T]``, or None.

    Returns:
        ``[B, T, H]`` in x's dtype, and the SSM's :class:`~rnnviz.engine.blocks.Trajectory`
        (:func:`layer_step`).
    """
    dtype, wide = x.dtype, wide_dtype(x.dtype)
    u, z = jnp.split(linear(x, p["mixer.in_proj.weight"], p.get("mixer.in_proj.bias")), 2, axis=-1)
    u = jax.nn.silu(causal_conv(u, p["mixer.conv1d.weight"], p.get("mixer.conv1d.bias")))
    delta, b_t, c_t = _selection(spec, p, u)
    # Δ, B and u per step rather than the decay and drive: what layer_step needs, in (2I + N)
    # numbers a step instead of 2·I·N
    inputs = {"delta": delta, "b": b_t.astype(wide), "u": u.astype(wide)}
    a = -jnp.exp(p["mixer.A_log"].astype(wide)).T  # [N, I]
    readout, h = selective_scan(a, inputs, c_t, state_probe, dtype)
    readout = readout.astype(dtype).astype(wide)
    y = (readout + u.astype(wide) * row(p["mixer.D"].astype(wide), 3)) * jax.nn.silu(z).astype(wide)
    out = linear(y.astype(dtype), p["mixer.out_proj.weight"], p.get("mixer.out_proj.bias"))
    return out, Trajectory({"h": h}, inputs)


def forward(
    spec: MambaSpec,
    params: Params,
    inputs: jax.Array,
    probes: Probes | None = None,
    *,
    with_states: bool = False,
    head: bool = True,
) -> jax.Array | tuple[jax.Array, tuple[Trajectory, ...]]:
    """The logits of ``MambaForCausalLM`` / ``FalconMambaForCausalLM``.

    Args:
        spec: the model's sizes (:func:`rnnviz.checkpoints.families.mamba.parse`).
        params: every tensor of :func:`~rnnviz.checkpoints.families.mamba.tensors`, tied ones
            included as their own entries (the gradient of a tied pair is the sum of the two).
        inputs: token ids ``<int>[B, T]``, or the embeddings ``<float>[B, T, D]`` (``inputs_embeds``).
        probes: zeros to differentiate (:class:`~rnnviz.engine.blocks.Probes`): ``stream`` rows
            ``[B, T, H]`` (row l enters block l, row L the final norm) and ``states`` as
            :func:`state_shapes`; or None.
        with_states: also return each layer's :class:`~rnnviz.engine.blocks.Trajectory`.
        head: False: the final norm's output ``[B, T, D]`` in place of the logits (what
            :mod:`~rnnviz.engine.blocks.vectors` reads out).

    Returns:
        Logits ``[B, T, V]``, float32 (float64 for float64 weights); with ``with_states``,
        ``(logits, trajectories)``: L trajectories, states ``{"h": [B, T, I, N]}`` and inputs
        as :func:`layer_step` reads them.

    Example:
        >>> import jax.numpy as jnp
        >>> from rnnviz.checkpoints.families.mamba import parse, tensors
        >>> spec = parse({"model_type": "mamba", "vocab_size": 11, "hidden_size": 8,
        ...               "num_hidden_layers": 1, "state_size": 2}, "demo")
        >>> params = {k: jnp.full(s, 0.1) for k, s in tensors(spec).items()}
        >>> forward(spec, params, jnp.zeros((2, 5), jnp.int32)).shape
        (2, 5, 11)
    """
    logits, trajectories = language_model(spec, params, inputs, probes, mixer, rms_norm, head=head)
    return (logits, trajectories) if with_states else logits


def layer_step(spec: MambaSpec, params: Params, layer: int, state: dict, inputs: dict) -> dict:
    r"""One step of layer ``layer``'s SSM: :math:`h_t = \exp(Δ_t A) ⊙ h_{t−1} + Δ_t B_t u_t`.

    Args:
        spec: the model's sizes.
        params: every tensor, as :func:`forward` takes them.
        layer: l.
        state: ``{"h": [B, I, N]}``, h_{t−1}.
        inputs: step t's ``{"delta": [B, I], "b": [B, N], "u": [B, I]}`` (a
            :class:`~rnnviz.engine.blocks.Trajectory`'s inputs at t).

    Returns:
        ``{"h": [B, I, N]}``, h_t before the probe.
    """
    h = state["h"]
    a = -jnp.exp(params[f"backbone.layers.{layer}.mixer.A_log"].astype(h.dtype)).T
    return {"h": jnp.swapaxes(ssm_step(a, jnp.swapaxes(h, -1, -2), inputs), -1, -2)}


def state_shapes(spec: MambaSpec, batch: int, seq_len: int) -> tuple[dict[str, jax.ShapeDtypeStruct], ...]:
    """Each layer's SSM state after each step: ``{"h": [B, T, I, N]}`` float32, L entries.

    Example:
        >>> from rnnviz.checkpoints.families.mamba import parse
        >>> spec = parse({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 2,
        ...               "state_size": 3}, "demo")
        >>> [s["h"].shape for s in state_shapes(spec, 2, 5)]
        [(2, 5, 16, 3), (2, 5, 16, 3)]
    """
    leaf = jax.ShapeDtypeStruct((batch, seq_len, spec.intermediate_size, spec.state_size), jnp.float32)
    return tuple({"h": leaf} for _ in range(spec.num_hidden_layers))


def _initialiser(spec: MambaSpec, settings: MambaInit, name: str) -> init.Initialiser:
    """How ``MambaPreTrainedModel._init_weights`` leaves tensor ``name`` (the mixer's own rules
    after every ``nn.Linear``'s N(0, initializer_range²) and zero bias)."""
    s = settings
    dt_std = s.time_step_scale / math.sqrt(spec.time_step_rank)
    rules = {
        "mixer.A_log": init.fixed(init.log_arange),
        "mixer.D": init.constant(1.0),
        "conv1d.weight": init.fan_in_uniform(),
        "dt_proj.weight": init.uniform(-dt_std, dt_std)
        if s.time_step_init_scheme == "random"
        else init.constant(dt_std),
        "dt_proj.bias": init.dt_bias(s.time_step_min, s.time_step_max, s.time_step_floor),
        "out_proj.weight": init.fan_in_uniform(
            1 / math.sqrt(spec.num_hidden_layers) if s.rescale_prenorm_residual else 1.0
        ),
    }
    last = name.rsplit(".", 2)
    if last[-1] == "bias" and last[-2] != "dt_proj":
        return init.constant(0.0)
    if last[-2] in ("norm", "norm_f"):
        return init.constant(1.0)
    return rules.get(".".join(last[-2:]), init.normal(s.initializer_range))


def init_params(
    spec: MambaSpec, key: jax.Array, *, dtype: str = "float32", settings: MambaInit | None = None
) -> Params:
    r"""A fresh Mamba or FalconMamba, drawn as transformers' ``MambaForCausalLM(config)`` draws it.

    Every ``nn.Linear`` and the embeddings N(0, initializer_range²) with zero biases; then each
    mixer's own rules: :math:`A_{log} = \log(1 … N)` per channel, D = 1, ``conv1d`` and
    ``out_proj`` torch's ``kaiming_uniform_(a=√5)``, U(±1/√fan_in) (``out_proj`` over √L with
    ``rescale_prenorm_residual``), ``dt_proj.weight`` U(±scale/√R) and ``dt_proj.bias`` the inverse
    softplus of Δ drawn log-uniformly in [time_step_min, time_step_max] (floored); norms 1.

    Args:
        spec: the sizes.
        key: the PRNG key; each tensor draws with its own key folded in from its name.
        dtype: ``"float32"`` or ``"bfloat16"`` (drawn in float32, then cast).
        settings: the config's initialisation fields (default: transformers' defaults).

    Returns:
        ``{name: array}``, the names and shapes of :func:`~rnnviz.checkpoints.families.mamba.tensors`,
        ``lm_head.weight`` the embeddings' own array when tied.

    Example:
        >>> from rnnviz.checkpoints.families.mamba import parse
        >>> spec = parse({"model_type": "mamba", "vocab_size": 32, "hidden_size": 8,
        ...               "state_size": 4, "num_hidden_layers": 1}, "demo")
        >>> params = init_params(spec, jax.random.key(0))
        >>> params["backbone.layers.0.mixer.A_log"].shape, float(params["backbone.layers.0.mixer.D"][0])
        ((16, 4), 1.0)
    """
    rule = functools.partial(_initialiser, spec, settings or MambaInit())
    return init.draw(tensors(spec), rule, key, dtype, tied(spec))

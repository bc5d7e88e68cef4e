r"""Mamba-2 language models as transformers computes them, in JAX, with probes.

Follows transformers' ``models/mamba2/modeling_mamba2.py``: ``Mamba2ForCausalLM``,
``Mamba2Model``, ``Mamba2Block``, ``Mamba2RMSNorm``, ``Mamba2RMSNormGated`` and
``Mamba2Mixer.forward``'s PyTorch path (``causal_conv1d_fn``, ``mamba2_scan_forward``,
``mamba2_chunk_scan``). Each block is pre-norm and residual, x ← x + Mixer(RMSNorm(x)); the mixer,
over n_h heads of P channels (inner width I = n_h·P), state size N and G groups:

.. math::
    [z; xBC; δ] = W_{in} x + b_{in},\quad
    [u; B; C] = \mathrm{SiLU}(\mathrm{conv}_K(xBC) + b_{conv}),

    Δ_t = \mathrm{clamp}(\mathrm{softplus}(δ_t + b_Δ), lo, hi),\quad A = −\exp(A_{log}),

    h_t = \exp(Δ_t A)\, h_{t−1} + Δ_t\, u_t B_t^\top,\quad y_t = h_t C_t + D\, u_t,

    \mathrm{out} = W_{out}\, \mathrm{GroupRMSNorm}(y ⊙ \mathrm{SiLU}(z)) + b_{out}

per head: Δ_t, A and D are scalars, u_t and y_t ``[P]``, h_t ``[P, N]``; head j reads B_t and C_t
``[N]`` of group ⌊j / (n_h / G)⌋. conv_K is depthwise and causal over the I + 2GN channels of xBC.

Subtleties kept from the reference:

* The gate multiplies *before* the norm (mamba_ssm's ``norm_before_gate=False``), and the gated
  norm's mean runs over each of G groups of I/G channels (the heads of one B/C group), not over I.
* transformers scans by chunks (SSD with ``chunk_size``, the sequence padded with zeros behind);
  here the scan is a sequential ``lax.scan``, the same sums in another order, so that every
  step's state can be probed.
* RMSNorm is ``w · x / sqrt(mean x² + ε)`` with w itself (not 1 + w), normalised in float32 and
  cast back to the input's dtype before the weight multiplies.
* dtypes: the projections, the convolution and its SiLU give the weights' dtype, and so does
  Δ's softplus (b_Δ joins δ there); the scan, D·u and the gated norm run in float32, and
  ``out_proj`` reads the norm's output cast back. Where torch's bfloat16 kernels sum or apply a
  function in float32 and round once (GEMMs with their bias, the convolution, SiLU, softplus),
  so does this. The residual stream is float32 when ``residual_in_fp32``; each block's norm
  reads it cast to its weight's dtype, the final norm reads it as is. In float32 every cast is
  the identity. Float64 weights compute in float64 throughout (the reference's float32 steps
  widen with them).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from rnnviz.checkpoints.families.mamba2 import Mamba2Init, tensors, tied
from rnnviz.engine.blocks import Probes, Trajectory, chunked_scan, init, probed, promoted, wide_dtype
from rnnviz.engine.blocks.backbone import language_model, linear, row

if TYPE_CHECKING:
    from rnnviz.checkpoints.families.mamba2 import Mamba2Spec

#: Whether a step's Jacobian in the state is diagonal: ∂h_t/∂h_{t−1} = exp(Δ_t A_head)·I per head: the decay
#: reads the layer's input, never its state.
STATE_IS_DIAGONAL = True


Params = dict[str, jax.Array]


def _scaled(weight: jax.Array, x: jax.Array) -> jax.Array:
    """``weight ⊙ x`` over the last axis, in the promoted dtype of the two (torch's ``w * x``)."""
    dtype = promoted(weight.dtype, x.dtype)
    return row(weight.astype(dtype), x.ndim) * x.astype(dtype)


def _pointwise(fn: Any, x: jax.Array) -> jax.Array:
    """``fn(x)`` computed in float32 and rounded once to x's dtype, as torch's bfloat16 kernels do."""
    return fn(x.astype(wide_dtype(x.dtype))).astype(x.dtype)


def rms_norm(x: jax.Array, weight: jax.Array, eps: float, group_size: int | None = None) -> jax.Array:
    r"""RMS norm (``Mamba2RMSNorm``): :math:`w ⊙ x / \sqrt{\mathrm{mean}(x^2) + ε}`.

    The mean runs over the last axis, or over each of its consecutive groups of ``group_size``
    (``Mamba2RMSNormGated``); it is computed in float32 (float64 for float64 input) and cast
    back to x's dtype, then w multiplies in the promoted dtype of the two.

    Args:
        x: ``[..., D]``.
        weight: ``[D]``.
        eps: ε.
        group_size: channels per mean, a divisor of D; None for all D.

    Returns:
        ``[..., D]`` in the promoted dtype of x and the weight.
    """
    width = x.shape[-1]
    size = width if group_size is None else group_size
    xf = x.astype(wide_dtype(x.dtype)).reshape(x.shape[:-1] + (width // size, size))
    normed = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return _scaled(weight, normed.reshape(x.shape).astype(x.dtype))


def gated_rms_norm(y: jax.Array, z: jax.Array, weight: jax.Array, groups: int, eps: float) -> jax.Array:
    """``Mamba2RMSNormGated``: the group RMS norm of y ⊙ SiLU(z), gated before it is normed.

    Args:
        y: the scan's output ``[B, T, I]``.
        z: the gate ``[B, T, I]``.
        weight: ``[I]``.
        groups: G; each mean runs over I / G consecutive channels.
        eps: ε.

    Returns:
        ``[B, T, I]`` in the promoted dtype of y and the weight.
    """
    wide = wide_dtype(y.dtype)
    gated = (y.astype(wide) * jax.nn.silu(z.astype(wide))).astype(y.dtype)
    return rms_norm(gated, weight, eps, y.shape[-1] // groups)


def causal_conv(x: jax.Array, weight: jax.Array, bias: jax.Array | None) -> jax.Array:
    r"""Depthwise causal convolution, torch's ``conv1d(padding=K − 1)[..., :T]``:
    :math:`c_t = \sum_{k=0}^{K−1} w_k ⊙ x_{t+k−K+1} + b` with x = 0 before t = 0.

    Args:
        x: ``[B, T, C]``.
        weight: ``[C, 1, K]`` (torch's depthwise layout).
        bias: ``[C]``, or None.

    Returns:
        ``[B, T, C]`` in x's dtype, summed and biased in float32 and rounded once (as torch's).
    """
    k_size, seq_len, wide = weight.shape[-1], x.shape[1], wide_dtype(x.dtype)
    padded = jnp.pad(x.astype(wide), ((0, 0), (k_size - 1, 0), (0, 0)))
    w = weight[:, 0, :].astype(wide)  # [C, K]
    out = sum(padded[:, k : k + seq_len, :] * row(w[:, k], 3) for k in range(k_size))
    return (out if bias is None else out + row(bias.astype(wide), 3)).astype(x.dtype)


def time_steps(spec: Mamba2Spec, dt_raw: jax.Array, dt_bias: jax.Array) -> jax.Array:
    """Δ = clamp(softplus(δ + b_Δ), lo, hi) ``[B, T, n_h]`` in float32, from δ ``[B, T, n_h]``.

    The softplus runs in δ's dtype, as the reference's; the clamp is the identity at the default
    limit (0, ∞).
    """
    lo, hi = spec.time_step_limit
    delta = jnp.clip(_pointwise(jax.nn.softplus, dt_raw + row(dt_bias.astype(dt_raw.dtype), 3)), lo, hi)
    return delta.astype(wide_dtype(dt_raw.dtype))


def state_update(h: jax.Array, decay: jax.Array, drive: jax.Array, b: jax.Array) -> jax.Array:
    r""":math:`a_t h_{t−1} + (Δ_t u_t) B_t^\top` per head, for h ``[B, n_h, P, N]``, a_t ``[B, n_h]``,
    Δ_t u_t ``[B, n_h, P]`` and B_t ``[B, n_h, N]``: one step of the scan, before the probe."""
    return decay[:, :, None, None] * h + drive[..., :, None] * b[..., None, :]


def ssd_scan(
    decay: jax.Array, drive: jax.Array, b: jax.Array, c: jax.Array, probe: jax.Array | None
) -> tuple[jax.Array, jax.Array]:
    r"""The state-space recurrence step by step, read out at every step:
    :math:`h_t = a_t h_{t−1} + (Δ_t u_t) B_t^\top + p_t`, :math:`y_t = h_t C_t`, h₋₁ = 0.

    The steps run in checkpointed chunks (:func:`~rnnviz.engine.blocks.chunked_scan`): a
    step's state is n_h·P·N numbers (196 608 at mamba2-130m's shape, 8× Mamba's), and a
    plain scan's reverse pass would keep two of them a step (h_{t−1} for the decay's
    gradient, h_t for the readout's), 0.8 GB a layer at T = 512.

    Args:
        decay: a_t = exp(Δ_t A) ``[B, T, n_h]``.
        drive: Δ_t u_t ``[B, T, n_h, P]``.
        b: B_t ``[B, T, n_h, N]``, already repeated from groups to heads.
        c: C_t ``[B, T, n_h, N]``.
        probe: p_t ``[B, T, n_h, P, N]`` added to the state after step t, a norm probe
            ``[B, T]`` at the same place (:func:`~rnnviz.engine.blocks.probed`), or None.

    Returns:
        y ``[B, T, n_h, P]`` (without the D skip), and h ``[B, T, n_h, P, N]``.
    """

    def step(h: jax.Array, inputs: tuple[jax.Array, ...]) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        a_t, d_t, b_t, c_t, p_t = inputs
        h = state_update(h, a_t, d_t, b_t)
        if p_t is not None:
            h = probed(h, p_t)
        return h, (jnp.einsum("bhpn,bhn->bhp", h, c_t), h)

    batch, _, heads, width = drive.shape
    h0 = jnp.zeros((batch, heads, width, b.shape[-1]), drive.dtype)
    time_major = [None if v is None else v.swapaxes(0, 1) for v in (decay, drive, b, c, probe)]
    _, (y, h) = chunked_scan(step, h0, tuple(time_major))
    return y.swapaxes(0, 1), h.swapaxes(0, 1)


def ssm(
    spec: Mamba2Spec, p: Params, xbc: jax.Array, dt_raw: jax.Array, probe: jax.Array | None
) -> tuple[jax.Array, Trajectory]:
    """The SSM of one layer on the convolved xBC: y = scan + D·u ``[B, T, I]``, float32.

    Args:
        spec: the model's sizes.
        p: the layer's tensors, named after ``backbone.layers.{l}.``.
        xbc: SiLU(conv(xBC)) ``[B, T, I + 2GN]``.
        dt_raw: δ ``[B, T, n_h]``, before b_Δ and the softplus.
        probe: ``[B, T, n_h, P, N]`` added to the state after each step, a norm probe
            ``[B, T]``, or None.

    Returns:
        ``[B, T, I]`` in float32 (float64 for float64 weights), and the scan's
        :class:`~rnnviz.engine.blocks.Trajectory` (:func:`layer_step`).
    """
    batch, seq_len, _ = xbc.shape
    heads, width, n, groups = spec.num_heads, spec.head_dim, spec.state_size, spec.n_groups
    wide = wide_dtype(xbc.dtype)
    u, b, c = jnp.split(xbc.astype(wide), [heads * width, heads * width + groups * n], axis=-1)
    u = u.reshape(batch, seq_len, heads, width)
    # head j reads group j // (n_h / G): repeat each group's B and C over its heads
    b, c = (jnp.repeat(v.reshape(batch, seq_len, groups, n), heads // groups, axis=2) for v in (b, c))
    delta = time_steps(spec, dt_raw, p["mixer.dt_bias"])
    a = -jnp.exp(p["mixer.A_log"].astype(wide))
    inputs = {"decay": jnp.exp(delta * row(a, 3)), "drive": delta[..., None] * u, "b": b}
    y, h = ssd_scan(inputs["decay"], inputs["drive"], b, c, None if probe is None else probe.astype(wide))
    skip = _scaled(p["mixer.D"], u.swapaxes(-1, -2)).swapaxes(-1, -2)  # D per head
    return (y + skip.astype(wide)).reshape(batch, seq_len, heads * width), Trajectory({"h": h}, inputs)


def mixer(
    spec: Mamba2Spec, p: Params, x: jax.Array, state_probe: jax.Array | None
) -> tuple[jax.Array, Trajectory]:
    """``Mamba2Mixer`` on the normed stream.

    Args:
        spec: the model's sizes.
        p: the layer's tensors, named after ``backbone.layers.{l}.``.
        x: ``[B, T, H]``, the block norm's output.
        state_probe: ``[B, T, n_h, P, N]`` added to the state after each step, a norm probe
            ``[B, T]``, or None.

    Returns:
        ``[B, T, H]`` in x's dtype, and the SSM's trajectory (:func:`ssm`).
    """
    inner = spec.intermediate_size
    projected = linear(x, p["mixer.in_proj.weight"], p.get("mixer.in_proj.bias"))
    z, xbc, dt_raw = jnp.split(projected, [inner, inner + spec.conv_dim], axis=-1)
    conv_weight = p["mixer.conv1d.weight"]
    xbc = _pointwise(
        jax.nn.silu, causal_conv(xbc.astype(conv_weight.dtype), conv_weight, p.get("mixer.conv1d.bias"))
    )
    y, trajectory = ssm(spec, p, xbc.astype(x.dtype), dt_raw, state_probe)
    normed = gated_rms_norm(y, z, p["mixer.norm.weight"], spec.n_groups, spec.layer_norm_epsilon)
    out = linear(normed.astype(x.dtype), p["mixer.out_proj.weight"], p.get("mixer.out_proj.bias"))
    return out, trajectory


def forward(
    spec: Mamba2Spec,
    params: Params,
    inputs: jax.Array,
    probes: Probes | None = None,
    *,
    with_states: bool = False,
    head: bool = True,
) -> jax.Array | tuple[jax.Array, tuple[Trajectory, ...]]:
    """The logits of ``Mamba2ForCausalLM``.

    Args:
        spec: the model's sizes (:func:`rnnviz.checkpoints.families.mamba2.parse`).
        params: every tensor of :func:`~rnnviz.checkpoints.families.mamba2.tensors`, tied ones
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
        ``(logits, trajectories)``: L trajectories, states ``{"h": [B, T, n_h, P, N]}`` and
        inputs as :func:`layer_step` reads them.

    Example:
        >>> import jax.numpy as jnp
        >>> from rnnviz.checkpoints.families.mamba2 import parse, tensors
        >>> spec = parse({"model_type": "mamba2", "vocab_size": 11, "hidden_size": 8, "num_heads": 2,
        ...               "head_dim": 8, "n_groups": 1, "state_size": 2, "num_hidden_layers": 1}, "demo")
        >>> params = {k: jnp.full(s, 0.1) for k, s in tensors(spec).items()}
        >>> forward(spec, params, jnp.zeros((2, 5), jnp.int32)).shape
        (2, 5, 11)
    """
    logits, trajectories = language_model(spec, params, inputs, probes, mixer, rms_norm, head=head)
    return (logits, trajectories) if with_states else logits


def layer_step(spec: Mamba2Spec, params: Params, layer: int, state: dict, inputs: dict) -> dict:
    r"""One step of a layer's SSM, every head: :math:`h_t = a_t h_{t−1} + (Δ_t u_t) B_t^\top`.

    Args:
        spec: the model's sizes.
        params: every tensor (unused: the step's inputs hold all it reads).
        layer: l.
        state: ``{"h": [B, n_h, P, N]}``, h_{t−1}.
        inputs: step t's ``{"decay": [B, n_h], "drive": [B, n_h, P], "b": [B, n_h, N]}`` (a
            :class:`~rnnviz.engine.blocks.Trajectory`'s inputs at t).

    Returns:
        ``{"h": [B, n_h, P, N]}``, h_t before the probe.
    """
    return {"h": state_update(state["h"], inputs["decay"], inputs["drive"], inputs["b"])}


def state_shapes(spec: Mamba2Spec, batch: int, seq_len: int) -> tuple[dict[str, jax.ShapeDtypeStruct], ...]:
    """Each layer's SSM state after each step: ``{"h": [B, T, n_h, P, N]}`` float32, L entries.

    Example:
        >>> from rnnviz.checkpoints.families.mamba2 import parse
        >>> spec = parse({"model_type": "mamba2", "hidden_size": 8, "num_heads": 4, "head_dim": 4,
        ...               "n_groups": 2, "state_size": 3, "num_hidden_layers": 2}, "demo")
        >>> [s["h"].shape for s in state_shapes(spec, 2, 5)]
        [(2, 5, 4, 4, 3), (2, 5, 4, 4, 3)]
    """
    shape = (batch, seq_len, spec.num_heads, spec.head_dim, spec.state_size)
    return tuple({"h": jax.ShapeDtypeStruct(shape, jnp.float32)} for _ in range(spec.num_hidden_layers))


def _initialiser(spec: Mamba2Spec, settings: Mamba2Init, name: str) -> init.Initialiser:
    """How ``Mamba2PreTrainedModel._init_weights`` leaves tensor ``name``."""
    s = settings
    rules = {
        "mixer.A_log": init.fixed(init.log_arange),
        "mixer.D": init.constant(1.0),
        "mixer.dt_bias": init.dt_bias(s.time_step_min, s.time_step_max, s.time_step_floor),
        "conv1d.weight": init.fan_in_uniform(),
        "out_proj.weight": init.fan_in_uniform(
            1 / math.sqrt(spec.num_hidden_layers) if s.rescale_prenorm_residual else 1.0
        ),
    }
    last = name.rsplit(".", 2)
    if last[-1] == "bias":
        return init.constant(0.0)
    if last[-2] in ("norm", "norm_f"):
        return init.constant(1.0)
    return rules.get(".".join(last[-2:]), init.normal(s.initializer_range))


def init_params(
    spec: Mamba2Spec, key: jax.Array, *, dtype: str = "float32", settings: Mamba2Init | None = None
) -> Params:
    r"""A fresh Mamba-2, drawn as transformers' ``Mamba2ForCausalLM(config)`` draws it.

    The embeddings, ``in_proj`` and an untied head N(0, initializer_range²), biases 0; per
    mixer :math:`A_{log} = \log(1 … n_h)`, D = 1, ``dt_bias`` the inverse softplus of Δ drawn
    log-uniformly in [time_step_min, time_step_max] (floored), ``conv1d`` and ``out_proj``
    U(±1/√fan_in) (``out_proj`` over √L with ``rescale_prenorm_residual``); norms 1.

    Args:
        spec: the sizes.
        key: the PRNG key; each tensor draws with its own key folded in from its name.
        dtype: ``"float32"`` or ``"bfloat16"`` (drawn in float32, then cast).
        settings: the config's initialisation fields (default: transformers' defaults).

    Returns:
        ``{name: array}``, the names and shapes of :func:`~rnnviz.checkpoints.families.mamba2.tensors`.

    Example:
        >>> from rnnviz.checkpoints.families.mamba2 import parse
        >>> spec = parse({"model_type": "mamba2", "vocab_size": 32, "hidden_size": 16, "num_heads": 4,
        ...               "head_dim": 8, "n_groups": 1, "state_size": 4, "num_hidden_layers": 1}, "demo")
        >>> init_params(spec, jax.random.key(0))["backbone.layers.0.mixer.A_log"].tolist()[:2]
        [0.0, 0.6931471824645996]
    """
    rule = functools.partial(_initialiser, spec, settings or Mamba2Init())
    return init.draw(tensors(spec), rule, key, dtype, tied(spec))

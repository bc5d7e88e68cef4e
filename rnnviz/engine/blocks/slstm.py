r"""The sLSTM block as NX-AI's ``xlstm`` package builds it (``xlstm/blocks/slstm/``), as pure JAX
functions of that module's tensors: ``sLSTMBlock`` with the ``vanilla`` backend of its cell.

Follows ``blocks/xlstm_block.py`` (``xLSTMBlock.forward``: the two residual branches),
``blocks/slstm/layer.py`` (``sLSTMLayer.forward``), ``blocks/slstm/cell.py`` (the vanilla cell:
its parameter layouts, ``reset_parameters``), ``blocks/slstm/src/vanilla/__init__.py``
(``slstm_forward``: the recurrent product per head) and ``src/vanilla/slstm.py``
(``slstm_forward_pointwise``), and ``components/`` (``ln.py``, ``conv.py``,
``linear_headwise.py``, ``feedforward.py``, ``init.py``). With N heads of d = D / N units, and
LN(x) = (1 + w) ⊙ (x − μ) / √(σ² + ε) (a residual weight, no bias, ε = 10⁻⁵):

.. math::
    u = \mathrm{LN}_{xlstm}(x),\quad ũ = \mathrm{SiLU}(\mathrm{conv}(u))\ (\text{or } ũ = u
    \text{ without the convolution}),

    [\tilde ι_t; \tilde φ_t; \tilde z_t; \tilde o_t] = [W_ι ũ_t; W_φ ũ_t; W_z u_t; W_o u_t]
    + R\, h_{t−1} + b \quad(W, R \text{ block-diagonal: one } d × d \text{ block per head}),

    m_t = \max(\tilde ι_t,\ \log σ(\tilde φ_t) + m_{t−1}),\quad
    i_t = \min(e^{\tilde ι_t − m_t}, 1),\quad f_t = \min(e^{\log σ(\tilde φ_t) + m_{t−1} − m_t}, 1),

    c_t = f_t c_{t−1} + i_t \tanh \tilde z_t,\quad n_t = f_t n_{t−1} + i_t,\quad
    h_t = σ(\tilde o_t)\, c_t / n_t,

    x ← x + \mathrm{GN}(h),\qquad
    x ← x + W_{down}\big(\mathrm{GELU}(W_{gate} v) ⊙ W_{up} v\big),\quad v = \mathrm{LN}_{ffn}(x)

from c₀ = n₀ = m₀ = h₀ = 0, where GN is a layer norm over each head's d units (its weight, again
1 + w, over all D) and GELU the exact one. The state (c, n, m, h) is the *stabilised* one: c and
n are the true ones times e^{−m_t}, which h's ratio cancels.

Subtleties kept from the reference:

* the layer's ``fgate`` module computes the *input* gate's pre-activation and ``igate`` the
  forget gate's (``sLSTMLayer.forward``: ``i, f, z, o = fgate(x_conv), igate(x_conv), ...``);
  the cell's bias and recurrent kernel hold the gates in the order (i, f, z, o), the forget
  gate's bias second. Both projections are drawn alike, so only a state dict tells them apart.
* at a step where n_{t−1} = 0 everywhere (in the whole batch: the first step from the zero
  state), m_t = ĩ_t rather than the max, as ``slstm_forward_pointwise``'s ``torch.all(n == 0)``.
  h is the same either way; m (and with it the stored c and n) is not.
* the gates' clamps min(·, 1) are no-ops but for that first step's forget gate (which multiplies
  zeros); at a tie the reference's and JAX's min and max share the gradient alike.
* the cell's parameters are held in the backend-independent layout of the reference's
  ``ParameterProxy`` views (``recurrent_kernel`` ``[N, d_in, 4, d_out]``, ``bias`` ``[N, 4, d]``);
  :func:`params_from_state_dict` reads either backend's ``state_dict``.
* everything runs in x's dtype, as the vanilla backend runs in its input's.

Use the four-leaf state probe ``{"c", "n", "m", "h"}`` (or norm probes ``[B, T]``) to read
∂L/∂state_t: leaf t is added to the state after step t, so h_t's readout and step t + 1 see it.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.engine.blocks import Trajectory, probed
from rnnviz.engine.blocks.backbone import linear, row

Params = dict[str, jax.Array]

#: The layer norms' and the group norm's ε (``components/ln.py``'s default, never changed).
EPS = 1e-5
#: The gates in the order the cell's bias and recurrent kernel hold them.
GATES = ("i", "f", "z", "o")
#: The projection modules feeding the cell's gates i, f, z, o, in that order (see above: ``fgate``
#: feeds the input gate).
GATE_PROJECTIONS = ("fgate", "igate", "zgate", "ogate")


class SLSTMSpec(NamedTuple):
    """The sizes of one ``sLSTMBlock``, named as ``sLSTMLayerConfig`` and ``FeedForwardConfig`` do.

    Attributes:
        embedding_dim: D, the stream's width and the cell's hidden size.
        num_heads: N, dividing D.
        conv1d_kernel_size: the causal convolution's taps before the i and f gates; 0: none.
        proj_factor: the feed-forward's up-projection F = ⌈proj_factor · D / 64⌉ · 64; None: no
            feed-forward branch.
        num_blocks: the blocks in the stack (the forget bias and the down projection's init).
        block_idx: this block's place in the stack (the forget bias's init).
        bias_init: ``"powerlaw_blockdependent"``, ``"small_init"``, ``"standard"`` or ``"zeros"``.
        recurrent_weight_init: ``"zeros"`` or ``"standard"``.
    """

    embedding_dim: int
    num_heads: int = 4
    conv1d_kernel_size: int = 4
    proj_factor: float | None = 1.3
    num_blocks: int = 1
    block_idx: int = 0
    bias_init: str = "powerlaw_blockdependent"
    recurrent_weight_init: str = "zeros"


class State(NamedTuple):
    """The sLSTM's carry, each ``[B, N, d]``: the stabilised memory c, normaliser n, stabiliser m,
    and the output h that the next step's recurrent product reads."""

    c: jax.Array
    n: jax.Array
    m: jax.Array
    h: jax.Array


def ffn_dim(spec: SLSTMSpec) -> int:
    """F, the feed-forward's inner width: proj_factor · D rounded up to a multiple of 64.

    >>> ffn_dim(SLSTMSpec(embedding_dim=16)), ffn_dim(SLSTMSpec(embedding_dim=96, proj_factor=4 / 3))
    (64, 128)
    """
    return math.ceil(spec.proj_factor * spec.embedding_dim / 64) * 64


def cell_step(cell: Params, carry: State, x: jax.Array) -> tuple[State, jax.Array]:
    r"""One step of the sLSTM cell, every head: the pre-activations
    :math:`[\tilde ι; \tilde φ; \tilde z; \tilde o] = x + R h_{t−1} + b`, then the stabilised
    exponential gating (see the module's formulas).

    Args:
        cell: ``{"recurrent_kernel": [N, d, 4, d], "bias": [N, 4, d]}``.
        carry: the state after step t − 1.
        x: the input's share of the pre-activations ``[B, 4, N, d]``, gates in the order i, f, z, o.

    Returns:
        The state after step t, and h_t ``[B, N, d]``.

    Example:
        >>> cell = {"recurrent_kernel": jnp.zeros((2, 3, 4, 3)), "bias": jnp.zeros((2, 4, 3))}
        >>> zero = State(*(jnp.zeros((5, 2, 3)) for _ in range(4)))
        >>> state, h = cell_step(cell, zero, jnp.ones((5, 4, 2, 3)))
        >>> h.shape, round(float(h[0, 0, 0]), 4)  # σ(1) tanh(1): i = 1, n = 1 at the first step
        ((5, 2, 3), 0.5568)
    """
    recurrent = jnp.einsum("bnk,nkgj->bgnj", carry.h, cell["recurrent_kernel"].astype(x.dtype))
    raw = x + recurrent + cell["bias"].astype(x.dtype).transpose(1, 0, 2)[None]
    i_raw, f_raw, z_raw, o_raw = (raw[:, g] for g in range(4))
    log_f_plus_m = carry.m + jax.nn.log_sigmoid(f_raw)
    m = jnp.where(jnp.all(carry.n == 0), i_raw, jnp.maximum(i_raw, log_f_plus_m))
    i_gate = jnp.minimum(jnp.exp(i_raw - m), 1.0)
    f_gate = jnp.minimum(jnp.exp(log_f_plus_m - m), 1.0)
    c = f_gate * carry.c + i_gate * jnp.tanh(z_raw)
    n = f_gate * carry.n + i_gate
    h = jax.nn.sigmoid(o_raw) * c / n
    return State(c, n, m, h), h


def slstm_scan(cell: Params, x: jax.Array, probe: Any) -> tuple[jax.Array, State]:
    """:func:`cell_step` over a sequence from the zero state, one :func:`jax.lax.scan`.

    Args:
        cell: the cell's parameters, as :func:`cell_step` takes them.
        x: the input's share of the pre-activations ``[B, T, 4, N, d]``.
        probe: a :class:`State` of ``[B, T, N, d]`` (or norm probes ``[B, T]``) added to the state
            after step t, or None.

    Returns:
        h ``[B, T, N, d]`` (after the probe) and the state after every step, a :class:`State`
        of ``[B, T, N, d]``.
    """
    batch, _, _, heads, d = x.shape
    init = State(*(jnp.zeros((batch, heads, d), x.dtype) for _ in range(4)))

    def step(carry: State, xs: tuple) -> tuple[State, State]:
        x_t, p_t = xs
        carry, _ = cell_step(cell, carry, x_t)
        carry = carry if p_t is None else State(*map(probed, carry, p_t))
        return carry, carry

    probes = None if probe is None else State(*(p.astype(x.dtype).swapaxes(0, 1) for p in probe))
    _, states = jax.lax.scan(step, init, (x.swapaxes(0, 1), probes))
    states = State(*(s.swapaxes(0, 1) for s in states))
    return states.h, states


def layer_norm(x: jax.Array, weight: jax.Array) -> jax.Array:
    """The reference's ``LayerNorm``: ``F.layer_norm`` over the last axis with the weight
    (1 + w) and no bias, ε = :data:`EPS`.

    >>> [round(float(v), 3) for v in layer_norm(jnp.array([[1.0, 3.0]]), jnp.zeros(2))[0]]
    [-1.0, 1.0]
    """
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + EPS) * row(1.0 + weight.astype(x.dtype), x.ndim)


def head_norm(h: jax.Array, weight: jax.Array) -> jax.Array:
    """The reference's ``MultiHeadLayerNorm`` (a group norm, one group per head): each head's d
    units normed, then the weight (1 + w) ``[N d]``, ε = :data:`EPS`.

    Args:
        h: ``[B, T, N, d]``.
        weight: w ``[N d]``.

    Returns:
        ``[B, T, N d]``.
    """
    mean = jnp.mean(h, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)
    normed = ((h - mean) * jax.lax.rsqrt(var + EPS)).reshape(h.shape[:2] + (-1,))
    return normed * row(1.0 + weight.astype(h.dtype), 3)


def causal_conv(x: jax.Array, weight: jax.Array, bias: jax.Array) -> jax.Array:
    r"""The depthwise causal convolution with bias (``CausalConv1d``, torch's
    ``conv1d(padding=K − 1)[..., :T]``): :math:`\sum_{k<K} w_k ⊙ x_{t+k−K+1} + b`, x = 0 before t = 0.

    Args:
        x: ``[B, T, D]``.
        weight: ``[D, 1, K]`` (torch's depthwise layout).
        bias: ``[D]``.

    Returns:
        ``[B, T, D]``.
    """
    taps, steps = weight.shape[-1], x.shape[1]
    padded = jnp.pad(x, ((0, 0), (taps - 1, 0), (0, 0)))
    w = weight[:, 0, :].astype(x.dtype)
    return sum(padded[:, k : k + steps] * row(w[:, k], 3) for k in range(taps)) + row(bias.astype(x.dtype), 3)


def headwise(x: jax.Array, weight: jax.Array) -> jax.Array:
    """``LinearHeadwiseExpand`` without bias: one ``[d_out, d_in]`` matrix per head.

    Args:
        x: ``[B, T, N d_in]``.
        weight: ``[N, d_out, d_in]``.

    Returns:
        ``[B, T, N, d_out]``.
    """
    heads = weight.shape[0]
    return jnp.einsum("btnd,nod->btno", x.reshape(x.shape[:2] + (heads, -1)), weight.astype(x.dtype))


def layer(spec: SLSTMSpec, p: Params, x: jax.Array, probe: Any) -> tuple[jax.Array, Trajectory]:
    """``sLSTMLayer`` over a whole sequence from the zero state (no dropout).

    Args:
        spec: the sizes.
        p: the layer's tensors, named as the module's ``state_dict`` names them, the cell's two
            as its proxies do (``slstm_cell.recurrent_kernel``, ``slstm_cell.bias``).
        x: ``[B, T, D]``, the normed stream.
        probe: the state probe (see :func:`slstm_scan`), or None.

    Returns:
        ``[B, T, D]``, and the cell's :class:`~rnnviz.engine.blocks.Trajectory`: states
        ``{"c", "n", "m", "h": [B, T, N, d]}``, inputs ``{"x": [B, T, 4, N, d]}`` as
        :func:`layer_step` reads them.
    """
    if spec.conv1d_kernel_size > 0:
        gated = jax.nn.silu(causal_conv(x, p["conv1d.conv.weight"], p["conv1d.conv.bias"]))
    else:
        gated = x
    sources = (gated, gated, x, x)  # the convolution feeds the input and forget gates only
    pre = jnp.stack([headwise(s, p[f"{m}.weight"]) for s, m in zip(sources, GATE_PROJECTIONS)], axis=2)
    cell = {"recurrent_kernel": p["slstm_cell.recurrent_kernel"], "bias": p["slstm_cell.bias"]}
    h, states = slstm_scan(cell, pre, None if probe is None else State(**probe))
    out = head_norm(h, p["group_norm.weight"])
    return out, Trajectory(states._asdict(), {"x": pre})


def layer_step(cell: Params, state: dict, inputs: dict) -> dict:
    """One step of the cell, before the probe: :func:`cell_step` on a trajectory's leaves.

    Args:
        cell: ``{"recurrent_kernel": [N, d, 4, d], "bias": [N, 4, d]}``.
        state: ``{"c", "n", "m", "h": [B, N, d]}``, the state after step t − 1.
        inputs: step t's ``{"x": [B, 4, N, d]}``.

    Returns:
        ``{"c", "n", "m", "h": [B, N, d]}``, the state after step t.
    """
    return cell_step(cell, State(**state), inputs["x"])[0]._asdict()


def feedforward(p: Params, x: jax.Array) -> jax.Array:
    r"""``GatedFeedForward`` (no bias, exact GELU): :math:`W_{down}(\mathrm{GELU}(g) ⊙ u)`,
    :math:`[g; u] = W_{up} x`.

    Args:
        p: ``{"proj_up.weight": [2F, D], "proj_down.weight": [D, F]}``.
        x: ``[B, T, D]``.

    Returns:
        ``[B, T, D]``.
    """
    gate, up = jnp.split(linear(x, p["proj_up.weight"]), 2, axis=-1)
    return linear(jax.nn.gelu(gate, approximate=False) * up, p["proj_down.weight"])


def _under(params: Params, prefix: str) -> Params:
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def block(spec: SLSTMSpec, params: Params, x: jax.Array, probe: Any = None) -> tuple[jax.Array, Trajectory]:
    r"""``sLSTMBlock``: :math:`x ← x + \mathrm{sLSTM}(\mathrm{LN}(x))`, then, with a feed-forward,
    :math:`x ← x + \mathrm{FFN}(\mathrm{LN}(x))`.

    Args:
        spec: the sizes.
        params: the block's tensors, as :func:`init` and :func:`params_from_state_dict` name them.
        x: ``[B, T, D]``.
        probe: ``{"c", "n", "m", "h"}``, each ``[B, T, N, d]`` (or norm probes ``[B, T]``), added
            to the cell's state after every step; or None.

    Returns:
        ``[B, T, D]`` in x's dtype, and the cell's :class:`~rnnviz.engine.blocks.Trajectory`.

    Example:
        >>> spec = SLSTMSpec(embedding_dim=8, num_heads=2, conv1d_kernel_size=4)
        >>> params = init(spec, key=jax.random.key(0))
        >>> out, trajectory = block(spec, params, jnp.ones((2, 5, 8)))
        >>> out.shape, trajectory.states["c"].shape, trajectory.inputs["x"].shape
        ((2, 5, 8), (2, 5, 2, 4), (2, 5, 4, 2, 4))
    """
    mixed, trajectory = layer(
        spec, _under(params, "xlstm."), layer_norm(x, params["xlstm_norm.weight"]), probe
    )
    x = x + mixed
    if spec.proj_factor is not None:
        x = x + feedforward(_under(params, "ffn."), layer_norm(x, params["ffn_norm.weight"]))
    return x, trajectory


def _powerlaw_forget_bias(spec: SLSTMSpec, d: int) -> jax.Array:
    """``powerlaw_blockdependent``'s forget bias over a head's units j: −(−5 + 12 (j / (d − 1))^p),
    p = 0.3 + 1.3 · block_idx / (num_blocks − 1) (0.3 for one block); 5 for d = 1, where the
    reference divides by zero."""
    ratio = spec.block_idx / (spec.num_blocks - 1) if spec.num_blocks > 1 else 0.0
    return -(-5.0 + 12.0 * jnp.linspace(0.0, 1.0, d) ** (0.3 + 1.3 * ratio))


def _cell_bias(spec: SLSTMSpec, key: jax.Array) -> jax.Array:
    """The cell's bias ``[N, 4, d]`` as ``sLSTMCellBase.reset_parameters`` draws it."""
    heads, hidden = spec.num_heads, spec.embedding_dim
    d = hidden // heads
    if spec.bias_init == "standard":
        bound = 1 / math.sqrt(hidden)
        return jax.random.uniform(key, (heads, 4, d), minval=-bound, maxval=bound)
    forget = {
        "powerlaw_blockdependent": lambda: _powerlaw_forget_bias(spec, d),
        "small_init": lambda: jnp.linspace(3.0, 6.0, d),
        "zeros": lambda: jnp.zeros(d),
    }[spec.bias_init]()
    return jnp.zeros((heads, 4, d)).at[:, 1].set(jnp.broadcast_to(forget, (heads, d)))


def init(spec: SLSTMSpec, *, key: jax.Array) -> Params:
    r"""A fresh block's parameters, drawn as the reference's ``reset_parameters`` draws them
    (float32). With D the width and d = D / N:

    * the norms' weights w: 0 (the scale 1 + w is 1);
    * the convolution (torch's ``Conv1d`` default, fan-in K): weight and bias U(±1/√K);
    * the gate projections: small_init, N(0, 2 / (5 D)); the cell's recurrent kernel: 0
      (``"zeros"``) or U(±1/√D) (``"standard"``);
    * the cell's bias: 0 but for the forget gate's, by ``bias_init`` (``powerlaw_blockdependent``:
      :math:`−(−5 + 12 (j/(d−1))^{0.3 + 1.3 ℓ/(L−1)})` for block ℓ of L);
    * the feed-forward: up small_init, N(0, 2 / (5 D)); down wang_init, N(0, (2 / (L √D))²).

    Args:
        spec: the sizes.
        key: a PRNG key.

    Returns:
        The tensors as :func:`block` reads them.

    Example:
        >>> params = init(SLSTMSpec(embedding_dim=8, num_heads=2), key=jax.random.key(0))
        >>> params["xlstm.slstm_cell.recurrent_kernel"].shape, params["ffn.proj_up.weight"].shape
        ((2, 4, 4, 4), (128, 8))
    """
    dim, heads, taps = spec.embedding_dim, spec.num_heads, spec.conv1d_kernel_size
    d = dim // heads
    keys = dict(
        zip(
            ("conv_w", "conv_b", "recurrent", "bias", "up", "down", *GATE_PROJECTIONS),
            jax.random.split(key, 10),
        )
    )
    small = math.sqrt(2 / (5 * dim))
    params = {"xlstm_norm.weight": jnp.zeros(dim), "xlstm.group_norm.weight": jnp.zeros(dim)}
    if taps > 0:
        bound = 1 / math.sqrt(taps)
        params["xlstm.conv1d.conv.weight"] = jax.random.uniform(
            keys["conv_w"], (dim, 1, taps), minval=-bound, maxval=bound
        )
        params["xlstm.conv1d.conv.bias"] = jax.random.uniform(
            keys["conv_b"], (dim,), minval=-bound, maxval=bound
        )
    for name in GATE_PROJECTIONS:
        params[f"xlstm.{name}.weight"] = small * jax.random.normal(keys[name], (heads, d, d))
    if spec.recurrent_weight_init == "standard":
        bound = 1 / math.sqrt(dim)
        kernel = jax.random.uniform(keys["recurrent"], (heads, d, 4, d), minval=-bound, maxval=bound)
    else:
        kernel = jnp.zeros((heads, d, 4, d))
    params["xlstm.slstm_cell.recurrent_kernel"] = kernel
    params["xlstm.slstm_cell.bias"] = _cell_bias(spec, keys["bias"])
    if spec.proj_factor is not None:
        inner = ffn_dim(spec)
        params["ffn_norm.weight"] = jnp.zeros(dim)
        params["ffn.proj_up.weight"] = small * jax.random.normal(keys["up"], (2 * inner, dim))
        down = 2 / spec.num_blocks / math.sqrt(dim)
        params["ffn.proj_down.weight"] = down * jax.random.normal(keys["down"], (dim, inner))
    return params


def params_from_state_dict(spec: SLSTMSpec, state: dict[str, Any]) -> Params:
    """An ``sLSTMBlock``'s ``state_dict`` (its arrays, as NumPy or JAX) as :func:`block` reads it:
    the cell's internal ``_recurrent_kernel_`` and ``_bias_``, laid out by the backend that made
    them (``vanilla``: ``[N, 4 d, d]`` and gate-major ``[4 N d]``; ``cuda``: ``[N, d, 4 d]`` and
    head-major ``[N 4 d]``), become ``recurrent_kernel`` ``[N, d, 4, d]`` and ``bias``
    ``[N, 4, d]`` (the reference's ``_recurrent_kernel_int2ext`` and ``_bias_int2ext``); the rest
    keep their names and shapes.

    Args:
        spec: the sizes.
        state: ``{name: array}``.

    Returns:
        ``{name: jax.Array}``.
    """
    heads = spec.num_heads
    d = spec.embedding_dim // heads
    prefix = "xlstm.slstm_cell."
    params = {k: jnp.asarray(v) for k, v in state.items() if not k.startswith(prefix)}
    kernel, bias = jnp.asarray(state[prefix + "_recurrent_kernel_"]), jnp.asarray(state[prefix + "_bias_"])
    if kernel.shape == (heads, 4 * d, d):  # vanilla
        params[prefix + "recurrent_kernel"] = kernel.reshape(heads, 4, d, d).transpose(0, 3, 1, 2)
        params[prefix + "bias"] = bias.reshape(4, heads, d).transpose(1, 0, 2)
    else:  # cuda
        params[prefix + "recurrent_kernel"] = kernel.reshape(heads, d, 4, d)
        params[prefix + "bias"] = bias.reshape(heads, 4, d)
    return params

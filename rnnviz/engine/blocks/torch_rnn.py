r"""A ``torch.nn.LSTM`` / ``torch.nn.GRU`` stack (one-way, no projection) as a pure JAX
function of its state dict, batch-first (inputs ``[B, T, I]``), from a zero initial state.

Follows torch's documented equations (``torch/nn/modules/rnn.py``, ``LSTM`` and ``GRU``),
the gates stacked along the weights' rows in torch's order. LSTM (i, f, g, o):

.. math::
    i, f, o = σ(W_{i·} x_t + b_{i·} + W_{h·} h_{t−1} + b_{h·}),\quad
    g = \tanh(W_{ig} x_t + b_{ig} + W_{hg} h_{t−1} + b_{hg}),\quad
    c_t = f ⊙ c_{t−1} + i ⊙ g,\quad h_t = o ⊙ \tanh(c_t)

GRU (r, z, n), whose candidate reads the reset gate *after* the recurrent bias:

.. math::
    r, z = σ(W_{i·} x_t + b_{i·} + W_{h·} h_{t−1} + b_{h·}),\quad
    n = \tanh(W_{in} x_t + b_{in} + r ⊙ (W_{hn} h_{t−1} + b_{hn})),\quad
    h_t = (1 − z) ⊙ n + z ⊙ h_{t−1}

Layer k reads layer k − 1's outputs h; the stack returns the top layer's. Without biases
(``bias=False``) both b terms are zero. The input projections of all steps are one matmul
before the scan; only ``W_h h`` runs inside it.

The probes: ``stream[k]`` is added to layer k's input (row L to the top layer's output);
``states[k]`` holds ``{"c", "h"}`` (LSTM) or ``{"h"}`` (GRU), each ``[B, T, H]``. The LSTM's c
probe is added before h_t = o ⊙ tanh(c_t) is read, so ∂L/∂c_t counts both the paths through
h_t and through c_{t+1}: the gradient torch gives a step's c with ``retain_grad``.

Weights of any float dtype are computed in float32 (the recurrence is short and small, and
torch's fused kernels accumulate the gates in float32 too), float64 weights in float64.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from rnnviz.checkpoints.families.torch_rnn import tensors
from rnnviz.engine.blocks import Probes, Trajectory, init, probed, wide_dtype

if TYPE_CHECKING:
    from rnnviz.checkpoints.families.torch_rnn import TorchRNNSpec

#: Whether a step's Jacobian in the state is diagonal: the gates read h_{t−1}.
STATE_IS_DIAGONAL = False


Params = dict[str, jax.Array]


def _layer_weights(spec: TorchRNNSpec, params: Params, k: int) -> tuple[jax.Array, ...]:
    """``(W_ih [G·H, I_k], W_hh [G·H, H], b_ih [G·H], b_hh [G·H])`` of layer k in float32, or
    float64 for float64 weights (zero biases when the stack has none)."""
    dtype = wide_dtype(params[spec.name("weight_hh", k)].dtype)
    w_ih, w_hh = (params[spec.name(n, k)].astype(dtype) for n in ("weight_ih", "weight_hh"))
    if not spec.bias:
        zero = jnp.zeros(w_hh.shape[:1], dtype)
        return w_ih, w_hh, zero, zero
    b_ih, b_hh = (params[spec.name(n, k)].astype(dtype) for n in ("bias_ih", "bias_hh"))
    return w_ih, w_hh, b_ih, b_hh


def lstm_step(
    c: jax.Array, x_gates: jax.Array, h_gates: jax.Array, probe: dict | None
) -> tuple[jax.Array, jax.Array]:
    """One LSTM step: ``(c_t, h_t)`` ``[B, H]`` from the gate pre-activations ``[B, 4H]`` of the
    input (``W_ih x_t + b_ih``) and of the state (``W_hh h_{t−1} + b_hh``), rows (i, f, g, o);
    ``probe`` ``{"c", "h"}`` ``[B, H]`` (or None) added to c_t before h_t reads it, and to h_t
    (or norm probes ``[B]``: :func:`~rnnviz.engine.blocks.probed`)."""
    i, f, g, o = jnp.split(x_gates + h_gates, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    if probe is not None:
        c = probed(c, probe["c"])
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    if probe is not None:
        h = probed(h, probe["h"])
    return c, h


def gru_step(h: jax.Array, x_gates: jax.Array, h_gates: jax.Array, probe: dict | None) -> jax.Array:
    """One GRU step: h_t ``[B, H]`` from the input's and the state's gate pre-activations
    ``[B, 3H]`` (rows r, z, n; the reset gate scales ``W_hn h + b_hn``), plus ``probe["h"]``."""
    x_r, x_z, x_n = jnp.split(x_gates, 3, axis=-1)
    h_r, h_z, h_n = jnp.split(h_gates, 3, axis=-1)
    r, z = jax.nn.sigmoid(x_r + h_r), jax.nn.sigmoid(x_z + h_z)
    n = jnp.tanh(x_n + r * h_n)
    h = (1.0 - z) * n + z * h
    return h if probe is None else probed(h, probe["h"])


def _step(
    lstm: bool, w_hh: jax.Array, b_hh: jax.Array, c: jax.Array, h: jax.Array, x_gates: jax.Array, probe: Any
) -> tuple[jax.Array, jax.Array]:
    """``(c_t, h_t)`` ``[B, H]`` of one LSTM step, or ``(c, h_t)`` of one GRU step (c unused)."""
    h_gates = h @ w_hh.T + b_hh[None]
    return lstm_step(c, x_gates, h_gates, probe) if lstm else (c, gru_step(h, x_gates, h_gates, probe))


def _state(spec: TorchRNNSpec, c: jax.Array, h: jax.Array) -> dict[str, jax.Array]:
    """The layer's state as :func:`state_shapes` names it: ``{"c", "h"}`` (LSTM) or ``{"h"}`` (GRU)."""
    return {"c": c, "h": h} if spec.model_type == "torch_lstm" else {"h": h}


def layer(
    spec: TorchRNNSpec, params: Params, k: int, x: jax.Array, probe: dict | None = None
) -> tuple[jax.Array, Trajectory]:
    """Layer k over the whole sequence: its outputs h ``[B, T, H]`` float32 from its inputs
    ``x`` ``[B, T, I_k]``, with ``probe`` (leaves ``[B, T, H]``, or None) added to its state;
    and its :class:`~rnnviz.engine.blocks.Trajectory` (states as :func:`state_shapes`, inputs
    ``{"gates": [B, T, G·H]}``, :func:`layer_step`)."""
    w_ih, w_hh, b_ih, b_hh = _layer_weights(spec, params, k)
    x_gates = jnp.einsum("bti,gi->tbg", x.astype(w_ih.dtype), w_ih) + b_ih[None, None]
    probe_t = None if probe is None else {n: jnp.swapaxes(p, 0, 1) for n, p in probe.items()}
    batch, h_size = x.shape[0], spec.hidden_size
    zeros = jnp.zeros((batch, h_size), w_ih.dtype)
    lstm = spec.model_type == "torch_lstm"

    def step(carry: tuple[jax.Array, jax.Array], xs: tuple[jax.Array, Any]):
        c, h = _step(lstm, w_hh, b_hh, *carry, *xs)
        return (c, h), (c, h)

    _, (cs, hs) = jax.lax.scan(step, (zeros, zeros), (x_gates, probe_t))
    cs, hs, x_gates = (jnp.swapaxes(v, 0, 1) for v in (cs, hs, x_gates))
    return hs, Trajectory(_state(spec, cs, hs), {"gates": x_gates})


def forward(
    spec: TorchRNNSpec,
    params: Params,
    inputs: jax.Array,
    probes: Probes | None = None,
    *,
    with_states: bool = False,
    head: bool = True,
) -> jax.Array | tuple[jax.Array, tuple[Trajectory, ...]]:
    """The stack's top-layer outputs ``[B, T, H]`` float32 for inputs ``[B, T, I]``.

    Args:
        spec: the stack's sizes (:class:`~rnnviz.checkpoints.families.torch_rnn.TorchRNNSpec`).
        params: ``{name: array}``, named as the state dict (prefix included).
        inputs: ``[B, T, I]`` float features, batch first.
        probes: optional :class:`~rnnviz.engine.blocks.Probes`: ``stream`` L + 1 arrays (row k
            ``[B, T, I_k]`` added to layer k's input, row L ``[B, T, H]`` to the output),
            ``states`` L dicts as :func:`state_shapes`.
        with_states: also return each layer's :class:`~rnnviz.engine.blocks.Trajectory`.
        head: accepted for a uniform call (a stack has no head: its output either way).

    Returns:
        h^{(L−1)} ``[B, T, H]`` float32, plus ``probes.stream[L]``; with ``with_states``,
        ``(outputs, trajectories)``: L trajectories (:func:`layer`).

    >>> import jax.numpy as jnp
    >>> from rnnviz.checkpoints.families.torch_rnn import TorchRNNSpec, tensors
    >>> spec = TorchRNNSpec("torch_lstm", num_layers=2, input_size=3, hidden_size=4)
    >>> params = {n: jnp.full(s, 0.1) for n, s in tensors(spec).items()}
    >>> forward(spec, params, jnp.ones((2, 5, 3))).shape
    (2, 5, 4)
    """
    x = inputs.astype(wide_dtype(params[spec.name("weight_hh", 0)].dtype))
    trajectories = []
    for k in range(spec.num_layers):
        if probes is not None:
            x = x + probes.stream[k]
        x, trajectory = layer(spec, params, k, x, None if probes is None else probes.states[k])
        trajectories.append(trajectory)
    out = x if probes is None else x + probes.stream[spec.num_layers]
    return (out, tuple(trajectories)) if with_states else out


def layer_step(spec: TorchRNNSpec, params: Params, layer: int, state: dict, inputs: dict) -> dict:
    """One step of layer ``layer``: the module docstring's LSTM or GRU update.

    Args:
        spec: the stack's sizes.
        params: the state dict (the layer's ``weight_hh`` and ``bias_hh``).
        layer: k.
        state: ``{"c", "h"}`` (LSTM) or ``{"h"}`` (GRU), each ``[B, H]``: the state after step
            t − 1, c and h taken as independent.
        inputs: step t's ``{"gates": [B, G·H]}``, ``W_ih x_t + b_ih`` (a
            :class:`~rnnviz.engine.blocks.Trajectory`'s inputs at t).

    Returns:
        The state after step t, before the probe, named as ``state``.
    """
    _, w_hh, _, b_hh = _layer_weights(spec, params, layer)
    h = state["h"]
    c, h = _step(spec.model_type == "torch_lstm", w_hh, b_hh, state.get("c", h), h, inputs["gates"], None)
    return _state(spec, c, h)


def state_shapes(spec: TorchRNNSpec, batch: int, seq_len: int) -> tuple[dict[str, jax.ShapeDtypeStruct], ...]:
    """Each layer's state probe: ``{"c", "h"}`` (LSTM) or ``{"h"}`` (GRU), leaves ``[B, T, H]`` float32.

    >>> from rnnviz.checkpoints.families.torch_rnn import TorchRNNSpec
    >>> shapes = state_shapes(TorchRNNSpec("torch_gru", 2, 3, 4), batch=2, seq_len=5)
    >>> len(shapes), shapes[0]["h"].shape
    (2, (2, 5, 4))
    """
    leaf = jax.ShapeDtypeStruct((batch, seq_len, spec.hidden_size), jnp.float32)
    names = ("c", "h") if spec.model_type == "torch_lstm" else ("h",)
    return tuple({n: leaf for n in names} for _ in range(spec.num_layers))


def init_params(
    spec: TorchRNNSpec, key: jax.Array, *, dtype: str = "float32", settings: None = None
) -> Params:
    r"""A fresh stack, drawn as torch's ``nn.LSTM`` / ``nn.GRU`` ``reset_parameters`` draws it:
    every weight and bias U(−1/√H, 1/√H).

    Args:
        spec: the sizes.
        key: the PRNG key; each tensor draws with its own key folded in from its name.
        dtype: ``"float32"`` or ``"bfloat16"`` (drawn in float32, then cast).
        settings: None (sizes alone decide torch's draw).

    Returns:
        ``{name: array}``, the names and shapes of :func:`~rnnviz.checkpoints.families.torch_rnn.tensors`.

    Example:
        >>> from rnnviz.checkpoints.families.torch_rnn import parse
        >>> spec = parse({"model_type": "torch_gru", "num_layers": 1, "input_size": 3, "hidden_size": 4}, "x")
        >>> params = init_params(spec, jax.random.key(0))
        >>> params["weight_ih_l0"].shape, bool(abs(params["weight_hh_l0"]).max() <= 0.5)
        ((12, 3), True)
    """
    del settings
    bound = 1 / math.sqrt(spec.hidden_size)
    return init.draw(tensors(spec), lambda name: init.uniform(-bound, bound), key, dtype)

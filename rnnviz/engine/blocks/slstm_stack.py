r"""A stack of sLSTM blocks as NX-AI's ``xlstm`` package builds it: ``xLSTMBlockStack``
(``xlstm/xlstm_block_stack.py``) with ``slstm_at="all"``, as pure JAX functions of its
``state_dict``'s tensors. A stack without a vocabulary: it reads the embedding stream.

With L blocks of width D, block ℓ the :func:`~rnnviz.engine.blocks.slstm.block` built at
``block_idx = ℓ`` of ``num_blocks = L`` (its forget-gate bias and its feed-forward's down
projection are drawn by depth), and LN the post-blocks layer norm (weight 1 + w, no bias,
ε = 10⁻⁵):

.. math::
    x^{(0)} = \mathrm{inputs},\qquad x^{(ℓ+1)} = \mathrm{sLSTMBlock}_ℓ(x^{(ℓ)}),\qquad
    y = \mathrm{LN}_{post}(x^{(L)})

(y = x^{(L)} without ``add_post_blocks_norm``). Each block keeps its own sLSTM state
(c, n, m, h) ``[B, N, d]`` from zero; the blocks are independent recurrences, stacked.

The probes (:class:`~rnnviz.engine.blocks.Probes`): ``stream[ℓ]`` is added to the stream
entering block ℓ (row 0 the inputs), ``stream[L]`` to the final norm's input; ``states[ℓ]``
holds block ℓ's ``{"c", "n", "m", "h"}``, each ``[B, T, N, d]`` (or norm probes ``[B, T]``),
added to the state after every step (:mod:`rnnviz.engine.blocks.slstm`).

Parameters are named as the reference's ``state_dict`` names them (``blocks.{ℓ}.xlstm_norm.weight``,
``blocks.{ℓ}.xlstm.fgate.weight``, …, ``post_blocks_norm.weight``), the cell's two tensors as its
proxies (``blocks.{ℓ}.xlstm.slstm_cell.recurrent_kernel`` ``[N, d, 4, d]`` and ``.bias``
``[N, 4, d]``): :func:`params_from_state_dict` reads the module's own. Everything runs in float32
(float64 for float64 weights), as the vanilla backend runs in its input's dtype.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.engine.blocks import Probes, Trajectory, slstm, wide_dtype

#: Whether a step's Jacobian in the state is diagonal: the gates read R h_{t−1} (block-diagonal
#: per head), and m_t rescales c and n.
STATE_IS_DIAGONAL = False

#: A block's state leaves, as :func:`state_shapes` names them.
STATE_LEAVES = ("c", "n", "m", "h")

Params = dict[str, jax.Array]


class SLSTMStackSpec(NamedTuple):
    """The sizes of an ``xLSTMBlockStack`` of sLSTM blocks, named as ``xLSTMBlockStackConfig``,
    ``sLSTMLayerConfig`` and ``FeedForwardConfig`` name them.

    Attributes:
        embedding_dim: D, the stream's width (inputs ``[B, T, D]``).
        num_blocks: L, the sLSTM blocks stacked.
        num_heads: N, dividing D.
        conv1d_kernel_size: the causal convolution's taps before the i and f gates; 0: none.
        proj_factor: each block's feed-forward up-projection (:func:`~rnnviz.engine.blocks.slstm.ffn_dim`);
            None: no feed-forward branch.
        bias_init: the forget gate's bias init, ``"powerlaw_blockdependent"`` (by depth),
            ``"small_init"``, ``"standard"`` or ``"zeros"``.
        recurrent_weight_init: ``"zeros"`` or ``"standard"``.
        add_post_blocks_norm: a final layer norm after the blocks.
    """

    embedding_dim: int
    num_blocks: int = 1
    num_heads: int = 4
    conv1d_kernel_size: int = 4
    proj_factor: float | None = 1.3
    bias_init: str = "powerlaw_blockdependent"
    recurrent_weight_init: str = "zeros"
    add_post_blocks_norm: bool = True

    @property
    def n_layers(self) -> int:
        """L."""
        return self.num_blocks

    @property
    def d_model(self) -> int:
        """D: the width of every row of the stream, the inputs' included."""
        return self.embedding_dim

    @property
    def vocab_size(self) -> int:
        """0: the stack reads the embedding stream, not tokens."""
        return 0


def block_spec(spec: SLSTMStackSpec, index: int) -> slstm.SLSTMSpec:
    """Block ``index``'s sizes, as the stack configures its ``sLSTMBlockConfig`` (``_block_idx``,
    ``_num_blocks``).

    >>> block_spec(SLSTMStackSpec(16, num_blocks=3), 2).block_idx
    2
    """
    return slstm.SLSTMSpec(
        embedding_dim=spec.embedding_dim,
        num_heads=spec.num_heads,
        conv1d_kernel_size=spec.conv1d_kernel_size,
        proj_factor=spec.proj_factor,
        num_blocks=spec.num_blocks,
        block_idx=index,
        bias_init=spec.bias_init,
        recurrent_weight_init=spec.recurrent_weight_init,
    )


def _under(params: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix) :]: v for k, v in params.items() if k.startswith(prefix)}


def _prefixed(params: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {prefix + k: v for k, v in params.items()}


def state_shapes(
    spec: SLSTMStackSpec, batch: int, seq_len: int
) -> tuple[dict[str, jax.ShapeDtypeStruct], ...]:
    """Each block's sLSTM state over a sequence, as :class:`~rnnviz.engine.blocks.Probes` holds it.

    Args:
        spec: the sizes.
        batch: B.
        seq_len: T.

    Returns:
        L dicts ``{"c", "n", "m", "h"}`` of float32 ``jax.ShapeDtypeStruct`` ``[B, T, N, d]``.

    >>> shapes = state_shapes(SLSTMStackSpec(16, num_blocks=2, num_heads=4), batch=3, seq_len=5)
    >>> len(shapes), shapes[1]["m"].shape
    (2, (3, 5, 4, 4))
    """
    heads = spec.num_heads
    leaf = jax.ShapeDtypeStruct((batch, seq_len, heads, spec.embedding_dim // heads), jnp.float32)
    return tuple({name: leaf for name in STATE_LEAVES} for _ in range(spec.num_blocks))


def forward(
    spec: SLSTMStackSpec,
    params: Params,
    inputs: jax.Array,
    probes: Probes | None = None,
    *,
    with_states: bool = False,
    head: bool = True,
) -> jax.Array | tuple[jax.Array, tuple[Trajectory, ...]]:
    """``xLSTMBlockStack.forward``: the L blocks, then the post-blocks norm.

    Args:
        spec: the sizes.
        params: ``{name: array}`` as :func:`init_params` and :func:`params_from_state_dict` name them.
        inputs: ``<float>[B, T, D]``, the embedding stream.
        probes: optional :class:`~rnnviz.engine.blocks.Probes`: ``stream`` L + 1 arrays
            ``[B, T, D]`` (row ℓ added to block ℓ's input, row L to the final norm's),
            ``states`` L dicts as :func:`state_shapes` (or norm probes ``[B, T]`` per leaf).
        with_states: also return each block's :class:`~rnnviz.engine.blocks.Trajectory`.
        head: accepted for a uniform call (a stack has no head: its output either way).

    Returns:
        y ``[B, T, D]`` float32 (float64 for float64 weights); with ``with_states``,
        ``(y, trajectories)``: L trajectories, states ``{"c", "n", "m", "h": [B, T, N, d]}``
        and inputs ``{"x": [B, T, 4, N, d]}`` (:func:`layer_step`).

    Example:
        >>> spec = SLSTMStackSpec(embedding_dim=8, num_blocks=2, num_heads=2)
        >>> params = init_params(spec, jax.random.key(0))
        >>> y, trajectories = forward(spec, params, jnp.ones((2, 5, 8)), with_states=True)
        >>> y.shape, len(trajectories), trajectories[1].states["c"].shape
        ((2, 5, 8), 2, (2, 5, 2, 4))
    """
    x = inputs.astype(wide_dtype(params["blocks.0.xlstm.slstm_cell.bias"].dtype))
    trajectories = []
    for index in range(spec.num_blocks):
        if probes is not None:
            x = x + probes.stream[index]
        probe = None if probes is None else probes.states[index]
        x, trajectory = slstm.block(block_spec(spec, index), _under(params, f"blocks.{index}."), x, probe)
        trajectories.append(trajectory)
    if probes is not None:
        x = x + probes.stream[spec.num_blocks]
    if spec.add_post_blocks_norm:
        x = slstm.layer_norm(x, params["post_blocks_norm.weight"])
    return (x, tuple(trajectories)) if with_states else x


def layer_step(spec: SLSTMStackSpec, params: Params, layer: int, state: dict, inputs: dict) -> dict:
    """One step of block ``layer``'s sLSTM cell, before the probe
    (:func:`~rnnviz.engine.blocks.slstm.cell_step`).

    Args:
        spec: the sizes.
        params: the stack's tensors (block ``layer``'s cell's recurrent kernel and bias are read).
        layer: ℓ.
        state: ``{"c", "n", "m", "h": [B, N, d]}``, the state after step t − 1.
        inputs: step t's ``{"x": [B, 4, N, d]}``, a trajectory's inputs at t.

    Returns:
        ``{"c", "n", "m", "h": [B, N, d]}``, the state after step t.
    """
    prefix = f"blocks.{layer}.xlstm.slstm_cell."
    cell = {"recurrent_kernel": params[prefix + "recurrent_kernel"], "bias": params[prefix + "bias"]}
    return slstm.layer_step(cell, state, inputs)


def init_params(
    spec: SLSTMStackSpec, key: jax.Array, *, dtype: str = "float32", settings: None = None
) -> Params:
    """A fresh stack's parameters, as ``xLSTMBlockStack``'s blocks draw theirs: block ℓ by
    :func:`~rnnviz.engine.blocks.slstm.init` at ``block_idx = ℓ`` of L (the power-law forget bias
    :math:`−(−5 + 12 (j/(d−1))^{0.3 + 1.3 ℓ/(L−1)})`, the down projection N(0, (2 / (L √D))²)),
    and the post-blocks norm's weight w = 0 (a scale of 1).

    Args:
        spec: the sizes.
        key: a PRNG key, split into one per block.
        dtype: ``"float32"`` or ``"bfloat16"`` (drawn in float32, then cast).
        settings: None (the sizes and the spec's init choices decide the draw).

    Returns:
        ``{name: array}`` named as the reference's ``state_dict`` (the cell's as its proxies).

    Example:
        >>> params = init_params(SLSTMStackSpec(8, num_blocks=3, num_heads=2), jax.random.key(0))
        >>> params["blocks.2.xlstm.slstm_cell.bias"].shape, params["post_blocks_norm.weight"].shape
        ((2, 4, 4), (8,))
    """
    del settings
    params: Params = {}
    for index, block_key in enumerate(jax.random.split(key, spec.num_blocks)):
        params |= _prefixed(slstm.init(block_spec(spec, index), key=block_key), f"blocks.{index}.")
    if spec.add_post_blocks_norm:
        params["post_blocks_norm.weight"] = jnp.zeros(spec.embedding_dim)
    return {k: v.astype(jnp.dtype(dtype)) for k, v in params.items()}


def params_from_state_dict(spec: SLSTMStackSpec, state: dict[str, Any]) -> Params:
    """An ``xLSTMBlockStack``'s ``state_dict`` (its arrays, as NumPy or JAX) as :func:`forward`
    reads it: each block's by :func:`~rnnviz.engine.blocks.slstm.params_from_state_dict` (the
    cell's internal layouts, vanilla or cuda, as its proxies), the post-blocks norm's as it is.

    Args:
        spec: the sizes.
        state: ``{name: array}``.

    Returns:
        ``{name: jax.Array}``.
    """
    params: Params = {}
    for index in range(spec.num_blocks):
        prefix = f"blocks.{index}."
        block = slstm.params_from_state_dict(block_spec(spec, index), _under(state, prefix))
        params |= _prefixed(block, prefix)
    if spec.add_post_blocks_norm:
        params["post_blocks_norm.weight"] = jnp.asarray(state["post_blocks_norm.weight"])
    return params

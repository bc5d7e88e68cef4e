r"""Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks: Improving Mamba2
with Delta Rule") and DeltaNet (Yang et al. 2024, "Parallelizing Linear Transformers with the
Delta Rule over Sequence Length", the α = 1 case) as a Flax cell honouring ``RNNCellBase``'s
contract: carry S ``[(B,) heads, d_v, d_k]``, output y ``[(B,) heads·d_v]`` read from the new
carry and the input (:func:`delta_rule_readout`).

Given the input the recurrence is linear in S: per head,
``vec(S_t) = α_t (I_{d_v} ⊗ (I − β_t k_t k_tᵀ)) vec(S_{t−1}) + …`` with vec the row-major
(C-order) flattening of ``[d_v, d_k]``; in the paper's column-major vec the same matrix reads
``α_t (I − β_t k_t k_tᵀ) ⊗ I``. With ‖k_t‖ = 1 (up to ε) its eigenvalues are α_t (1 − β_t) once and α_t
(d_k − 1 times), per row of S.

Checked against ``fla-org/flash-linear-attention``: ``fla/ops/gated_delta_rule/naive.py``
(``recurrent_gated_delta_rule_ref``) and ``fla/layers/gated_deltanet.py`` (``GatedDeltaNet``:
gates, initialisation, the q/k L2 norm).
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.engine.cells.modern import _Cell
from rnnviz.engine.cells.shared import affine, dense, dt_bias_init, split_heads

Params = dict[str, Any]

#: Inside the L2 norm's square root, x / √(Σx² + ε), as fla's ``l2norm``.
L2_EPS = 1e-6


def a_log_init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
    """``A_log = ln A`` with A ∼ U(0, 16) per head, as fla's ``GatedDeltaNet``.

    >>> import jax, jax.numpy as jnp
    >>> a = jnp.exp(a_log_init(jax.random.key(0), (100,)))
    >>> bool(a.min() > 0), bool(a.max() <= 16)
    (True, True)
    """
    a = jax.random.uniform(key, shape, jnp.float32, 0.0, 16.0)
    return jnp.log(a).astype(dtype)


def _l2_normalise(a: jax.Array) -> jax.Array:
    return a * jax.lax.rsqrt(jnp.sum(a * a, axis=-1, keepdims=True) + L2_EPS)


def delta_rule_inputs(params: Params, x: jax.Array) -> dict[str, jax.Array]:
    r"""What one step reads from the input ``x`` ``[(B,) I]``, per head (heads from ``b``'s kernel):

    .. math::
        q_t = \frac{\hat q}{‖\hat q‖},\ k_t = \frac{\hat k}{‖\hat k‖},\ v_t = \hat v\quad
        (\hat q, \hat k, \hat v = \mathrm{SiLU}(W_{q,k,v} x_t)),

        β_t = σ(W_β x_t),\qquad α_t = \exp(−e^{A_{log}} ⊙ \mathrm{softplus}(W_α x_t + b_{dt}))

    Returns:
        ``{"q", "k", "v"}`` ``[(B,) heads, d]`` in ``x``'s dtype and ``{"alpha", "beta"}``
        ``[(B,) heads]`` in float32; α = 1 when the params have no ``A_log`` (DeltaNet).
    """
    heads = params["b"]["kernel"].shape[-1]
    q, k, v = (split_heads(jax.nn.silu(dense(params[name], x)), heads) for name in ("q", "k", "v"))
    beta = jax.nn.sigmoid(dense(params["b"], x).astype(jnp.float32))
    if "A_log" in params:
        raw = dense(params["a"], x).astype(jnp.float32)
        rate = jnp.exp(params["A_log"].astype(jnp.float32))
        bias = params["dt_bias"].astype(jnp.float32)
        alpha = jnp.exp(
            -jnp.broadcast_to(rate, raw.shape) * jax.nn.softplus(raw + jnp.broadcast_to(bias, raw.shape))
        )
    else:
        alpha = jnp.ones_like(beta)
    return {"q": _l2_normalise(q), "k": _l2_normalise(k), "v": v, "alpha": alpha, "beta": beta}


def delta_rule_step(params: Params, state: jax.Array, x: jax.Array) -> jax.Array:
    r"""One (gated) delta-rule step: the new S ``[(B,) heads, d_v, d_k]`` in ``state``'s dtype,
    computed in ``x``'s dtype, as S_t = α S (I − β k kᵀ) + β v kᵀ = αS + β (v − αS k) kᵀ."""
    dt = x.dtype
    g = delta_rule_inputs(params, x)
    k, v = g["k"], g["v"]
    alpha, beta = g["alpha"].astype(dt)[..., None, None], g["beta"].astype(dt)[..., None]
    decayed = alpha * state.astype(dt)
    error = v - jnp.einsum("...vk,...k->...v", decayed, k)  # v − αS k: what the memory gets wrong
    return (decayed + (beta * error)[..., :, None] * k[..., None, :]).astype(state.dtype)


def delta_rule_readout(params: Params, state: jax.Array, x: jax.Array) -> jax.Array:
    """o_t = S_t q_t / √d_k per head, flattened to ``[(B,) heads·d_v]``, from the new S and x."""
    q = delta_rule_inputs(params, x)["q"]
    o = jnp.einsum("...vk,...k->...v", state.astype(q.dtype), q) / math.sqrt(q.shape[-1])
    return o.reshape(o.shape[:-2] + (-1,))


class GatedDeltaNetCell(_Cell):
    r"""Gated DeltaNet (Yang et al. 2024): a matrix memory per head, decayed by α_t and corrected
    towards v_t along k_t by the delta rule; carry S ``[(B,) heads, d, d]`` (``[d_v, d_k]``),
    d = H/heads.

    .. math::
        S_t = α_t\, S_{t−1} (I − β_t k_t k_t^\top) + β_t v_t k_t^\top,\qquad
        y_t = S_t q_t / \sqrt{d}\ \text{flattened to}\ [(B,)\ H]

    with q_t, k_t, v_t, β_t, α_t as in :func:`delta_rule_inputs`; ``gated=False`` is DeltaNet
    (α_t = 1). Parameters: ``q``, ``k``, ``v`` ``[I, H]``, ``b`` (β) ``[I, heads]``, and when
    gated ``a`` ``[I, heads]``, ``A_log`` and ``dt_bias`` ``[heads]``; q, k and v have biases.

    Choices (checked against fla ``fla/ops/gated_delta_rule/naive.py`` and
    ``fla/layers/gated_deltanet.py``):

    * S is ``[d_v, d_k]`` and multiplies q from the left (S q), as the paper; fla's naive
      reference stores ``[d_k, d_v]`` (its transpose, read as qᵀS), its current kernels
      ``[d_v, d_k]`` (``state_v_first``).
    * q and k are L2-normalised per head (fla's ``use_qk_l2norm_in_kernel``, ε = 1e-6 inside the
      root), and the output is scaled by d_k^{−1/2} (the kernels' default ``scale``).
    * q, k, v pass through SiLU, as the reference layer's path without its short convolution
      (left out, with the output norm, output gate and output projection); d_k = d_v = d.
    * Init: A ∼ U(0, 16) (:func:`a_log_init`), softplus(b_dt) log-uniform on [10⁻³, 10⁻¹]
      (:func:`dt_bias_init`); the kernels from ``kernel_init``.
    * q, k and v have biases, zero at initialisation (so the cell at initialisation is the
      reference's, whose projections have none). The reference reads q from a short
      convolution over the last four inputs; without it and without a bias, an input of zeros
      gives q_t = 0 and y_t = 0 whatever S holds, and a classifier of sequences that end in
      zeros (most digits by pixel) cannot learn. β and α stay bias-free, as the reference's.
    * Dtypes: the projections and the state update run in the compute dtype; α_t, β_t in float32,
      then cast.

    Attributes:
        num_heads: the number of heads (H divisible by it).
        gated: α_t from the input (True) or α_t = 1, DeltaNet (False).
        The other fields as ``_Cell`` (``bias_init`` and ``recurrent_kernel_init`` are unused).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from rnnviz.engine.cells.deltanet import GatedDeltaNetCell
        >>> cell = GatedDeltaNetCell(features=4, num_heads=2)
        >>> x = jnp.ones((2, 3))  # [B, I]
        >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
        >>> variables = cell.init(jax.random.key(1), carry, x)
        >>> carry, y = cell.apply(variables, carry, x)
        >>> carry.shape, y.shape  # S [B, heads, d_v, d_k], y [B, H]
        ((2, 2, 2, 2), (2, 4))
    """

    num_heads: int = 1
    gated: bool = True

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        h_dim, heads, i_dim = self.features, self.num_heads, x.shape[-1]
        if h_dim % heads:
            raise ValueError(f"GatedDeltaNetCell: features {h_dim} is not divisible by num_heads {heads}")
        # q, k, v with biases (zero at first), standing for the short convolution left out
        zeros = nn.initializers.zeros_init()
        params = {name: affine(self, name, i_dim, h_dim, bias_init=zeros) for name in ("q", "k", "v")}
        params["b"] = affine(self, "b", i_dim, heads, bias=False)
        if self.gated:
            params["a"] = affine(self, "a", i_dim, heads, bias=False)
            params["A_log"] = self.param("A_log", a_log_init, (heads,), self.param_dtype)
            params["dt_bias"] = self.param("dt_bias", dt_bias_init(), (heads,), self.param_dtype)
        dt = self.dtype if self.dtype is not None else jnp.result_type(x.dtype, self.param_dtype)
        x = x.astype(dt)
        state = delta_rule_step(params, carry, x)
        return state, delta_rule_readout(params, state, x)

    @nn.nowrap
    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> jax.Array:
        """S_0 of shape ``input_shape[:-1] + (heads, d, d)`` from ``carry_init``."""
        d = self.features // self.num_heads
        return self.carry_init(rng, tuple(input_shape[:-1]) + (self.num_heads, d, d), self.param_dtype)


__all__ = [
    "L2_EPS",
    "GatedDeltaNetCell",
    "a_log_init",
    "delta_rule_inputs",
    "delta_rule_readout",
    "delta_rule_step",
    "dt_bias_init",
]

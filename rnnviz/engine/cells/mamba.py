r"""Mamba's selective state-space model (Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling
with Selective State Spaces", the S6 layer) as a Flax cell honouring ``RNNCellBase``'s contract:
carry h ``[(B,) D, N]``, output y ``[(B,) D]`` read from the new carry and the input
(:func:`selective_ssm_readout`).

The recurrence is diagonal and linear in h given the input: ∂h_t/∂h_{t−1} = diag(exp(Δ_t A))
over the D·N state entries, with ln of the diagonal Δ_t A (:func:`selective_ssm_log_decay`).

Checked against ``state-spaces/mamba``: ``mamba_ssm/ops/selective_scan_interface.py``
(``selective_scan_ref``) and ``mamba_ssm/modules/mamba_simple.py`` (``Mamba.__init__``: the
initialisation, and ``Mamba.step``).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.engine.cells.modern import Initializer, _Cell
from rnnviz.engine.cells.shared import affine, dense, dt_bias_init

Params = dict[str, Any]


def s4d_real_log_a(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
    """S4D-real: ``A_log[d, n] = ln(n + 1)``, so A = −exp(A_log) = −(1 … N) in every channel.

    >>> import jax, jax.numpy as jnp
    >>> (-jnp.exp(s4d_real_log_a(jax.random.key(0), (2, 3)))).tolist()
    [[-1.0, -2.0, -3.0], [-1.0, -2.0, -3.0]]
    """
    del key
    a = jnp.broadcast_to(jnp.arange(1, shape[-1] + 1, dtype=jnp.float32), shape)
    return jnp.log(a).astype(dtype)


def _uniform_signed(scale: float) -> Initializer:
    """U(−scale, scale), drawn in float32 (torch's ``uniform_(−std, std)``)."""

    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        return jax.random.uniform(key, shape, jnp.float32, -scale, scale).astype(dtype)

    return init


def _selection(params: Params, u: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Δ ``[(B,) D]`` (float32), B_t and C_t ``[(B,) N]`` from the projected input u."""
    n_state = params["A_log"].shape[-1]
    x_dbl = dense(params["x_proj"], u)  # [(B,) r + 2N]: r = 0 for a full-rank W_Δ
    rank = x_dbl.shape[-1] - 2 * n_state
    b_t, c_t = x_dbl[..., rank : rank + n_state], x_dbl[..., rank + n_state :]
    dt_in = x_dbl[..., :rank] if rank else u
    dt_raw = dt_in @ params["dt_proj"]["kernel"].astype(u.dtype)
    bias = params["dt_proj"]["bias"].astype(jnp.float32)
    delta = jax.nn.softplus(dt_raw.astype(jnp.float32) + jnp.broadcast_to(bias, dt_raw.shape))
    return delta, b_t, c_t


def selective_ssm_log_decay(params: Params, x: jax.Array) -> jax.Array:
    """ln of the diagonal of ∂h_t/∂h_{t−1} at input ``x`` ``[(B,) I]``: Δ_t A ``[(B,) D, N]``
    (float32), A = −exp(A_log)."""
    u = dense(params["in_proj"], x)
    delta, _, _ = _selection(params, u)
    a = -jnp.exp(params["A_log"].astype(jnp.float32))
    return delta[..., :, None] * jnp.broadcast_to(a, delta.shape + a.shape[-1:])


def selective_ssm_readout(params: Params, h: jax.Array, x: jax.Array) -> jax.Array:
    """y_t = C_t · h_t + D ⊙ u_t ``[(B,) D]`` from the new state h ``[(B,) D, N]`` and the input x
    (u = W_in x, C_t = W_C u), computed in ``x``'s dtype."""
    u = dense(params["in_proj"], x)
    _, _, c_t = _selection(params, u)
    skip = jnp.broadcast_to(params["D"].astype(u.dtype), u.shape)
    return jnp.einsum("...dn,...n->...d", h.astype(u.dtype), c_t) + skip * u


def selective_ssm_step(params: Params, h: jax.Array, x: jax.Array) -> jax.Array:
    """One selective-SSM step: the new state ``[(B,) D, N]`` in ``h``'s dtype, computed in ``x``'s
    dtype (exp(Δ A) and Δ in float32, then cast); the maths of :class:`SelectiveSSMCell`."""
    dt = x.dtype
    u = dense(params["in_proj"], x)
    delta, b_t, _ = _selection(params, u)
    a = -jnp.exp(params["A_log"].astype(jnp.float32))
    decay = jnp.exp(delta[..., :, None] * jnp.broadcast_to(a, delta.shape + a.shape[-1:]))
    # Euler for B: Δ_t B_t x_t, as selective_scan_ref's deltaB_u
    drive = (delta.astype(dt) * u)[..., :, None] * b_t[..., None, :]
    return (decay.astype(dt) * h.astype(dt) + drive).astype(h.dtype)


class SelectiveSSMCell(_Cell):
    r"""Mamba's selective SSM (S6, Gu & Dao 2023): a diagonal state space whose step Δ_t and
    input/output maps B_t, C_t are functions of the input; carry h ``[(B,) D, N]``, D = features.

    .. math::
        u_t = W_{in} x_t + b_{in},\quad Δ_t = \mathrm{softplus}(W_Δ u_t + b_Δ),

        B_t = W_B u_t,\quad C_t = W_C u_t,

        h_t = \exp(Δ_t A) ⊙ h_{t−1} + (Δ_t ⊙ u_t)\, B_t^\top,\quad
        y_t = h_t C_t + D ⊙ u_t,\qquad A = −\exp(A_{log})

    Shapes: x ``[(B,) I]``; u, Δ, y ``[(B,) D]``; B_t, C_t ``[(B,) N]``; h ``[(B,) D, N]``.
    Parameters: ``in_proj`` ``[I, D]`` + bias, ``x_proj`` ``[D, r + 2N]`` (no bias; B and C
    in its last 2N columns), ``dt_proj`` ``[r or D, D]`` + bias b_Δ, ``A_log`` ``[D, N]``, ``D``
    ``[D]``.

    Choices (checked against mamba ``selective_scan_ref`` and ``mamba_simple.py``):

    * Discretisation as the reference: zero-order hold for A (exp(Δ A)), Euler for B (Δ B u).
    * W_Δ is full rank (``dt_proj`` reads u, r = 0) unless ``dt_rank`` is set; then, as the
      reference, Δ reads the first r outputs of ``x_proj`` through ``dt_proj`` ``[r, D]``
      (the reference's default rank is ⌈d_model/16⌉). Its kernel starts uniform on
      ±r^{−1/2}·dt_scale (r = D when full rank), the reference's ``dt_init="random"``.
    * Init: S4D-real A = −(1 … N) per channel (:func:`s4d_real_log_a`), Δ = softplus(b_Δ)
      log-uniform on [dt_min, dt_max] (:func:`dt_bias_init`), D = 1; ``in_proj`` and ``x_proj``
      from ``kernel_init``.
    * Left out: the block around the SSM — its input projection's gating branch z and the
      SiLU(z) multiplication, the short causal convolution and its SiLU, and the output
      projection. u = W_in x + b_in stands for the projection to the inner width D and the
      convolution: its bias, zero at initialisation (so the cell at initialisation is the
      reference's S6), is the convolution's (the reference's ``conv_bias``); without it an input
      of zeros gives u_t = 0, C_t = 0 and y_t = 0 whatever h holds, and a classifier of
      sequences that end in zeros (most digits by pixel) cannot learn.
    * Dtypes: the projections and the state update run in the compute dtype; Δ, exp(Δ A) are
      computed in float32 and cast (the reference computes the scan in float32; exp(−10⁻³) is 1
      in bfloat16).

    Attributes:
        state_size: N (16).
        dt_rank: the rank of W_Δ; None: full rank.
        dt_min, dt_max, dt_init_floor: Δ's initial range and floor (1e-3, 1e-1, 1e-4).
        dt_scale: scales the initial ``dt_proj`` kernel (1).
        The other fields as ``_Cell`` (``bias_init`` and ``recurrent_kernel_init`` are unused).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from rnnviz.engine.cells.mamba import SelectiveSSMCell
        >>> cell = SelectiveSSMCell(features=4, state_size=3)
        >>> x = jnp.ones((2, 5))  # [B, I]
        >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
        >>> variables = cell.init(jax.random.key(1), carry, x)
        >>> carry, y = cell.apply(variables, carry, x)
        >>> carry.shape, y.shape  # h [B, D, N], y [B, D]
        ((2, 4, 3), (2, 4))
    """

    state_size: int = 16
    dt_rank: int | None = None
    dt_min: float = 1e-3
    dt_max: float = 1e-1
    dt_init_floor: float = 1e-4
    dt_scale: float = 1.0

    @nn.compact
    def __call__(self, carry: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        d, n_state = self.features, self.state_size
        rank = self.dt_rank or 0
        dt_std = (rank or d) ** -0.5 * self.dt_scale
        params = {
            # a bias (zero at first) for the causal convolution's, left out (see Choices)
            "in_proj": affine(self, "in_proj", x.shape[-1], d, bias_init=nn.initializers.zeros_init()),
            "x_proj": affine(self, "x_proj", d, rank + 2 * n_state, bias=False),
            "dt_proj": affine(
                self,
                "dt_proj",
                rank or d,
                d,
                kernel_init=_uniform_signed(dt_std),
                bias_init=dt_bias_init(self.dt_min, self.dt_max, self.dt_init_floor),
            ),
            "A_log": self.param("A_log", s4d_real_log_a, (d, n_state), self.param_dtype),
            "D": self.param("D", nn.initializers.ones_init(), (d,), self.param_dtype),
        }
        dt = self.dtype if self.dtype is not None else jnp.result_type(x.dtype, self.param_dtype)
        x = x.astype(dt)
        h = selective_ssm_step(params, carry, x)
        return h, selective_ssm_readout(params, h, x)

    @nn.nowrap
    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> jax.Array:
        """h_0 of shape ``input_shape[:-1] + (D, N)`` from ``carry_init``."""
        shape = tuple(input_shape[:-1]) + (self.features, self.state_size)
        return self.carry_init(rng, shape, self.param_dtype)


__all__ = [
    "SelectiveSSMCell",
    "dt_bias_init",
    "s4d_real_log_a",
    "selective_ssm_log_decay",
    "selective_ssm_readout",
    "selective_ssm_step",
]

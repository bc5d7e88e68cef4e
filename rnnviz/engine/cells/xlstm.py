r"""The two cells of xLSTM (Beck et al. 2024, "xLSTM: Extended Long Short-Term Memory"), as Flax
cells honouring ``RNNCellBase``'s contract: the scalar-memory :class:`SLSTMCell` and the
matrix-memory :class:`MLSTMCell`. Both have an exponential input gate, kept finite by a
stabiliser m_t carried with the state.

Checked against ``NX-AI/xlstm``: ``xlstm/blocks/slstm/src/vanilla/slstm.py``
(``slstm_forward_pointwise``), ``xlstm/blocks/slstm/cell.py`` (``reset_parameters``: the
forget-gate bias), ``xlstm/blocks/mlstm/backends.py`` (``recurrent_step_stabilized_simple``),
``xlstm/blocks/mlstm/cell.py`` (gate initialisation) and ``xlstm/components/init.py``.

**Stored vs true state.** Both cells carry the *stabilised* state: the stored memory and
normaliser are the true (unstabilised) ones times e^{−m_t},

.. math:: c^{stored}_t = e^{−m_t} c_t,\qquad n^{stored}_t = e^{−m_t} n_t

(sLSTM: m ``[(B,) H]``, one per unit; mLSTM: m ``[(B,) heads]``, one per head, scaling C and n
of that head). Every output is a ratio in which e^{−m_t} cancels, so any m represents the same
true state; :func:`slstm_true_state` and :func:`mlstm_true_state` map a stored carry to the
same state with m = 0, which the cell continues from to the same outputs. For a loss L of what
follows that sees the state only through the outputs (or the true state), with m held fixed,
the chain rule gives

.. math:: \frac{∂L}{∂c_t} = e^{−m_t} \frac{∂L}{∂c^{stored}_t},\qquad
          \frac{∂L}{∂n_t} = e^{−m_t} \frac{∂L}{∂n^{stored}_t}

elementwise per unit (sLSTM) or per head (mLSTM): gradients with respect to the carry, as
rnnviz measures them, are those of the stored state, e^{m_t} times those of the true state.

**Dtypes.** The projections and the state update run in the compute dtype ``dtype``; the
stabiliser and the gates (m_t, i′_t, f′_t) are computed in float32 and cast (a forget gate
σ(3) … σ(6) rounds to 1 in bfloat16), and so is the mLSTM's normalised readout
(:func:`mlstm_readout`). The mLSTM holds its memory (C, n, m) and updates it in
``state_dtype``, float32 by default whatever the compute dtype, as the reference's kernels keep
their states (``inference_state_dtype = "float32"`` in NX-AI ``xlstm/xlstm_large/model.py``):
a bfloat16 C rounded at every step is what limited a bfloat16 mLSTM's gradient (see
``tests/engine/test_designs.py``). The new m_t is rounded to the carry's dtype *before*
i′_t and f′_t are formed from it, so the stored state stays exactly e^{−m_t} times the true one
for the m that is carried (any m is a valid stabiliser).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rnnviz.engine.cells.modern import Initializer, _Cell
from rnnviz.engine.cells.shared import affine, dense, split_heads
from rnnviz.engine.linalg import drawing_together
from rnnviz.tables.builtin_cells import SLSTM_GATES as GATES  # the sLSTM's gates, in the reference's order

Params = dict[str, Any]
SLSTMCarry = tuple[jax.Array, jax.Array, jax.Array, jax.Array]
MLSTMCarry = tuple[jax.Array, jax.Array, jax.Array]


def _stabilised_gates(
    i_raw: jax.Array, log_f: jax.Array, m: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """m_t = max(ln f + m_{t−1}, ĩ) (rounded to m's dtype), i′ = e^{ĩ − m_t}, f′ = e^{ln f + m_{t−1} − m_t}:
    float32, the new m in m's dtype."""
    m_prev = m.astype(jnp.float32)
    m_new = jnp.maximum(log_f + m_prev, i_raw).astype(m.dtype)
    m32 = m_new.astype(jnp.float32)
    return jnp.exp(i_raw - m32), jnp.exp(log_f + m_prev - m32), m_new


# ---- sLSTM ---------------------------------------------------------------------------------


def powerlaw_forget_bias(num_heads: int) -> Initializer:
    r"""The NX-AI sLSTM forget-gate bias (``bias_init="powerlaw_blockdependent"``, one block):
    per head, over the head's units j = 0 … d−1,

    .. math:: b_f[j] = −\left(−5 + 12·\left(\frac{j}{d − 1}\right)^{0.3}\right)

    from +5 (σ = 0.993: long memory) down to −7, the same in every head (the reference's
    exponent is 0.3 + 1.3·block_idx/(num_blocks − 1); one cell is block 0 of 1). d = 1 gives 5.

    >>> import jax, jax.numpy as jnp
    >>> b = powerlaw_forget_bias(2)(jax.random.key(0), (6,))
    >>> [round(float(v), 2) for v in b]
    [5.0, -4.75, -7.0, 5.0, -4.75, -7.0]
    """

    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        del key
        d = shape[-1] // num_heads
        j = jnp.arange(d, dtype=jnp.float32) / max(d - 1, 1)
        return jnp.tile(-(-5.0 + 12.0 * j**0.3), num_heads).astype(dtype)

    return init


def _per_head(init: Initializer, num_heads: int) -> Initializer:
    """Draw a ``[heads, d, d]`` kernel as ``heads`` independent ``[d, d]`` draws of ``init``
    (an orthogonal draw per block, not one tall orthonormal matrix cut in blocks), vmapped: one
    draw to compile, not one per head."""

    def draw(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        keys = jax.random.split(key, num_heads)
        if drawing_together():  # each head's draw joins the parameters' others, vmapped there
            return jnp.stack([init(keys[h], shape[1:], dtype) for h in range(num_heads)])
        return jax.vmap(lambda k: init(k, shape[1:], dtype))(keys)

    return draw


def slstm_step(
    params: Params, carry: SLSTMCarry, x: jax.Array, exponential_forget: bool = False
) -> SLSTMCarry:
    """One sLSTM step: the new carry ``(c, n, m, h)`` (each ``[(B,) H]``, in the carry's dtypes),
    computed in ``x``'s dtype; the maths of :class:`SLSTMCell`."""
    h = carry[3]
    dt = x.dtype
    heads = params["hi"]["kernel"].shape[0]
    hb = split_heads(h.astype(dt), heads)

    def pre(gate: str) -> jax.Array:
        rec = jnp.einsum("...gd,gde->...ge", hb, params["h" + gate]["kernel"].astype(dt))
        return dense(params["i" + gate], x) + rec.reshape(h.shape)

    return slstm_update(carry, *(pre(g) for g in GATES), exponential_forget)


def slstm_update(
    carry: SLSTMCarry,
    i_raw: jax.Array,
    f_raw: jax.Array,
    z_raw: jax.Array,
    o_raw: jax.Array,
    exponential_forget: bool = False,
) -> SLSTMCarry:
    """The element-wise rest of an sLSTM step from its four pre-activations ``[(B,) H]`` (in the
    compute dtype): the stabilised gates, then ``(c, n, m, h)`` in the carry's dtypes."""
    c, n, m, h = carry
    dt = i_raw.dtype
    f32 = f_raw.astype(jnp.float32)
    log_f = f32 if exponential_forget else jax.nn.log_sigmoid(f32)
    i_gate, f_gate, m_new = _stabilised_gates(i_raw.astype(jnp.float32), log_f, m)
    i_gate, f_gate = i_gate.astype(dt), f_gate.astype(dt)
    c_new = f_gate * c.astype(dt) + i_gate * jnp.tanh(z_raw)
    n_new = f_gate * n.astype(dt) + i_gate
    h_new = jax.nn.sigmoid(o_raw) * c_new / n_new
    return c_new.astype(c.dtype), n_new.astype(n.dtype), m_new, h_new.astype(h.dtype)


def slstm_pointwise(
    carry: SLSTMCarry, zx: tuple[jax.Array, ...], zh: tuple[jax.Array, ...], act: Any = None
) -> SLSTMCarry:
    """The sLSTM's fused form (:class:`~rnnviz.tables.cells.FusedForm`): the new carry from
    the gates' input projections ``zx`` (with their biases) and recurrent ones ``zh`` (h_{t−1}
    times the block-diagonal kernels), each a tuple (i, f, z, o) of ``[(B,) H]``; ``act`` unused."""
    return slstm_update(carry, *(a + b for a, b in zip(zx, zh)))


def slstm_true_state(carry: SLSTMCarry) -> SLSTMCarry:
    """The stored sLSTM carry ``(c, n, m, h)`` as the same state with m = 0: ``(c·e^m, n·e^m, 0, h)``,
    the unstabilised memory and normaliser (see the module docstring).

    >>> import jax.numpy as jnp
    >>> c, n, m, h = slstm_true_state((jnp.ones(2), jnp.ones(2), jnp.log(jnp.array([2.0, 3.0])), jnp.ones(2)))
    >>> [round(float(v), 4) for v in c], [float(v) for v in m]
    ([2.0, 3.0], [0.0, 0.0])
    """
    c, n, m, h = carry
    scale = jnp.exp(m.astype(jnp.float32))
    return (
        (c.astype(jnp.float32) * scale).astype(c.dtype),
        (n.astype(jnp.float32) * scale).astype(n.dtype),
        jnp.zeros_like(m),
        h,
    )


class SLSTMCell(_Cell):
    r"""sLSTM (Beck et al. 2024): an LSTM with an exponential input gate, a normaliser and
    block-diagonal (per-head) recurrent weights; carry ``(c, n, m, h)``, each ``[(B,) H]``.

    .. math::
        \tilde g_t = W_{ig} x_t + b_g + R_g h_{t−1}\quad (g ∈ \{i, f, z, o\},\ R_g\ \text{block-diagonal}),

        \ln f_t = \ln σ(\tilde f_t),\quad m_t = \max(\ln f_t + m_{t−1},\ \tilde i_t),\quad
        i'_t = e^{\tilde i_t − m_t},\quad f'_t = e^{\ln f_t + m_{t−1} − m_t},

        c_t = f'_t ⊙ c_{t−1} + i'_t ⊙ \tanh(\tilde z_t),\quad n_t = f'_t ⊙ n_{t−1} + i'_t,\quad
        h_t = σ(\tilde o_t) ⊙ c_t / n_t,\quad y_t = h_t

    Parameters: ``ii``, ``if``, ``iz``, ``io`` (Dense ``[I, H]`` + bias: the input part and the
    biases) and ``hi``, ``hf``, ``hz``, ``ho`` (``{"kernel": [heads, d, d]}``, d = H/heads: head
    g's block acts as ``h_{t−1}[g] @ kernel[g]``, Flax's right-multiplication).

    Choices (checked against NX-AI ``xlstm/blocks/slstm/src/vanilla/slstm.py`` and ``cell.py``):

    * The forget gate is a sigmoid, ln f = log σ(f̃), as the reference's ``slstm`` function;
      ``exponential_forget=True`` gives the paper's other option, ln f = f̃.
    * The forget bias starts as the reference's ``powerlaw_blockdependent`` init
      (:func:`powerlaw_forget_bias`); the other biases start at ``bias_init`` (zeros, as there).
    * The recurrent blocks start from ``recurrent_kernel_init`` drawn per head (orthogonal by
      default); the reference starts them at zero (``recurrent_weight_init="zeros"``: pass
      ``nn.initializers.zeros_init()`` to replicate it).
    * The input kernels are full Dense layers from ``kernel_init`` (the reference's layer uses
      headwise projections with a small-init normal, a causal convolution before i and f, and a
      group norm after; all left out: this is the cell).
    * m_t is always the max; the reference's first step (n = 0) takes m_1 = ĩ_1, which only
      rescales the stored state (the outputs are the same). c_0 and h_0 come from
      ``carry_init``; n_0 = m_0 = 0.

    Stored vs true state: see the module docstring and :func:`slstm_true_state`. The cell is not
    linear in its state (h_{t−1} enters every gate).

    Attributes:
        num_heads: the number of diagonal blocks of the recurrent matrices (H divisible by it;
            the reference's default is 4).
        exponential_forget: ln f = f̃ instead of log σ(f̃).
        The other fields as ``_Cell``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from rnnviz.engine.cells.xlstm import SLSTMCell
        >>> cell = SLSTMCell(features=4, num_heads=2)
        >>> x = jnp.ones((2, 3))  # [B, I]
        >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
        >>> variables = cell.init(jax.random.key(1), carry, x)
        >>> carry, y = cell.apply(variables, carry, x)
        >>> [c.shape for c in carry], y.shape  # (c, n, m, h), each [B, H]
        ([(2, 4), (2, 4), (2, 4), (2, 4)], (2, 4))
    """

    num_heads: int = 1
    exponential_forget: bool = False

    @nn.compact
    def __call__(self, carry: SLSTMCarry, x: jax.Array) -> tuple[SLSTMCarry, jax.Array]:
        h_dim, heads = self.features, self.num_heads
        if h_dim % heads:
            raise ValueError(f"SLSTMCell: features {h_dim} is not divisible by num_heads {heads}")
        d = h_dim // heads
        recurrent = _per_head(self.recurrent_kernel_init, heads)

        def block_kernel(key: jax.Array) -> Params:
            return {"kernel": recurrent(key, (heads, d, d), self.param_dtype)}

        params: Params = {}
        for g in GATES:
            bias_init = powerlaw_forget_bias(heads) if g == "f" else None
            params["i" + g] = affine(self, "i" + g, x.shape[-1], h_dim, bias_init=bias_init)
        for g in GATES:
            params["h" + g] = self.param("h" + g, block_kernel)
        dt = self.dtype if self.dtype is not None else jnp.result_type(x.dtype, self.param_dtype)
        new = slstm_step(params, carry, x.astype(dt), self.exponential_forget)
        return new, new[3]

    @nn.nowrap
    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> SLSTMCarry:
        """``(c, n, m, h)``, each ``input_shape[:-1] + (H,)``: c and h from ``carry_init``, n = m = 0."""
        k_c, k_h = jax.random.split(rng)
        shape = tuple(input_shape[:-1]) + (self.features,)
        zeros = jnp.zeros(shape, self.param_dtype)
        return (
            self.carry_init(k_c, shape, self.param_dtype),
            zeros,
            zeros,
            self.carry_init(k_h, shape, self.param_dtype),
        )


# ---- mLSTM ---------------------------------------------------------------------------------


def linspace_forget_bias(start: float = 3.0, end: float = 6.0) -> Initializer:
    """The NX-AI mLSTM forget-gate bias: ``linspace(start, end, heads)`` across the heads
    (``bias_linspace_init_(start=3.0, end=6.0)``; one head gets ``start``).

    >>> import jax
    >>> [float(v) for v in linspace_forget_bias()(jax.random.key(0), (4,))]
    [3.0, 4.0, 5.0, 6.0]
    """

    def init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
        del key
        return jnp.linspace(start, end, shape[-1], dtype=jnp.float32).astype(dtype)

    return init


def _qk(params: Params, x: jax.Array, heads: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """q, k/√d, v ``[(B,) heads, d]`` from x."""
    q, k, v = (split_heads(dense(params[name], x), heads) for name in ("q", "k", "v"))
    return q, k / math.sqrt(k.shape[-1]), v


def _wider(a: Any, b: Any) -> Any:
    """The float dtype of more bits of ``a`` and ``b`` (``a`` on a tie): chosen, not promoted,
    so that it holds under JAX's strict promotion."""
    return b if jnp.finfo(b).bits > jnp.finfo(a).bits else a


def mlstm_readout(params: Params, carry: MLSTMCarry, x: jax.Array, eps: float = 0.0) -> jax.Array:
    r"""The mLSTM output ``[(B,) heads·d]`` from the new carry ``(C, n, m)`` and the input x:

    .. math:: \tilde h_t = \frac{C_t q_t}{\max(|n_t^\top q_t|,\ e^{−m_t}) + ε},\qquad
              y_t = \tilde h_t\ \ (\text{or } σ(W_o x_t + b_o) ⊙ \tilde h_t
              \text{ when } \texttt{ogate} \text{ is in params})

    per head, flattened, in ``x``'s dtype. q is projected in ``x``'s dtype; C q, nᵀq and their
    ratio are computed in float32: h̃ is scale-free in q (and in the input gate, which scales C
    and n alike), so its gradient is a difference of two nearly equal terms, which bfloat16
    would lose (20 % errors in ∂L/∂W_q at bfloat16 otherwise).
    """
    C, n, m = carry
    f32 = jnp.float32
    heads = params["igate"]["kernel"].shape[-1]
    q = split_heads(dense(params["q"], x), heads).astype(f32)
    num = jnp.einsum("...gvk,...gk->...gv", C.astype(f32), q)
    den = jnp.maximum(jnp.abs(jnp.sum(n.astype(f32) * q, axis=-1)), jnp.exp(-m.astype(f32))) + eps
    h_tilde = (num / den[..., None]).reshape(num.shape[:-2] + (-1,)).astype(x.dtype)
    if "ogate" in params:
        h_tilde = jax.nn.sigmoid(dense(params["ogate"], x)) * h_tilde
    return h_tilde


def mlstm_step(params: Params, carry: MLSTMCarry, x: jax.Array) -> MLSTMCarry:
    """One mLSTM step: the new carry ``(C [(B,) heads, d, d], n [(B,) heads, d], m [(B,) heads])``
    in the carry's dtypes; projected in ``x``'s dtype, updated in the wider of it and C's; the
    maths of :class:`MLSTMCell`."""
    C, n, m = carry
    dt = _wider(x.dtype, C.dtype)  # the state's dtype when it is wider (float32 C)
    heads = params["igate"]["kernel"].shape[-1]
    k, v = (a.astype(dt) for a in _qk(params, x, heads)[1:])
    i_raw = dense(params["igate"], x).astype(jnp.float32)
    log_f = jax.nn.log_sigmoid(dense(params["fgate"], x).astype(jnp.float32))
    i_gate, f_gate, m_new = _stabilised_gates(i_raw, log_f, m)
    i_gate, f_gate = i_gate.astype(dt)[..., None], f_gate.astype(dt)[..., None]
    C_new = f_gate[..., None] * C.astype(dt) + i_gate[..., None] * (v[..., :, None] * k[..., None, :])
    n_new = f_gate * n.astype(dt) + i_gate * k
    return C_new.astype(C.dtype), n_new.astype(n.dtype), m_new


def mlstm_true_state(carry: MLSTMCarry) -> MLSTMCarry:
    """The stored mLSTM carry ``(C, n, m)`` as the same state with m = 0: ``(C·e^m, n·e^m, 0)``,
    e^m per head (see the module docstring).

    >>> import jax.numpy as jnp
    >>> C, n, m = mlstm_true_state((jnp.ones((1, 2, 2)), jnp.ones((1, 2)), jnp.log(jnp.array([2.0]))))
    >>> round(float(C[0, 1, 1]), 4), round(float(n[0, 0]), 4), float(m[0])
    (2.0, 2.0, 0.0)
    """
    C, n, m = carry
    scale = jnp.exp(m.astype(jnp.float32))[..., None]
    return (
        (C.astype(jnp.float32) * scale[..., None]).astype(C.dtype),
        (n.astype(jnp.float32) * scale).astype(n.dtype),
        jnp.zeros_like(m),
    )


def _max_plus(
    left: tuple[jax.Array, jax.Array], right: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    """Two steps m ↦ max(a + m, b) composed (first ``left``): associative, like (A, B) pairs."""
    a1, b1 = left
    a2, b2 = right
    return a1 + a2, jnp.maximum(a2 + b1, b2)


def mlstm_prefix_scan(
    params: Params,
    first: MLSTMCarry,
    rest: MLSTMCarry | None,
    xs: jax.Array,
    scan: Callable[[jax.Array, jax.Array], jax.Array],
) -> MLSTMCarry:
    r"""The mLSTM's carries ``(C, n, m)``, each ``[T, …]``, from prefix scans, not a loop.

    Given the stabiliser, the memory is linear: :math:`C_t = f'_t C_{t−1} + i'_t v_t k_t^\top`
    with :math:`f'_t = e^{\ln f_t + m_{t−1} − m_t}` and :math:`i'_t = e^{ĩ_t − m_t}` (and n
    alike). The stabiliser itself, :math:`m_t = \max(\ln f_t + m_{t−1}, ĩ_t)`, is an affine map
    in the (max, +) semiring, m ↦ max(a + m, b), and those compose associatively too:
    (a₁, b₁) then (a₂, b₂) is (a₁ + a₂, max(a₂ + b₁, b₂)). So m comes from one
    ``jax.lax.associative_scan`` (a ``[T, (B,) heads]`` array: cheap), the gates from m, and C
    and n from ``scan``, the strategy's linear prefix scan (``scan(a, b)`` gives
    h_t = a_t ⊙ h_{t−1} + b_t from h_{−1} = 0, a broadcasting against b). f′ ≤ 1 by the
    choice of m, so no product of the scan overflows.

    The per-step perturbations ``rest`` (``[T, …]`` per leaf; None without) are added to the
    carry handed on, as :func:`~rnnviz.engine.rollout.rollout` adds them: to m's affine maps
    (m ↦ max(a + m, b) + e is the map (a + e, b + e)) and to C's and n's b_t. ``first`` is
    carry_0 with its perturbation added. Float32 carries give the sequential cell's values to
    rounding; a bfloat16 carry (``state_dtype=bfloat16``) is rounded once at the end, not at
    every step.

    Args:
        params: the cell's parameters (as :func:`mlstm_step` reads them).
        first: ``(C_0, n_0, m_0)`` ``[(B,) heads, d, d]``, ``[(B,) heads, d]``, ``[(B,) heads]``.
        rest: the perturbations of steps 1…T, or None.
        xs: ``[T, (B,) I]`` in the compute dtype.
        scan: the linear prefix scan.

    Returns:
        ``(C [T, (B,) heads, d, d], n [T, (B,) heads, d], m [T, (B,) heads])`` in the carry's dtypes.
    """
    f32 = jnp.float32
    C0, n0, m0 = first
    dt = _wider(xs.dtype, C0.dtype)  # as mlstm_step: the state's dtype when wider
    heads = params["igate"]["kernel"].shape[-1]
    k, v = (a.astype(dt) for a in _qk(params, xs, heads)[1:])  # [T, (B,) heads, d]
    i_raw = dense(params["igate"], xs).astype(f32)  # [T, (B,) heads]
    log_f = jax.nn.log_sigmoid(dense(params["fgate"], xs).astype(f32))
    e_C, e_n, e_m = (None, None, None) if rest is None else rest
    e = jnp.zeros_like(i_raw) if e_m is None else e_m.astype(f32)
    shift, floor = jax.lax.associative_scan(_max_plus, (log_f + e, i_raw + e))
    m_handed = jnp.maximum(shift + m0.astype(f32)[None], floor)  # m_t + e_t, handed to step t + 1
    m_new = m_handed - e
    m_prev = jnp.concatenate([m0.astype(f32)[None], m_handed[:-1]])
    f_gate = jnp.exp(log_f + m_prev - m_new).astype(dt)[..., None]
    i_gate = jnp.exp(i_raw - m_new).astype(dt)[..., None]
    b_C = i_gate[..., None] * (v[..., :, None] * k[..., None, :])
    b_n = i_gate * k
    if rest is not None:
        b_C, b_n = b_C + e_C.astype(dt), b_n + e_n.astype(dt)
    a_C = f_gate[..., None]
    b_C = b_C.at[0].add(a_C[0] * C0.astype(dt))  # carry_0 folded into the first step
    b_n = b_n.at[0].add(f_gate[0] * n0.astype(dt))
    return scan(a_C, b_C).astype(C0.dtype), scan(f_gate, b_n).astype(n0.dtype), m_handed.astype(m0.dtype)


class MLSTMCell(_Cell):
    r"""mLSTM (Beck et al. 2024): a matrix memory per head written with an exponential input
    gate; carry ``(C [(B,) heads, d, d], n [(B,) heads, d], m [(B,) heads])``, d = H/heads.

    .. math::
        q_t = W_q x_t + b_q,\quad k_t = (W_k x_t + b_k) / \sqrt d,\quad v_t = W_v x_t + b_v
        \quad \text{(per head)},

        \tilde i_t = w_i^\top x_t + b_i,\quad \ln f_t = \ln σ(w_f^\top x_t + b_f)
        \quad \text{(scalars per head)},

        m_t = \max(\ln f_t + m_{t−1},\ \tilde i_t),\quad i'_t = e^{\tilde i_t − m_t},\quad
        f'_t = e^{\ln f_t + m_{t−1} − m_t},

        C_t = f'_t C_{t−1} + i'_t\, v_t k_t^\top,\quad n_t = f'_t n_{t−1} + i'_t k_t,\quad
        y_t = \frac{C_t q_t}{\max(|n_t^\top q_t|,\ e^{−m_t})}\ \text{flattened to}\ [(B,)\ H]

    Parameters: ``q``, ``k``, ``v`` (``[I, H]`` + bias), ``igate``, ``fgate`` (``[I, heads]`` +
    bias), and ``ogate`` (``[I, H]`` + bias) when ``output_gate``.

    Choices (checked against NX-AI ``xlstm/blocks/mlstm/backends.py`` and ``cell.py``):

    * C is ``[d_v, d_k]`` = v kᵀ, as in the paper (the reference stores its transpose k vᵀ and
      reads qᵀC); k is scaled by 1/√d, as the reference does.
    * The gates read x only (the reference's read concat(q, k, v), linear in x too); their
      kernels start at zero, the input bias at N(0, 0.1²) and the forget bias at
      linspace(3, 6) across heads (:func:`linspace_forget_bias`), as the reference.
    * The output gate σ(W_o x + b_o) of the paper is optional (``output_gate``, off: the
      reference's block gates with SiLU(z) and a skip instead; left out with its convolution,
      up/down projections and norm).
    * ``eps`` is added to the denominator as the reference's 1e-6 does; 0 by default (the paper),
      which keeps the outputs exactly invariant to the stabiliser.
    * C_0 comes from ``carry_init``; n_0 = m_0 = 0.
    * q, k and v have biases, zero at initialisation (so the cell at initialisation is the
      paper's). The reference computes q and k from a causal convolution with a bias, left out
      here; without any bias an input of zeros reads out y_t = 0 whatever C holds, and a
      classifier of sequences that end in zeros (most digits by pixel) cannot learn.

    Given the gates the recurrence is linear in (C, n); the output is a ratio of the two. The
    output is a function of the new carry and x (:func:`mlstm_readout`). Stored vs true state:
    see the module docstring and :func:`mlstm_true_state`.

    Attributes:
        num_heads: the number of heads (H divisible by it; the reference's default is 4).
        output_gate: multiply the output by σ(W_o x + b_o).
        eps: added to the denominator (0).
        state_dtype: the dtype of C, n and m and of their update: float32 (the reference's
            ``inference_state_dtype``) whatever ``dtype`` and ``param_dtype`` are; None: the
            params' dtype.
        The other fields as ``_Cell`` (``recurrent_kernel_init`` is unused).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from rnnviz.engine.cells.xlstm import MLSTMCell
        >>> cell = MLSTMCell(features=4, num_heads=2)
        >>> x = jnp.ones((2, 3))  # [B, I]
        >>> carry = cell.initialize_carry(jax.random.key(0), x.shape)
        >>> variables = cell.init(jax.random.key(1), carry, x)
        >>> carry, y = cell.apply(variables, carry, x)
        >>> [c.shape for c in carry], y.shape  # C, n, m; y [B, H]
        ([(2, 2, 2, 2), (2, 2, 2), (2, 2)], (2, 4))
    """

    num_heads: int = 1
    output_gate: bool = False
    eps: float = 0.0
    state_dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, carry: MLSTMCarry, x: jax.Array) -> tuple[MLSTMCarry, jax.Array]:
        h_dim, heads, i_dim = self.features, self.num_heads, x.shape[-1]
        if h_dim % heads:
            raise ValueError(f"MLSTMCell: features {h_dim} is not divisible by num_heads {heads}")
        zeros = nn.initializers.zeros_init()
        # q, k, v with biases (zero at first): the block's causal convolution, left out, has one
        params: Params = {name: affine(self, name, i_dim, h_dim, bias_init=zeros) for name in ("q", "k", "v")}
        params["igate"] = affine(
            self, "igate", i_dim, heads, kernel_init=zeros, bias_init=nn.initializers.normal(0.1)
        )
        params["fgate"] = affine(
            self, "fgate", i_dim, heads, kernel_init=zeros, bias_init=linspace_forget_bias()
        )
        if self.output_gate:
            params["ogate"] = affine(self, "ogate", i_dim, h_dim)
        dt = self.dtype if self.dtype is not None else jnp.result_type(x.dtype, self.param_dtype)
        x = x.astype(dt)
        new = mlstm_step(params, carry, x)
        return new, mlstm_readout(params, new, x, self.eps)

    @nn.nowrap
    def initialize_carry(self, rng: jax.Array, input_shape: tuple[int, ...]) -> MLSTMCarry:
        """``(C, n, m)``: C ``batch + (heads, d, d)`` from ``carry_init``, n ``batch + (heads, d)``
        and m ``batch + (heads,)`` zero (batch = ``input_shape[:-1]``), in ``state_dtype``."""
        batch, heads = tuple(input_shape[:-1]), self.num_heads
        d = self.features // heads
        dtype = self.param_dtype if self.state_dtype is None else self.state_dtype
        return (
            self.carry_init(rng, batch + (heads, d, d), dtype),
            jnp.zeros(batch + (heads, d), dtype),
            jnp.zeros(batch + (heads,), dtype),
        )


__all__ = [
    "MLSTMCell",
    "SLSTMCell",
    "linspace_forget_bias",
    "mlstm_prefix_scan",
    "mlstm_readout",
    "mlstm_step",
    "mlstm_true_state",
    "powerlaw_forget_bias",
    "slstm_pointwise",
    "slstm_step",
    "slstm_true_state",
    "slstm_update",
]

"""Per-step carry and input gradients and parameter gradients in one reverse pass.

The zero-perturbation trick: a zero ``eps`` shaped like the carry trajectory
``[T+1, (B,) H]`` is added to the carry handed on at every step (:func:`rollout`), and one
``jax.vjp`` of the loss with respect to ``(params, eps, xs)`` gives ∂L/∂W, every
∂L/∂carry_t and every ∂L/∂x_t together. ∂L/∂carry_t is the total derivative through all
later steps, taken at the carry as handed on: for the LSTM, ∂L/∂c_t holds h_t fixed, and
with ``loss="last"`` ∂L/∂c_T = 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.engine.cells import Params, cell_spec, final_output, outputs
from rnnviz.engine.losses import Objective, objective_loss
from rnnviz.engine.norms import robust_norm
from rnnviz.engine.rollout import Carry
from rnnviz.engine.strategies.registry import ForwardPass, ReversePass, strategy
from rnnviz.engine.strategies.traced import probe_for

if TYPE_CHECKING:
    from rnnviz.config import RunConfig


def loss_from_outputs(cfg: RunConfig, hs: jax.Array, objective: Objective | None = None) -> jax.Array:
    """Loss of the outputs ``hs`` [T, (B,) H] (y_t: the h part of the carry, or the cell
    spec's readout), accumulated in float32.

    ``last``: ``L = ½ Σ h_T²``; ``all``: ``L = ½ (1/T) Σ_t Σ h_t²``. With a data set's
    ``objective`` its task loss (:mod:`rnnviz.engine.losses`), which reads every step of ``hs``.
    """
    if objective is not None:
        return objective_loss(cfg, objective, hs)
    h = hs.astype(jnp.float32)
    if cfg.loss == "last":
        return 0.5 * jnp.sum(h[-1] * h[-1])
    return 0.5 * jnp.sum(h * h) / h.shape[0]


def reads_every_step(cfg: RunConfig, objective: Objective | None = None) -> bool:
    """Whether the loss reads every y_t (a data objective, ``loss="all"``) or only y_T."""
    return objective is not None or cfg.loss == "all"


def loss_outputs(
    cfg: RunConfig,
    params: Params,
    carries: Carry,
    xs_tm: jax.Array,
    objective: Objective | None = None,
    *,
    per_step: bool = False,
) -> jax.Array:
    """The outputs :func:`loss_from_outputs` reads from a trajectory (carries ``[T+1, …]``,
    time-major xs): every y_t ``[T, (B,) O]`` for a data objective or ``loss="all"``, only y_T
    ``[1, (B,) O]`` for ``"last"``. Reading a cell's readout at every step to keep the last
    costs a pass over the trajectory and over its zero cotangent: for a matrix memory
    ``[T+1, B, heads, d, d]`` that was the larger part of the analysis (the mLSTM's gradient
    through the rollout at B=16·T=200·I=32·H=64: docs/dev/benchmarks.md). ``per_step``: params
    with a leading ``[T]`` axis (y_T reads copy T)."""
    if reads_every_step(cfg, objective):
        return outputs(cfg, params, carries, xs_tm, per_step=per_step)
    last = jax.tree.map(lambda a: a[-1], params) if per_step else params
    return final_output(cfg, last, jax.tree.map(lambda c: c[-1], carries), xs_tm[-1])[None]


def time_major(cfg: RunConfig, xs: jax.Array) -> jax.Array:
    """Batch-first ``[B, T, I]`` → ``[T, B, I]``; unbatched ``[T, I]`` unchanged."""
    return xs if cfg.batch_size is None else jnp.swapaxes(xs, 0, 1)


def full_carry0(cfg: RunConfig, carry0: Carry) -> Carry:
    """A learned initial carry is one ``[H]`` vector per component, shared by the batch."""
    if cfg.carry_init != "learned" or cfg.batch_size is None:
        return carry0
    return jax.tree.map(lambda c: jnp.broadcast_to(c, (cfg.batch_size,) + c.shape), carry0)


class StepGrads(NamedTuple):
    """Raw outputs of one forward + one reverse pass (device arrays).

    carries / carry_grads: carry-shaped, each component ``[T+1, (B,) H]``;
    input_grads: ``[T, (B,) I]`` time-major; param_grads: like params;
    learned_carry_grads: like the ``[H]`` learned carry, or None;
    by_step: ``[T, G]`` per-step contribution norms (``per_step`` only), or None.
    """

    loss: jax.Array
    carries: Carry
    carry_grads: Carry
    input_grads: jax.Array
    param_grads: Params
    learned_carry_grads: Carry | None
    by_step: jax.Array | None


def step_gradients(
    cfg: RunConfig, cell, params: Params, carry0: Carry, xs: jax.Array, objective: Objective | None = None
) -> StepGrads:
    """Everything about how ∂L flows back through time, from one ``jax.vjp``.

    ``xs`` is batch-first ``[(B,) T, I]``; ``carry0`` is ``[(B,) H]`` per component, or
    ``[H]`` for a learned carry. The strategy's table entry (:mod:`rnnviz.engine.strategies.registry`) runs
    the forward pass. ``objective``: a data set's loss terms (:mod:`rnnviz.engine.losses`), or
    None for ``cfg.loss``. Jit this at the call site (``cfg`` and ``cell`` static).
    """
    strat = strategy(cfg.strategy)
    xs_tm = time_major(cfg, xs)
    t_len = cfg.seq_len
    learned = cfg.carry_init == "learned"
    eps = jax.tree.map(lambda c: jnp.zeros((t_len + 1,) + c.shape, c.dtype), full_carry0(cfg, carry0))

    def forward(p, c0, e, x, tap):
        carries = strat.rollout(ForwardPass(cfg, cell, p, full_carry0(cfg, c0), x, e, tap))
        hs = loss_outputs(cfg, p, carries, x, objective, per_step=lift.stacked)
        return loss_from_outputs(cfg, hs, objective), carries

    lift, contrib = strat.param_lift, strat.contributions
    taps = None if contrib is None else contrib.taps(cfg, xs_tm)
    primals = (lift.lift(params, t_len), carry0, eps, xs_tm, taps)
    loss, vjp, carries = jax.vjp(forward, *primals, has_aux=True)
    g_params, g_carry0, g_eps, g_xs, g_taps = vjp(jnp.ones((), loss.dtype))
    by_step = None if contrib is None else contrib.norms(ReversePass(cfg, carries, xs_tm, g_params, g_taps))
    return StepGrads(
        loss, carries, g_eps, g_xs, lift.collapse(g_params), g_carry0 if learned else None, by_step
    )


def plain_grad(
    cfg: RunConfig, cell, params: Params, carry0: Carry, xs: jax.Array, objective: Objective | None = None
) -> tuple[jax.Array, Params]:
    """Baseline: ``jax.value_and_grad`` of the same loss w.r.t. params only, plain scan."""
    xs_tm = time_major(cfg, xs)

    def loss_fn(p):
        def step(carry, x):
            carry, y = cell.apply({"params": p}, carry, x)
            return carry, (y if every_step else None)

        last, ys = jax.lax.scan(step, full_carry0(cfg, carry0), xs_tm)
        hs = ys if every_step else final_output(cfg, p, last, xs_tm[-1])[None]
        return loss_from_outputs(cfg, hs, objective)

    every_step = reads_every_step(cfg, objective)

    return jax.value_and_grad(loss_fn)(params)


def strategy_grad(
    cfg: RunConfig, cell, params: Params, carry0: Carry, xs: jax.Array, objective: Objective | None = None
) -> tuple[jax.Array, Params]:
    """Loss and parameter gradient only, gathered with ``cfg.strategy`` (no per-step carry
    gradients kept, no norms): what each strategy costs on its own."""
    strat = strategy(cfg.strategy)
    lift = strat.param_lift
    xs_tm = time_major(cfg, xs)

    def loss_fn(p):
        carries = strat.rollout(ForwardPass(cfg, cell, p, full_carry0(cfg, carry0), xs_tm))
        hs = loss_outputs(cfg, p, carries, xs_tm, objective, per_step=lift.stacked)
        return loss_from_outputs(cfg, hs, objective)

    loss, grads = jax.value_and_grad(loss_fn)(lift.lift(params, cfg.seq_len))
    return loss, lift.collapse(grads)


class Summary(NamedTuple):
    """Norms computed on device (float32). C = carry components, in Flax order.

    component_grad_norms ``[C, T+1]``; example_grad_norms ``[T+1, B]`` (``[T+1, 1]``
    unbatched); input_grad_norms ``[T]``; component_carry_norms ``[C, T+1]``.
    """

    component_grad_norms: jax.Array
    example_grad_norms: jax.Array
    input_grad_norms: jax.Array
    component_carry_norms: jax.Array


def summarize(cfg: RunConfig, sg: StepGrads) -> Summary:
    """Every norm with :func:`rnnviz.engine.norms.robust_norm` (no underflow of the squares)."""
    grads = jax.tree.leaves(sg.carry_grads)
    batch_axes = 1 if cfg.batch_size is None else 2  # axes before the units: [T+1, (B,)]
    comp = jnp.stack([robust_norm(g, tuple(range(1, g.ndim))) for g in grads])
    per_comp_example = jnp.stack([robust_norm(g, tuple(range(batch_axes, g.ndim))) for g in grads])
    per_example = robust_norm(per_comp_example, 0).reshape(cfg.seq_len + 1, -1)
    inputs = robust_norm(sg.input_grads, tuple(range(1, sg.input_grads.ndim)))
    carry_norms = jnp.stack([robust_norm(c, tuple(range(1, c.ndim))) for c in jax.tree.leaves(sg.carries)])
    return Summary(comp, per_example, inputs, carry_norms)


def batch_axes(cfg: RunConfig) -> int:
    """Axes before the units in a carry leaf: 1 batched ``[B, …]``, 0 unbatched."""
    return 0 if cfg.batch_size is None else 1


def summary_of_norms(
    cfg: RunConfig, grad_norms: Carry, input_grads: jax.Array, carry_norms: Carry
) -> Summary:
    """The :class:`Summary` from per-example norms: ``grad_norms`` and ``carry_norms`` hold,
    per carry leaf, ``[T+1, (B,)]`` norms of ∂L/∂carry_t and of carry_t (a norm over the
    batch, or over the components, of such norms is the norm over both)."""
    rows = cfg.seq_len + 1

    def stacked(tree: Carry) -> jax.Array:
        return jnp.stack([leaf.reshape(rows, -1) for leaf in jax.tree.leaves(tree)])  # [C, T+1, B]

    per = stacked(grad_norms)
    inputs = robust_norm(input_grads, tuple(range(1, input_grads.ndim)))
    return Summary(robust_norm(per, 2), robust_norm(per, 0), inputs, robust_norm(stacked(carry_norms), 2))


def traced_pays(cfg: RunConfig) -> bool:
    """Whether the analysis of ``cfg`` takes the traced pass: its strategy has one and the
    cell's reverse pass would keep carry-sized arrays per step (``CostModel.residual_carries``,
    the matrix memories and Mamba's state). There, storing every step's residuals and
    gradient costs more than computing each step again in the reverse pass (mLSTM,
    B=16·T=200·I=32·H=64, ``bench --suite designs``: docs/guide/cells.md); for a vector state
    the step's matrix products dominate, and recomputing them does not pay (the sLSTM's
    analysis was slower that way)."""
    return strategy(cfg.strategy).traced is not None and cell_spec(cfg.cell).cost.residual_carries > 0


def traced_gradients(
    cfg: RunConfig, cell, params: Params, carry0: Carry, xs: jax.Array, objective: Objective | None = None
) -> tuple[StepGrads, Summary]:
    """:func:`analysis_outputs` for a strategy with a ``traced`` rollout
    (:mod:`rnnviz.engine.strategies.traced`): the same numbers as :func:`step_gradients` plus
    :func:`summarize`, without any per-step gradient stored (``carry_grads`` is None)."""
    axes = batch_axes(cfg)
    run = strategy(cfg.strategy).traced(cell, axes)
    xs_tm = time_major(cfg, xs)

    def forward(p, c0, probe, x):
        traced = run(p, full_carry0(cfg, c0), x, probe)
        hs = loss_outputs(cfg, p, traced.carries, x, objective)
        return loss_from_outputs(cfg, hs, objective), traced

    probe = probe_for(full_carry0(cfg, carry0), cfg.seq_len, axes)
    loss, vjp, traced = jax.vjp(forward, params, carry0, probe, xs_tm, has_aux=True)
    g_params, g_carry0, g_norms, g_xs = vjp(jnp.ones((), loss.dtype))
    learned = g_carry0 if cfg.carry_init == "learned" else None
    sg = StepGrads(loss, traced.carries, None, None, g_params, learned, None)
    return sg, summary_of_norms(cfg, g_norms, g_xs, traced.carry_norms)


def analysis_outputs(
    cfg: RunConfig, cell, params: Params, carry0: Carry, xs: jax.Array, objective: Objective | None = None
) -> tuple[StepGrads, Summary]:
    """:func:`step_gradients` plus its norms: the function the analysis compiles.

    The full per-step gradients stay on device (only their norms come back), so the
    result a host copies is the trajectory, the param grads and ``O(T·B)`` norms. Where
    :func:`traced_pays` (``accumulate`` on a matrix memory) they are never stored:
    :func:`traced_gradients`.
    """
    if traced_pays(cfg):
        return traced_gradients(cfg, cell, params, carry0, xs, objective)
    sg = step_gradients(cfg, cell, params, carry0, xs, objective)
    return sg._replace(carry_grads=None, input_grads=None), summarize(cfg, sg)

"""The accumulator's analysis pass: the trajectory is the only residual, and every
‖∂L/∂carry_t‖ comes out of the reverse scan as a norm, not as a stored gradient.

The analysis needs three things from one forward and one reverse pass: the trajectory
``carry_0 … carry_T`` (a figure of its own), ∂L/∂W, and the norm of every ∂L/∂carry_t. With
autodiff of a scan (:func:`rnnviz.engine.rollout.rollout` with zero perturbations ``eps``) that
costs, on top of plain ``jax.grad``:

* the trajectory written twice, once as the scan's output and once as autodiff's residuals;
* every ∂L/∂carry_t written as a ``[T+1, (B,) …]`` array, the cotangent of ``eps``;
* norms taken afterwards in separate reductions over both ``[T+1, (B,) …]`` arrays.

For a cell whose state is as big as its work per step (a matrix memory ``[heads, d, d]``,
Mamba's ``[D, N]``) each is as large as the gradient itself: the mLSTM's analysis took
several times plain ``jax.grad`` (B=16·T=200·I=32·H=64; docs/guide/cells.md). Here, as a
``jax.custom_vjp``:

* **forward**: one loop writes the trajectory into a ``[T+1, …]`` buffer and, per step, each
  carry component's norm per example, while the step's values are in cache (a plain sum of
  squares where float32 holds it exactly, the scaled norm elsewhere: :func:`_norms`);
* **reverse**: a reverse loop whose residual is that trajectory. Step t recomputes the
  cell's VJP at ``(W, carry_{t−1}, x_t)`` (one forward step again, instead of storing its
  gates for all T), propagates ``g_t = ∂L/∂carry_t``, adds ∂L/∂W into one buffer (the
  accumulator) and emits ``‖g_t‖`` per component and example, ``[T+1, (B,)]`` floats, as
  the cotangent of a zero *probe*.

The numbers are those of the zero-perturbation definition (∂L/∂carry_t the total derivative
through all later steps, at the carry as handed on); tests compare the two for every cell.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.engine.cells import Params
from rnnviz.engine.norms import robust_norm
from rnnviz.engine.rollout import Carry

__all__ = ["Traced", "leaf_norms", "probe_for", "traced_rollout"]


class Traced(NamedTuple):
    """What :func:`traced_rollout` returns.

    Attributes:
        carries: the trajectory, each leaf ``[T+1, (B,) …]`` (carry_0 at index 0).
        carry_norms: ‖carry_t‖ per leaf and example, each ``[T+1, (B,)]`` float32.
    """

    carries: Carry
    carry_norms: Carry


def leaf_norms(leaf: jax.Array, batch_axes: int) -> jax.Array:
    """``[(B,)]``: the Frobenius norm of one carry component per example (float32, robust:
    :func:`rnnviz.engine.norms.robust_norm`); ``batch_axes`` is 1 batched, 0 unbatched."""
    return robust_norm(leaf, tuple(range(batch_axes, leaf.ndim))).astype(jnp.float32)


def probe_for(carry0: Carry, seq_len: int, batch_axes: int) -> Carry:
    """The zero probe: per carry leaf ``[T+1, (B,)]`` float32 zeros. Its cotangent through
    :func:`traced_rollout` is ‖∂L/∂carry_t‖ per leaf and example.

    That "cotangent" is a reading passed out of the reverse pass, not a derivative (a norm is
    not linear in the loss's cotangent): it means ‖∂L/∂carry_t‖ for the pullback of a scalar
    loss with seed 1, as ``jax.grad`` and :func:`rnnviz.engine.gradients.traced_gradients`
    take it, and nothing under a second derivative."""
    return jax.tree.map(lambda c: jnp.zeros((seq_len + 1,) + c.shape[:batch_axes], jnp.float32), carry0)


#: Where a float32 sum of squares is exact enough: at least 2⁻⁶⁰ (then the largest square is at
#: least 2⁻⁶⁰/n, and a square flushed below float32's 2⁻¹²⁶ weighs less than 2⁻⁴⁶ of it for
#: n ≤ 2²⁰ elements) and below 2¹²⁰ (far from overflow).
_PLAIN_RANGE = (2.0**-60, 2.0**120)


def _squares(leaf: jax.Array, batch_axes: int) -> jax.Array:
    a = jnp.abs(leaf) if jnp.iscomplexobj(leaf) else leaf
    a = a.astype(jnp.float32)
    return jnp.sum(a * a, tuple(range(batch_axes, leaf.ndim)))


def _leaf_norm(leaf: jax.Array, batch_axes: int) -> jax.Array:
    squares = _squares(leaf, batch_axes)
    low, high = _PLAIN_RANGE
    return jax.lax.cond(
        jnp.all((squares >= low) & (squares < high)),
        lambda: jnp.sqrt(squares),
        lambda: leaf_norms(leaf, batch_axes),
    )


def _norms(tree: Carry, batch_axes: int) -> Carry:
    """Per leaf and example, ‖leaf‖ as :func:`leaf_norms` gives it, in one pass over the step's
    values where that is exact: the plain sum of squares when every example's sum lies in
    :data:`_PLAIN_RANGE`, else (a vanishing or exploding step, a component that is 0, inf,
    NaN) the scaled :func:`~rnnviz.engine.norms.robust_norm`, decided per leaf and step. The
    scaled norm's two passes (its max, then the scaled squares) took a third of the traced
    analysis' time (mLSTM, B=16·T=200·I=32·H=64; docs/dev/benchmarks.md)."""
    return jax.tree.map(lambda leaf: _leaf_norm(leaf, batch_axes), tree)


def traced_rollout(cell: Any, batch_axes: int) -> Callable[[Params, Carry, jax.Array, Carry], Traced]:
    """``(params, carry0, xs [T, (B,) I], probe) -> Traced`` for ``cell``, differentiable in
    ``params``, ``carry0``, ``xs`` and ``probe`` (see the module docstring).

    Args:
        cell: the Flax cell (``cell.apply({"params": p}, carry, x) -> (carry, y)``).
        batch_axes: axes before the units in each carry leaf: 1 batched, 0 unbatched.

    Returns:
        The custom-VJP function. The cotangent of ``carries`` may be nonzero at any step (a
        loss that reads every output); the cotangent of ``carry_norms`` is ignored (they
        are a reading, not something a loss depends on).
    """

    def step(params: Params, carry: Carry, x: jax.Array) -> Carry:
        return cell.apply({"params": params}, carry, x)[0]

    @jax.custom_vjp
    def run(params: Params, carry0: Carry, xs: jax.Array, probe: Carry) -> Traced:
        t_len = xs.shape[0]
        # Written in place by index: a scan's outputs would need a concatenate (one more
        # copy of the trajectory) to put carry_0 in front.
        buf = jax.tree.map(lambda c: jnp.zeros((t_len + 1,) + c.shape, c.dtype).at[0].set(c), carry0)
        norms = jax.tree.map(
            lambda n: jnp.zeros((t_len + 1,) + n.shape, n.dtype).at[0].set(n), _norms(carry0, batch_axes)
        )

        def body(t, state):
            carry, buf, norms = state
            new = step(params, carry, xs[t])
            put = lambda b, v: jax.lax.dynamic_update_index_in_dim(b, v, t + 1, 0)  # noqa: E731
            return new, jax.tree.map(put, buf, new), jax.tree.map(put, norms, _norms(new, batch_axes))

        _, buf, norms = jax.lax.fori_loop(0, t_len, body, (carry0, buf, norms))
        return Traced(buf, norms)

    def forward(params, carry0, xs, probe):
        out = run(params, carry0, xs, probe)
        return out, (params, out.carries, xs)

    def reverse(res, cts: Traced):
        params, carries, xs = res
        ct = cts.carries  # ∂L/∂carry_t read directly (every step for a per-step loss)
        t_len = xs.shape[0]
        at = lambda tree, t: jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, t, 0, False), tree)  # noqa: E731

        def back(i, state):
            # By index, as the forward: slices [:-1] of the trajectory would be copies of it.
            t = t_len - i  # step t maps carry_{t−1} and x_t (xs[t−1]) to carry_t
            d_params, g, norms, dxs = state  # g = ∂L/∂carry_t, complete
            _, vjp = jax.vjp(step, params, at(carries, t - 1), xs[t - 1])
            dp, d_prev, dx = vjp(g)
            put = lambda b, v, k: jax.lax.dynamic_update_index_in_dim(b, v, k, 0)  # noqa: E731
            norms = jax.tree.map(lambda b, v: put(b, v, t), norms, _norms(g, batch_axes))
            return (
                jax.tree.map(jnp.add, d_params, dp),
                jax.tree.map(jnp.add, d_prev, at(ct, t - 1)),
                norms,
                put(dxs, dx, t - 1),
            )

        norms0 = jax.tree.map(
            lambda c: jnp.zeros((t_len + 1,) + c.shape[1 : 1 + batch_axes], jnp.float32), carries
        )
        start = (jax.tree.map(jnp.zeros_like, params), at(ct, t_len), norms0, jnp.zeros_like(xs))
        d_params, g0, norms, dxs = jax.lax.fori_loop(0, t_len, back, start)
        norms = jax.tree.map(lambda b, v: b.at[0].set(v), norms, _norms(g0, batch_axes))
        return d_params, g0, dxs, norms

    run.defvjp(forward, reverse)
    return run

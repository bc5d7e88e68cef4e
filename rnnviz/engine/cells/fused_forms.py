r"""The built-in cells' fused forms (:class:`~rnnviz.tables.cells.FusedForm`): each step
after its two projections ``zx = x W_x + b_x`` and ``zh = h W_h + b_h`` (one ``[(B,) H]``
array per gate), written to match Flax's own ``__call__`` operation for operation, and the
hand-written reverse of each (the ``fused`` strategy's custom VJP).

A ``*_step`` equals its ``*_pointwise`` and saves the gate activations; its ``*_backward``
is the chain rule written out with σ' = σ(1 − σ) and tanh' = 1 − tanh². Given the
cotangent g of the new carry it returns ``(∂L/∂carry_{t−1} except through W_h,
dz^x per gate, dz^h per gate)``; for an additive gate (read only as ``zx + zh``) the two
are the same array.

Simple cell, h' = φ(z), z = zx + zh:

.. math::

    \frac{\partial L}{\partial z} = g \odot \varphi'(z)

LSTM, carry (c, h), gates i, f, o = σ(·), ĝ = tanh(·), c' = f⊙c + i⊙ĝ, h' = o⊙tanh(c'),
with cotangents (g_c, g_h) of (c', h'):

.. math::

    \bar c = g_c + g_h \odot o \odot (1 - \tanh^2 c'), \qquad
    \frac{\partial L}{\partial c} = \bar c \odot f,

    dz_i = \bar c \odot \hat g \odot i(1-i), \quad
    dz_f = \bar c \odot c \odot f(1-f), \quad
    dz_{\hat g} = \bar c \odot i \odot (1-\hat g^2), \quad
    dz_o = g_h \odot \tanh c' \odot o(1-o)

GRU, r, z = σ(·), n = tanh(zx_n + r⊙zh_n), h' = (1 − z)⊙n + z⊙h:

.. math::

    dn = g \odot (1-z) \odot (1-n^2), \quad
    dr = dn \odot zh_n \odot r(1-r), \quad
    dz = g \odot (h-n) \odot z(1-z), \quad
    \frac{\partial L}{\partial h} = g \odot z,

    dz^h_n = dn \odot r \quad (dz^x_n = dn)

MGU, f = σ(·), n = tanh(zx_n + f⊙zh_n), h' = (1 − f)⊙n + f⊙h:

.. math::

    dn = g \odot (1-f) \odot (1-n^2), \quad
    df = \big(g \odot (h-n) + dn \odot zh_n\big) \odot f(1-f), \quad
    \frac{\partial L}{\partial h} = g \odot f, \quad dz^h_n = dn \odot f

(∂L/∂h through W_h, ``dz^h · W_hᵀ``, is added by :mod:`rnnviz.engine.strategies.fused`.) The equality of
each pair with ``jax.vjp`` of its pointwise form is tested in ``tests/engine/test_strategies.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def simple_pointwise(carry, zx, zh, act):
    """The simple cell's new carry ``h' = act(zx[0] + zh[0])`` ``[(B,) H]`` (``carry`` unused)."""
    return act(zx[0] + zh[0])


def lstm_pointwise(carry, zx, zh, act):
    """The LSTM's new carry ``(c', h')``: ``c' = σ(f)⊙c + σ(i)⊙tanh(ĝ)``, ``h' = σ(o)⊙tanh(c')``.

    Args:
        carry: ``(c, h)``, each ``[(B,) H]``.
        zx: the input projections of the gates ``(i, f, ĝ, o)``, each ``[(B,) H]``.
        zh: the recurrent projections, the same gates and shapes.
        act: unused (the LSTM's activations are fixed).

    Returns:
        ``(c', h')``, each ``[(B,) H]``.
    """
    c, _ = carry
    i, f, g, o = (b + a for a, b in zip(zx, zh))
    new_c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return new_c, jax.nn.sigmoid(o) * jnp.tanh(new_c)


def gru_pointwise(h, zx, zh, act):
    """The GRU's new carry ``h' = (1 − z)⊙n + z⊙h`` ``[(B,) H]``, ``n = tanh(zx_n + r⊙zh_n)``."""
    r = jax.nn.sigmoid(zx[0] + zh[0])
    z = jax.nn.sigmoid(zx[1] + zh[1])
    n = jnp.tanh(zx[2] + r * zh[2])
    return (1.0 - z) * n + z * h


def mgu_pointwise(h, zx, zh, act):
    """The MGU's new carry ``h' = (1 − f)⊙n + f⊙h`` ``[(B,) H]``, ``n = tanh(zx_n + f⊙zh_n)``."""
    f = jax.nn.sigmoid(zx[0] + zh[0])
    n = jnp.tanh(zx[1] + f * zh[1])
    return (1.0 - f) * n + f * h


def simple_step(carry, zx, zh, act):
    """:func:`simple_pointwise` and what its reverse needs.

    Returns:
        ``(h', φ'(z))``: the new carry and the activation's slope at ``z = zx[0] + zh[0]``, each ``[(B,) H]``.
    """
    y, slope = jax.jvp(act, (zx[0] + zh[0],), (jnp.ones_like(zh[0]),))  # φ and φ' at the pre-activation
    return y, slope


def simple_backward(slope, h, g, act):
    """The simple cell's reverse step: ``dz = g ⊙ φ'(z)`` (``h`` unused).

    Args:
        slope: ``φ'(z)`` ``[(B,) H]`` saved by :func:`simple_step`.
        h: the old carry (unused).
        g: the cotangent of the new carry ``[(B,) H]``.
        act: unused.

    Returns:
        ``(zeros, (dz,), (dz,))``: no ∂L/∂h except through W_h, and the one additive gate's cotangent.
    """
    dz = g * slope
    return jnp.zeros_like(g), (dz,), (dz,)


def lstm_step(carry, zx, zh, act):
    """:func:`lstm_pointwise` and what its reverse needs.

    Returns:
        ``((c', h'), (i, f, ĝ, o, tanh c'))``: the new carry and the gate activations, each ``[(B,) H]``.
    """
    c, _ = carry
    i, f, g, o = (b + a for a, b in zip(zx, zh))
    i, f, g, o = jax.nn.sigmoid(i), jax.nn.sigmoid(f), jnp.tanh(g), jax.nn.sigmoid(o)
    new_c = f * c + i * g
    tc = jnp.tanh(new_c)
    return (new_c, o * tc), (i, f, g, o, tc)


def lstm_backward(res, carry, grad, act):
    """The LSTM's reverse step (the module docstring's formulas).

    Args:
        res: ``(i, f, ĝ, o, tanh c')`` saved by :func:`lstm_step`.
        carry: the old carry ``(c, h)``.
        grad: the cotangents ``(g_c, g_h)`` of the new carry.
        act: unused.

    Returns:
        ``((c̄⊙f, zeros), dz, dz)`` with ``dz = (dz_i, dz_f, dz_ĝ, dz_o)``: every gate is additive.
    """
    i, f, g, o, tc = res
    c, _ = carry
    gc, gh = grad
    gc = gc + gh * o * (1.0 - tc * tc)
    dz = (gc * g * i * (1.0 - i), gc * c * f * (1.0 - f), gc * i * (1.0 - g * g), gh * tc * o * (1.0 - o))
    return (gc * f, jnp.zeros_like(gh)), dz, dz


def gru_step(h, zx, zh, act):
    """:func:`gru_pointwise` and what its reverse needs.

    Returns:
        ``(h', (r, z, n, zh_n))``, each ``[(B,) H]``.
    """
    r = jax.nn.sigmoid(zx[0] + zh[0])
    z = jax.nn.sigmoid(zx[1] + zh[1])
    n = jnp.tanh(zx[2] + r * zh[2])
    return (1.0 - z) * n + z * h, (r, z, n, zh[2])


def gru_backward(res, h, g, act):
    """The GRU's reverse step (the module docstring's formulas).

    Args:
        res: ``(r, z, n, zh_n)`` saved by :func:`gru_step`.
        h: the old carry ``[(B,) H]``.
        g: the cotangent of the new carry ``[(B,) H]``.
        act: unused.

    Returns:
        ``(g⊙z, (dr, dz, dn), (dr, dz, dn⊙r))``: ∂L/∂h except through W_h, dz^x and dz^h per gate.
    """
    r, z, n, hn = res
    dn = g * (1.0 - z) * (1.0 - n * n)
    dr = dn * hn * r * (1.0 - r)
    dz = g * (h - n) * z * (1.0 - z)
    return g * z, (dr, dz, dn), (dr, dz, dn * r)


def mgu_step(h, zx, zh, act):
    """:func:`mgu_pointwise` and what its reverse needs.

    Returns:
        ``(h', (f, n, zh_n))``, each ``[(B,) H]``.
    """
    f = jax.nn.sigmoid(zx[0] + zh[0])
    n = jnp.tanh(zx[1] + f * zh[1])
    return (1.0 - f) * n + f * h, (f, n, zh[1])


def mgu_backward(res, h, g, act):
    """The MGU's reverse step (the module docstring's formulas).

    Args:
        res: ``(f, n, zh_n)`` saved by :func:`mgu_step`.
        h: the old carry ``[(B,) H]``.
        g: the cotangent of the new carry ``[(B,) H]``.
        act: unused.

    Returns:
        ``(g⊙f, (df, dn), (df, dn⊙f))``: ∂L/∂h except through W_h, dz^x and dz^h per gate.
    """
    f, n, hn = res
    dn = g * (1.0 - f) * (1.0 - n * n)
    df = (g * (h - n) + dn * hn) * f * (1.0 - f)
    return g * f, (df, dn), (df, dn * f)

r"""The state (carry) of every recurrent layer of a model over the steps of one example: each
state leaf's norm ‖state_t‖ and a few of its numbers after every step.

For recurrent layer l and leaf p of its state (Mamba's h ``[I, N]``, Mamba-2's h
``[heads, P, N]``, the RG-LRU's h ``[W]``, the mLSTM's C, n and m, an LSTM's c and h, a GRU's h,
Gated DeltaNet's S), flattened to its n_p numbers for one example,

.. math::
    \mathrm{norm}_t^{(l, p)} = ‖s_t^{(l, p)}‖_2, \qquad t = 0 … T − 1,

is taken on the trajectory one forward pass runs (:class:`~rnnviz.engine.blocks.Trajectory`:
the state after each step; the state before step 0 is zero in every family), and the first
k of the n_p numbers are kept as they are. The norm is of one example, not a mean over the
batch: the numbers drawn beside it are that example's, and a mean over sequences would blur
where one of them saturates or resets.

One executable per model shape: the forward pass and the norms, no LAPACK call.
"""

from __future__ import annotations

import functools
import time
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.models import ModelStates
from rnnviz.engine.blocks.dispatch import module_of
from rnnviz.engine.compile import Compiled, compile_cache, compile_for
from rnnviz.engine.norms import robust_norm
from rnnviz.studies.models import Model, check_inputs

#: Numbers of each leaf kept by default: enough lines to see them move, few enough to tell apart.
DEFAULT_UNITS = 8


def state_leaves(module: ModuleType, spec: Any) -> tuple[tuple[int, ...], tuple[str, ...], tuple[int, ...]]:
    """``(layers, leaves, sizes)``: the layers with a recurrent state, the names of a state's
    leaves in the family's order, and each leaf's count of numbers for one example.

    Example:
        >>> from rnnviz.engine.blocks import torch_rnn
        >>> from rnnviz.checkpoints.families.torch_rnn import TorchRNNSpec
        >>> state_leaves(torch_rnn, TorchRNNSpec("torch_lstm", num_layers=2, input_size=3, hidden_size=4))
        ((0, 1), ('c', 'h'), (4, 4))
    """
    shapes = module.state_shapes(spec, 1, 1)
    layers = tuple(i for i, s in enumerate(shapes) if s is not None)
    if not layers:
        return (), (), ()
    first = shapes[layers[0]]  # every recurrent layer of a family has the same state
    return layers, tuple(first), tuple(int(np.prod(first[name].shape[2:])) for name in first)


def state_summary(
    module: ModuleType,
    spec: Any,
    layers: tuple[int, ...],
    leaves: tuple[str, ...],
    k: int,
    params: Any,
    inputs: jax.Array,
) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    """The norms and first numbers of every recurrent layer's state leaves after every step.

    Args:
        module: the model's module (:func:`~rnnviz.engine.blocks.dispatch.module_of`).
        spec: its sizes (static).
        layers: the R recurrent layers (static).
        leaves: the P leaf names (static).
        k: numbers kept per leaf, at most (static).
        params: ``{name: array}``.
        inputs: one example: ``<int32>[1, T]`` tokens or ``<float32>[1, T, I]``.

    Returns:
        ``(norms [R, P, T], units)``, units P arrays ``[R, k_p, T]``, k_p = min(k, n_p).
    """
    _, trajectories = module.forward(spec, params, inputs, with_states=True)
    steps = inputs.shape[1]
    norms, units = [], [[] for _ in leaves]
    for layer in layers:
        states = trajectories[layer].states
        row = []
        for p, name in enumerate(leaves):
            flat = states[name][0].reshape(steps, -1)  # [T, n_p]
            # scaled: an unbounded state (the mLSTM's C between its stabiliser's resets) may
            # square past float32's range where its norm does not
            row.append(robust_norm(flat, axis=1))
            units[p].append(flat[:, :k].T)
        norms.append(jnp.stack(row))
    return jnp.stack(norms), tuple(jnp.stack(u) for u in units)


def _shape_key(model: Model, inputs: np.ndarray, k: int) -> tuple:
    """What the executable depends on: the family, sizes, shapes, dtypes, k and device."""
    params = tuple(sorted((name, v.shape, str(v.dtype)) for name, v in model.params.items()))
    device = next(iter(model.params.values())).devices().pop()
    return model.model_type, model.spec, params, (inputs.shape, str(inputs.dtype)), k, device


@compile_cache(maxsize=8, key=_shape_key)
def _executable(model_type, spec, params, shape, k, device) -> Compiled:
    """:func:`state_summary` compiled for one model shape and k (:func:`_shape_key`)."""
    module = module_of(model_type, spec)
    layers, leaves, _ = state_leaves(module, spec)
    fn = functools.partial(state_summary, module, spec, layers, leaves, k)
    stand_ins = {name: jax.ShapeDtypeStruct(s, jnp.dtype(d)) for name, s, d in params}
    return compile_for(fn, (stand_ins, jax.ShapeDtypeStruct(shape[0], jnp.dtype(shape[1]))), device)


def model_states(model: Model, inputs: Any, *, example: int = 0, units: int = DEFAULT_UNITS) -> ModelStates:
    """Each recurrent layer's state after every step of one example: every leaf's norm and
    its first ``units`` numbers, in one compiled forward pass.

    Args:
        model: from :func:`~rnnviz.studies.models.load_model` or
            :func:`~rnnviz.studies.block_models.block_model`.
        inputs: ``<int>[B, T]`` token ids (``[T]`` for one sequence), or for a stack without a
            vocabulary ``<float>[B, T, I]``, as :func:`~rnnviz.studies.models.analyze_model`.
        example: which sequence of the batch.
        units: k, the numbers kept of each leaf (fewer where a leaf has fewer).

    Returns:
        :class:`~rnnviz.base.models.ModelStates`: ``norms`` ``[R, P, T]``, ``units`` P arrays
        ``[R, k_p, T]``; a model without a recurrent layer has R = P = 0.

    Raises:
        ValueError: inputs of the wrong shape or type, or an argument out of its range.

    Example:
        >>> import numpy as np, rnnviz
        >>> cfg = rnnviz.RunConfig(cell="mlstm", block="reference", layers=2, hidden_size=16, seq_len=8)
        >>> s = model_states(rnnviz.block_model(cfg), np.ones((1, 8, cfg.input_size), np.float32), units=4)
        >>> s.layers, s.leaves, s.norms.shape       # [R, P, T]
        ((0, 1), ('C', 'n', 'm'), (2, 3, 8))
        >>> [u.shape for u in s.units]              # [R, k_p, T]: m has one number per head
        [(2, 4, 8), (2, 4, 8), (2, 1, 8)]
    """
    batch = check_inputs(model, np.atleast_2d(np.asarray(inputs)) if model.vocab_size else np.asarray(inputs))
    if not 0 <= example < batch.shape[0]:
        raise ValueError(f"example {example}; allowed: 0 … {batch.shape[0] - 1}")
    if units < 1:
        raise ValueError(f"units = {units}: at least 1")
    one = batch[example : example + 1]
    layers, leaves, sizes = state_leaves(module_of(model.model_type, model.spec), model.spec)
    if not layers:  # a model of attention layers only: no state to follow
        empty = np.zeros((0, 0, one.shape[1]))
        return ModelStates(model.model_type, model.source, int(example), (), (), (), empty, (), 0.0, 0.0)
    key = (model, one, int(units))
    fresh = key not in _executable
    compiled = _executable(*key)
    start = time.perf_counter()
    norms, values = jax.block_until_ready(compiled.fn(model.params, one))
    run_s = time.perf_counter() - start
    return ModelStates(
        model.model_type,
        model.source,
        int(example),
        layers,
        leaves,
        sizes,
        np.asarray(norms, np.float64),
        tuple(np.asarray(v, np.float64) for v in values),
        compiled.compile_s if fresh else 0.0,
        run_s,
    )


__all__ = ["ModelStates", "model_states"]

"""The ways a model's per-step gradients can be computed, timed against plain ``jax.grad`` of
the same loss and checked against each other (:func:`block_strategies`), and the executables
they run (:func:`prepared`), which the benchmark of whole models
(:mod:`rnnviz.bench.block_costs`) times too.

Every way is a row of :data:`WAYS`:

* **plain jax.grad** — ``jax.jit(jax.value_and_grad(loss))`` with respect to every tensor of the
  model, the loss computed by ``module.forward`` without probes (:func:`plain_loss`): the
  baseline, with no per-step gradient;
* **analysis, one reverse pass** — :func:`~rnnviz.engine.blocks.gradients.model_gradients`
  with ``shared=True``, what :func:`~rnnviz.analyze_model` runs for a stack whose loss reads its
  last position: the loss's per-step norms from one forward and one reverse pass;
* **analysis, two cotangents** — ``shared=False``: the model loss's and one position's loss's
  cotangents, through one vmapped VJP or (the Mamba and Mamba-2 language models:
  :data:`~rnnviz.engine.blocks.gradients.OWN_CONNECTIVITY_PASS`) the second in a pass of its
  own, what a language model needs (its loss is the mean over positions, so no one position's
  loss is it).

Each executable is compiled once beforehand (its seconds kept apart), run once untimed for the
values it returns, then timed in rounds, one run of each per round
(:func:`~rnnviz.engine.timing.time_interleaved`), so that their ratios compare runs made under
the same load. Every way returns the model loss, and the two analyses return its per-step
norms (row 0 of ``stream`` and of each state leaf), which must agree.

:func:`block_on_devices` does all this on every device JAX sees (CPU against GPU), the model's
weights and inputs put on each in turn.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.models import ModelDevices, ModelStrategies, WayCost
from rnnviz.engine.blocks.dispatch import module_of
from rnnviz.engine.blocks.placement import input_sharding, place
from rnnviz.engine.compile import Compiled, compile_lowered, peak_bytes
from rnnviz.engine.environment import device_label
from rnnviz.engine.timing import time_interleaved
from rnnviz.studies.comparisons import present_devices
from rnnviz.studies.models import TRUSTED_FLOAT32, Model, check_inputs
from rnnviz.studies.models import _executable as analysis_executable


def plain_loss(module: Any, spec: Any, params: dict[str, jax.Array], inputs: jax.Array) -> jax.Array:
    """The model's own loss ``[]`` from its forward pass without probes.

    A language model: the mean next-token cross entropy over the B · (T − 1) predictions
    (transformers' loss with ``labels=input_ids``); a stack without a head: ½ Σ_b ‖y_{b,T−1}‖²
    (the bare cells' ``last`` loss). The loss that
    :func:`~rnnviz.engine.blocks.gradients.position_losses` weights by its weights, written
    without them.

    Args:
        module: the block family (:data:`~rnnviz.engine.blocks.registry.BLOCKS`).
        spec: its sizes.
        params: ``{name: array}``.
        inputs: ``<int32>[B, T]`` tokens, or ``<float32>[B, T, I]`` for a stack.

    Example:
        >>> from rnnviz import RunConfig
        >>> from rnnviz.studies.block_models import block_inputs, block_model
        >>> cfg = RunConfig(cell="gru", block="reference", layers=1, hidden_size=8, seq_len=6)
        >>> m, x = block_model(cfg), block_inputs(cfg)
        >>> loss = plain_loss(module_of(m.model_type, m.spec), m.spec, m.params, jnp.asarray(x))
        >>> loss.shape, bool(loss > 0)
        ((), True)
    """
    out = module.forward(spec, params, inputs).astype(jnp.float32)
    if spec.vocab_size:
        logp = jax.nn.log_softmax(out[:, :-1], axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, inputs[:, 1:, None], axis=-1))
    return 0.5 * jnp.sum(out[:, -1] ** 2)


def plain_grad_executable(model: Model, inputs: jax.Array) -> Compiled:
    """``jax.jit(jax.value_and_grad(plain_loss))`` with respect to every tensor of
    ``model.params``, compiled for these arrays' shapes and places."""
    start = time.perf_counter()
    fn = jax.value_and_grad(
        functools.partial(plain_loss, module_of(model.model_type, model.spec), model.spec)
    )
    compiled = compile_lowered(jax.jit(fn).lower(model.params, inputs), "plain jax.grad of a model")
    return Compiled(compiled, time.perf_counter() - start, peak_bytes(compiled))


class Placed(NamedTuple):
    """A model's inputs checked and placed beside its weights.

    Attributes:
        inputs: the checked NumPy inputs (what the analysis's executable is keyed by).
        placed: the same on the weights' devices.
        position: ``[]`` int32, the last position with a loss, placed alike.
        device: the first of those devices (by id).
    """

    inputs: np.ndarray
    placed: jax.Array
    position: jax.Array
    device: jax.Device


def placed_inputs(model: Model, inputs: np.ndarray) -> Placed:
    """``inputs`` checked (:func:`~rnnviz.studies.models.check_inputs`) and put where
    ``model``'s weights are, with the analysis's default position, the last one with a loss."""
    inputs = check_inputs(model, inputs)
    placed = jax.device_put(inputs, input_sharding(model.params))
    steps = inputs.shape[1] - (1 if model.vocab_size else 0)
    position = jax.device_put(np.int32(steps - 1), placed.sharding)
    return Placed(inputs, placed, position, min(placed.devices(), key=lambda d: d.id))


class Prepared(NamedTuple):
    """One way's executable and the arguments it runs on."""

    compiled: Compiled
    args: tuple


def plain_prepared(model: Model, at: Placed) -> Prepared:
    """Plain ``jax.grad`` (:func:`plain_grad_executable`), compiled here, on ``(params, inputs)``."""
    return Prepared(plain_grad_executable(model, at.placed), (model.params, at.placed))


def analysis_prepared(model: Model, at: Placed, shared: bool) -> Prepared:
    """The analysis's executable (compiled, or reused from :func:`~rnnviz.analyze_model`'s cache)
    with one reverse pass (``shared``) or two cotangents, on ``(params, inputs, position)``."""
    return Prepared(analysis_executable(model, at.inputs, shared), (model.params, at.placed, at.position))


def _plain_loss(out: Any) -> float:
    return float(out[0])


def _analysis_loss(out: Any) -> float:
    return float(out.loss)


def _loss_norms(out: Any) -> list[np.ndarray]:
    """The model loss's per-step norms of every stream row and state leaf."""
    leaves = jax.tree.leaves((out.stream, out.states))  # a layer without a state is None: no leaf
    return [np.asarray(leaf, np.float64) for leaf in leaves]


class Way(NamedTuple):
    """One way of computing the gradients: its name, what it computes, how its executable is
    made, and how to read its loss and (for an analysis) its per-step norms from its output."""

    name: str
    description: str
    prepare: Callable[[Model, Placed], Prepared]
    loss: Callable[[Any], float]
    norms: Callable[[Any], list[np.ndarray]] | None


#: The ways, plain ``jax.grad`` (the ratios' baseline) first, then the analysis the others are
#: compared with.
WAYS: tuple[Way, ...] = (
    Way(
        "plain jax.grad",
        "jax.value_and_grad of the model's loss with respect to every parameter: the baseline, no "
        "per-step gradient",
        plain_prepared,
        _plain_loss,
        None,
    ),
    Way(
        "analysis, one reverse pass",
        "every layer's and state's per-step gradient norms from one forward and one reverse pass "
        "(for a stack, whose loss is its last position's own, that pass serves the connectivity too; "
        "for a language model, what analyze_model runs with connectivity=False)",
        functools.partial(analysis_prepared, shared=True),
        _analysis_loss,
        _loss_norms,
    ),
    Way(
        "analysis, two cotangents",
        "the same norms, and one position's loss's connectivity: a second cotangent through one "
        "vmapped reverse pass, or for the Mamba and Mamba-2 language models a pass of its own without "
        "the state probes (what a language model needs, whose loss is the mean over positions)",
        functools.partial(analysis_prepared, shared=False),
        _analysis_loss,
        _loss_norms,
    ),
)


def max_rel_diff(
    got: Sequence[np.ndarray], want: Sequence[np.ndarray], floor: float = TRUSTED_FLOAT32
) -> float:
    """The largest elementwise relative difference |a − b| / max(|a|, |b|) over arrays of the
    same shapes, where max(|a|, |b|) ≥ ``floor``: below :data:`~rnnviz.studies.models.TRUSTED_FLOAT32`
    (2⁻¹⁰⁰) float32 norms went through subnormal products and keep few digits, so two float32
    passes may differ there by more than rounding, and the analysis itself reads their log₁₀
    from its float64 pass.

    Example:
        >>> max_rel_diff([np.array([1.0, 0.0, 2.0])], [np.array([1.0, 0.0, 2.2])])
        0.0909...
        >>> max_rel_diff([np.array([1.0, 6.2247e-37])], [np.array([1.0, 6.2237e-37])])  # below 2⁻¹⁰⁰
        0.0
        >>> max_rel_diff([np.array([1.0, np.nan])], [np.array([1.0, 1e-40])])  # a NaN only one has
        inf
    """
    worst = 0.0
    for a, b in zip(got, want, strict=True):
        if (np.isnan(a) != np.isnan(b)).any():
            return math.inf
        scale = np.maximum(np.abs(a), np.abs(b))
        compared = scale >= floor
        worst = max(worst, float(np.max(np.abs(a - b)[compared] / scale[compared], initial=0.0)))
    return worst


def block_strategies(
    model: Model, inputs: np.ndarray, repeats: int = 10, budget_s: float | None = None
) -> ModelStrategies:
    """Every way of :data:`WAYS` on ``model`` and ``inputs``: compiled once each beforehand, run
    once for the values compared, then timed in the same rounds.

    Args:
        model: any model (:func:`~rnnviz.block_model`, :func:`~rnnviz.fresh_model`, a checkpoint).
        inputs: ``<int32>[B, T]`` tokens, or ``<float32>[B, T, I]`` for a stack.
        repeats: rounds of timed runs after one untimed run of each.
        budget_s: seconds of timed runs per way; a slow one gets fewer rounds (at least 3).

    Returns:
        :class:`~rnnviz.base.models.ModelStrategies`, plain ``jax.grad`` first: each way's
        compile seconds, median run, ratio to plain, loss, and for the analyses the largest
        relative difference of the model loss's per-step norms from the one-reverse-pass's.

    Example:
        >>> from rnnviz import RunConfig
        >>> from rnnviz.studies.block_models import block_inputs, block_model
        >>> cfg = RunConfig(cell="gru", block="reference", layers=1, hidden_size=8, seq_len=6)
        >>> s = block_strategies(block_model(cfg), block_inputs(cfg), repeats=1)
        >>> print(" | ".join(w.name for w in s.ways))
        plain jax.grad | analysis, one reverse pass | analysis, two cotangents
        >>> s.ways[0].ratio, s.ways[1].max_rel_diff, s.ways[2].max_rel_diff < 1e-5
        (1.0, 0.0, True)
    """
    at = placed_inputs(model, np.asarray(inputs))
    prepared = [way.prepare(model, at) for way in WAYS]
    # one untimed run each, for the values compared; time_interleaved runs its own warm-up
    outs = [jax.device_get(p.compiled.fn(*p.args)) for p in prepared]
    timings = time_interleaved([(p.compiled.fn, p.args) for p in prepared], repeats, budget_s)
    reference = _loss_norms(outs[1])
    plain_s = timings[0].median_s
    ways = tuple(
        WayCost(
            way.name,
            way.description,
            p.compiled.compile_s,
            t.median_s,
            t.min_s,
            t.max_s,
            t.repeats,
            t.median_s / plain_s if plain_s > 0 else float("nan"),
            way.loss(out),
            None if way.norms is None else max_rel_diff(way.norms(out), reference),
        )
        for way, p, out, t in zip(WAYS, prepared, outs, timings)
    )
    batch, steps = at.inputs.shape[:2]
    return ModelStrategies(
        model.model_type, model.source, batch, steps, model.n_params, ways, device_label(at.device)
    )


def on_device(model: Model, device: jax.Device) -> Model:
    """``model`` with its weights on ``device`` alone (tied weights stay one array).

    Example:
        >>> from rnnviz import RunConfig
        >>> from rnnviz.studies.block_models import block_model
        >>> cfg = RunConfig(cell="gru", block="reference", layers=1, hidden_size=8, seq_len=6)
        >>> cpu = jax.devices("cpu")[0]
        >>> m = on_device(block_model(cfg), cpu)
        >>> {d for w in m.params.values() for d in w.devices()} == {cpu}
        True
    """
    return dataclasses.replace(model, params=place(model.params, [device]))


def block_on_devices(
    model: Model,
    inputs: np.ndarray,
    devices: Sequence[jax.Device] | None = None,
    repeats: int = 10,
    budget_s: float | None = None,
) -> ModelDevices:
    """:func:`block_strategies` on each device: the model's weights put there
    (:func:`on_device`), its inputs beside them, every way compiled, checked and timed there.

    Each device's ways are timed in their own rounds, so a ratio compares runs on one device
    under the same load; across devices, compare the median runs of one way.

    Args:
        model: any model (:func:`~rnnviz.block_model`, :func:`~rnnviz.fresh_model`, a checkpoint).
        inputs: ``<int32>[B, T]`` tokens, or ``<float32>[B, T, I]`` for a stack.
        devices: where to run (default: every device of each platform JAX sees,
            :func:`~rnnviz.studies.comparisons.present_devices`; CPU-only: one).
        repeats: rounds of timed runs per device, as :func:`block_strategies`.
        budget_s: seconds of timed runs per way and device, as :func:`block_strategies`.

    Returns:
        :class:`~rnnviz.base.models.ModelDevices`: a
        :class:`~rnnviz.base.models.ModelStrategies` per device in ``devices``' order (each
        naming the device it ran on), and the GPUs JAX sees.

    Example:
        >>> from rnnviz import RunConfig
        >>> from rnnviz.studies.block_models import block_inputs, block_model
        >>> cfg = RunConfig(cell="gru", block="reference", layers=1, hidden_size=8, seq_len=6)
        >>> cpu = jax.devices("cpu")[0]
        >>> d = block_on_devices(block_model(cfg), block_inputs(cfg), devices=[cpu], repeats=1)
        >>> [r.device for r in d.runs], d.runs[0].ways[0].name
        (['cpu:0 cpu'], 'plain jax.grad')
    """
    inputs = np.asarray(inputs)
    runs = tuple(
        block_strategies(on_device(model, device), inputs, repeats, budget_s)
        for device in (present_devices() if devices is None else devices)
    )
    gpus = tuple(device_label(d) for d in present_devices() if d.platform == "gpu")
    return ModelDevices(runs, gpus)


__all__ = [
    "WAYS",
    "ModelDevices",
    "ModelStrategies",
    "WayCost",
    "Placed",
    "Prepared",
    "Way",
    "analysis_prepared",
    "block_on_devices",
    "block_strategies",
    "max_rel_diff",
    "on_device",
    "placed_inputs",
    "plain_grad_executable",
    "plain_loss",
    "plain_prepared",
]

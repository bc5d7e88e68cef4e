r"""What a network remembers: the connectivity of one output to every earlier input
(Madsen 2019, "Visualizing memorization in RNNs", Distill), with exact magnitudes.

For one sequence x_1 … x_T of a data set and an output step τ (default: the last real
step), the connectivity of input t is the size of the gradient of a scalar read at τ:

.. math::

    \text{target: } c_t = \Big\| \frac{\partial \log p(y^*_\tau \mid x_{\le \tau})}{\partial x_t}
    \Big\|,
    \qquad
    \text{output: } c_t = \Big\| \frac{\partial y_\tau}{\partial x_t} \Big\|_F

(``target``: the log-probability the trained readout gives the right class or next
character; ``output``: the Frobenius norm of the cell output's Jacobian, one reverse pass
per output unit, vmapped). c_t = 0 for t > τ. Each is one reverse recursion over the
trajectory held as mantissa · 2^exponent (:func:`rnnviz.engine.logpass.log_input_gradients`),
so log₁₀ c_t is exact even where float32 would have flushed it to 0.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.connectivity import MEASURES, Connectivity
from rnnviz.base.weights import Weights
from rnnviz.config import ConfigError, RunConfig, check_number
from rnnviz.dataset import Dataset, check_data
from rnnviz.dataset.describe import digit_steps, preview_record
from rnnviz.engine.cells import carry_to_dict, make_cell, outputs
from rnnviz.engine.compile import Compiled, compile_cache, compile_for
from rnnviz.engine.logpass import log_input_gradients
from rnnviz.engine.losses import DataSpec, data_spec
from rnnviz.engine.norms import Scaled, combine, log10
from rnnviz.engine.prepare import check_weights, output_size, prepared_inputs, resolve_device, static_config
from rnnviz.engine.rollout import rollout


def _target_scalar(cfg: RunConfig, params, step, w, b, target):
    def s(carries, xs_tm):
        y = outputs(cfg, params, carries, xs_tm)[step - 1].astype(jnp.float32)
        return jax.nn.log_softmax(y @ w + b)[target]

    return s


def connectivity_pass(cfg: RunConfig, measure: str, params, carry0, xs, step, w, b, target):
    """``(Scaled [T], log p or 0, carries)`` for one unbatched sequence ``xs [T, I]``
    (``step`` τ, the readout ``w [O, F]``, ``b [F]`` and ``target`` are traced: a new
    sequence, step or target never recompiles)."""
    cell = make_cell(cfg)
    carries = rollout(cell, params, carry0, xs)
    if measure == "target":
        s = _target_scalar(cfg, params, step, w, b, target)
        direct, direct_x = jax.grad(s, argnums=(0, 1))(carries, xs)
        norms = log_input_gradients(cell, params, carries, xs, direct, direct_x)
        return Scaled(norms.mantissa[:, 0], norms.exponent[:, 0]), s(carries, xs), carries

    def unit(o):
        def s(cs, x):
            return outputs(cfg, params, cs, x)[step - 1][o].astype(jnp.float32)

        direct, direct_x = jax.grad(s, argnums=(0, 1))(carries, xs)
        n = log_input_gradients(cell, params, carries, xs, direct, direct_x)
        return Scaled(n.mantissa[:, 0], n.exponent[:, 0])

    per_unit = jax.vmap(unit)(jnp.arange(output_size(cfg)))  # [O, T]
    return combine(per_unit, 0), jnp.float32(0), carries


@compile_cache(maxsize=32)
def connectivity_executable(static: RunConfig, measure: str, args: DataSpec, device: jax.Device) -> Compiled:
    """:func:`connectivity_pass` compiled for one shape (a new sequence, step, target or
    weights of the same shapes reuse it)."""
    return compile_for(functools.partial(connectivity_pass, static, measure), args.shapes(), device)


def connectivity(
    cfg: RunConfig,
    data: Dataset,
    index: int = 0,
    *,
    params: Weights | None = None,
    step: int | None = None,
    measure: str | None = None,
) -> Connectivity:
    """How strongly the output at step τ of sequence ``index`` depends on each input.

    Args:
        cfg: the configuration (fitted to ``data``: :func:`rnnviz.fit_to_data`); its batch
            size is ignored (one sequence).
        data: the data set.
        index: which of its sequences (0 … N−1).
        params: trained weights (``run.weights(step)``); None: the seed's initialisation.
        step: τ, the output step (1 … T); None: the sequence's last real step.
        measure: ``target`` (needs trained weights whose readout fits the data:
            classification or next-step), ``output``, or None (``target`` where it can).

    Returns:
        A :class:`Connectivity`.

    Raises:
        ConfigError: a bad index, step or measure, or weights that do not fit ``cfg``.

    Example:
        >>> from rnnviz import RunConfig, fit_to_data, load_dataset
        >>> from rnnviz.studies.connectivity import connectivity
        >>> digits = load_dataset("digits", order="rows")
        >>> c = connectivity(fit_to_data(RunConfig(cell="gru", hidden_size=8), digits), digits, 3)
        >>> c.measure, c.log10.shape, c.step  # no trained readout: ‖∂y_τ/∂x_t‖_F
        ('output', (8,), 8)
    """
    check_data(cfg, data)
    one = cfg.replace(batch_size=None, carry_init=cfg.carry_init)
    check_weights(one, params)
    index = check_number("index", index, 0, data.n_sequences - 1, integer=True)
    length = int(data.mask[index].sum())
    step = length if step is None else check_number("step", step, 1, max(1, length), integer=True)
    readout = None if params is None else params.readout
    targets = _targets(data, index, step)
    fits = (
        readout is not None
        and targets is not None
        and tuple(readout["kernel"].shape) == (output_size(static_config(one)), data.n_classes)
    )
    if measure is None:
        measure = "target" if fits else "output"
    if measure not in MEASURES:
        raise ConfigError("measure", measure, "one of " + ", ".join(MEASURES))
    if measure == "target" and not fits:
        raise ConfigError(
            "measure",
            measure,
            "'output': 'target' needs trained weights whose readout fits this data's classes "
            "(a classification or next-step data set)",
        )
    p, carry0, _ = prepared_inputs(one, None, None, params)
    xs = jnp.asarray(data.inputs[index], jnp.dtype(one.dtype))
    w = jnp.zeros((1, 1), jnp.float32) if not fits else jnp.asarray(readout["kernel"])
    b = jnp.zeros((1,), jnp.float32) if not fits else jnp.asarray(readout["bias"])
    target = 0 if targets is None else targets
    args = (p, carry0, xs, np.int32(step), w, b, np.int32(target))
    exe = connectivity_executable(static_config(one), measure, data_spec(args), resolve_device(one))
    norms, log_prob, carries = exe.fn(*args)
    host = jax.device_get((p, carries))
    return Connectivity(
        config=one,
        index=int(index),
        step=int(step),
        measure=measure,
        log10=np.asarray(log10(norms), np.float64),
        inputs=np.asarray(data.inputs[index]),
        mask=np.asarray(data.mask[index]),
        target=None if measure != "target" else int(target),
        log_prob=None if measure != "target" else float(log_prob),
        carries=carry_to_dict(one, host[1]),
        params=host[0],
        text=None if data.vocab is None else "".join(data.vocab[i] for i in data.inputs[index].argmax(-1)),
        image=preview_record(data, int(index)).image,
        pixel_steps=digit_steps(data),
        data=data.label,
        weights=None if params is None else params.label,
    )


def _targets(data: Dataset, index: int, step: int) -> int | None:
    """The class (classification) or the next token at τ (next-step), else None."""
    if data.kind == "classification":
        return int(data.labels[index])
    if data.kind == "next-step":
        return int(data.targets[index, step - 1])
    return None

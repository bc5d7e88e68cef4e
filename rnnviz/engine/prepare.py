"""What one analysis reads: params, the initial carry and the inputs, from the seed and the
config's values, in cached compiled *prepare* executables (:func:`prepared_batch`).

* params and carry ``(key, values) -> (params, carry0)``: params from ``cell.init`` (gain
  and forget bias applied), the initial carry from ``cell.initialize_carry``; independent
  of T, so lengths share it;
* inputs ``(key, values) -> xs``: :func:`rnnviz.engine.inputs.make_inputs` at a bucketed length,
  cut to T;
* or, with a data set, ``(key, data) -> (xs, objective)``: B sequences of its training
  split (an argument, on the device once) and a readout, drawn by the seed
  (:mod:`rnnviz.engine.losses`);
* with trained weights (:class:`rnnviz.base.weights.Weights`, an argument like the data), the
  trained params replace the initialised ones (:func:`prepare_trained`).

The seed's key is split into named keys for each. Seed, gain, forget bias and scales are
arguments, so changing them never recompiles.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.weights import Weights
from rnnviz.config import ConfigError, RunConfig, static_config
from rnnviz.dataset import Dataset, check_data
from rnnviz.engine.cells import adjust_params, apply_gain, final_output, make_cell
from rnnviz.engine.compile import Compiled, compile_cache, compile_for
from rnnviz.engine.gradients import full_carry0
from rnnviz.engine.inputs import make_inputs
from rnnviz.engine.linalg import orthogonal_draws_together
from rnnviz.engine.losses import DataArrays, DataSpec, Objective, data_arrays, data_spec, draw_batch
from rnnviz.tables.cells import cell_spec


class Values(NamedTuple):
    """The config's plain values, passed to *prepare* as float32 scalars."""

    carry_scale: Any
    recurrent_gain: Any
    forget_bias: Any
    input_scale: Any

    @classmethod
    def of(cls, cfg: RunConfig) -> Values:
        """The values of ``cfg`` as float32 scalars (arguments: changing them never recompiles)."""
        return cls(*(np.float32(getattr(cfg, f)) for f in cls._fields))


def seed_key(seed: int) -> jax.Array:
    """Raw ``uint32[2]`` key data of ``seed`` (an argument, never a compile-time constant)."""
    return jax.random.key_data(jax.random.key(seed))


def _keys(key_data: jax.Array):
    """The seed's key split into named keys: params, carry, inputs."""
    return jax.random.split(jax.random.wrap_key_data(key_data), 3)


def prepare_params(cfg: RunConfig, key_data: jax.Array, values: Values):
    """``(params, carry0)``: params as ``cell.init(...)["params"]`` with the gain and
    forget bias applied; carry0 ``[(B,) H]`` per component (``[H]`` when learned), from
    ``cell.initialize_carry``. Independent of T, so a new seq_len does not recompile it."""
    k_params, k_carry, _ = _keys(key_data)
    dtype = jnp.dtype(cfg.dtype)
    cell = make_cell(cfg, values.carry_scale)
    x0 = jnp.zeros(cfg.input_shape[:-2] + (cfg.input_size,), dtype)  # init reads shapes only
    carry_input_shape = (cfg.input_size,) if cfg.carry_init == "learned" else x0.shape
    carry0 = cell.initialize_carry(k_carry, carry_input_shape)
    # the recurrent kernels' orthogonal draws in one vmapped factorisation: one to compile, not
    # one per kernel (an LSTM's parameters then lower and compile faster: docs/dev/benchmarks.md)
    params = orthogonal_draws_together(lambda: cell.init(k_params, full_carry0(cfg, carry0), x0)["params"])
    params = adjust_params(cfg, params, values.recurrent_gain, values.forget_bias)
    return params, carry0


def input_bucket(seq_len: int) -> int:
    """Length the inputs are drawn at: the next power of two ≥ T (at least 16).

    Compiling a draw of threefry normals takes as long on CPU whatever the length, so inputs
    are drawn at bucketed lengths and cut to T: most sequence-length changes then reuse the
    drawing executable. x is defined as the first T steps of that draw."""
    return max(16, 1 << (seq_len - 1).bit_length())


def draw_inputs(cfg: RunConfig, length: int, key_data: jax.Array, values: Values) -> jax.Array:
    """``[(B,) length, I]`` from the seed's inputs key (``cfg.seq_len`` is not read)."""
    _, _, k_inputs = _keys(key_data)
    shape = cfg.input_shape[:-2] + (length, cfg.input_size)
    return make_inputs(k_inputs, cfg.inputs, shape, values.input_scale, jnp.dtype(cfg.dtype))


def prepare_inputs(cfg: RunConfig, key_data: jax.Array, values: Values) -> jax.Array:
    """The input sequence ``[(B,) T, I]``: the first T steps of a draw at ``input_bucket(T)``."""
    return draw_inputs(cfg, input_bucket(cfg.seq_len), key_data, values)[..., : cfg.seq_len, :]


def prepare_data(cfg: RunConfig, key_data: jax.Array, data: DataArrays) -> tuple[jax.Array, Objective]:
    """``(xs [(B,) T, I], Objective)``: a batch of ``data`` and a readout drawn by the seed's
    inputs key (:func:`rnnviz.engine.losses.draw_batch`)."""
    _, _, k_inputs = _keys(key_data)
    return draw_batch(cfg, output_size(cfg), k_inputs, data)


@functools.lru_cache(maxsize=256)
def output_size(cfg: RunConfig) -> int:
    """O, the size of the cell's output y_t (what a data set's readout reads)."""
    params, carry0 = jax.eval_shape(functools.partial(prepare_params, cfg), seed_key(0), Values.of(cfg))
    x = jax.ShapeDtypeStruct(cfg.input_shape[:-2] + (cfg.input_size,), jnp.dtype(cfg.dtype))
    y = jax.eval_shape(lambda p, c, x: final_output(cfg, p, full_carry0(cfg, c), x), params, carry0, x)
    return int(y.shape[-1])


def trained_tree(weights: Weights) -> dict[str, Any]:
    """The arrays of ``weights`` as the prepare functions read them (the gain a float32 leaf)."""
    return {**weights.tree(), "gain": np.float32(weights.gain)}


def prepare_trained(cfg: RunConfig, key_data: jax.Array, values: Values, trained: dict[str, Any]):
    """``(params, carry0)`` of a trained network (:func:`trained_tree`): the trained params
    with the recurrence times ``recurrent_gain / gain`` (the run's own gain: as trained); the
    trained initial carry if it was learned, else the seed's (as in training)."""
    _, carry0 = prepare_params(cfg, key_data, values)
    params = apply_gain(cfg, trained["cell"], values.recurrent_gain / trained["gain"])
    return params, trained.get("carry", carry0)


def with_readout(objective: Objective | None, trained: dict[str, Any] | None) -> Objective | None:
    """A data set's loss terms through the trained readout, where the weights have one that
    fits (:func:`check_weights` decided); else the readout drawn by the seed."""
    readout = None if trained is None else trained.get("readout")
    if objective is None or readout is None or objective.w is None:
        return objective
    if tuple(readout["kernel"].shape) != tuple(objective.w.shape):
        return objective
    return dataclasses.replace(objective, w=readout["kernel"], b=readout["bias"])


def prepare(
    cfg: RunConfig,
    key_data: jax.Array,
    values: Values,
    data: DataArrays | None = None,
    trained: dict[str, Any] | None = None,
):
    """``(params, carry0, xs, objective)`` for ``cfg`` (see :func:`prepare_params`,
    :func:`prepare_inputs`, :func:`prepare_data`); objective is None without data. With
    ``trained`` (:func:`trained_tree`), the trained network (:func:`prepare_trained`)."""
    if trained is None:
        params, carry0 = prepare_params(cfg, key_data, values)
    else:
        params, carry0 = prepare_trained(cfg, key_data, values, trained)
    if data is None:
        return params, carry0, prepare_inputs(cfg, key_data, values), None
    xs, objective = prepare_data(cfg, key_data, data)
    return params, carry0, xs, with_readout(objective, trained)


@functools.lru_cache(maxsize=64)
def _param_shapes(static: RunConfig):
    """``(params, carry0)`` shape stand-ins of ``static`` (traced once per shape)."""
    return jax.eval_shape(functools.partial(prepare_params, static), seed_key(0), Values.of(static))


def check_weights(cfg: RunConfig, weights: Weights | None) -> None:
    """Whether ``weights`` fit ``cfg``: the same params tree with the same shapes and dtypes,
    and a learned initial carry exactly when ``cfg.carry_init`` is ``learned``.

    Raises:
        ConfigError: ``params``, naming the first leaf that differs and what ``cfg`` needs.
    """
    if weights is None:
        return
    if not isinstance(weights, Weights):
        raise ConfigError("params", type(weights).__name__, "trained weights: a run's run.weights(step)")
    expected, carry = _param_shapes(static_config(cfg))
    got_paths = {jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_leaves_with_path(weights.cell)}
    what = f"{cfg.cell} H={cfg.hidden_size} I={cfg.input_size} {cfg.dtype}"
    for path, leaf in jax.tree_util.tree_leaves_with_path(expected):
        name = jax.tree_util.keystr(path)
        have = got_paths.pop(name, None)
        if have is None:
            raise ConfigError("params", weights.label, f"weights for this config ({what}) need {name}")
        if tuple(np.shape(have)) != tuple(leaf.shape) or np.asarray(have).dtype != leaf.dtype:
            raise ConfigError(
                "params",
                weights.label,
                f"{name} is {np.asarray(have).dtype}{list(np.shape(have))}, but this config ({what}) "
                f"needs {leaf.dtype}{list(leaf.shape)}",
            )
    if got_paths:
        raise ConfigError("params", weights.label, f"{', '.join(got_paths)} is not a param of {what}")
    learned = cfg.carry_init == "learned"
    if learned != (weights.carry is not None):
        raise ConfigError(
            "carry_init",
            cfg.carry_init,
            "'learned': the weights hold a trained initial carry"
            if weights.carry is not None
            else "the weights hold no trained initial carry: any but 'learned'",
        )
    if learned and [c.shape for c in jax.tree.leaves(carry)] != [
        np.shape(c) for c in jax.tree.leaves(weights.carry)
    ]:
        raise ConfigError("params", weights.label, f"the learned carry does not fit {what}")


def with_missing_biases(cfg: RunConfig, cell_params: Any, lead: tuple[int, ...] = ()) -> Any:
    """``cell_params`` with zeros for the biases a run saved before they existed lacks: those
    of the top-level parameters in ``cfg.cell``'s ``ParamRules.zero_if_missing``, where the
    kernel is there and the bias is not. Zero is what those biases start at, so it is the
    network that was saved. ``lead``: axes before each leaf's own (a run file's kept steps).
    Anything else that is missing stays missing, for :func:`check_weights` to name."""
    names = cell_spec(cfg.cell).params.zero_if_missing
    if not names or not isinstance(cell_params, dict):
        return cell_params
    expected, _ = _param_shapes(static_config(cfg))
    out = dict(cell_params)
    for name in names:
        have, want = out.get(name), expected.get(name)
        if isinstance(have, dict) and "kernel" in have and "bias" not in have and want and "bias" in want:
            bias = want["bias"]
            out[name] = {**have, "bias": np.zeros(tuple(lead) + tuple(bias.shape), bias.dtype)}
    return out


def resolve_device(cfg: RunConfig) -> jax.Device:
    """The JAX device ``cfg.device`` names; a missing GPU is a :class:`ConfigError`."""
    if cfg.device in ("gpu", "auto"):
        try:
            return jax.devices("gpu")[0]
        except RuntimeError:
            if cfg.device == "gpu":
                raise ConfigError(
                    "device", "gpu", "no GPU is visible to JAX on this machine; use 'cpu' or 'auto'"
                ) from None
    return jax.devices("cpu")[0]


def prepared_shapes(static: RunConfig, data: DataSpec | None = None):
    """Shape/dtype stand-ins of ``(params, carry0, xs, objective)`` for ``static``."""
    return jax.eval_shape(
        functools.partial(prepare, static),
        seed_key(0),
        Values.of(static),
        None if data is None else data.shapes(),
    )


def _params_config(static: RunConfig) -> RunConfig:
    """Only fields that shape the params and the initial carry; T, loss, inputs and
    strategy do not, so configs differing in those share one params executable."""
    return static.replace(seq_len=1, loss="last", inputs="normal", strategy="accumulate")


@compile_cache(maxsize=64)
def params_executable(params_static: RunConfig, device: jax.Device) -> Compiled:
    """``(key, values) -> (params, carry0)``: the seed's initialisation (see :func:`prepare_params`)."""
    return compile_for(
        functools.partial(prepare_params, params_static),
        (seed_key(0), Values.of(params_static)),
        device,
        run_once=True,
    )


@compile_cache(maxsize=64)
def inputs_executable(inputs_static: RunConfig, length: int, device: jax.Device) -> Compiled:
    """``(key, values) -> xs [(B,) length, I]``: the seed's inputs (see :func:`draw_inputs`)."""
    return compile_for(
        functools.partial(draw_inputs, inputs_static, length),
        (seed_key(0), Values.of(inputs_static)),
        device,
        run_once=True,
    )


@compile_cache(maxsize=64)
def data_executable(static: RunConfig, data: DataSpec, device: jax.Device) -> Compiled:
    """``(key, data) -> (xs, objective)``: a batch of a data set (see :func:`prepare_data`)."""
    return compile_for(
        functools.partial(prepare_data, static), (seed_key(0), data.shapes()), device, run_once=True
    )


def prepare_executables(
    static: RunConfig, device: jax.Device, data: DataSpec | None = None
) -> tuple[Compiled, Compiled]:
    """The two cached *prepare* executables (params and carry; inputs or a data batch) for
    one shape, without compiling the analysis: what the Lyapunov and Jacobian passes need."""
    params = params_executable(_params_config(static), device)
    if data is not None:
        return params, data_executable(static.replace(strategy="accumulate"), data, device)
    return params, inputs_executable(_inputs_config(static), input_bucket(static.seq_len), device)


def _inputs_config(static: RunConfig) -> RunConfig:
    """Only the fields the drawn inputs depend on (B, I, dtype, distribution): another cell,
    H, init or loss draws the same inputs with the same executable. seq_len=1: lengths
    share it through :func:`input_bucket` (and any B, I stays within the budgets)."""
    return RunConfig(
        batch_size=static.batch_size,
        input_size=static.input_size,
        dtype=static.dtype,
        inputs=static.inputs,
        seq_len=1,
        device=static.device,
    )


@functools.lru_cache(maxsize=4)
def device_data(ds: Dataset, device: jax.Device) -> tuple[DataArrays, DataSpec]:
    """A data set's training split on ``device`` and its spec (copied once per data set and device)."""
    arrays = jax.device_put(data_arrays(ds), device)
    return arrays, data_spec(arrays)


def data_on(
    cfg: RunConfig, device: jax.Device, data: Dataset | None
) -> tuple[DataArrays | None, DataSpec | None]:
    """``(device arrays, spec)`` of ``data`` checked against ``cfg``; ``(None, None)`` without."""
    if data is None:
        return None, None
    check_data(cfg, data)
    return device_data(data, device)


class Prepared(NamedTuple):
    """What one analysis reads, on the device: params (a Flax tree), carry0 (``[(B,) H]``
    per component), xs ``[(B,) T, I]`` and a data set's objective (None without data)."""

    params: Any
    carry0: Any
    xs: jax.Array
    objective: Objective | None


def prepared_batch(
    cfg: RunConfig,
    device: jax.Device | None = None,
    data: Dataset | None = None,
    weights: Weights | None = None,
) -> Prepared:
    """:class:`Prepared` for ``cfg``'s seed and values (and a batch of ``data``; trained
    ``weights``), from the cached *prepare* executables."""
    device = device or resolve_device(cfg)
    return prepared_on(cfg, device, *data_on(cfg, device, data), weights)


@compile_cache(maxsize=64)
def trained_executable(params_static: RunConfig, trained: DataSpec, device: jax.Device) -> Compiled:
    """``(key, values, trained) -> (params, carry0)`` for weights of the spec ``trained``
    (:func:`prepare_trained`): new weights of the same shapes reuse it."""
    return compile_for(
        functools.partial(prepare_trained, params_static),
        (seed_key(0), Values.of(params_static), trained.shapes()),
        device,
        run_once=True,
    )


def prepared_on(
    cfg: RunConfig,
    device: jax.Device,
    arrays: DataArrays | None,
    spec: DataSpec | None,
    weights: Weights | None = None,
) -> Prepared:
    """What one analysis of ``cfg`` reads, on ``device``: params (the seed's, or ``weights``
    with the recurrence scaled by the gain), the initial carry, and the inputs — the seed's
    ``[(B,) T, I]``, or a batch of the data set (``arrays``, compiled for ``spec``) with its
    loss terms and readout.

    Raises:
        ConfigError: ``weights`` do not fit ``cfg`` (before anything is compiled).
    """
    check_weights(cfg, weights)
    params, inputs = prepare_executables(static_config(cfg), device, spec)
    key, values = jax.device_put((seed_key(cfg.seed), Values.of(cfg)), device)
    if weights is None:
        p, carry0 = params.fn(key, values)
        trained = None
    else:
        trained = jax.device_put(trained_tree(weights), device)
        exe = trained_executable(_params_config(static_config(cfg)), data_spec(trained), device)
        p, carry0 = exe.fn(key, values, trained)
    if arrays is None:
        return Prepared(p, carry0, inputs.fn(key, values)[..., : cfg.seq_len, :], None)
    xs, objective = inputs.fn(key, arrays)
    return Prepared(p, carry0, xs, with_readout(objective, trained))


def prepared_inputs(
    cfg: RunConfig,
    device: jax.Device | None = None,
    data: Dataset | None = None,
    weights: Weights | None = None,
):
    """``(params, carry0, xs)`` on the device, from the cached *prepare* executables."""
    return tuple(prepared_batch(cfg, device, data, weights)[:3])

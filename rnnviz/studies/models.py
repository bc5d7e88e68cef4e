r"""Your own model: a checkpoint loaded exactly (:func:`load_model`), or one design drawn fresh
from its sizes as its reference draws it (:func:`fresh_model`), and the gradient through every
layer and every step of it (:func:`analyze_model`).

>>> import numpy as np, rnnviz, torch, tempfile
>>> folder = tempfile.mkdtemp()
>>> lstm = torch.nn.LSTM(input_size=3, hidden_size=8, num_layers=2, batch_first=True)
>>> torch.save(lstm.state_dict(), f"{folder}/lstm.pt")
>>> model = rnnviz.load_model(f"{folder}/lstm.pt")
>>> model.model_type, model.n_layers
('torch_lstm', 2)
>>> a = rnnviz.analyze_model(model, np.ones((4, 20, 3), np.float32))
>>> a.grad_norms.shape           # [L + 1, T]: the input of each layer, and the top output
(3, 20)
>>> sorted(a.state_grad_norms[0])  # layer 0's state leaves, each [T]
['c', 'h']
"""

from __future__ import annotations

import dataclasses
import functools
import math
import shutil
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.models import ModelAnalysis
from rnnviz.checkpoints import CheckpointError, read_checkpoint
from rnnviz.checkpoints.archive import extracted_model, is_archive
from rnnviz.checkpoints.load import MAX_BYTES
from rnnviz.checkpoints.record import Family
from rnnviz.checkpoints.registry import FAMILIES
from rnnviz.checkpoints.tensors import DTYPES
from rnnviz.dataset.budget import size_text
from rnnviz.engine.blocks.dispatch import module_of
from rnnviz.engine.blocks.gradients import ModelGrads, model_gradients
from rnnviz.engine.blocks.placement import input_sharding, place
from rnnviz.engine.blocks.registry import BLOCKS
from rnnviz.engine.compile import Compiled, compile_cache, compile_lowered, peak_bytes


@dataclass(frozen=True, eq=False)
class Model:
    """A checkpoint's model: its family, sizes and weights on the device.

    Attributes:
        model_type: ``"mamba"``, ``"falcon_mamba"``, ``"mamba2"``, ``"recurrent_gemma"``,
            ``"qwen3_next"``, ``"xlstm"``, ``"torch_lstm"`` or ``"torch_gru"``.
        spec: the family's frozen record of sizes.
        params: ``{name: array}`` named as the checkpoint names them.
        source: the folder or file it was read from (in an archive: ``model.zip/tiny``).
        tokenizer: the ``tokenizer.json`` beside it, or None.
    """

    model_type: str
    spec: Any
    params: dict[str, jax.Array]
    source: str
    tokenizer: str | None = None

    @property
    def n_layers(self) -> int:
        """L, the blocks (or stacked layers)."""
        return self.spec.n_layers

    @property
    def vocab_size(self) -> int:
        """The vocabulary (0 for a stack that reads vectors)."""
        return self.spec.vocab_size

    @property
    def n_params(self) -> int:
        """Parameters, each tied tensor counted once."""
        seen = {id(v): math.prod(v.shape) for v in self.params.values()}
        return sum(seen.values())

    @property
    def input_size(self) -> int:
        """The features each step reads, for a model without vocabulary (a torch stack's I, an
        sLSTM stack's D, a vector model's I)."""
        return getattr(self.spec, "input_size", self.spec.d_model)

    @property
    def stream_widths(self) -> tuple[int, ...]:
        """The L + 1 widths of the residual stream's rows (a stack's row 0: its input size)."""
        own = getattr(self.spec, "stream_widths", None)
        return own or (self.input_size,) + (self.spec.d_model,) * self.spec.n_layers

    def __call__(self, inputs: Any) -> jax.Array:
        """Logits ``[B, T, V]`` (float32) of tokens ``[B, T]``; for a stack, its top output
        ``[B, T, H]`` for inputs ``[B, T, I]``."""
        return _forward(self.model_type, self.spec, self.params, jnp.asarray(inputs))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _forward(model_type: str, spec: Any, params: Any, inputs: jax.Array) -> jax.Array:
    return module_of(model_type, spec).forward(spec, params, inputs)


#: The share of one device's memory a model's weights may take before they are split over
#: all its devices: the analysis holds the activations of every step besides.
WEIGHTS_SHARE = 0.5


def devices_for(nbytes: int, devices: Sequence[jax.Device] | None = None) -> list[jax.Device]:
    """The devices a model of ``nbytes`` of weights goes on: ``devices`` when given, else the
    default device when the weights take at most :data:`WEIGHTS_SHARE` of its memory (a CPU
    reports none: the host's), else every device of its platform."""
    if devices:
        return list(devices)
    first = jax.devices()[0]
    limit = (first.memory_stats() or {}).get("bytes_limit")
    if limit is None or nbytes <= WEIGHTS_SHARE * limit:
        return [first]
    return jax.devices(first.platform)


def load_model(
    path: str | Path,
    dtype: str = "float32",
    max_bytes: int = MAX_BYTES,
    devices: Sequence[jax.Device] | None = None,
) -> Model:
    """A Hugging Face model folder or a PyTorch state dict, read exactly.

    Args:
        path: a folder with ``config.json`` and ``model.safetensors`` (or a sharded index, or
            ``pytorch_model.bin``) of model type ``mamba``, ``mamba2``, ``falcon_mamba``,
            ``recurrent_gemma``, ``qwen3_next`` or ``xlstm``; or an ``nn.LSTM``/``nn.GRU`` state dict
            (``.safetensors``, or ``.pt``/``.pth``/``.bin``, read without running its pickle);
            or either in a ``.zip``, ``.tar``, ``.tar.gz`` or ``.tgz`` archive, judged by its
            directory and extracted into a temporary folder for as long as it is read
            (:func:`~rnnviz.checkpoints.archive.extracted_model`).
        dtype: ``"float32"`` (default) or ``"bfloat16"``.
        max_bytes: the most bytes of weights read (and, for an archive, declared by its members).
        devices: where the weights go; several devices split them over a mesh
            (:mod:`rnnviz.engine.blocks.placement`). Default: :func:`devices_for`.

    Returns:
        The :class:`Model`.

    Raises:
        CheckpointError: naming the file, what is wrong and what is expected; every header is
            checked before any data are read, and an archive's directory before a byte of it is
            extracted.
    """
    if is_archive(str(path)) and not Path(path).is_dir():
        return _archived_model(path, dtype, max_bytes, devices)
    ckpt = read_checkpoint(path, dtype=dtype, max_bytes=max_bytes)
    nbytes = sum(v.nbytes for v in {id(v): v for v in ckpt.tensors.values()}.values())
    params = place(ckpt.tensors, devices_for(nbytes, devices))
    return Model(ckpt.model_type, ckpt.spec, params, ckpt.source, ckpt.tokenizer)


def _archived_model(path, dtype: str, max_bytes: int, devices) -> Model:
    """The model in an archive, named by the archive (``model.zip/tiny``); its temporary folder
    is removed once the weights are read. Text is tokenised later, so a ``tokenizer.json`` is
    kept in a temporary folder of its own, removed with the model."""
    with extracted_model(path, max_bytes) as found:
        model = load_model(found.path, dtype, max_bytes, devices)
        tokenizer = kept = None
        if model.tokenizer is not None:
            kept = tempfile.mkdtemp(prefix="rnnviz-tokenizer-")
            tokenizer = shutil.move(model.tokenizer, kept)
    model = dataclasses.replace(model, source=found.name, tokenizer=tokenizer)
    if kept is not None:
        weakref.finalize(model, shutil.rmtree, kept, ignore_errors=True)
    return model


def _fresh_family(model_type: str, config: Mapping[str, Any], source: str) -> Family:
    """The family of ``model_type``, which ``config`` may repeat but not contradict."""
    if model_type not in FAMILIES:
        raise CheckpointError(source, f"model_type is {model_type!r}; allowed: {', '.join(sorted(FAMILIES))}")
    if config.get("model_type", model_type) != model_type:
        raise CheckpointError(
            source, f"config's model_type is {config['model_type']!r}; allowed: {model_type!r}"
        )
    return FAMILIES[model_type]


def fresh_model(
    model_type: str,
    config: Mapping[str, Any],
    *,
    seed: int = 0,
    dtype: str = "float32",
    max_bytes: int = MAX_BYTES,
    devices: Sequence[jax.Device] | None = None,
) -> Model:
    """A model of one design drawn fresh from its sizes, as its reference draws a new one.

    The sizes are read and checked by the same family parser :func:`load_model` uses, the
    config's initialisation fields (``initializer_range``, Mamba's ``time_step_*``, …) with
    it, and the weights drawn by the family's ``init_params``: transformers'
    ``_init_weights`` for the Hugging Face designs, torch's ``reset_parameters`` for
    ``torch_lstm`` and ``torch_gru``. The tensors are named and shaped as a saved checkpoint
    of that config holds them, so :func:`analyze_model` reads it as it reads a loaded one.

    Args:
        model_type: ``"mamba"``, ``"falcon_mamba"``, ``"mamba2"``, ``"recurrent_gemma"``,
            ``"qwen3_next"``, ``"xlstm"``, ``"torch_lstm"`` or ``"torch_gru"``.
        config: ``config.json``'s fields (absent ones at the reference's defaults); for a torch
            stack, its constructor's ``num_layers``, ``input_size`` and ``hidden_size``.
        seed: the PRNG seed: the same seed, sizes and dtype give the same weights.
        dtype: ``"float32"`` (default) or ``"bfloat16"`` (drawn in float32, then rounded).
        max_bytes: the most bytes of weights drawn, checked before any are.
        devices: where the weights go (default: :func:`devices_for`).

    Returns:
        The :class:`Model`, its ``source`` ``"fresh <model_type> (seed <seed>)"``.

    Raises:
        CheckpointError: an unknown model type or dtype, a size or field the family refuses (the
            loader's message for the same ``config.json``), or weights beyond ``max_bytes``.

    Example:
        >>> import numpy as np, rnnviz
        >>> model = rnnviz.fresh_model("mamba", {"vocab_size": 64, "hidden_size": 16, "state_size": 4,
        ...                                      "num_hidden_layers": 2}, seed=0)
        >>> model.source, model.n_layers, model.params["backbone.layers.0.mixer.A_log"].shape
        ('fresh mamba (seed 0)', 2, (32, 4))
        >>> a = rnnviz.analyze_model(model, np.arange(12).reshape(1, 12))
        >>> a.grad_norms.shape                   # [L + 1, T]
        (3, 12)
    """
    source = f"fresh {model_type} (seed {seed})"
    family = _fresh_family(model_type, config, source)
    if dtype not in DTYPES:
        raise CheckpointError(source, f"dtype {dtype!r} asked for; allowed: {', '.join(DTYPES)}")
    config = {**config, "model_type": model_type}
    spec = family.parse(config, source)
    nbytes = sum(math.prod(shape) for shape in family.tensors(spec).values()) * DTYPES[dtype].itemsize
    if nbytes > max_bytes:
        raise CheckpointError(
            source, f"{size_text(nbytes)} of weights as {dtype}; allowed: at most {size_text(max_bytes)}"
        )
    settings = family.init(config, source) if family.init is not None else None
    params = BLOCKS[model_type].init_params(spec, jax.random.key(seed), dtype=dtype, settings=settings)
    return Model(model_type, spec, place(params, devices_for(nbytes, devices)), source)


def tokenize(model: Model, text: str) -> tuple[np.ndarray, list[str]]:
    """``text`` as ``<int32>[1, T]`` tokens by the model's ``tokenizer.json``, and each token's
    text (for the charts' axes).

    Raises:
        CheckpointError: the model has no ``tokenizer.json``, or it gives no tokens.
    """
    if model.tokenizer is None:
        raise CheckpointError(model.source, "has no tokenizer.json beside it; pass token ids instead of text")
    from tokenizers import Tokenizer  # optional: only text needs it

    encoding = Tokenizer.from_file(model.tokenizer).encode(text)
    if not encoding.ids:
        raise CheckpointError(model.tokenizer, f"gives no tokens for {text!r}")
    return np.asarray([encoding.ids], np.int32), list(encoding.tokens)


def _shape_key(model: Model, inputs: np.ndarray, shared: bool = False) -> tuple:
    """What the analysis's executable depends on: the family, sizes, the arrays' shapes,
    dtypes and shardings, never their values; and whether one reverse pass serves the loss and
    the connectivity (:func:`shares_pass`)."""
    params = tuple(sorted((k, v.shape, str(v.dtype), v.sharding) for k, v in model.params.items()))
    wide = "float64" if any(v.dtype == jnp.float64 for v in model.params.values()) else "float32"
    placed = input_sharding(model.params)
    return (
        model.model_type,
        model.spec,
        model.stream_widths,
        wide,
        params,
        inputs.shape,
        str(inputs.dtype),
        placed,
        shared,
    )


@compile_cache(maxsize=16, key=_shape_key)
def _executable(model_type, spec, widths, wide, params, shape, dtype, placed, shared) -> Compiled:
    """The analysis compiled for one model shape and placement (:func:`_shape_key`): new
    weights or inputs of the same shapes reuse it."""
    start = time.perf_counter()
    module = module_of(model_type, spec)
    fn = functools.partial(model_gradients, module, spec, widths, jnp.dtype(wide), shared=shared)
    stand_ins = {k: jax.ShapeDtypeStruct(s, jnp.dtype(d), sharding=where) for k, s, d, where in params}
    args = (
        stand_ins,
        jax.ShapeDtypeStruct(shape, jnp.dtype(dtype), sharding=placed),
        jax.ShapeDtypeStruct((), jnp.int32, sharding=placed),
    )
    compiled = compile_lowered(jax.jit(fn).lower(*args), "the analysis of a model")
    return Compiled(compiled, time.perf_counter() - start, peak_bytes(compiled))


def shares_pass(model: Model, steps: int, position: int) -> bool:
    """Whether one reverse pass gives both the loss's gradients and position p's: a stack's loss
    is its last position's own, ℓ_{T−1} (a language model's is the mean over positions)."""
    return not model.vocab_size and position == steps - 1


def is_compiled_for(model: Model, inputs: np.ndarray) -> bool:
    """Whether :func:`analyze_model` of ``model`` on inputs of this shape (at its default
    position) would reuse an executable."""
    inputs = check_inputs(model, np.asarray(inputs))
    return (model, inputs, not model.vocab_size) in _executable


def check_inputs(model: Model, inputs: np.ndarray) -> np.ndarray:
    """Tokens ``[B, T]`` within the vocabulary, or a stack's ``[B, T, I]`` floats."""
    if model.vocab_size:
        if inputs.ndim != 2 or inputs.dtype.kind not in "iu" or inputs.shape[1] < 2:
            raise ValueError(
                f"tokens must be integers [B, T] with T ≥ 2; got {inputs.dtype} {list(inputs.shape)}"
            )
        if inputs.min() < 0 or inputs.max() >= model.vocab_size:
            raise ValueError(
                f"token ids must lie in 0 … {model.vocab_size - 1}; got {inputs.min()} … {inputs.max()}"
            )
        return inputs.astype(np.int32)
    width = model.input_size
    if inputs.ndim != 3 or inputs.shape[2] != width:
        raise ValueError(f"inputs must be [B, T, {width}]; got {list(inputs.shape)}")
    return inputs.astype(np.float32)


#: Below this a float32 norm may have lost entries to underflow (XLA:CPU flushes subnormals,
#: and the gradient's entries lie below the norm): such entries are taken from the float64 pass.
TRUSTED_FLOAT32 = 2.0**-100


def _log10(values: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log10(np.asarray(values, np.float64))


def _run(model: Model, inputs: np.ndarray, position: int, shared: bool) -> tuple[ModelGrads, float, float]:
    """One compiled pass (one reverse pass where ``shared``): its outputs as NumPy, the seconds
    compiling (0 when reused) and running."""
    fresh = (model, inputs, shared) not in _executable
    compiled = _executable(model, inputs, shared)
    placed = input_sharding(model.params)
    args = jax.device_put((inputs, np.int32(position)), placed)
    start = time.perf_counter()
    out = jax.block_until_ready(compiled.fn(model.params, *args))
    run_s = time.perf_counter() - start
    return jax.tree.map(lambda v: np.asarray(v, np.float64), out), compiled.compile_s if fresh else 0.0, run_s


def _wide_pass(model: Model, inputs: np.ndarray, position: int, shared: bool) -> ModelGrads:
    """The same pass with the weights, probes, loss and norms in float64 (JAX's x64 mode, for
    this call only): norms down to about 1e-300, where float32 flushes below about 1e-38."""
    with jax.enable_x64(True):
        params = {
            k: v.astype(jnp.float64) if jnp.issubdtype(v.dtype, jnp.floating) else v
            for k, v in model.params.items()
        }
        wide = dataclasses.replace(model, params=params)
        wide_inputs = inputs.astype(np.float64) if inputs.dtype.kind == "f" else inputs
        return _run(wide, wide_inputs, position, shared)[0]


def _exact_logs(narrow: np.ndarray, wide: np.ndarray | None) -> np.ndarray:
    """log₁₀ of the float32 norms, with the float64 pass's wherever float32 fell below
    :data:`TRUSTED_FLOAT32` (−inf: exactly 0 in both)."""
    logs = _log10(narrow)
    if wide is None:
        return logs
    return np.where(narrow < TRUSTED_FLOAT32, _log10(wide), logs)


def _underflows(out: ModelGrads) -> bool:
    """Whether any norm of the float32 pass lies in (0, :data:`TRUSTED_FLOAT32`): a gradient
    that shrinks along a chain of steps passes through there before float32 flushes it to 0,
    while a true zero (a position no loss reads) does not ask for the float64 pass."""
    leaves = jax.tree.leaves((out.stream, out.states, out.connectivity))
    return any(np.any((leaf > 0) & (leaf < TRUSTED_FLOAT32)) for leaf in leaves)


def _state_logs(out: ModelGrads, wide: ModelGrads | None) -> dict[int, dict[str, np.ndarray]]:
    """``{layer: {leaf: [T]}}`` of the exact log₁₀ state norms of the loss."""
    return {
        layer: {
            leaf: _exact_logs(v, None if wide is None else wide.states[layer][leaf])
            for leaf, v in leaves.items()
        }
        for layer, leaves in enumerate(out.states)
        if leaves is not None
    }


def analyze_model(
    model: Model,
    inputs: Any,
    *,
    position: int | None = None,
    connectivity: bool = True,
    tokens: list[str] | None = None,
    exact: bool = True,
) -> ModelAnalysis:
    """Per-step gradient norms through every layer and recurrent state of ``model``, in one
    compiled forward and reverse pass, and one position's connectivity (the same pass, a
    second cotangent through it, or a pass of its own:
    :func:`~rnnviz.engine.blocks.gradients.model_gradients`), in one executable.

    A stack's loss is its last position's own, so that position's connectivity comes with the
    loss's pass. A language model's loss is the mean over positions: one position's
    connectivity is a second pull through the model, which ``connectivity=False`` leaves out.

    Args:
        model: from :func:`load_model`.
        inputs: ``<int>[B, T]`` token ids (``[T]`` for one sequence), or for a stack without a
            vocabulary ``<float>[B, T, I]``.
        position: p, the position whose own prediction the connectivity reads (default: the
            last one with a loss, T − 2 for a language model, T − 1 for a stack).
        connectivity: whether to compute it where it needs a pull of its own (False: the
            record's ``connectivity`` and ``log10_connectivity`` are None there).
        tokens: each position's text, carried into the record for the charts.
        exact: where a float32 norm falls below :data:`TRUSTED_FLOAT32` (2⁻¹⁰⁰), run the pass
            again in float64 and take its log₁₀ there (the record's ``log10_source`` says so).

    Returns:
        :class:`ModelAnalysis`.

    Raises:
        ValueError: inputs of the wrong shape or type, ids outside the vocabulary, or a
            position outside 0 … P − 1.
    """
    inputs = check_inputs(
        model, np.atleast_2d(np.asarray(inputs)) if model.vocab_size else np.asarray(inputs)
    )
    steps = inputs.shape[1] - (1 if model.vocab_size else 0)
    position = steps - 1 if position is None else position
    if not 0 <= position < steps:
        raise ValueError(f"position {position}; allowed: 0 … {steps - 1}")
    shared = shares_pass(model, steps, position)
    one_pass = shared or not connectivity
    out, compile_s, run_s = _run(model, inputs, position, one_pass)
    wide = _wide_pass(model, inputs, position, one_pass) if exact and _underflows(out) else None
    kept = shared or connectivity
    return ModelAnalysis(
        model_type=model.model_type,
        source=model.source,
        loss=float(out.loss),
        grad_norms=out.stream,
        log10_grad_norms=_exact_logs(out.stream, None if wide is None else wide.stream),
        state_grad_norms={k: d for k, d in enumerate(out.states) if d},
        log10_state_grad_norms=_state_logs(out, wide),
        position=position,
        connectivity=out.connectivity if kept else None,
        log10_connectivity=(
            _exact_logs(out.connectivity, None if wide is None else wide.connectivity) if kept else None
        ),
        log10_source="float32" if wide is None else "float64 where float32 fell below 2^-100",
        tokens=tokens,
        compile_s=compile_s,
        run_s=run_s,
    )

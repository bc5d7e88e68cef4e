r"""Your own model: a checkpoint loaded exactly (:func:`load_model`) and the gradient through
every layer and every step of it (:func:`analyze_model`).

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

import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.formatting import finite_json
from rnnviz.checkpoints import CheckpointError, read_checkpoint
from rnnviz.checkpoints.load import MAX_BYTES
from rnnviz.engine.blocks.gradients import ModelGrads, model_gradients
from rnnviz.engine.blocks.registry import BLOCKS
from rnnviz.engine.compile import Compiled, compile_cache, compile_for


@dataclass(frozen=True, eq=False)
class Model:
    """A checkpoint's model: its family, sizes and weights on the device.

    Attributes:
        model_type: ``"mamba"``, ``"falcon_mamba"``, ``"mamba2"``, ``"recurrent_gemma"``,
            ``"xlstm"``, ``"torch_lstm"`` or ``"torch_gru"``.
        spec: the family's frozen record of sizes.
        params: ``{name: array}`` named as the checkpoint names them.
        source: the folder or file it was read from.
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
    def stream_widths(self) -> tuple[int, ...]:
        """The L + 1 widths of the residual stream's rows (a stack's row 0: its input size)."""
        first = getattr(self.spec, "input_size", self.spec.d_model)
        return (first,) + (self.spec.d_model,) * self.spec.n_layers

    def __call__(self, inputs: Any) -> jax.Array:
        """Logits ``[B, T, V]`` (float32) of tokens ``[B, T]``; for a stack, its top output
        ``[B, T, H]`` for inputs ``[B, T, I]``."""
        return _forward(self.model_type, self.spec, self.params, jnp.asarray(inputs))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _forward(model_type: str, spec: Any, params: Any, inputs: jax.Array) -> jax.Array:
    return BLOCKS[model_type].forward(spec, params, inputs)


def load_model(path: str | Path, dtype: str = "float32", max_bytes: int = MAX_BYTES) -> Model:
    """A Hugging Face model folder or a PyTorch state dict, read exactly.

    Args:
        path: a folder with ``config.json`` and ``model.safetensors`` (or a sharded index, or
            ``pytorch_model.bin``) of model type ``mamba``, ``mamba2``, ``falcon_mamba``,
            ``recurrent_gemma`` or ``xlstm``; or an ``nn.LSTM``/``nn.GRU`` state dict
            (``.safetensors``, or ``.pt``/``.pth``/``.bin``, read without running its pickle).
        dtype: ``"float32"`` (default) or ``"bfloat16"``.
        max_bytes: the most bytes of weights read.

    Returns:
        The :class:`Model`.

    Raises:
        CheckpointError: naming the file, what is wrong and what is expected; every header is
            checked before any data are read.
    """
    ckpt = read_checkpoint(path, dtype=dtype, max_bytes=max_bytes)
    unique = {id(v): v for v in ckpt.tensors.values()}  # tied tensors stay one array on the device
    arrays = {key: jnp.asarray(v) for key, v in unique.items()}
    params = {name: arrays[id(value)] for name, value in ckpt.tensors.items()}
    return Model(ckpt.model_type, ckpt.spec, params, ckpt.source, ckpt.tokenizer)


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


@dataclass(frozen=True, eq=False)
class ModelAnalysis:
    """The gradient through every layer and every step of a model, for one batch.

    Attributes:
        model_type: the model's family.
        source: the checkpoint it was read from.
        loss: L: next-token cross-entropy (mean over B·(T − 1)), or a stack's ½ Σ ‖y_T‖².
        grad_norms: ``[L + 1, T]`` ‖∂L/∂x_t^{(l)}‖ over the batch: x^{(l)} the residual stream
            entering block l (row 0: the embeddings; row L: the final norm's input).
        log10_grad_norms: ``[L + 1, T]`` its log₁₀ (−inf for a true zero).
        state_grad_norms: ``{layer: {leaf: [T]}}`` ‖∂L/∂state_t‖ of each recurrent layer's
            state leaves (Mamba's ``h``, the mLSTM's ``C``, ``n``, ``m``, LSTM's ``c``, ``h``, …).
        position: p, the position whose own loss ℓ_p the connectivity reads.
        connectivity: ``[T]`` ‖∂ℓ_p/∂x_s^{(0)}‖: how much position p's prediction depends on each
            input (0 after p).
        tokens: each position's token text, or None.
        compile_s: seconds compiling the analysis (0 when reused).
        run_s: seconds running it.
    """

    model_type: str
    source: str
    loss: float
    grad_norms: np.ndarray
    log10_grad_norms: np.ndarray
    state_grad_norms: dict[int, dict[str, np.ndarray]]
    position: int
    connectivity: np.ndarray
    tokens: list[str] | None
    compile_s: float
    run_s: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (arrays as lists, non-finite numbers as null)."""
        return finite_json(
            {
                **{k: v for k, v in vars(self).items() if not isinstance(v, (np.ndarray, dict))},
                "grad_norms": self.grad_norms.tolist(),
                "log10_grad_norms": self.log10_grad_norms.tolist(),
                "state_grad_norms": {
                    str(layer): {leaf: v.tolist() for leaf, v in leaves.items()}
                    for layer, leaves in self.state_grad_norms.items()
                },
                "connectivity": self.connectivity.tolist(),
            }
        )


def _shape_key(model: Model, inputs: np.ndarray) -> tuple:
    """What the analysis's executable depends on: the family, sizes, the arrays' shapes and
    dtypes and the device, never their values."""
    params = tuple(sorted((k, v.shape, str(v.dtype)) for k, v in model.params.items()))
    device = next(iter(model.params.values())).devices().pop()
    return model.model_type, model.spec, model.stream_widths, params, inputs.shape, str(inputs.dtype), device


@compile_cache(maxsize=16, key=_shape_key)
def _executable(model_type, spec, widths, params, shape, dtype, device) -> Compiled:
    """The analysis compiled for one model shape (:func:`_shape_key`): new weights or inputs
    of the same shapes reuse it."""
    fn = functools.partial(model_gradients, BLOCKS[model_type], spec, widths)
    stand_ins = {k: jax.ShapeDtypeStruct(s, jnp.dtype(d)) for k, s, d in params}
    args = (stand_ins, jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)), jax.ShapeDtypeStruct((), jnp.int32))
    return compile_for(fn, args, device)


def _check_inputs(model: Model, inputs: np.ndarray) -> np.ndarray:
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
    width = model.stream_widths[0]
    if inputs.ndim != 3 or inputs.shape[2] != width:
        raise ValueError(f"inputs must be [B, T, {width}]; got {list(inputs.shape)}")
    return inputs.astype(np.float32)


def _state_norms(states: tuple[Any, ...]) -> dict[int, dict[str, np.ndarray]]:
    return {
        layer: {leaf: np.asarray(v[0], np.float64) for leaf, v in leaves.items()}
        for layer, leaves in enumerate(states)
        if leaves is not None
    }


def analyze_model(
    model: Model, inputs: Any, *, position: int | None = None, tokens: list[str] | None = None
) -> ModelAnalysis:
    """Per-step gradient norms through every layer and recurrent state of ``model``, in one
    compiled forward and reverse pass.

    Args:
        model: from :func:`load_model`.
        inputs: ``<int>[B, T]`` token ids (``[T]`` for one sequence), or for a stack without a
            vocabulary ``<float>[B, T, I]``.
        position: p, the position whose own prediction the connectivity reads (default: the
            last one with a loss, T − 2 for a language model, T − 1 for a stack).
        tokens: each position's text, carried into the record for the charts.

    Returns:
        :class:`ModelAnalysis`.

    Raises:
        ValueError: inputs of the wrong shape or type, ids outside the vocabulary, or a
            position outside 0 … P − 1.
    """
    inputs = _check_inputs(
        model, np.atleast_2d(np.asarray(inputs)) if model.vocab_size else np.asarray(inputs)
    )
    steps = inputs.shape[1] - (1 if model.vocab_size else 0)
    position = steps - 1 if position is None else position
    if not 0 <= position < steps:
        raise ValueError(f"position {position}; allowed: 0 … {steps - 1}")
    fresh = (model, inputs) not in _executable
    compiled = _executable(model, inputs)
    start = time.perf_counter()
    out: ModelGrads = jax.block_until_ready(compiled.fn(model.params, inputs, np.int32(position)))
    run_s = time.perf_counter() - start
    norms = np.asarray(out.stream, np.float64)
    with np.errstate(divide="ignore"):
        logs = np.log10(norms[0])
    return ModelAnalysis(
        model.model_type,
        model.source,
        float(out.loss),
        norms[0],
        logs,
        _state_norms(out.states),
        position,
        norms[1, 0],
        tokens,
        compiled.compile_s if fresh else 0.0,
        run_s,
    )

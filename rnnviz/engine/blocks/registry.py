"""The block families, by ``model_type`` (the checkpoints' names): one line per module."""

from __future__ import annotations

from types import ModuleType

from rnnviz.engine.blocks import mamba, mamba2, qwen3_next, recurrent_gemma, slstm_stack, torch_rnn, xlstm

#: ``model_type`` → the module defining its ``forward`` and ``state_shapes``.
BLOCKS: dict[str, ModuleType] = {
    "mamba": mamba,
    "falcon_mamba": mamba,
    "mamba2": mamba2,
    "recurrent_gemma": recurrent_gemma,
    "qwen3_next": qwen3_next,
    "xlstm": xlstm,
    "torch_lstm": torch_rnn,
    "torch_gru": torch_rnn,
    "slstm_stack": slstm_stack,
}

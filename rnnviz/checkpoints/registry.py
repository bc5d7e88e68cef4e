"""The families read, by ``model_type``: one line per family module."""

from __future__ import annotations

from rnnviz.checkpoints.families import mamba, mamba2, qwen3_next, recurrent_gemma, torch_rnn, xlstm
from rnnviz.checkpoints.record import Family

FAMILIES: dict[str, Family] = {
    model_type: module.FAMILY
    for module in (mamba, mamba2, recurrent_gemma, qwen3_next, xlstm, torch_rnn)
    for model_type in module.FAMILY.model_types
}

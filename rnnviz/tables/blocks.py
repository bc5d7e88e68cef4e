"""The reference block of each cell's design, in plain data (no JAX): what
``RunConfig(block="reference")`` builds instead of the bare cell, and the sizes its budget
estimates read.

A design's reference block is the paper's or the library's layer around the recurrence (its
convolutions, gates, norms, feed-forward and residual), stacked ``layers`` deep and read as
a model of vectors (:mod:`rnnviz.engine.blocks.vectors`): the same inputs ``[B, T, I]`` as the
bare cell, and a readout to H outputs whose ``½‖ŷ_T‖²`` is the loss, as the bare cell's
``½‖h_T‖²`` is.

Example:
    >>> BLOCK_DESIGNS["mamba"].design, BLOCK_DESIGNS["lstm"].reference
    ('mamba', 'torch.nn.LSTM')
    >>> round(BLOCK_DESIGNS["mamba"].params_per_layer(64))
    32832
"""

from __future__ import annotations

from typing import NamedTuple


class BlockDesign(NamedTuple):
    """One cell's reference block.

    Attributes:
        design: the block family's ``model_type`` (:data:`rnnviz.engine.blocks.registry.BLOCKS`).
        reference: the reference implementation, in words.
        square: a, and
        linear: b, of the parameters per layer ≈ a·D² + b·D at the sizing template's proportions
            (:mod:`rnnviz.studies.sizing`; a test holds them to its counts).
        activations: floats the analysis keeps per example, step and layer, per unit of D
            (the wide inner projections and a state of N per channel for the SSMs).
        projects: whether the inputs reach the blocks through a linear projection to D (a
            torch stack reads the I features itself).
    """

    design: str
    reference: str
    square: float
    linear: float
    activations: float
    projects: bool = True

    def params_per_layer(self, width: int) -> float:
        """About how many parameters one layer of width D has."""
        return self.square * width * width + self.linear * width


#: cell → its reference block: one line per design.
BLOCK_DESIGNS: dict[str, BlockDesign] = {
    "lstm": BlockDesign("torch_lstm", "torch.nn.LSTM", 8.0, 8.0, 8.0, projects=False),
    "gru": BlockDesign("torch_gru", "torch.nn.GRU", 6.0, 6.0, 6.0, projects=False),
    "mamba": BlockDesign("mamba", "transformers' MambaBlock", 6.25, 113.0, 48.0),
    "rglru": BlockDesign("recurrent_gemma", "transformers' RecurrentGemma recurrent block", 8.5, 19.0, 24.0),
    "mlstm": BlockDesign("xlstm", "transformers' xLSTM (mLSTM) block", 11.94, 32.0, 24.0),
    "slstm": BlockDesign("slstm_stack", "NX-AI xlstm's sLSTMBlock", 7.0, 30.0, 24.0),
    "gated_deltanet": BlockDesign(
        "qwen3_next", "transformers' Qwen3-Next Gated DeltaNet layer", 16.25, 26.0, 24.0
    ),
}
#: What ``RunConfig.block`` may say: the bare cell, or its design's reference block.
BLOCK_KINDS = ("cell", "reference")
#: The deepest stack a config may ask for.
MAX_LAYERS = 32

"""Each reference block's memory knob, in plain data (no JAX): the one number of its
initialisation that sets how long its recurrence remembers at the start, which the block's
Phase diagram sweeps (:func:`rnnviz.studies.block_phase.block_phase`).

Where the reference names such a setting, the knob scales or shifts it: Mamba's Δ range
(transformers' ``time_step_min`` / ``time_step_max``), the RG-LRU's range of a (the
reference's ``min_rad`` / ``max_rad``), Gated DeltaNet's range of A (``A_log``), the mLSTM's
and the sLSTM's forget-gate bias. torch's LSTM and GRU draw every weight U(±1/√H) and name
no such setting: their knob is a gain on the recurrent matrices ``weight_hh_l*``, as the bare
cell's Phase diagram sweeps the recurrent gain.

Example:
    >>> knob = BLOCK_KNOBS["mamba"]
    >>> knob.name, knob.default, knob.spacing
    ('scale of the range of Δ', 1.0, 'log')
    >>> BLOCK_KNOBS["torch_lstm"].setting
    'weight_hh_l* × g (torch names no memory knob: the gain on the recurrent matrices is the knob)'
"""

from __future__ import annotations

from typing import NamedTuple


class BlockKnob(NamedTuple):
    """One design's memory knob.

    Attributes:
        name: what it is, in words.
        symbol: its letter on the chart's axis.
        setting: the initialisation setting it changes, and how.
        reference: the reference's own setting, which the knob's default draws.
        default: the knob's value that draws the reference's initialisation exactly.
        lo: the smallest value allowed.
        hi: the largest.
        view: the range the dashboard opens at.
        spacing: ``"linear"`` (a shift or a gain) or ``"log"`` (a scale): how a sweep spaces
            its values.
    """

    name: str
    symbol: str
    setting: str
    reference: str
    default: float
    lo: float
    hi: float
    view: tuple[float, float]
    spacing: str

    def allowed(self) -> str:
        """The range allowed, in words (for a refusal)."""
        return f"a {self.name} in [{self.lo:g}, {self.hi:g}]"


_GAIN = BlockKnob(
    name="gain on the recurrent weights",
    symbol="g",
    setting="weight_hh_l* × g (torch names no memory knob: the gain on the recurrent matrices is the knob)",
    reference="g = 1: torch's U(±1/√H)",
    default=1.0,
    lo=0.0,
    hi=10.0,
    view=(0.5, 2.0),
    spacing="linear",
)

#: design (:data:`~rnnviz.tables.blocks.BLOCK_DESIGNS`' ``design``) → its memory knob.
BLOCK_KNOBS: dict[str, BlockKnob] = {
    "torch_lstm": _GAIN,
    "torch_gru": _GAIN,
    "mamba": BlockKnob(
        name="scale of the range of Δ",
        symbol="s",
        setting="time_step_min, time_step_max × s (dt_proj.bias = softplus⁻¹ of Δ log-uniform in that "
        "range, floored at time_step_floor 10⁻⁴)",
        reference="s = 1: Δ in [0.001, 0.1]",
        default=1.0,
        lo=1e-3,
        hi=100.0,
        view=(0.01, 100.0),
        spacing="log",
    ),
    "recurrent_gemma": BlockKnob(
        name="scale of the range of −log a",
        symbol="s",
        setting="the RG-LRU's recurrent_param: a = √u, u ~ U(min_rad², max_rad²), with min_rad, max_rad "
        "→ 0.9^s, 0.999^s",
        reference="s = 1: a in [0.9, 0.999]",
        default=1.0,
        lo=1e-2,
        hi=100.0,
        view=(0.01, 100.0),
        spacing="log",
    ),
    "xlstm": BlockKnob(
        name="shift of the forget-gate bias",
        symbol="b",
        setting="fgate_preact.bias + b",
        reference="b = 0: linspace(3, 6) over the heads",
        default=0.0,
        lo=-20.0,
        hi=20.0,
        view=(-10.0, 10.0),
        spacing="linear",
    ),
    "slstm_stack": BlockKnob(
        name="shift of the forget-gate bias",
        symbol="b",
        setting="the cell's forget-gate bias + b",
        reference="b = 0: powerlaw_blockdependent, −(−5 + 12 (j/(d−1))^p), 5 down to −7 over a head's units",
        default=0.0,
        lo=-20.0,
        hi=20.0,
        view=(-10.0, 10.0),
        spacing="linear",
    ),
    "qwen3_next": BlockKnob(
        name="scale of the range of A",
        symbol="s",
        setting="A_log = log U(0.01 s, 16 s) (dt_bias kept at 1)",
        reference="s = 1: A ~ U(0.01, 16)",
        default=1.0,
        lo=1e-4,
        hi=100.0,
        view=(0.001, 10.0),
        spacing="log",
    ),
}

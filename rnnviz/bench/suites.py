"""The benchmark's fixed suites: the configurations each ``--suite`` measures (plain data)."""

from __future__ import annotations

from rnnviz.config import RunConfig

SMALL = dict(batch_size=8, seq_len=50, input_size=8, hidden_size=32)

BIG = dict(batch_size=32, seq_len=200, input_size=32, hidden_size=128)


def strategies_suite() -> list[RunConfig]:
    """LSTM, GRU and simple cells at B=8·T=50·H=32 and B=32·T=200·I=32·H=128."""
    return [RunConfig(cell=c, **size) for size in (SMALL, BIG) for c in ("lstm", "gru", "simple")]


def devices_suite() -> list[RunConfig]:
    """T ∈ {50, 200, 1000} × H ∈ {32, 128, 512} × B ∈ {8, 64}, LSTM, I = 32."""
    return [
        RunConfig(cell="lstm", seq_len=t, hidden_size=h, batch_size=b, input_size=32)
        for b in (8, 64)
        for h in (32, 128, 512)
        for t in (50, 200, 1000)
    ]


def parallel_suite() -> list[RunConfig]:
    """mingru and lru, H=128, B=16, I=32, T ∈ {256, 1024, 4096, 16384}."""
    return [
        RunConfig(cell=c, hidden_size=128, batch_size=16, input_size=32, seq_len=t)
        for c in ("mingru", "lru")
        for t in (256, 1024, 4096, 16384)
    ]


def perf_suite() -> list[RunConfig]:
    """LSTM and GRU at B=32·T=200·I=32·H=128 and B=8·T=50·I=8·H=32."""
    return [RunConfig(cell=c, **size) for size in (BIG, SMALL) for c in ("lstm", "gru")]


#: The long-sequence rows of the perf suite: LSTM B=8·I=32·H=128 at T = 1000, 10 000 and
#: 100 000 (at 100 000 the accumulator is over the memory budget; checkpoint is not).
LONG = dict(cell="lstm", batch_size=8, input_size=32, hidden_size=128)

LONG_LENGTHS = (1000, 10_000, 100_000)

SUITES = {
    "strategies": strategies_suite,
    "perf": perf_suite,
    "devices": devices_suite,
    "sweep": lambda: [RunConfig(seq_len=100)],
    "parallel": parallel_suite,
    "lyapunov": lambda: [
        RunConfig(cell="simple", hidden_size=256, seq_len=1000, batch_size=None, input_size=32)
    ],
    "train": lambda: [
        RunConfig(cell="lstm", forget_bias=1.0, hidden_size=64, input_size=2, seq_len=100, batch_size=64)
    ],
    # the real-data learning table: every DATA_LEARNING_CELLS design on the digits' orders
    "data": lambda: [RunConfig(hidden_size=64, input_size=1, seq_len=64, batch_size=64)],
    # analyze on data against synthetic inputs of the same shape (rnnviz.bench.data_cost.ROWS)
    "data-cost": lambda: [],
    # today's designs: cost, parallel, the gradient at initialisation (rnnviz.bench.designs)
    "designs": lambda: [],
    # whole models of each design at two depths: the analysis against plain jax.grad
    # (rnnviz.bench.block_costs; part of "designs" too)
    "designs-blocks": lambda: [],
    # their learning table on the digits and the text (rnnviz.bench.designs.learning_table)
    "designs-learning": lambda: [],
    # what a lent GPU measures in one command: devices, cuDNN, parallel, memory (rnnviz.bench.gpu)
    "gpu": lambda: [],
    # whole models built with transformers: the analysis against its forward + backward (rnnviz.bench.models)
    "models": lambda: [],
}

#: The learning table's designs (Le, Jaitly & Hinton 2015): tanh RNN, IRNN (ReLU with an
#: identity recurrent init), LSTM with forget bias 1, GRU; all H = 64.
LEARNING_CELLS = {
    "tanh RNN": dict(cell="simple", activation="tanh"),
    "IRNN": dict(cell="simple", activation="relu", recurrent_init="identity"),
    "LSTM fb=1": dict(cell="lstm", forget_bias=1.0),
    "GRU": dict(cell="gru"),
}

#: The real-data learning table's designs: the classic four and the modern cells.
DATA_LEARNING_CELLS = {
    **LEARNING_CELLS,
    "IndRNN": dict(cell="indrnn", activation="relu"),
    "minGRU": dict(cell="mingru"),
    "minLSTM": dict(cell="minlstm"),
    "LRU": dict(cell="lru"),
}
#: The digits' orders of the table (pixel by pixel, and a fixed permutation of the pixels).
DIGIT_ORDERS = ("pixels", "permuted")
#: The block learning table's grid (``--suite designs-learning --block reference``): every
#: design at these depths and about these parameter counts.
BLOCK_DEPTHS = (2, 4)
BLOCK_PARAMS = ("100k", "400k")
#: The designs trained on the text for bits per character.
TEXT_CELLS = ("tanh RNN", "LSTM fb=1", "GRU")

"""``python -m rnnviz bench``: strategy and analysis cost as ratios to plain ``jax.grad``.

* :mod:`rnnviz.bench.suites` — the fixed configurations of each ``--suite`` (plain data);
* :mod:`rnnviz.bench.references` — what rnnviz is measured against (a Python loop, the
  textbook Lyapunov loop, a GEMM, the XLA floor of an LSTM gradient, PyTorch's fused LSTM);
* :mod:`rnnviz.bench.measure` — the cost measurements, their tables and their records;
* :mod:`rnnviz.bench.learning` — training speed and the learning tables (adding, real data).

The "+log pass×" column is the log-magnitude reverse pass on its own (what ``analyze``
adds, only when float32 cannot hold every gradient norm).

Every ratio's baseline is measured in the same process, right before, on the same
inputs: absolute times vary across machines, ratios much less. Not a test: nothing here
asserts a time. The command line (``--suite`` and the rest) is in :mod:`rnnviz.cli.main`.
"""

"""Run one vmapped rnnviz path again and again in this (fresh) process; print "ok" when done.

    python tests/deadlock_probe.py PATH CELL POINTS REPEATS

PATH is ``sweep`` (the gradient phase diagram), ``lyapunov`` (λ₁ over the gains) or
``train_many`` (runs trained in one vmapped call; from the second call on, its runs start
from the draw the first kept, as a dashboard's next training call does: the init and the
chunk hold no LAPACK call at all, which ``test_never_hang.py`` checks for the LSTM, GRU,
mLSTM and Mamba, and the chunk runs every call). The test that calls it
(``test_never_hang.py``) kills it after a timeout: a hang in jaxlib's CPU LAPACK thread
pool never returns, so only a separate process can show one and survive it.
"""

from __future__ import annotations

import sys


def main() -> None:
    path, cell, points, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    from rnnviz import RunConfig

    gains = [0.5 + i / points for i in range(points)]
    if path == "sweep":
        from rnnviz.studies.sweep import sweep

        cfg = RunConfig(cell=cell, hidden_size=128, input_size=4, seq_len=8, batch_size=2)
        run = lambda: sweep(cfg, {"recurrent_gain": gains})  # noqa: E731
    elif path == "lyapunov":
        from rnnviz.studies.lyapunov import lyapunov_phase

        cfg = RunConfig(cell=cell, hidden_size=128, input_size=4, seq_len=8, batch_size=2)
        run = lambda: lyapunov_phase(cfg, gains, [0])  # noqa: E731
    elif path == "train_many":
        from rnnviz.studies.training import train_many

        cfg = RunConfig(cell=cell, hidden_size=128, input_size=2, seq_len=8, batch_size=2)
        run = lambda: train_many(cfg, {"seed": list(range(points))}, steps=1, log_every=1)  # noqa: E731
    else:
        raise SystemExit(f"unknown path {path!r}: sweep, lyapunov or train_many")
    for i in range(repeats):
        run()
        print(f"call {i + 1}", flush=True)
    print("ok", flush=True)


if __name__ == "__main__":
    main()

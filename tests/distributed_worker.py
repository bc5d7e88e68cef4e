"""One process of a two-process JAX run on this machine (Gloo CPU collectives): the sweep.

    python tests/distributed_worker.py PORT PROCESS_ID OUT.npy

Both processes run the same sweep over 8 gains; the mesh spans both processes' devices,
each supplies its own shards, and process 0 writes the gathered log10 norms.
"""

from __future__ import annotations

import sys

import jax


def main() -> None:
    port, pid, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid, initialization_timeout=120
    )
    import numpy as np

    from rnnviz import RunConfig
    from rnnviz.studies.sweep import sweep

    assert jax.process_count() == 2 and len(jax.devices()) == 2, jax.devices()
    df = sweep(
        RunConfig(cell="lstm", hidden_size=8, input_size=3, seq_len=20, batch_size=2),
        {"recurrent_gain": [0.5 + i / 7 for i in range(8)]},
    )
    if pid == 0:
        np.save(out, df["log10_grad_norm"].to_numpy())
    jax.distributed.shutdown()
    print("ok", flush=True)


if __name__ == "__main__":
    main()

"""cuDNN's LSTM as a peer: its forward + backward through ``jax.experimental.rnn``, timed on
rnnviz's shapes, or that module's reference scan where cuDNN cannot run.

``jax.experimental.rnn.lstm`` is a custom-VJP pair of primitives (``rnn_fwd``, ``rnn_bwd``)
that lower only for the platforms ``cuda`` (and ``rocm``). On a CPU it stops earlier, at its
shape rule, which asks the CUDA plugin for cuDNN's reserve-space size (with jaxlib 0.10.2 on
a CPU: ``AttributeError: module 'jaxlib.gpu_rnn' has no attribute
'compute_rnn_workspace_reserve_space_sizes'``). Its ``lstm_ref`` is a ``lax.scan`` of the same
equations on the same packed weights (cuDNN's gate order i, f, g, o and two biases), which
runs everywhere: it is what a device without cuDNN measures, and the record says so.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rnnviz.config import RunConfig
from rnnviz.engine.compat import experimental_rnn
from rnnviz.engine.compile import Compiled, compile_for
from rnnviz.engine.timing import RunTiming, time_runs

#: What each peer is, for the records' ``implementation`` field.
IMPLEMENTATIONS = {
    "cudnn": "jax.experimental.rnn.lstm (cuDNN's LSTM, forward + backward)",
    "lstm_ref": "jax.experimental.rnn.lstm_ref (a lax.scan of the same LSTM, on the same packed weights)",
}


def cudnn_unavailable(device: jax.Device) -> str | None:
    """Why cuDNN's LSTM cannot run on ``device`` (None: it can be tried there).

    Args:
        device: a JAX device.

    Returns:
        None on a CUDA GPU whose jaxlib has the cuDNN RNN kernels, else the reason.
    """
    rnn = experimental_rnn()
    if rnn is None:
        return "this jax has no jax.experimental.rnn with lstm, lstm_ref and init_lstm_weight"
    if device.platform != "gpu":
        return (
            f"cuDNN's LSTM needs a CUDA GPU: jax.experimental.rnn.lstm lowers only for the platforms "
            f"cuda and rocm, and {device.platform} has neither"
        )
    if not hasattr(getattr(rnn, "gpu_rnn", None), "compute_rnn_workspace_reserve_space_sizes"):
        return "this jaxlib has no cuDNN RNN kernels (jaxlib's CUDA plugin is not installed)"
    return None


class PeerRun(NamedTuple):
    """One timed peer: which (``cudnn`` or ``lstm_ref``), its compiled function and its timing.

    Attributes:
        peer: ``"cudnn"`` or ``"lstm_ref"``.
        exe: the compiled ``weights -> (½‖h_T‖², ∂/∂weights)``.
        timing: the timed runs.
    """

    peer: str
    exe: Compiled
    timing: RunTiming


def lstm_inputs(cfg: RunConfig, device: jax.Device) -> tuple[jax.Array, ...]:
    """``(weights [P], x [B, T, I], h0 [1, B, H], c0 [1, B, H], seq_lengths [B])`` for
    ``cfg``'s shape, drawn from ``cfg.seed`` and placed on ``device`` (unbatched: B = 1).

    The weights are ``init_lstm_weight``'s: U(−1/√H, 1/√H), packed in cuDNN's layout.
    """
    rnn = experimental_rnn()
    if rnn is None:
        raise RuntimeError(cudnn_unavailable(device))
    b, t, i, h = cfg.batch_size or 1, cfg.seq_len, cfg.input_size, cfg.hidden_size
    k_w, k_x = jax.random.split(jax.random.key(cfg.seed))
    weights = rnn.init_lstm_weight(k_w, i, h, 1, False)
    x = jax.random.normal(k_x, (b, t, i), jnp.float32)
    zeros = jnp.zeros((1, b, h), jnp.float32)
    lengths = jnp.full((b,), t, jnp.int32)
    return tuple(jax.device_put((weights, x, zeros, zeros, lengths), device))


def lstm_loss_and_grad(peer: str, input_size: int, hidden_size: int):
    """``(weights, x, h0, c0, seq_lengths) -> (L, ∂L/∂weights)`` with L = ½‖h_T‖², through
    cuDNN (``peer="cudnn"``) or the reference scan (``peer="lstm_ref"``): one layer, one
    direction, no dropout, float32.

    Args:
        peer: ``"cudnn"`` or ``"lstm_ref"``.
        input_size: I.
        hidden_size: H.

    Returns:
        The function to compile (its gradient is only with respect to the packed weights, as
        rnnviz's plain ``jax.grad`` is only with respect to the parameters).
    """
    rnn = experimental_rnn()
    if rnn is None:
        raise RuntimeError("this jax has no jax.experimental.rnn")

    def loss(weights, x, h0, c0, lengths):
        if peer == "cudnn":
            _, h_n, _ = rnn.lstm(x, h0, c0, weights, lengths, input_size, hidden_size, 1, 0.0, False)
        else:
            w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(weights, input_size, hidden_size, 1, False)
            _, h_n, _ = rnn.lstm_ref(
                x, h0, c0, w_ih, w_hh, b_ih, b_hh, lengths, input_size, hidden_size, 1, 0.0, False
            )
        return 0.5 * jnp.sum(h_n * h_n)

    return jax.value_and_grad(loss)


def time_peer(
    cfg: RunConfig, peer: str, device: jax.Device, repeats: int, budget_s: float | None = None
) -> PeerRun:
    """Compile and time one peer's LSTM forward + backward on ``cfg``'s shape on ``device``.

    Args:
        cfg: the shape (B, T, I, H; float32 whatever ``cfg.dtype`` says: cuDNN's LSTM here
            takes float32 only).
        peer: ``"cudnn"`` or ``"lstm_ref"``.
        device: where it runs.
        repeats: timed runs after one warm-up.
        budget_s: seconds of timed runs (slow ones get fewer, never under 3).

    Returns:
        The :class:`PeerRun`.

    Raises:
        RuntimeError: ``peer="cudnn"`` where :func:`cudnn_unavailable` gives a reason.
    """
    if peer == "cudnn" and (why := cudnn_unavailable(device)):
        raise RuntimeError(why)
    args = lstm_inputs(cfg, device)
    exe = compile_for(lstm_loss_and_grad(peer, cfg.input_size, cfg.hidden_size), args, device)
    _, timing = time_runs(exe.fn, args, repeats, budget_s=budget_s)
    return PeerRun(peer, exe, timing)


def peer_fields(run: PeerRun) -> dict[str, Any]:
    """The timing fields of a ``kind: "peer"`` record for ``run`` (the rest: the suite's)."""
    t = run.timing
    return {
        "peer": run.peer,
        "implementation": IMPLEMENTATIONS[run.peer],
        "measure": "grad",
        "compile_s": run.exe.compile_s,
        "run_s": t.median_s,
        "run_min_s": t.min_s,
        "run_max_s": t.max_s,
        "repeats": t.repeats,
        "peak_bytes": int(run.exe.peak_bytes),
    }

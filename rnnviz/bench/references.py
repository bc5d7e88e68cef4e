"""Reference implementations the benchmark measures rnnviz against, in the same run: a
Python loop of one jitted training step, the textbook Lyapunov loop (explicit Jacobians,
NumPy's QR), a large GEMM (the machine's practical peak), the hand-written XLA floor of an
LSTM gradient, and PyTorch's fused ``nn.LSTM`` when it is installed."""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.config import RunConfig
from rnnviz.engine.cells import make_cell
from rnnviz.engine.gradients import full_carry0
from rnnviz.engine.prepare import Values, prepared_inputs, seed_key
from rnnviz.engine.timing import time_runs
from rnnviz.studies.jacobians import flat_step, initial_directions, pack, unit_shapes, unpacker
from rnnviz.studies.training import TrainSettings, check_training
from rnnviz.studies.training.model import Hyper, init_state, step_fn


def loop_steps_per_s(cfg: RunConfig, steps: int, task: str = "adding", log_every: int = 100) -> float:
    """Steps/s of a Python loop calling one jitted (donating) optimisation step — the same
    step the chunked scan runs, without its per-chunk probe profile."""

    settings = TrainSettings(task, steps, log_every=log_every)
    _, spec = check_training(cfg, settings)
    hyper = Hyper(np.float32(settings.learning_rate), np.float32(settings.clip))
    key, values = seed_key(cfg.seed), Values.of(cfg)
    state = jax.jit(init_state, static_argnums=(0, 1))(cfg, spec, key, values)
    one = jax.jit(lambda st, k, v, h, i: step_fn(cfg, spec, k, v, h)(st, i), donate_argnums=(0,))
    state, rec = one(state, key, values, hyper, np.int32(0))  # compile
    jax.block_until_ready(rec)
    start = time.perf_counter()
    for i in range(1, steps + 1):
        state, rec = one(state, key, values, hyper, np.int32(i))
    jax.block_until_ready((state, rec))
    return steps / (time.perf_counter() - start)


def reference_lyapunov(cfg: RunConfig, k: int):
    """The straightforward way: a Python loop over steps, the explicit J_t from a jitted
    ``jax.jacfwd`` of one step, NumPy's QR. Same trajectory and start directions as
    :func:`rnnviz.studies.lyapunov.lyapunov` (warm-up 0). Returns the k exponents, unsorted."""

    params, carry0, xs = prepared_inputs(cfg)
    carry0 = full_carry0(cfg, carry0)
    shapes = unit_shapes(cfg)
    step = flat_step(make_cell(cfg), params, unpacker(carry0, shapes))
    advance = jax.jit(step)
    jacobian = jax.jit(jax.jacfwd(step))
    v = pack(carry0, shapes)
    q = np.asarray(
        initial_directions(jax.random.key_data(jax.random.key(cfg.seed)), v.shape[-1], k), np.float64
    )
    total = np.zeros(k)
    for t in range(cfg.seq_len):
        j = np.asarray(jacobian(v, xs[t]), np.float64)
        q, r = np.linalg.qr(j @ q)
        total += np.log(np.abs(np.diag(r)))
        v = advance(v, xs[t])
    return total / cfg.seq_len


def gemm_flops_per_s(repeats: int = 20, shape: tuple[int, int, int] = (6400, 160, 512)) -> float:
    """FLOP/s of one large float32 GEMM ``[m, k] · [k, n]``, measured now (the median of
    ``repeats`` runs): the machine's practical peak for this work. The default shape is the
    LSTM's input-and-recurrent product at B·T = 6400."""

    m, k, n = shape
    a = jax.random.normal(jax.random.key(0), (m, k), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (k, n), jnp.float32)
    f = jax.jit(jnp.dot)
    f(a, b).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    return 2.0 * m * k * n / float(np.median(times))


class Floor(NamedTuple):
    """Milliseconds of the three pieces any LSTM forward + backward on XLA:CPU must run,
    each written by hand at its cheapest (see :func:`xla_lstm_floor`)."""

    forward: float
    reverse: float
    weight_gemm: float

    @property
    def total(self) -> float:
        """Milliseconds of the whole floor: ``forward + reverse + weight_gemm``."""
        return self.forward + self.reverse + self.weight_gemm


def xla_lstm_floor(batch: int, seq_len: int, hidden: int, repeats: int = 100) -> Floor:
    """The floor of an LSTM's parameter gradient built from XLA:CPU primitives, measured now.

    - forward: a ``lax.scan`` of ``h W_h`` (one product per gate: slicing four gates out of
      one ``[B, 4H]`` product slows XLA:CPU's element-wise step) and the gates, saving nothing;
    - reverse: a reverse ``lax.scan`` of the element-wise LSTM reverse and ``dz W_hᵀ``,
      storing dz — the least a reverse pass does;
    - weight GEMM: ∂L/∂W_h = ``[T·B, H]ᵀ · [T·B, 4H]`` once.

    Their sum leaves out the input projections, the loss, the optimiser and every
    residual store: an LSTM gradient built from the same primitives is not expected to
    be faster (each piece: the fastest of ``repeats`` timed runs, as every bench number)."""

    keys = jax.random.split(jax.random.key(0), 4)
    w = tuple(jax.random.normal(k, (hidden, hidden), jnp.float32) / np.sqrt(hidden) for k in keys)
    wt = tuple(m.T for m in w)
    # Four separate [T, B, H] arrays: slicing gates out of one scanned block is XLA:CPU's slow path.
    zx = tuple(
        jax.random.normal(k, (seq_len, batch, hidden), jnp.float32)
        for k in jax.random.split(jax.random.key(1), 4)
    )
    sig = jax.nn.sigmoid

    def forward(w, zx):
        def step(carry, z):
            c, h = carry
            i, f, g, o = (z[k] + h @ w[k] for k in range(4))
            c = sig(f) * c + sig(i) * jnp.tanh(g)
            return (c, sig(o) * jnp.tanh(c)), None

        zeros = jnp.zeros((batch, hidden), jnp.float32)
        return jax.lax.scan(step, (zeros, zeros), zx)[0]

    res = tuple(sig(z) for z in zx)  # stands in for the saved gate activations i, f, g, o

    def reverse(wt, res, gh):
        def step(carry, inp):
            gc, gh_next = carry
            (i, f, g, o), c, gh_t = inp
            gh_all = gh_next + gh_t
            tc = jnp.tanh(c)
            gc = gc + gh_all * o * (1.0 - tc * tc)
            dz = (
                gc * g * i * (1.0 - i),
                gc * c * f * (1.0 - f),
                gc * i * (1.0 - g * g),
                gh_all * tc * o * (1.0 - o),
            )
            return (gc * f, sum(d @ m for d, m in zip(dz, wt))), dz

        zeros = jnp.zeros((batch, hidden), jnp.float32)
        return jax.lax.scan(step, (zeros, zeros), (res, zx[0], gh), reverse=True)

    a = jax.random.normal(jax.random.key(2), (seq_len * batch, hidden), jnp.float32)
    d = jax.random.normal(jax.random.key(3), (seq_len * batch, 4 * hidden), jnp.float32)

    def best(fn, *args) -> float:
        return 1e3 * time_runs(fn, args, repeats)[1].min_s

    return Floor(
        best(jax.jit(forward), w, zx),
        best(jax.jit(reverse), wt, res, zx[1]),
        best(jax.jit(lambda a, d: a.T @ d), a, d),
    )


def torch_lstm_s(cfg: RunConfig, repeats: int = 20) -> float | None:
    """Median seconds of PyTorch's fused ``nn.LSTM`` forward + backward (parameter
    gradients of ½‖h_T‖²) on ``cfg``'s shape, or None when PyTorch is not installed (it is
    an optional peer, never a dependency)."""
    try:
        import torch
    except ImportError:
        return None

    torch.manual_seed(cfg.seed)
    lstm = torch.nn.LSTM(cfg.input_size, cfg.hidden_size, batch_first=True)
    x = torch.randn(cfg.batch_size or 1, cfg.seq_len, cfg.input_size)

    def once() -> None:
        lstm.zero_grad(set_to_none=True)
        _, (h, _) = lstm(x)
        (0.5 * (h * h).sum()).backward()

    once()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    return float(np.median(times))

"""How training moves the dynamics: λ₁ and the step-Jacobian spectrum at every kept step
of a run, each in one vmapped, compiled call over the kept weights.

Does training move the network toward the edge of chaos (λ₁ → 0)? For every step s whose
weights the run kept (:attr:`rnnviz.studies.training.Training.weight_steps`), on the run's own
probe batch (the fixed batch its gradient profiles were taken on: the task's probe
sequences, or a data set's first 32 training sequences):

* the k leading Lyapunov exponents by the QR method (:func:`rnnviz.studies.lyapunov.qr_pass`),
  averaged over the probe's examples;
* the top-k singular values σ_i(J_t) of the step Jacobians J_t = ∂carry_t/∂carry_{t−1}
  along the first probe example (:func:`rnnviz.studies.jacobians.jacobian_pass`), summarised
  per kept step by their median over t.

The two are separate executables, run one after the other: each holds one batched LAPACK
factorisation (QR, SVD), never two that could run at once (see :mod:`rnnviz.base.hlo`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.training import LayersOverTraining, OverTraining, Training
from rnnviz.config import FLOP_BUDGET, BudgetError, ConfigError, RunConfig, check_number
from rnnviz.dataset import DataError, Dataset, load_dataset
from rnnviz.engine.compile import Compiled, compile_cache, compile_for
from rnnviz.engine.losses import DataSpec, data_spec
from rnnviz.engine.prepare import Values, prepare_params, resolve_device, seed_key, static_config
from rnnviz.studies.block_models import block_model
from rnnviz.studies.jacobians import EXACT_MAX_DIM, carry_dim, jacobian_flops, jacobian_pass
from rnnviz.studies.lyapunov import LyapunovOptions, check_options, lyapunov_flops, qr_pass
from rnnviz.studies.model_lyapunov import model_lyapunov
from rnnviz.studies.tasks.data import data_task
from rnnviz.studies.tasks.synthetic import get_task
from rnnviz.studies.training.model import PROBE_BATCH, PROBE_SALT


def run_dataset(run: Training, data: Dataset | None = None) -> Dataset | None:
    """The data set a run trained on: ``data`` if given (it must be that data set), else
    reloaded from the run's ``data_source``; None for a synthetic task.

    Raises:
        DataError: the data cannot be reloaded, or ``data`` is not what the run trained on.
    """
    if run.data_source is None:
        return None
    name, options = run.data_source
    ds = data if data is not None else load_dataset(name, **dict(options))
    if data_task(ds).name != run.task:
        raise DataError(
            ds.name, f"is not the data the run trained on ({run.task.split(' #')[0]}: its contents differ)"
        )
    return ds


def probe_inputs(run: Training, data: Dataset | None = None) -> jax.Array:
    """``[32, T, I]`` the run's probe batch (its gradient profiles' inputs)."""
    cfg = run.config
    ds = run_dataset(run, data)
    task = get_task(run.task) if ds is None else data_task(ds)
    root = jax.random.wrap_key_data(seed_key(cfg.seed))
    probe = task.probe_batch(jax.random.fold_in(root, PROBE_SALT), PROBE_BATCH, cfg.seq_len, run.lag)
    return probe.inputs.astype(jnp.dtype(cfg.dtype))


def _exponents(cfg: RunConfig, opts: LyapunovOptions, cells, carries, xs, key_data):
    """``[S, B, k]``: the QR method at each of S stacked weights (one vmapped pass)."""

    def one(params, carry0):
        running, covered = qr_pass(cfg, opts, params, carry0, xs, key_data)
        return running[-1] / covered[-1].astype(running.dtype)  # [B, k]

    return jax.vmap(one)(cells, carries)


def _spectra(cfg: RunConfig, method: str, k: int, iterations: int, stride: int, cells, carries, xs, key_data):
    """``[S, n, k]``: σ_i(J_t) along the first example at each of S stacked weights."""
    fn = functools.partial(jacobian_pass, cfg, method, k, iterations, stride, 0)
    return jax.vmap(lambda p, c: fn(p, c, xs, key_data))(cells, carries)


@compile_cache(maxsize=16)
def exponents_executable(
    cfg: RunConfig, opts: LyapunovOptions, args: DataSpec, device: jax.Device
) -> Compiled:
    """The compiled vmapped QR pass: ``(cells [S, …], carries [S, …], xs, key data) -> [S, B, k]``.

    Args:
        cfg: the shape-deciding config (probe batch size).
        opts: the checked Lyapunov options.
        args: the spec of ``(cells, carries, xs, key data)`` to compile against (the cache key).
        device: where it runs.

    Returns:
        The :class:`~rnnviz.engine.compile.Compiled` pass (cached per argument tuple, 16 kept).
    """
    return compile_for(functools.partial(_exponents, cfg, opts), args.shapes(), device)


@compile_cache(maxsize=16)
def spectra_executable(
    cfg: RunConfig, method: str, k: int, stride: int, args: DataSpec, device: jax.Device
) -> Compiled:
    """The compiled vmapped Jacobian pass: ``(cells, carries, xs, key data) -> [S, n, k]`` σ_i(J_t).

    Args:
        cfg: the shape-deciding config (probe batch size).
        method: ``"exact"`` or ``"subspace"`` (12 power-iteration rounds).
        k: singular values per analysed step.
        stride: J_t at every ``stride``-th step of the first probe example.
        args: the spec of ``(cells, carries, xs, key data)`` to compile against (the cache key).
        device: where it runs.

    Returns:
        The :class:`~rnnviz.engine.compile.Compiled` pass (cached per argument tuple, 16 kept).
    """
    return compile_for(functools.partial(_spectra, cfg, method, k, 12, stride), args.shapes(), device)


def _pick(steps: np.ndarray, max_points: int) -> np.ndarray:
    """Indices of at most ``max_points`` kept steps, evenly spread, first and last kept."""
    if steps.size <= max_points:
        return np.arange(steps.size)
    return np.unique(np.round(np.linspace(0, steps.size - 1, max_points)).astype(int))


def _loss_before(run: Training, steps: np.ndarray) -> np.ndarray:
    window = max(1, int(np.diff(run.profile_steps).min()) if run.profile_steps.size > 1 else run.steps_run)
    out = []
    for s in steps:
        lo, hi = max(0, int(s) - window), max(1, int(s))
        part = run.losses[lo:hi]
        part = part[np.isfinite(part)]
        out.append(float(part.mean()) if part.size else np.nan)
    return np.asarray(out)


def over_training(
    run: Training,
    k: int = 4,
    *,
    data: Dataset | None = None,
    max_points: int = 64,
    max_steps: int = 64,
    warmup: int | None = None,
) -> OverTraining:
    r"""λ₁ … λ_k and the spectrum of J_t at each kept step of ``run``, on its probe batch.

    .. math::

        \lambda_i(s) = \frac{1}{T'} \sum_{t > \text{warmup}} \log |R^{(t)}_{ii}(W_s)|,
        \qquad \sigma_i\big(J_t(W_s)\big),
        \quad J_t = \frac{\partial \text{carry}_t}{\partial \text{carry}_{t-1}}

    Args:
        run: a training run (``train(...)`` or :func:`rnnviz.load_run`).
        k: exponents and singular values per kept step (1 ≤ k ≤ D).
        data: the data set the run trained on (None: reloaded from ``run.data_source``).
        max_points: analyse at most this many kept steps, evenly spread (first and last
            always).
        max_steps: take J_t at every ``ceil(T / max_steps)``-th step.
        warmup: as :func:`rnnviz.lyapunov` (default T/10).

    Returns:
        An :class:`OverTraining`.

    Raises:
        ConfigError: a bad argument, or the run kept no weights (``BudgetError`` when the
            kept steps × k tangents are over the FLOP budget, naming how many fit).
        DataError: the run's data cannot be reloaded.

    Example:
        >>> from rnnviz import RunConfig, train
        >>> from rnnviz.studies.over_training import over_training
        >>> cfg = RunConfig(cell="gru", hidden_size=8, input_size=2, seq_len=20, batch_size=16)
        >>> ot = over_training(train(cfg, "adding", steps=40, log_every=20), k=2)
        >>> [int(s) for s in ot.steps], ot.exponents.shape, ot.singular_values.shape  # [S, k], [S, n, k]
        ([0, 20, 40], (3, 2), (3, 20, 2))
    """
    if run.weight_steps is None or run.weight_tree is None or not run.weight_steps.size:
        raise ConfigError("run", run.label, "a run that kept its weights (trained with this rnnviz)")
    max_points = check_number("max_points", max_points, 1, 1000, integer=True)
    max_steps = check_number("max_steps", max_steps, 1, 100_000, integer=True)
    cfg = run.config.replace(batch_size=PROBE_BATCH)
    opts = check_options(cfg, k, warmup, 1)
    idx = _pick(run.weight_steps, int(max_points))
    dim = carry_dim(cfg)
    method = "exact" if dim <= EXACT_MAX_DIM else "subspace"
    stride = max(1, -(-cfg.seq_len // int(max_steps)))
    per_point = lyapunov_flops(cfg, opts.k) + jacobian_flops(cfg, method, opts.k, 12, cfg.seq_len // stride)
    if per_point * idx.size > FLOP_BUDGET:
        raise BudgetError(
            "max_points",
            max_points,
            f"{idx.size} kept steps need about {per_point * idx.size / 1e12:.1f} TFLOP, over the "
            f"{FLOP_BUDGET / 1e12:g} TFLOP budget; at most {int(FLOP_BUDGET // per_point)} fit",
        )
    xs = probe_inputs(run, data)
    key = seed_key(cfg.seed)
    weights = [run.weights(int(s)) for s in run.weight_steps[idx]]
    cells = jax.tree.map(lambda *a: jnp.stack(a), *[w.cell for w in weights])
    _, fixed = prepare_params(cfg, key, Values.of(cfg))
    if cfg.carry_init == "learned":
        carries = jax.tree.map(lambda *a: jnp.stack(a), *[w.carry for w in weights])
    else:
        carries = jax.tree.map(lambda c: jnp.broadcast_to(c, (idx.size,) + c.shape), fixed)
    args = (cells, carries, xs, key)
    device = resolve_device(cfg)
    exe = exponents_executable(static_config(cfg), opts, data_spec(args), device)
    exps = np.asarray(exe.fn(*args), np.float64)  # [S, B, k]
    exps = -np.sort(-exps, axis=-1)
    exe = spectra_executable(static_config(cfg), method, opts.k, stride, data_spec(args), device)
    sv = np.asarray(exe.fn(*args), np.float64)  # [S, n, k]
    steps = run.weight_steps[idx]
    return OverTraining(
        run=run,
        steps=steps,
        loss=_loss_before(run, steps),
        exponents=exps.mean(1),
        spread=exps.std(1),
        singular_values=sv,
        jacobian_steps=np.arange(stride, cfg.seq_len + 1, stride),
        probe=PROBE_BATCH,
    )


def layers_over_training(
    run: Training, *, data: Dataset | None = None, max_points: int = 64
) -> LayersOverTraining:
    r"""λ₁ of each recurrent layer of a reference block's run at each kept step, on the first
    sequence of its probe batch: :func:`~rnnviz.studies.model_lyapunov.model_lyapunov` of
    :func:`~rnnviz.studies.block_models.block_model` at the step's tensors, one executable for
    every step.

    Args:
        run: a reference block's run (``RunConfig(block="reference")``).
        data: the data set the run trained on (None: reloaded from ``run.data_source``).
        max_points: analyse at most this many kept steps, evenly spread (first and last always).

    Returns:
        A :class:`~rnnviz.base.training.LayersOverTraining`.

    Raises:
        ConfigError: a bare cell's run (:func:`over_training` reads those), one that kept no
            weights, or a bad ``max_points``.
        DataError: the run's data cannot be reloaded.

    Example:
        >>> from rnnviz import RunConfig, train
        >>> cfg = RunConfig(cell="mamba", block="reference", layers=2, hidden_size=8, input_size=2,
        ...                 seq_len=12, batch_size=4)
        >>> ot = layers_over_training(train(cfg, "adding", steps=20, log_every=10))
        >>> [int(s) for s in ot.steps], ot.layers, ot.lambda1.shape  # [S, R]
        ([0, 10, 20], (0, 1), (3, 2))
    """
    if run.config.block != "reference":
        raise ConfigError("run", run.label, "a reference block's run (over_training reads a bare cell's)")
    if run.weight_steps is None or run.weight_tree is None or not run.weight_steps.size:
        raise ConfigError("run", run.label, "a run that kept its weights (trained with this rnnviz)")
    max_points = check_number("max_points", max_points, 1, 1000, integer=True)
    steps = run.weight_steps[_pick(run.weight_steps, int(max_points))]
    xs = np.asarray(probe_inputs(run, data), np.float32)
    found = [model_lyapunov(block_model(run.config, run.tensors(int(s))), xs) for s in steps]
    return LayersOverTraining(
        run=run,
        steps=steps,
        loss=_loss_before(run, steps),
        layers=found[0].layers,
        lambda1=np.stack([f.lambda1 for f in found]),
        warmup=found[0].warmup,
    )

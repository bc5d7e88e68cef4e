"""A data set as a training task: batches drawn from its train split, the loss its kind asks
for, and its test split held out.

The readout sees every output (``outputs_read = T``), so each loss reads the steps it needs:

* ``classification`` — cross-entropy of the readout at each sequence's last real step
  (``lengths − 1``): L = −mean_b log softmax(ŷ_{b, ℓ_b})[label_b]; metric: accuracy;
  baseline ln C (a uniform guess).
* ``next-step`` — cross-entropy of the next token at every real step, in nats:
  L = −Σ_{b,t} m_{bt} log softmax(ŷ_{bt})[y_{bt}] / Σ m; metric: bits per character
  (L / ln 2); baseline: the unigram entropy of the training tokens.
* ``regression`` — squared error at every real step, averaged over steps and outputs;
  baseline: the targets' variance (predicting their mean).

The formulas are the analysis's own (:mod:`rnnviz.engine.losses`: :func:`class_nll`,
:func:`token_nll`, :func:`squared_error`, on batch-first predictions here), so what training
lowers is what the analysis differentiates.

The data live in the compiled step as constants (a text as its tokens, one-hot inside the
step), so a run is one compiled call per chunk like the synthetic tasks; that caps a data
set used for training at :data:`MAX_TRAIN_BYTES`. Each data set becomes one task, named by
its source and a fingerprint of its contents (the compile cache keys on the name).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.dataset import DataError, Dataset
from rnnviz.engine.losses import at_step, class_nll, squared_error, token_nll
from rnnviz.studies.tasks.synthetic import DATA_TASKS, Batch, Task

#: Largest data set (train and test arrays as the step holds them) a run may train on.
MAX_TRAIN_BYTES = 64 * 1024**2
#: Most held-out sequences evaluated at every profile (the first of the test split).
HELD_OUT = 512


def data_task(ds: Dataset) -> Task:
    """The training task of a data set (registered, so the compiled step can find it).

    Args:
        ds: a ``classification``, ``next-step`` or ``regression`` data set.

    Returns:
        A :class:`~rnnviz.studies.tasks.synthetic.Task` whose ``seq_len`` and ``input_size`` are the data's.

    Raises:
        DataError: an ``unlabelled`` data set (nothing to learn) or one over
            :data:`MAX_TRAIN_BYTES`.
    """
    if ds.kind == "unlabelled":
        raise DataError(ds.name, "has no labels or targets: there is nothing to train on")
    tokens = ds.vocab is not None
    stored = ds.inputs.argmax(-1).astype(np.int32) if tokens else ds.inputs
    size = stored.nbytes + (0 if ds.targets is None else ds.targets.nbytes)
    if size > MAX_TRAIN_BYTES:
        raise DataError(
            ds.name,
            f"{size / 2**20:.0f} MiB to train on, over the {MAX_TRAIN_BYTES / 2**20:.0f} MiB a compiled "
            "training step may hold; use fewer or shorter sequences",
        )
    name = f"{ds.label} #{_fingerprint(ds)}"
    if name not in DATA_TASKS:
        DATA_TASKS[name] = _build(ds, name, stored, tokens)
    return DATA_TASKS[name]


def _fingerprint(ds: Dataset) -> str:
    h = hashlib.sha1(ds.kind.encode())
    for a in (ds.inputs, ds.mask, ds.labels, ds.targets, ds.train, ds.test):
        if a is not None:
            h.update(str(a.shape).encode())
            h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:8]


def _build(ds: Dataset, name: str, stored: np.ndarray, tokens: bool) -> Task:
    vocab = len(ds.vocab) if tokens else 0
    last = (ds.lengths - 1).astype(np.int32)

    def inputs_of(x: jax.Array) -> jax.Array:
        return jax.nn.one_hot(x, vocab, dtype=jnp.float32) if tokens else x

    def split_arrays(index: np.ndarray) -> tuple[jax.Array, Any]:
        x = jnp.asarray(stored[index])
        if ds.kind == "classification":
            return x, (jnp.asarray(ds.labels[index], jnp.int32), jnp.asarray(last[index]))
        return x, (jnp.asarray(ds.targets[index]), jnp.asarray(ds.mask[index]))

    train_x, train_y = split_arrays(ds.train)
    test_index = ds.test[:HELD_OUT] if ds.test.size else ds.train[:HELD_OUT]
    test_x, test_y = split_arrays(test_index)
    n_train = int(ds.train.size)

    def batch(key: jax.Array, size: int, seq_len: int, lag: int = 0) -> Batch:
        del seq_len, lag
        idx = jax.random.randint(key, (size,), 0, n_train)
        return Batch(inputs_of(train_x[idx]), jax.tree.map(lambda a: a[idx], train_y))

    def probe(key: jax.Array, size: int, seq_len: int, lag: int = 0) -> Batch:
        del key, seq_len, lag  # the first `size` training sequences (cycled if fewer)
        idx = jnp.arange(size) % n_train
        return Batch(inputs_of(train_x[idx]), jax.tree.map(lambda a: a[idx], train_y))

    def held_out(key: jax.Array, size: int, seq_len: int, lag: int = 0) -> Batch:
        del key, size, seq_len, lag
        return Batch(inputs_of(test_x), test_y)

    loss, metric, metric_name, higher, baseline, out = _objective(ds)
    return Task(
        name=name,
        input_size=ds.input_size,
        out_features=out,
        outputs_read=ds.seq_len,
        batch=batch,
        metric_name=metric_name,
        higher_is_better=higher,
        min_seq_len=ds.seq_len,
        description=f"{ds.kind} on {ds.source}",
        loss_of=lambda seq_len: loss,
        metric=metric,
        baseline_loss=baseline,
        held_out=held_out,
        seq_len=ds.seq_len,
        probe=probe,
    )


def _per_step(pred: jax.Array) -> jax.Array:
    """Predictions ``[B, T, F]`` (the readout returns ``[B, F]`` when T = 1)."""
    return pred[:, None] if pred.ndim == 2 else pred


def _objective(ds: Dataset) -> tuple[Callable, Callable, str, bool, float, int]:
    """``(loss, metric, metric name, higher is better, baseline, readout size)``: the losses of
    :mod:`rnnviz.engine.losses` (the analysis's own) on batch-first predictions ``[B, T, F]``."""
    if ds.kind == "classification":

        def logits(pred, targets):
            return at_step(_per_step(pred), targets[1], time_axis=1)  # each sequence's last real step

        def ce(pred, targets):
            return class_nll(logits(pred, targets).astype(jnp.float32), targets[0])

        def accuracy(pred, targets):
            return jnp.mean((jnp.argmax(logits(pred, targets), axis=-1) == targets[0]).astype(jnp.float32))

        return ce, accuracy, "accuracy", True, math.log(ds.n_classes), ds.n_classes
    if ds.kind == "next-step":

        def nats(pred, targets):
            tok, mask = targets
            return token_nll(_per_step(pred).astype(jnp.float32), tok, mask)

        def bits(pred, targets):
            return nats(pred, targets) / math.log(2.0)

        counts = np.bincount(ds.targets[ds.train][ds.mask[ds.train]], minlength=ds.n_classes)
        p = counts[counts > 0] / counts.sum()
        return nats, bits, "bits/char", False, float(-(p * np.log(p)).sum()), ds.n_classes

    def mse(pred, targets):
        y, mask = targets
        return squared_error(_per_step(pred).astype(jnp.float32), y, mask)

    real = ds.targets[ds.train][ds.mask[ds.train]]
    return mse, mse, "MSE", False, float(real.var(axis=0).mean()) if real.size else 1.0, ds.targets.shape[-1]

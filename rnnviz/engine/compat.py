"""What differs between the JAX versions rnnviz runs on, in one place.

rnnviz is tested with jax 0.10.2 (the lower bounds in ``pyproject.toml``); a lent GPU machine
may carry a newer jax (0.11 on the one this project is lent). Everything rnnviz uses that is
private, experimental or has moved between versions is reached through this module, each with
what happens where it is not there:

* ``lax.scan``'s private ``_split_transpose`` keyword (:func:`scan`): passed only when asked
  for, so every other scan is a plain ``lax.scan``; where it is gone, the ``split_transpose``
  strategy is unavailable (:func:`split_transpose_available`) and nothing else changes;
* ``jax._src.lru_cache`` (:func:`persistent_cache_module`), the persistent compilation
  cache's file store that :func:`rnnviz.engine.compile.seal_compilation_cache` seals: None
  where it is not there (the cache then runs unsealed);
* jaxlib's version (:func:`jaxlib_version`): ``jaxlib.__version__``, or the installed
  distribution's;
* ``jax.experimental.multihost_utils`` (:func:`process_allgather`);
* ``jax.experimental.rnn`` (:func:`experimental_rnn`), cuDNN's LSTM: None where it does not import;
* ``Device.memory_stats()`` (:func:`memory_stats`): the allocator's statistics, None where
  the backend keeps none (XLA:CPU).

The rest of rnnviz uses JAX's public, non-deprecated API only; the suite checks that no
deprecated API is reached (``tests/engine/test_compat.py`` runs an analysis of every strategy
with deprecation warnings as errors).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
from collections.abc import Callable
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp

#: The jax versions the whole suite has passed with (the README says which others are expected to).
KNOWN_TO_WORK = ("0.10.2",)


def scan(f: Callable, init: Any, xs: Any, *, split_transpose: bool = False) -> tuple[Any, Any]:
    """``jax.lax.scan(f, init, xs)``, with ``_split_transpose=True`` only when asked for.

    Args:
        f: the step ``(carry, x) -> (carry, y)``.
        init: the first carry.
        xs: the scanned inputs, leading axis T.
        split_transpose: ask for lax.scan's experimental split transpose (only where
            :func:`split_transpose_available`).

    Returns:
        ``(final carry, stacked ys)`` as ``lax.scan`` returns them.
    """
    if split_transpose:
        return jax.lax.scan(f, init, xs, _split_transpose=True)
    return jax.lax.scan(f, init, xs)


@functools.lru_cache(maxsize=1)
def split_transpose_available() -> bool:
    """Whether this JAX can differentiate ``lax.scan(..., _split_transpose=True)`` (a private,
    experimental keyword: any failure, a missing keyword included, means "not here")."""
    try:

        def f(w, xs):
            return scan(lambda c, x: (jnp.tanh(w * c + x), None), jnp.float32(0), xs, split_transpose=True)[0]

        jax.jit(jax.grad(f))(jnp.float32(0.5), jnp.ones(3, jnp.float32)).block_until_ready()
        return True
    except Exception:
        return False


def persistent_cache_module() -> ModuleType | None:
    """``jax._src.lru_cache`` (its ``LRUCache`` is the persistent compilation cache's file
    store), or None where this jax has no such module."""
    try:
        return importlib.import_module("jax._src.lru_cache")
    except ImportError:
        return None


def jaxlib_version() -> str:
    """The installed jaxlib's version (``"0.10.2"``), or ``"unknown"``."""
    try:
        import jaxlib

        return str(jaxlib.__version__)
    except (ImportError, AttributeError):
        try:
            return importlib.metadata.version("jaxlib")
        except importlib.metadata.PackageNotFoundError:
            return "unknown"


def process_allgather(x: jax.Array) -> Any:
    """Every process's shards of ``x`` gathered on each host
    (``jax.experimental.multihost_utils.process_allgather(x, tiled=True)``)."""
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(x, tiled=True)


def experimental_rnn() -> ModuleType | None:
    """``jax.experimental.rnn`` (cuDNN's LSTM and its reference scan), or None where this jax
    has none, or not with the functions rnnviz calls."""
    try:
        rnn = importlib.import_module("jax.experimental.rnn")
    except ImportError:
        return None
    needed = ("lstm", "lstm_ref", "init_lstm_weight", "unpack_lstm_weights")
    return rnn if all(hasattr(rnn, name) for name in needed) else None


def memory_stats(device: jax.Device) -> dict[str, int] | None:
    """The device allocator's statistics (``peak_bytes_in_use``, ``bytes_in_use``, …), or None
    where the backend keeps none (XLA:CPU returns None)."""
    try:
        stats = device.memory_stats()
    except Exception:  # not implemented by this backend or this jaxlib
        return None
    return dict(stats) if stats else None

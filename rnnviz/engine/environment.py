"""Where rnnviz runs, as one record (:class:`~rnnviz.base.environment.Environment`, re-exported
here): the versions and host facts every recorded measurement carries, the GPUs JAX sees, and
which strategies this JAX can run (:func:`environment`), plus the fields of a record's stamp
(:func:`run_stamp`).

The dashboard asks its worker processes for it (their JAX is the one that computes) and the
benchmarks stamp every line with it, so both read the same facts.
"""

from __future__ import annotations

import os
import platform
from typing import Any

import flax
import jax

from rnnviz.base.environment import STAMPED, Environment
from rnnviz.base.measurements import now_utc
from rnnviz.engine.allocator import allocator
from rnnviz.engine.compat import jaxlib_version
from rnnviz.engine.strategies.registry import unavailable
from rnnviz.tables.strategies import strategy_names


def device_label(device: jax.Device) -> str:
    """A device in words, as every record names it: ``"cpu:0 cpu"``, ``"gpu:0 NVIDIA H200"``.

    >>> device_label(jax.devices("cpu")[0])
    'cpu:0 cpu'
    """
    return f"{device.platform}:{device.id} {device.device_kind}"


def _gpus() -> tuple[str, ...]:
    try:
        devices = jax.devices("gpu")
    except RuntimeError:  # no GPU backend in this jaxlib
        return ()
    return tuple(device_label(d) for d in devices)


def environment() -> Environment:
    """The :class:`Environment` of this process (cheap: no compilation).

    Example:
        >>> from rnnviz.engine.environment import environment
        >>> env = environment()
        >>> "accumulate" in env.strategies, env.cpu_count > 0
        (True, True)
    """
    hidden = {s: why for s in strategy_names() if (why := unavailable(s))}
    return Environment(
        jax_version=jax.__version__,
        jaxlib_version=jaxlib_version(),
        flax_version=flax.__version__,
        python=platform.python_version(),
        cpu_count=os.cpu_count() or 0,
        allocator=allocator(),
        gpus=_gpus(),
        strategies=tuple(s for s in strategy_names() if s not in hidden),
        hidden=hidden,
    )


def run_stamp(device: jax.Device) -> dict[str, Any]:
    """The fields every schema-1 record carries about where and when it was measured:
    the device, the backend, the versions and host facts of :func:`environment`
    (:data:`STAMPED`), and the UTC time."""
    env = environment()
    return {
        "device_kind": device.platform,
        "device_name": str(device.device_kind),
        "backend": jax.default_backend(),
        **{k: getattr(env, k) for k in STAMPED},
        "timestamp": now_utc(),
    }


__all__ = ["STAMPED", "Environment", "device_label", "environment", "run_stamp"]

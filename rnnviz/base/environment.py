"""Where rnnviz runs, as one plain record (no JAX): the versions and host facts every recorded
measurement carries, the GPUs JAX sees, and which strategies this JAX can run.

:func:`rnnviz.engine.environment.environment` fills it in the process whose JAX computes; the
dashboard's server receives it from its workers and reads it without importing JAX.
"""

from __future__ import annotations

from typing import NamedTuple

#: the facts of :class:`Environment` that every recorded measurement carries
STAMPED = ("jax_version", "jaxlib_version", "flax_version", "cpu_count", "allocator")


class Environment(NamedTuple):
    """This process's JAX and host.

    Attributes:
        jax_version: ``jax.__version__``.
        jaxlib_version: jaxlib's version (:func:`rnnviz.engine.compat.jaxlib_version`).
        flax_version: ``flax.__version__``.
        python: the Python version, e.g. ``"3.11.7"``.
        cpu_count: logical CPUs (0 when unknown).
        allocator: ``"heap"`` once :func:`rnnviz.engine.allocator.keep_freed_buffers` took
            effect, else ``"default"``.
        gpus: the GPUs JAX sees, as ``"gpu:0 NVIDIA H200"``.
        strategies: the strategies this JAX can run, in table order.
        hidden: why each other strategy cannot run here (strategy → reason).
    """

    jax_version: str
    jaxlib_version: str
    flax_version: str
    python: str
    cpu_count: int
    allocator: str
    gpus: tuple[str, ...]
    strategies: tuple[str, ...]
    hidden: dict[str, str]

    @property
    def gpu_reason(self) -> str | None:
        """Why there is no GPU to choose, or None when there is one."""
        return no_gpu_reason(self.gpus)


def no_gpu_reason(gpus: tuple[str, ...]) -> str | None:
    """Why there is no GPU, given the GPUs JAX sees, or None when it sees one.

    >>> no_gpu_reason(()), no_gpu_reason(("gpu:0 NVIDIA H100",))
    ('JAX sees no GPU on this machine', None)
    """
    return None if gpus else "JAX sees no GPU on this machine"


__all__ = ["STAMPED", "Environment", "no_gpu_reason"]

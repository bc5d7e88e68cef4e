"""Where a whole model's weights live: on one device, or split over several along a
one-dimensional mesh when one device cannot hold them.

Each weight is split along its largest axis that the devices divide (the vocabulary of an
embedding, the width of a projection), and kept whole on every device where none does (a
norm's scale, a small bias). The computation needs no change: under ``jax.jit`` XLA places
each operation by its operands' shardings and moves what it must between the devices, so
the analysis of a sharded model equals that of the same model on one device.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

#: The mesh's one axis.
AXIS = "model"


def split_axis(shape: tuple[int, ...], devices: int) -> int | None:
    """The largest axis of ``shape`` that ``devices`` divide (the first of equal ones), or None.

    >>> split_axis((50280, 768), 2), split_axis((768,), 4), split_axis((3,), 2)
    (0, 0, None)
    """
    axes = [i for i, n in enumerate(shape) if n >= devices and n % devices == 0]
    return max(axes, key=lambda i: (shape[i], -i)) if axes else None


def sharding_of(shape: tuple[int, ...], mesh: Mesh) -> NamedSharding:
    """A weight's sharding on ``mesh``: split along :func:`split_axis`, else replicated."""
    axis = split_axis(shape, mesh.size)
    spec = [None] * len(shape)
    if axis is not None:
        spec[axis] = AXIS
    return NamedSharding(mesh, PartitionSpec(*spec))


def place(params: Mapping[str, np.ndarray], devices: Sequence[jax.Device]) -> dict[str, jax.Array]:
    """``params`` on ``devices``: on the one device, or split over a mesh of them. Arrays that
    are one object in ``params`` (tied weights) stay one array.

    Args:
        params: ``{name: array}``, NumPy or JAX.
        devices: one device, or several of one platform.

    Returns:
        ``{name: jax.Array}`` with each array's sharding.
    """
    mesh = Mesh(np.asarray(devices), (AXIS,)) if len(devices) > 1 else None
    unique = {id(v): v for v in params.values()}
    placed = {
        key: jax.device_put(v, devices[0] if mesh is None else sharding_of(tuple(v.shape), mesh))
        for key, v in unique.items()
    }
    return {name: placed[id(v)] for name, v in params.items()}


def input_sharding(params: Mapping[str, jax.Array]) -> jax.sharding.Sharding:
    """Where the inputs of a model whose weights are ``params`` go: the weights' one device,
    or replicated over their mesh."""
    first = next(iter(params.values())).sharding
    if isinstance(first, NamedSharding):
        return NamedSharding(first.mesh, PartitionSpec())
    return first

"""What a tab asks the workers for: a :class:`Request`, and the keys it is made of.

A request names a job (a module-level function of :mod:`rnnviz.serve.jobs`, sent to a worker
by reference), its arguments, the route whose worker holds the executables, and the words
for the waiting line. Its cache key is made here, from the job and its arguments, and
nowhere else: a tab that draws an answer and idle time that computed it ahead
(:mod:`rnnviz.serve.idle`) agree by construction. Nothing here imports JAX or Streamlit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from rnnviz.config import RunConfig

if TYPE_CHECKING:
    from collections.abc import Hashable


class Request(NamedTuple):
    """One computation: ``job(*args)`` in the worker of ``route``.

    Attributes:
      job: a module-level function the workers run (:mod:`rnnviz.serve.jobs`).
      args: its arguments (they pickle, and are hashable: they make the cache key).
      route: which worker holds what it needs (:func:`route`).
      what: the computation in words, for the waiting line and the pool's messages.
      timed: its answer holds run times, so idle time keeps it only when no visitor did
        anything while it ran (:meth:`rnnviz.serve.worker.WorkerPool.activity`).
      cached: its answer is kept for every session (False: asked each time, as for what a
        worker has compiled, or a training run's next chunk).
      spill: any free worker may answer when the route's is busy (False: the job works on
        state its worker keeps, a training run).
    """

    job: Callable[..., Any]
    args: tuple
    route: str
    what: str
    timed: bool = False
    cached: bool = True
    spill: bool = True

    @property
    def key(self) -> Hashable:
        """The result cache's key: the job's name and its arguments.

        >>> Request(divmod, (7, 2), "r", "a division").key
        ('divmod', 7, 2)
        """
        return (self.job.__name__, *self.args)


class Missing(LookupError):
    """A request whose answer is not there yet, raised by a look-up that must not compute
    (idle time's planning: :mod:`rnnviz.serve.idle` then computes it first)."""

    def __init__(self, request: Request):
        super().__init__(request.what)
        self.request = request


def job_key(cfg: RunConfig, data: dict | None = None, weights: dict | None = None) -> str:
    """A job's key: the config's fields, with the data source and the trained weights when
    there are (every answer then carries the data and weights it was computed on).

    >>> job_key(RunConfig(), weights={"path": "a.rnnviz", "step": 3})[-43:]
    '"weights": {"path": "a.rnnviz", "step": 3}}'
    """
    values = cfg.to_dict()
    if data is not None:
        values["data"] = data
    if weights is not None:
        values["weights"] = weights
    return json.dumps(values, sort_keys=True)


def route(cfg: RunConfig, data: dict | None = None) -> str:
    """Calls for one shape go to one worker, whose executables then serve every value
    (trained weights are values too): the static config (its plain values at their
    defaults) and the data source."""
    return job_key(RunConfig(**dict(cfg.shape_key())), data)


def describe(cfg: RunConfig) -> str:
    """A config in a few words, for the waiting line.

    >>> describe(RunConfig(cell="simple", seq_len=50, hidden_size=32, batch_size=4))
    'simple T=50 H=32 B=4 float32'
    """
    return f"{cfg.cell} T={cfg.seq_len} H={cfg.hidden_size} B={cfg.batch_size or 'unbatched'} {cfg.dtype}"


__all__ = ["Missing", "Request", "describe", "job_key", "route"]

"""What a tab asks the workers for: a :class:`Request` (a job of :mod:`rnnviz.serve.jobs` by
name, never imported here), the keys it is made of, and the dashboard's own answers. The cache
key is made here and nowhere else, so a tab and idle time agree by construction
(docs/dev/architecture.md, "The dashboard's two boundaries")."""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from rnnviz.config import RunConfig

if TYPE_CHECKING:
    from collections.abc import Hashable

    from rnnviz.base.training import Training


@dataclasses.dataclass(frozen=True)
class Job:
    """A job of :mod:`rnnviz.serve.jobs` by name: it pickles as its name, and calling it (in a
    worker, whose setup imported the jobs) calls the job."""

    name: str

    @property
    def __name__(self) -> str:  # what a request's key and the pool's messages read
        return self.name

    def __call__(self, *args: Any) -> Any:
        return getattr(importlib.import_module("rnnviz.serve.jobs"), self.name)(*args)


class _Jobs:
    """The jobs as attributes: ``jobs.phase == Job("phase")``."""

    def __getattr__(self, name: str) -> Job:
        if name.startswith("_"):
            raise AttributeError(name)
        return Job(name)


jobs = _Jobs()


class Request(NamedTuple):
    """One computation: ``job(*args)`` in the worker of ``route``."""

    job: Callable[..., Any]  # a Job (or, in tests, any module-level function)
    args: tuple  # they pickle and are hashable: they make the cache key
    route: str  # which worker holds what it needs (route())
    what: str  # the computation in words, for the waiting line and the pool's messages
    # its answer holds run times: idle time keeps it only when no visitor did anything meanwhile
    timed: bool = False
    cached: bool = True  # kept for every session (False: asked each time, a look-up or a training chunk)
    spill: bool = True  # any free worker may answer when the route's is busy (False: a training run)

    @property
    def key(self) -> Hashable:
        """The result cache's key: the job's name and its arguments."""
        return (self.job.__name__, *self.args)


class Missing(LookupError):
    """A request whose answer is not there yet, raised by a look-up that must not compute
    (idle time's planning: :mod:`rnnviz.serve.idle` then computes it first)."""

    def __init__(self, request: Request):
        super().__init__(request.what)
        self.request = request


def job_key(cfg: RunConfig, data: dict | None = None, weights: dict | None = None) -> str:
    """A job's key: the config's fields, with the data source and the trained weights when
    there are (every answer then carries the data and weights it was computed on)."""
    values = cfg.to_dict()
    if data is not None:
        values["data"] = data
    if weights is not None:
        values["weights"] = weights
    return json.dumps(values, sort_keys=True)


def config_of(key: str) -> RunConfig:
    """The config of a job's key (without its ``data`` and ``weights`` entries).

    >>> config_of(job_key(RunConfig(cell="gru"), weights={"path": "a.rnnviz", "step": 3})).cell
    'gru'
    """
    values = json.loads(key)
    values.pop("data", None)
    values.pop("weights", None)
    return RunConfig(**values)


def route(cfg: RunConfig, data: dict | None = None) -> str:
    """Calls for one shape go to one worker, whose executables then serve every value
    (trained weights are values too): the static config (its plain values at their
    defaults) and the data source."""
    return job_key(RunConfig(**dict(cfg.shape_key())), data)


def model_words(cfg: RunConfig) -> str:
    """The cell, or its reference block and depth: ``'lstm'``, ``'mamba block ×2'``."""
    return cfg.cell if cfg.block == "cell" else f"{cfg.cell} block ×{cfg.layers}"


def describe(cfg: RunConfig) -> str:
    """A config in a few words, for the waiting line.

    >>> describe(RunConfig(cell="simple", seq_len=50, hidden_size=32, batch_size=4))
    'simple T=50 H=32 B=4 float32'
    """
    batch = cfg.batch_size or "unbatched"
    return f"{model_words(cfg)} T={cfg.seq_len} H={cfg.hidden_size} B={batch} {cfg.dtype}"


# ---- the dashboard's own answers (the library's records are the others) -------------------


class RunSummary(NamedTuple):
    """What the sidebar shows of a saved run (no arrays): its label, config, kept steps, data."""

    label: str
    config: RunConfig
    weight_steps: tuple[int, ...]
    data_source: tuple | None
    final_loss: float
    metric: str


class ModelSummary(NamedTuple):
    """What the Your model tab shows of a loaded checkpoint (no arrays)."""

    model_type: str  # its family ("mamba", "torch_lstm", …)
    source: str  # the folder or file it was read from
    n_layers: int  # L, its blocks (or stacked layers)
    n_params: int  # tied ones counted once
    vocab_size: int  # 0: a stack that reads vectors
    input_size: int  # the width of what its first layer reads (a stack's I)
    tokenizer: bool  # whether a tokenizer.json lies beside it


class TrainProgress(NamedTuple):
    """Where a training run stands: steps done of ``steps``, seconds of training, whether it
    is done (finished, stopped or diverged everywhere) or was stopped, and its records so far
    without their weights. Once done, ``paths`` are the run files its worker wrote, or
    ``write_error`` says why there are none."""

    steps_done: int
    steps: int
    run_s: float
    done: bool
    stopped: bool
    records: list[Training] | None
    paths: tuple[str, ...] = ()
    write_error: str | None = None

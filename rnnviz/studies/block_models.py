r"""A config's design as its reference block (``RunConfig(block="reference")``): the model
:func:`block_model` draws, the inputs :func:`block_inputs` gives it (the bare cell's own), and
the per-layer, per-step gradient :func:`analyze_block` reads through it.

The model is the cell's reference block (:data:`~rnnviz.tables.blocks.BLOCK_DESIGNS`) at width
D = H, ``layers`` deep, at its reference's proportions (:data:`~rnnviz.studies.sizing.TEMPLATES`;
Gated DeltaNet without Qwen3-Next's attention layers, the sLSTM with as many of 4, 2 or 1
heads as divide H), read as a model of vectors (:mod:`rnnviz.engine.blocks.vectors`): inputs
``[B, T, I]`` projected to D (a torch stack reads I itself), the blocks, a readout to H outputs.
Its loss is the bare cell's ``last`` loss on the readout, :math:`L = ½ \sum_b ‖ŷ_{b,T}‖²`.

Example:
    >>> import rnnviz
    >>> cfg = rnnviz.RunConfig(cell="mamba", block="reference", layers=2, hidden_size=16, seq_len=12)
    >>> a = rnnviz.analyze_block(cfg)
    >>> a.model_type, a.grad_norms.shape          # [L + 1, T]
    ('mamba', (3, 12))
    >>> sorted(a.state_grad_norms)                 # the layers with a recurrent state
    [0, 1]
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.formatting import layers_text
from rnnviz.base.models import ModelAnalysis, ModelStates
from rnnviz.checkpoints.registry import FAMILIES
from rnnviz.config import FIELD_SPECS, ConfigError, param_count
from rnnviz.engine.blocks import vectors
from rnnviz.engine.blocks.placement import place
from rnnviz.engine.blocks.slstm_stack import SLSTMStackSpec
from rnnviz.engine.prepare import Values, prepare_inputs, seed_key
from rnnviz.studies.model_states import model_states
from rnnviz.studies.models import Model, analyze_model, devices_for
from rnnviz.studies.sizing import TEMPLATES, TOLERANCE, target_count
from rnnviz.tables.blocks import BLOCK_DESIGNS

if TYPE_CHECKING:
    from rnnviz.config import RunConfig
    from rnnviz.dataset import Dataset


def _slstm_spec(cfg: RunConfig) -> SLSTMStackSpec:
    heads = next(n for n in (4, 2, 1) if cfg.hidden_size % n == 0)
    return SLSTMStackSpec(embedding_dim=cfg.hidden_size, num_blocks=cfg.layers, num_heads=heads)


def _knobs(design: str, cfg: RunConfig) -> dict[str, Any]:
    """The template's fixed knobs, as a model of vectors needs them."""
    knobs = dict(TEMPLATES[design].knobs)
    if "vocab_size" in knobs:
        knobs["vocab_size"] = 1  # the embeddings and head are left out (vectors.ENDS)
    if "input_size" in knobs:
        knobs["input_size"] = cfg.input_size  # a torch stack reads the features itself
    if design == "qwen3_next":
        knobs["full_attention_interval"] = cfg.layers + 1  # Gated DeltaNet layers only
    return knobs


def _inner(design: str, cfg: RunConfig) -> tuple[Any, Any]:
    """The design's own spec at D = H and L = ``layers``, and its initialisation settings."""
    if design == "slstm_stack":
        return _slstm_spec(cfg), None
    template, family = TEMPLATES[design], FAMILIES[design]
    if not template.allows(cfg.hidden_size, template.knobs):
        raise ConfigError("hidden_size", cfg.hidden_size, f"the {design} block takes {template.legal}")
    config = {"model_type": design, **template.build(cfg.hidden_size, cfg.layers, _knobs(design, cfg))}
    source = f"{design} at H={cfg.hidden_size}"
    settings = family.init(config, source) if family.init is not None else None
    return family.parse(config, source), settings


def block_model(cfg: RunConfig, tensors: Mapping[str, Any] | None = None) -> Model:
    r"""The config's reference block, drawn from the seed's parameter key, or holding a trained
    run's ``tensors``.

    Args:
        cfg: a config with ``block="reference"``.
        tensors: a trained run's tensors by name (:meth:`~rnnviz.base.training.Training.tensors`,
            what :func:`~rnnviz.studies.training.train` kept at one step); its readout has the
            task's O outputs, which the loss then reads, :math:`L = ½ \sum_b ‖ŷ_{b,T}‖²`. None:
            the seed's draw, its readout to H outputs.

    Returns:
        A :class:`~rnnviz.studies.models.Model` whose ``model_type`` is the design's and
        whose spec is a :class:`~rnnviz.engine.blocks.vectors.VectorSpec`.

    Raises:
        ConfigError: ``cfg`` is a bare cell's, H is not a width the design's template takes, or
            ``tensors`` are not this block's by name and shape (:func:`check_tensors`).

    Example:
        >>> import rnnviz
        >>> cfg = rnnviz.RunConfig(
        ...     cell="gru", block="reference", layers=2, hidden_size=8, seq_len=6, input_size=2, batch_size=4
        ... )
        >>> run = rnnviz.train(cfg, "adding", steps=2, log_every=1)
        >>> m = block_model(run.config, run.tensors())
        >>> m.spec.output_size, "trained" in m.source
        (1, True)
    """
    if cfg.block != "reference":
        raise ConfigError("block", cfg.block, "'reference' for a block model")
    if tensors is None:
        spec, settings = block_spec(cfg)
        params = vectors.init_params(spec, block_key(cfg), dtype=cfg.dtype, settings=settings)
        how = f"seed {cfg.seed}"
    else:
        spec = block_spec(cfg, output_size=check_tensors(cfg, tensors))[0]
        params = {name: jnp.asarray(t, cfg.dtype) for name, t in tensors.items()}
        how = "trained"
    nbytes = sum(v.nbytes for v in params.values())
    source = f"{spec.design} × {cfg.layers} (H={cfg.hidden_size}, {how})"
    return Model(spec.design, spec, place(params, devices_for(nbytes)), source)


def check_tensors(cfg: RunConfig, tensors: Mapping[str, Any]) -> int:
    """The readout's outputs O of a trained run's ``tensors``, once they are shown to be
    ``cfg``'s block by name and shape (O read from ``readout.bias``: a data set's run does
    not name its task's outputs).

    Raises:
        ConfigError: a tensor missing, foreign or of another shape (naming up to three).
    """
    out = np.shape(tensors.get("readout.bias", ()))
    output_size = int(out[0]) if len(out) == 1 else 1
    want = _drawn_shapes(*block_spec(cfg, output_size=output_size))
    have = {name: tuple(np.shape(t)) for name, t in tensors.items()}
    if have != want:
        wrong = sorted(set(want) ^ set(have)) or sorted(n for n in want if want[n] != have[n])
        raise ConfigError(
            "weights", ", ".join(wrong[:3]), f"the {len(want)} tensors of {cfg.cell} block ×{cfg.layers}"
        )
    return output_size


def block_key(cfg: RunConfig) -> jax.Array:
    """The key :func:`block_model` draws from: the bare cell's parameter key of the seed."""
    return jax.random.split(jax.random.key(cfg.seed), 3)[0]


def block_spec(cfg: RunConfig, output_size: int | None = None) -> tuple[vectors.VectorSpec, Any]:
    """The config's design read as a model of vectors, and its initialisation settings.

    Args:
        cfg: a config with ``block="reference"``.
        output_size: O, the readout's outputs; None: H (the analysis's readout). Training
            reads the task's outputs here instead (:mod:`rnnviz.studies.training.blocks`).

    Returns:
        ``(spec, settings)`` for :func:`~rnnviz.engine.blocks.vectors.init_params`.
    """
    design = BLOCK_DESIGNS[cfg.cell].design
    inner, settings = _inner(design, cfg)
    out = cfg.hidden_size if output_size is None else output_size
    return vectors.VectorSpec(design, inner, input_size=cfg.input_size, output_size=out), settings


def block_param_count(cfg: RunConfig) -> int:
    """The parameters :func:`block_model` draws for ``cfg``, from their shapes alone (no draw).

    Example:
        >>> import rnnviz
        >>> cfg = rnnviz.RunConfig(cell="mamba", block="reference", layers=2, hidden_size=16)
        >>> block_param_count(cfg) == block_model(cfg).n_params
        True
    """
    return sum(math.prod(shape) for shape in _drawn_shapes(*block_spec(cfg)).values())


def _drawn_shapes(spec: vectors.VectorSpec, settings: Any) -> dict[str, tuple[int, ...]]:
    """Each tensor's shape as :func:`block_model` would draw it, from the shapes alone (no draw)."""
    shapes = jax.eval_shape(lambda key: vectors.init_params(spec, key, settings=settings), jax.random.key(0))
    return {name: tuple(s.shape) for name, s in shapes.items()}


def block_inputs(cfg: RunConfig, data: Dataset | None = None) -> np.ndarray:
    """The inputs a block's views read, ``[B, T, I]`` float32: the bare cell's for ``cfg`` (its
    distribution, scale and seed; an unbatched config's ``[T, I]`` as one example), or with
    ``data`` its first B training sequences (cycled when it has fewer), as a data set's
    probe batch is.

    Raises:
        ConfigError: ``cfg`` does not have the data's T and I (:func:`~rnnviz.dataset.fit_to_data`).
    """
    batch = cfg.batch_size or 1
    if data is None:
        x = prepare_inputs(cfg, seed_key(cfg.seed), Values.of(cfg))
        return np.asarray(x, np.float32).reshape((batch, cfg.seq_len, cfg.input_size))
    for name, want in (("seq_len", data.seq_len), ("input_size", data.input_size)):
        if getattr(cfg, name) != want:
            raise ConfigError(name, getattr(cfg, name), f"{want}, the data's ({data.name})")
    index = data.train[np.arange(batch) % data.train.size]
    return np.asarray(data.inputs[index], np.float32)


def analyze_block(
    cfg: RunConfig,
    *,
    exact: bool = True,
    data: Dataset | None = None,
    tensors: Mapping[str, Any] | None = None,
) -> ModelAnalysis:
    """Per-layer, per-step gradient norms of the config's reference block on the bare cell's
    inputs, in one compiled forward and reverse pass (:func:`~rnnviz.studies.models.analyze_model`).

    Args:
        cfg: a config with ``block="reference"``.
        exact: take log₁₀ from a float64 pass where float32 underflows (as ``analyze_model``).
        data: a data set whose first B training sequences it reads (:func:`block_inputs`);
            None: the bare cell's inputs.
        tensors: a trained run's (:func:`block_model`); None: the seed's draw.

    Returns:
        :class:`~rnnviz.base.models.ModelAnalysis`: ``grad_norms`` ``[L + 1, T]`` (row 0 the
        inputs x_t themselves, row l the stream leaving block l: row L what the final norm
        and the readout read), each
        recurrent layer's state gradients, connectivity of step T − 1 over the inputs.
    """
    return analyze_model(block_model(cfg, tensors), block_inputs(cfg, data), exact=exact)


def block_states(cfg: RunConfig, *, example: int = 0) -> ModelStates:
    """Each recurrent layer's state over the steps of one of the config's own examples, in its
    reference block (:func:`~rnnviz.studies.model_states.model_states` of :func:`block_model`
    on :func:`block_inputs`).

    Args:
        cfg: a config with ``block="reference"``.
        example: which sequence of the batch.

    Returns:
        :class:`~rnnviz.base.models.ModelStates`: ``norms`` ``[R, P, T]`` ‖state_t‖ of each
        recurrent layer's P state leaves, ``units`` their first 8 numbers ``[R, k_p, T]``.

    Example:
        >>> import rnnviz
        >>> cfg = rnnviz.RunConfig(cell="lstm", block="reference", layers=2, hidden_size=8, seq_len=10)
        >>> s = block_states(cfg)
        >>> s.layers, s.leaves, s.norms.shape, s.units[0].shape
        ((0, 1), ('c', 'h'), (2, 2, 10), (2, 8, 10))
    """
    return model_states(block_model(cfg), block_inputs(cfg), example=example)


#: The designs whose count grows with H only across the widths of one residue modulo a period,
#: by design: the sLSTM's heads (as many of 4, 2 or 1 as divide H) follow H mod 4, and a width of
#: fewer heads holds more recurrent weights (H = 69, one head: 136,344 at L = 2; H = 70: 100,310).
COUNT_PERIODS = {"slstm_stack": 4}


def sized_config(cfg: RunConfig, params: int | str) -> RunConfig:
    """``cfg`` (a reference block) at the width H whose drawn model's parameter count is nearest
    ``params``: the count grows with H (within each residue of :data:`COUNT_PERIODS`), so a
    bisection (one per residue) between half and twice the width the block table's estimate
    (:func:`~rnnviz.config.param_count`) gives, among the widths whose config is valid at
    ``cfg``'s batch and T (the analysis's budget bounds them).

    Args:
        cfg: a config with ``block="reference"``; every field but ``hidden_size`` is kept.
        params: the count, as a number or ``"100k"``, ``"1.5M"``
            (:func:`~rnnviz.studies.sizing.target_count`).

    Returns:
        The config at that width (the widest valid one when ``params`` lies past it).

    Raises:
        ConfigError: no width is valid at ``cfg``'s other fields.

    Example:
        >>> import rnnviz
        >>> cfg = sized_config(rnnviz.RunConfig(cell="gru", block="reference", layers=2), "10k")
        >>> cfg.hidden_size, block_model(cfg).n_params
        (30, 10110)
    """
    target = target_count(params)

    @functools.cache
    def count(width: int) -> int:
        return block_param_count(cfg.replace(hidden_size=width))

    estimates = {}
    for width in range(1, int(FIELD_SPECS["hidden_size"].hi) + 1):
        try:
            estimates[width] = param_count(cfg.replace(hidden_size=width))
        except ConfigError:  # past the analysis's budget at this batch and T: not a width to pick
            continue
    if not estimates:
        raise ConfigError(
            "hidden_size", cfg.hidden_size, f"a width at which the {cfg.cell} block fits the budget"
        )
    guess = min(estimates, key=lambda w: abs(estimates[w] - target))
    lo, hi = max(1, guess // 2), min(max(estimates), 2 * guess + 8)
    period = COUNT_PERIODS.get(BLOCK_DESIGNS[cfg.cell].design, 1)
    near = []
    for first in range(lo, min(lo + period, hi + 1)):
        widths = range(first, hi + 1, period)
        i = bisect.bisect_right(widths, target, key=count)  # the first width over the target
        near += [widths[j] for j in (i - 1, i) if 0 <= j < len(widths)]
    return cfg.replace(hidden_size=min(near, key=lambda width: abs(count(width) - target)))


def sized_block(cfg: RunConfig, params: int | str) -> tuple[RunConfig, int]:
    """:func:`sized_config` and its drawn model's parameter count, refused where even the nearest
    width's count lies more than :data:`~rnnviz.studies.sizing.TOLERANCE` from ``params``:
    designs sized to one target then differ by at most that.

    Args:
        cfg: a config with ``block="reference"``; every field but ``hidden_size`` is kept.
        params: the count (:func:`~rnnviz.studies.sizing.target_count`).

    Returns:
        ``(config, count)``.

    Raises:
        ConfigError: a bad count, or none within the tolerance (naming the nearest width and count).

    Example:
        >>> import rnnviz
        >>> cfg, count = sized_block(rnnviz.RunConfig(cell="gru", block="reference", layers=2), "10k")
        >>> cfg.hidden_size, count
        (30, 10110)
        >>> sized_block(rnnviz.RunConfig(cell="lstm", block="reference", layers=8), "1k")
        Traceback (most recent call last):
            ...
        rnnviz.config.ConfigError: params=1000 is not allowed: a count the lstm block of 8 layers reaches \
within 5%: its nearest, at H = 3, has 840; another count, or another depth.
    """
    target = target_count(params)
    sized = sized_config(cfg, target)
    count = block_param_count(sized)
    if abs(count - target) > TOLERANCE * target:
        raise ConfigError(
            "params",
            target,
            f"a count the {cfg.cell} block of {layers_text(cfg.layers)} reaches within {TOLERANCE:.0%}: its "
            f"nearest, at H = {sized.hidden_size}, has {count:,}; another count, or another depth",
        )
    return sized, count

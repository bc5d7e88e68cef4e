r"""A reference block's phase diagram: the design's memory knob
(:data:`~rnnviz.tables.block_knobs.BLOCK_KNOBS`) swept, and at every value how much of the
gradient reaches each input x_t of the block (:func:`block_phase`), from the analysis of the
block drawn with the knob changed (:func:`knob_model`).

The draws differ only in the values of a few tensors (the knob's), never in their shapes, so
every point reuses the analysis's one executable (:func:`~rnnviz.studies.models.analyze_model`
keys it by shape): the sweep compiles once, at its first point.

Example:
    >>> import rnnviz
    >>> cfg = rnnviz.RunConfig(cell="mamba", block="reference", layers=2, hidden_size=8, seq_len=6)
    >>> p = block_phase(cfg, [0.1, 1.0, 10.0])
    >>> p.knob, p.log10_grad_norms.shape          # [V, S, L + 1, T]
    ('scale of the range of Δ', (3, 1, 3, 6))
    >>> bool((p.compile_s[1:] == 0).all())         # one executable for the sweep
    True
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from rnnviz.base.models import BlockPhase
from rnnviz.config import ConfigError
from rnnviz.engine.blocks import init
from rnnviz.engine.blocks.placement import place
from rnnviz.engine.blocks.qwen3_next import a_log_range
from rnnviz.engine.blocks.recurrent_gemma import recurrent_param_range
from rnnviz.studies.block_models import block_inputs, block_key, block_model, block_spec
from rnnviz.studies.models import Model, analyze_model, devices_for
from rnnviz.tables.block_knobs import BLOCK_KNOBS, BlockKnob
from rnnviz.tables.blocks import BLOCK_DESIGNS

if TYPE_CHECKING:
    from rnnviz.config import RunConfig

#: The most values one sweep takes.
MAX_VALUES = 256


def block_knob(cfg: RunConfig) -> BlockKnob:
    """The memory knob of ``cfg``'s design (a cell without a reference block raises ConfigError)."""
    if cfg.cell not in BLOCK_DESIGNS:
        raise ConfigError("cell", cfg.cell, f"a cell with a reference block: {', '.join(BLOCK_DESIGNS)}")
    return BLOCK_KNOBS[BLOCK_DESIGNS[cfg.cell].design]


def _check(knob: BlockKnob, cell: str, value: float) -> float:
    if not (math.isfinite(value) and knob.lo <= value <= knob.hi):
        raise ConfigError("knob", value, f"{knob.allowed()} for the {cell} block")
    return float(value)


def knob_grid(cfg: RunConfig, lo: float, hi: float, n: int) -> list[float]:
    """``n`` values of the design's knob from ``lo`` to ``hi``, evenly spaced (a scale's
    geometrically, a gain's or a shift's linearly).

    Raises:
        ConfigError: a bound outside the knob's range, ``hi`` not above ``lo``, or ``n`` not in
            1 … :data:`MAX_VALUES`.

    Example:
        >>> import rnnviz
        >>> knob_grid(rnnviz.RunConfig(cell="mamba", block="reference"), 0.1, 10.0, 3)
        [0.1, 1.0, 10.0]
    """
    knob = block_knob(cfg)
    lo, hi = _check(knob, cfg.cell, lo), _check(knob, cfg.cell, hi)
    if not 1 <= n <= MAX_VALUES:
        raise ConfigError("n", n, f"1 … {MAX_VALUES} values")
    if n == 1:
        return [lo]
    if hi <= lo:
        raise ConfigError("hi", hi, f"a bound above lo ({lo:g})")
    if knob.spacing == "log":
        grid = np.geomspace(lo, hi, n)
    else:
        grid = np.linspace(lo, hi, n)
    return [float(round(v, 12)) for v in grid]


#: How each design's knob changes its drawn tensors: ``(value, settings) -> (suffix, change)``,
#: ``change(name, array, key)`` the tensor as the knob draws it (``key`` the model's).
Change = Callable[[str, jax.Array, jax.Array], jax.Array]


def _redraw(initialiser: init.Initialiser) -> Change:
    # the tensor's own key, as init.draw gives it: the default value draws the reference's tensor
    return lambda name, array, key: initialiser(init.named_key(key, name), array.shape).astype(array.dtype)


def _changes(design: str, value: float, settings: Any) -> tuple[tuple[str, ...], Change]:
    """The suffixes of the tensors ``design``'s knob changes, and how."""
    if design in ("torch_lstm", "torch_gru"):
        return ("weight_hh_l",), lambda name, array, key: (array.astype(jnp.float32) * value).astype(
            array.dtype
        )
    if design == "mamba":
        s = settings
        dt = init.dt_bias(value * s.time_step_min, value * s.time_step_max, s.time_step_floor)
        return ("mixer.dt_proj.bias",), _redraw(dt)
    if design == "recurrent_gemma":
        return ("rg_lru.recurrent_param",), _redraw(recurrent_param_range(0.9**value, 0.999**value))
    if design == "qwen3_next":
        return ("linear_attn.A_log",), _redraw(a_log_range(0.01 * value, 16.0 * value))
    if design == "xlstm":
        return (".fgate_preact.bias",), lambda name, array, key: array + value
    if design == "slstm_stack":
        # the bias is [heads, 4, d], the gates in the order (i, f, z, o)
        return ("xlstm.slstm_cell.bias",), lambda name, array, key: array.at[:, 1].add(value)
    raise ConfigError("design", design, f"a design with a memory knob: {', '.join(BLOCK_KNOBS)}")


def knob_model(cfg: RunConfig, value: float, drawn: Model | None = None) -> Model:
    """``cfg``'s reference block (:func:`~rnnviz.studies.block_models.block_model`) with its
    memory knob at ``value``: the knob's tensors drawn again (or scaled, or shifted) as the
    knob's setting says (:data:`~rnnviz.tables.block_knobs.BLOCK_KNOBS`), every other tensor as
    the reference draws it.

    Args:
        cfg: a config with ``block="reference"``.
        value: the knob's value (its default draws the reference's initialisation exactly).
        drawn: ``block_model(cfg)``, when already drawn.

    Returns:
        The :class:`~rnnviz.studies.models.Model`, its tensors of the same shapes and placement.

    Raises:
        ConfigError: a value outside the knob's range.

    Example:
        >>> import rnnviz
        >>> cfg = rnnviz.RunConfig(cell="lstm", block="reference", layers=1, hidden_size=4)
        >>> m = knob_model(cfg, 2.0)
        >>> bool((m.params["weight_hh_l0"] == 2 * block_model(cfg).params["weight_hh_l0"]).all())
        True
    """
    knob = block_knob(cfg)
    value = _check(knob, cfg.cell, value)
    drawn = block_model(cfg) if drawn is None else drawn
    spec, settings = block_spec(cfg)
    suffixes, change = _changes(spec.design, value, settings)
    key = block_key(cfg)
    params = dict(drawn.params)
    touched = [name for name in params if any(s in name for s in suffixes)]
    if not touched:  # a renamed tensor would leave the sweep flat: say so rather than draw it
        raise RuntimeError(f"the {spec.design} knob found none of {suffixes} in {sorted(params)[:8]} …")
    for name in touched:
        params[name] = change(name, params[name], key)
    nbytes = sum(v.nbytes for v in params.values())
    source = f"{drawn.source}, {knob.symbol} = {value:g}"
    return dataclasses.replace(drawn, params=place(params, devices_for(nbytes)), source=source)


def block_phase(
    cfg: RunConfig, values: Sequence[float], seeds: Iterable[int] | None = None, *, exact: bool = True
) -> BlockPhase:
    """Per-layer, per-step gradient norms of ``cfg``'s reference block at every value of its
    memory knob and seed: the block phase diagram (row 0: how much gradient reaches each input
    x_t, lag T − 1 − t).

    Args:
        cfg: a config with ``block="reference"``.
        values: ``[V]`` the knob's values (:func:`knob_grid` spaces them).
        seeds: the seeds (each draws its own weights and inputs; default: ``cfg.seed``).
        exact: take log₁₀ from a float64 pass where float32 underflows (as ``analyze_model``).

    Returns:
        :class:`~rnnviz.base.models.BlockPhase`: ``log10_grad_norms`` ``[V, S, L + 1, T]``, at
        the knob's default each seed's ``analyze_block(cfg.replace(seed=seed))``.

    Raises:
        ConfigError: no values, a value outside the knob's range, or a bare cell's config.

    Example:
        >>> import rnnviz
        >>> cfg = rnnviz.RunConfig(cell="gru", block="reference", layers=1, hidden_size=4, seq_len=5)
        >>> block_phase(cfg, [0.5, 1.0], seeds=[0, 1]).log10_grad_norms.shape
        (2, 2, 2, 5)
    """
    knob = block_knob(cfg)
    values = [_check(knob, cfg.cell, v) for v in values]
    if not values:
        raise ConfigError("values", values, f"at least one value of the {knob.name}")
    seeds = (cfg.seed,) if seeds is None else tuple(int(s) for s in seeds)
    logs, compile_s = [], []
    start = time.perf_counter()
    for seed in seeds:
        at_seed = cfg.replace(seed=seed)
        drawn, inputs = block_model(at_seed), block_inputs(at_seed)
        analyses = [analyze_model(knob_model(at_seed, v, drawn), inputs, exact=exact) for v in values]
        logs.append([a.log10_grad_norms for a in analyses])
        compile_s.append([a.compile_s for a in analyses])
    return BlockPhase(
        model_type=BLOCK_DESIGNS[cfg.cell].design,
        knob=knob.name,
        symbol=knob.symbol,
        default=knob.default,
        values=np.asarray(values, np.float64),
        seeds=seeds,
        log10_grad_norms=np.swapaxes(np.asarray(logs, np.float64), 0, 1),
        compile_s=np.asarray(compile_s, np.float64).T,
        run_s=time.perf_counter() - start,
    )

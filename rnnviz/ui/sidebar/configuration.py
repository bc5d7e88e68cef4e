"""The sidebar's *Configuration* section: its widgets (keyed ``cfg_<field>``, drawn from
:data:`~rnnviz.config.FIELD_SPECS`) ↔ :class:`RunConfig` ↔ the URL, which holds the
non-default fields so that a copied URL reopens the same view; a reference block's size, asked
as its width H or as about N parameters (:data:`SIZE_BY`); the teaching presets; the limits."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import streamlit as st

from rnnviz.base.presets import PRESETS, config_from_params, config_to_params
from rnnviz.config import BLOCK_FIXES, FIELD_SPECS, RunConfig
from rnnviz.studies.sizing import TOLERANCE, target_count
from rnnviz.tables.cells import cell_names, cell_spec
from rnnviz.tables.strategies import cell_unavailable

KEY = "cfg_{}".format
UI_PARAMS = ("tab", "data")  # the Data choice keeps its own parameter (rnnviz.ui.sidebar.data)
#: The URL parameter of a size asked as about N parameters (a widget's, not a RunConfig field:
#: the width it picks is the config's ``hidden_size``, in the URL beside it).
PARAMS_URL = "params"
SIZE_KEY, PARAMS_KEY = "size_by", "size_params"
#: The width last picked for a count: where H starts when the Size control goes back to the width.
PICKED_KEY = "_size_width"
BY_WIDTH, BY_PARAMS = "width H", "about N parameters"
#: Counts the help names as examples (:func:`~rnnviz.studies.sizing.target_count` reads them).
COUNT_EXAMPLES = ("10k", "30k", "100k", "300k", "1M", "1.5M", "25000")


def offer(key: str, options: Any, default: Any) -> bool:
    """Set the widget ``key`` to ``default`` unless it holds one of ``options``; whether it did."""
    if st.session_state.get(key) in options:
        return False
    st.session_state[key] = default
    return True


def _set_widgets(cfg: RunConfig) -> None:
    st.session_state[KEY("batched")] = cfg.batch_size is not None
    st.session_state[SIZE_KEY] = BY_WIDTH  # a preset's H (or the URL's) is its own
    for name in FIELD_SPECS:
        value = getattr(cfg, name)
        if name == "batch_size" and value is None:  # unbatched: the disabled B keeps its value
            value = st.session_state.get(KEY("batch_size"), 4)
        st.session_state[KEY(name)] = value


def init_from_url() -> None:
    """On a session's first run, widgets start from the URL (bad values warn)."""
    if st.session_state.get("_initialised"):
        return
    cfg, warnings = config_from_params(dict(st.query_params), ignore=(*UI_PARAMS, PARAMS_URL))
    _set_widgets(cfg)
    if PARAMS_URL in st.query_params:  # checked where it is used: one message, as a typed one gets
        st.session_state[SIZE_KEY] = BY_PARAMS
        st.session_state[PARAMS_KEY] = st.query_params[PARAMS_URL]
    st.session_state["_url_warnings"] = warnings
    st.session_state["_initialised"] = True


def apply_preset(title: str) -> None:
    """on_click callback: load a preset into the widgets (before they are drawn), and its
    Training tab settings when it has some."""
    preset = PRESETS[title]
    _set_widgets(preset.config())
    for name, value in (preset.training or {}).items():
        st.session_state[f"train_{name}"] = value


def _help(name: str) -> str:
    return f"{FIELD_SPECS[name].help}; {FIELD_SPECS[name].allowed()}"


def _field(name: str, choices: tuple[str, ...] | None = None, **options: Any) -> Any:
    """The widget of a :class:`RunConfig` field: a menu of its allowed values (or ``choices``),
    or a number input within its bounds and step, labelled and explained as its spec says."""
    spec = FIELD_SPECS[name]
    options = {"key": KEY(name), "help": _help(name), **options}
    if spec.choices is not None:
        return st.sidebar.selectbox(spec.title, spec.options() if choices is None else choices, **options)
    lo, hi, step = ((int if spec.kind is int else float)(x) for x in (spec.lo, spec.hi, spec.step))
    return st.sidebar.number_input(spec.title, lo, hi, step=step, **options)


def _fields(*names: str) -> dict[str, Any]:
    return {name: _field(name) for name in names}


def sidebar(
    strategies: tuple[str, ...], devices: tuple[str, ...], gpu_reason: str | None
) -> tuple[dict[str, Any], Size | None]:
    """Draw the sidebar; return the raw field values (validated by RunConfig later) and, where a
    reference block's size is asked as about N parameters, that :class:`Size` (:func:`sized`
    then sets the width)."""
    sb = st.sidebar
    sb.header("Configuration")
    _presets(sb)
    sb.subheader("Cell")
    names = cell_names()  # registered cells only: a URL can name one, never a module
    offer(KEY("cell"), names, "simple")
    about = "\n\n".join(f"{n} ({cell_spec(n).group}): {cell_spec(n).description}" for n in names)
    about = "Registered cells (plugins register through the rnnviz.engine.cells entry point):\n\n" + about
    v = {"cell": _field("cell", names, format_func=lambda n: f"{n} · {cell_spec(n).group}", help=about)}
    v["block"] = _field("block")
    fixed = v["block"] == "reference"  # the fields the reference block fixes are shown, not asked
    layers = _field("layers", disabled=not fixed)
    v["layers"] = layers if fixed else 1
    spec = cell_spec(v["cell"])
    takes = len(spec.activations) > 1
    takes_text = f"; the {v['cell']} cell takes " + ", ".join(spec.activations) if takes else ""
    v["activation"] = _field("activation", disabled=not takes, help=_help("activation") + takes_text)
    if v["activation"] not in spec.activations:
        v["activation"] = spec.activations[0]
    size = _size(sb, fixed, v)
    v["recurrent_init"] = _field("recurrent_init", disabled=fixed)
    v["recurrent_gain"] = _field("recurrent_gain", format="%.3f", disabled=fixed)
    has_bias = spec.forget_bias is not None
    bias = _field("forget_bias", disabled=fixed or not has_bias)
    v["forget_bias"] = bias if has_bias else 0.0
    sb.subheader("Carry")
    v["carry_init"] = _field("carry_init", disabled=fixed)
    v["carry_scale"] = _field("carry_scale", disabled=fixed or v["carry_init"] == "zeros")
    sb.subheader("Input")
    v |= _fields("seq_len", "input_size")
    batched = sb.toggle(
        "Batched input [B, T, I]", key=KEY("batched"), help="off: one unbatched sequence [T, I]"
    )
    b = _field("batch_size", disabled=not batched)
    v["batch_size"] = b if batched else None
    v |= _fields("inputs", "input_scale", "dtype")
    sb.subheader("Gradient")
    v["loss"] = _field("loss", disabled=fixed)
    offered = []
    for name in strategies:  # the worker has left out those JAX cannot run here
        if why := cell_unavailable(name, spec):
            sb.caption(f"Strategy '{name}' is hidden: the {v['cell']} cell cannot use it — {why}.")
        else:
            offered.append(name)
    offer(KEY("strategy"), offered, "accumulate")
    v["strategy"] = _field("strategy", tuple(offered), disabled=fixed)
    wrong = st.session_state.get(KEY("device"))
    if offer(KEY("device"), devices, "auto"):
        sb.warning(f"device={wrong!r} is not available: no GPU is visible to JAX here; using 'auto'.")
    v["device"] = _field("device", devices)
    if gpu_reason:
        sb.caption(f"GPU unavailable: {gpu_reason}")
    v["seed"] = _field("seed")
    if fixed:
        v |= {name: value for name, (value, _) in BLOCK_FIXES.items()}
        sb.caption(
            "The reference block fixes, as its reference does: "
            + "; ".join(f"{name} {value!r}" for name, (value, _) in BLOCK_FIXES.items())
            + "."
        )
    return v, size


class Size(NamedTuple):
    """A reference block's size asked as about N parameters."""

    params: str  # the count as typed ("100k"), checked by sized()
    note: Any  # the sidebar's line under the control: the width picked and its count


def _by_width(sb: Any, v: dict[str, Any]) -> None:
    v["hidden_size"] = _field("hidden_size")


def _by_params(sb: Any, v: dict[str, Any]) -> Size:
    st.session_state.setdefault(PARAMS_KEY, "100k")
    asked = sb.text_input(
        "Parameters N",
        key=PARAMS_KEY,
        help="the block's parameters as drawn: an integer, or a number with k or M ("
        + ", ".join(COUNT_EXAMPLES)
        + f"); H is the width whose count comes nearest, within {TOLERANCE:.0%}",
    )
    # the worker picks the width (sized()); until then the narrowest stands in, which no budget refuses
    v["hidden_size"] = 1
    return Size(str(asked), sb.empty())


#: How the Size control asks for a reference block's width → what draws its widgets, sets
#: ``hidden_size`` in the values, and returns the :class:`Size` to pick a width for (or None).
SIZE_BY: dict[str, Callable[[Any, dict[str, Any]], Size | None]] = {
    BY_WIDTH: _by_width,
    BY_PARAMS: _by_params,
}


def _size(sb: Any, fixed: bool, v: dict[str, Any]) -> Size | None:
    """The width's widgets; a reference block's (``fixed``) asked as :data:`SIZE_BY` chooses."""
    by = BY_WIDTH
    if fixed:
        by = sb.radio(
            "Size",
            tuple(SIZE_BY),
            key=SIZE_KEY,
            horizontal=True,
            on_change=_keep_picked_width,
            help="the block's width H, or about N parameters: the width whose drawn model's count comes "
            f"nearest N (within {TOLERANCE:.0%}), so that designs side by side are the same size",
        )
    return SIZE_BY[by](sb, v)


def _keep_picked_width() -> None:
    """on_change callback: back to the width, H starts at the one the count picked (not drawn
    meanwhile, its widget's value is gone)."""
    if st.session_state.get(SIZE_KEY) == BY_WIDTH and PICKED_KEY in st.session_state:
        st.session_state[KEY("hidden_size")] = st.session_state[PICKED_KEY]


def sized(
    cfg: RunConfig, size: Size | None, width_for: Callable[[RunConfig, int], tuple[int, int]]
) -> RunConfig:
    """``cfg`` at the width the Size control asks for: as it is, or, for about N parameters,
    at the width ``width_for(cfg, N)`` picks (:func:`rnnviz.ui.calls.block_width`), said under
    the control as "H = 37 → 100,412 parameters (target 100,000, +0.4 %)".

    Raises:
        ConfigError: a count that is not one (:func:`~rnnviz.studies.sizing.target_count`), or
            none the block reaches within :data:`~rnnviz.studies.sizing.TOLERANCE`.
    """
    if size is None:
        return cfg
    target = target_count(size.params)
    width, count = width_for(cfg, target)
    st.session_state[PICKED_KEY] = width
    off = 100 * (count - target) / target
    size.note.caption(f"H = {width} → {count:,} parameters (target {target:,}, {off:+.1f} %)")
    return cfg.replace(hidden_size=width)


def _presets(sb: Any) -> None:
    """The teaching presets' buttons, in an expander drawn only while it is open: closed, as
    every page opens, its buttons and tooltips are neither built nor sent to the browser."""
    box = sb.expander("Teaching presets", expanded=False, key="presets_open", on_change="rerun")
    if not box.open:
        return
    with box:
        for title, preset in PRESETS.items():
            st.button(
                title,
                key=f"preset_{title}",
                help=preset.lesson,
                on_click=apply_preset,
                args=(title,),
                width="stretch",
            )
        st.button(
            "Reset to defaults",
            key="preset_reset",
            on_click=_set_widgets,
            args=(RunConfig(),),
            width="stretch",
        )


def limits_caption() -> None:
    """The sizes the dashboard accepts, under the sidebar."""
    hi = {name: f"{FIELD_SPECS[name].hi:g}" for name in ("seq_len", "hidden_size", "batch_size")}
    st.sidebar.caption(
        f"Limits: T ≤ {hi['seq_len']}, H ≤ {hi['hidden_size']}, B ≤ {hi['batch_size']}, "
        "and an estimated working set ≤ 4 GiB."
    )


def sync_url(cfg: RunConfig, size: Size | None = None) -> None:
    """Mirror the config, and a size asked as about N parameters, into the URL (only what
    changed, to avoid reruns); the parameters bound to widgets (:data:`UI_PARAMS`) are
    Streamlit's, left be."""
    want = config_to_params(cfg) | ({PARAMS_URL: size.params} if size is not None else {})
    for key in list(st.query_params):
        if key not in want and key not in UI_PARAMS:
            del st.query_params[key]
    for key, value in want.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value

"""The sidebar's *Configuration* section: its widgets (keyed ``cfg_<field>``, drawn from
:data:`~rnnviz.config.FIELD_SPECS`) ↔ :class:`RunConfig` ↔ the URL, which holds the
non-default fields so that a copied URL reopens the same view; the teaching presets; the limits."""

from __future__ import annotations

from typing import Any

import streamlit as st

from rnnviz.base.presets import PRESETS, config_from_params, config_to_params
from rnnviz.config import BLOCK_FIXES, FIELD_SPECS, RunConfig
from rnnviz.tables.cells import cell_names, cell_spec
from rnnviz.tables.strategies import cell_unavailable

KEY = "cfg_{}".format
UI_PARAMS = ("tab", "data")  # the Data choice keeps its own parameter (rnnviz.ui.sidebar.data)


def offer(key: str, options: Any, default: Any) -> bool:
    """Set the widget ``key`` to ``default`` unless it holds one of ``options``; whether it did."""
    if st.session_state.get(key) in options:
        return False
    st.session_state[key] = default
    return True


def _set_widgets(cfg: RunConfig) -> None:
    st.session_state[KEY("batched")] = cfg.batch_size is not None
    for name in FIELD_SPECS:
        value = getattr(cfg, name)
        if name == "batch_size" and value is None:  # unbatched: the disabled B keeps its value
            value = st.session_state.get(KEY("batch_size"), 4)
        st.session_state[KEY(name)] = value


def init_from_url() -> None:
    """On a session's first run, widgets start from the URL (bad values warn)."""
    if st.session_state.get("_initialised"):
        return
    cfg, warnings = config_from_params(dict(st.query_params), ignore=UI_PARAMS)
    _set_widgets(cfg)
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


def sidebar(strategies: tuple[str, ...], devices: tuple[str, ...], gpu_reason: str | None) -> dict[str, Any]:
    """Draw the sidebar; return the raw field values (validated by RunConfig later)."""
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
    v["hidden_size"] = _field("hidden_size")
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
    return v


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


def sync_url(cfg: RunConfig) -> None:
    """Mirror the config into the URL (only what changed, to avoid reruns); the parameters bound
    to widgets (:data:`UI_PARAMS`) are Streamlit's, left be."""
    want = config_to_params(cfg)
    for key in list(st.query_params):
        if key not in want and key not in UI_PARAMS:
            del st.query_params[key]
    for key, value in want.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value

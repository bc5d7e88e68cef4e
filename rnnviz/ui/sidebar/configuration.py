"""The sidebar's *Configuration* section: its widgets ↔ :class:`RunConfig` ↔ ``st.query_params``;
the teaching presets, and the limits.

Every widget is keyed ``cfg_<field>``; the URL holds the non-default fields, so a copied
URL reopens the same view. Session state is the only UI state.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from rnnviz.base.presets import PRESETS, config_from_params, config_to_params
from rnnviz.config import (
    FIELD_SPECS,
    ConfigError,
    RunConfig,
)
from rnnviz.tables.cells import cell_names, cell_spec
from rnnviz.tables.strategies import cell_unavailable

KEY = "cfg_{}".format
UI_PARAMS = ("tab", "data")  # the Data choice keeps its own parameter (rnnviz.ui.sidebar.data)


def _set_widgets(cfg: RunConfig) -> None:
    for name in FIELD_SPECS:
        value = getattr(cfg, name)
        if name == "batch_size":
            st.session_state[KEY("batched")] = value is not None
            value = value if value is not None else st.session_state.get(KEY("batch_size"), 4)
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
    st.session_state["_preset"] = title


def reset_defaults() -> None:
    """Set every config field's widget to :class:`~rnnviz.config.RunConfig`'s default and forget
    the chosen preset (the *Reset to defaults* button)."""
    _set_widgets(RunConfig())
    st.session_state["_preset"] = None


def _help(name: str) -> str:
    spec = FIELD_SPECS[name]
    return f"{spec.help}; {spec.allowed()}"


def _number(sb: Any, name: str, **options: Any) -> Any:
    """The number input of a :class:`~rnnviz.config.RunConfig` field: its label, bounds, step
    and help as :data:`~rnnviz.config.FIELD_SPECS` says (``options``: ``disabled``, ``format``)."""
    spec = FIELD_SPECS[name]
    as_kind = int if spec.kind is int else float
    lo, hi, step = (as_kind(x) for x in (spec.lo, spec.hi, spec.step))
    return sb.number_input(spec.title, lo, hi, key=KEY(name), step=step, help=_help(name), **options)


def _choice(sb: Any, name: str, choices: tuple[str, ...] | None = None, **options: Any) -> Any:
    """The menu of a :class:`~rnnviz.config.RunConfig` field: its label, its allowed values (or
    ``choices``, those offered here) and help as :data:`~rnnviz.config.FIELD_SPECS` says."""
    spec = FIELD_SPECS[name]
    options.setdefault("help", _help(name))
    return sb.selectbox(spec.title, spec.options() if choices is None else choices, key=KEY(name), **options)


def sidebar(strategies: tuple[str, ...], devices: tuple[str, ...], gpu_reason: str | None) -> dict[str, Any]:
    """Draw the sidebar; return the raw field values (validated by RunConfig later)."""
    sb = st.sidebar
    sb.header("Configuration")
    _presets(sb)
    v: dict[str, Any] = {}
    sb.subheader("Cell")
    names = cell_names()  # registered cells only: a URL can name one, never a module
    if st.session_state.get(KEY("cell")) not in names:
        st.session_state[KEY("cell")] = "simple"
    v["cell"] = _choice(sb, "cell", names, format_func=_cell_label, help=_cell_help(names))
    spec = cell_spec(v["cell"])
    takes = len(spec.activations) > 1
    v["activation"] = _choice(
        sb,
        "activation",
        disabled=not takes,
        help=_help("activation")
        + (f"; the {v['cell']} cell takes " + ", ".join(spec.activations) if takes else ""),
    )
    if v["activation"] not in spec.activations:
        v["activation"] = spec.activations[0]
    v["hidden_size"] = _number(sb, "hidden_size")
    v["recurrent_init"] = _choice(sb, "recurrent_init")
    v["recurrent_gain"] = _number(sb, "recurrent_gain", format="%.3f")
    has_bias = spec.forget_bias is not None
    v["forget_bias"] = _number(sb, "forget_bias", disabled=not has_bias)
    if not has_bias:
        v["forget_bias"] = 0.0
    sb.subheader("Carry")
    v["carry_init"] = _choice(sb, "carry_init")
    v["carry_scale"] = _number(sb, "carry_scale", disabled=v["carry_init"] == "zeros")
    sb.subheader("Input")
    v["seq_len"] = _number(sb, "seq_len")
    v["input_size"] = _number(sb, "input_size")
    batched = sb.toggle(
        "Batched input [B, T, I]", key=KEY("batched"), help="off: one unbatched sequence [T, I]"
    )
    b = _number(sb, "batch_size", disabled=not batched)
    v["batch_size"] = b if batched else None
    v["inputs"] = _choice(sb, "inputs")
    v["input_scale"] = _number(sb, "input_scale")
    v["dtype"] = _choice(sb, "dtype")
    sb.subheader("Gradient")
    v["loss"] = _choice(sb, "loss")
    hidden = {
        name: cell_unavailable(name, spec) for name in strategies
    }  # the JAX-wide reasons were applied by the worker
    hidden = {name: why for name, why in hidden.items() if why}
    strategies = tuple(name for name in strategies if name not in hidden)
    for name, why in hidden.items():
        sb.caption(f"Strategy '{name}' is hidden: the {v['cell']} cell cannot use it — {why}.")
    if st.session_state.get(KEY("strategy")) not in strategies:
        st.session_state[KEY("strategy")] = "accumulate"
    v["strategy"] = _choice(sb, "strategy", strategies)
    if st.session_state.get(KEY("device")) not in devices:
        sb.warning(
            f"device={st.session_state.get(KEY('device'))!r} is not available: no GPU is visible to JAX "
            "here; using 'auto'."
        )
        st.session_state[KEY("device")] = "auto"
    v["device"] = _choice(sb, "device", devices)
    if gpu_reason:
        sb.caption(f"GPU unavailable: {gpu_reason}")
    v["seed"] = _number(sb, "seed")
    return v


def _presets(sb: Any) -> None:
    """The teaching presets' buttons, in an expander drawn only while it is open: closed (as
    every page opens), its 17 buttons and their tooltips are neither built nor sent, and a
    fresh browser has that much less to draw before the first chart."""
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
        st.button("Reset to defaults", key="preset_reset", on_click=reset_defaults, width="stretch")


def _cell_label(name: str) -> str:
    return f"{name} · {cell_spec(name).group}"


def _cell_help(names: tuple[str, ...]) -> str:
    lines = [f"{n} ({cell_spec(n).group}): {cell_spec(n).description}" for n in names]
    return (
        "Registered cells (plugins register through the rnnviz.engine.cells entry point):\n\n"
        + "\n\n".join(lines)
    )


def limits_caption() -> None:
    """The sizes the dashboard accepts, under the sidebar."""
    st.sidebar.caption(
        f"Limits: T ≤ {FIELD_SPECS['seq_len'].hi:g}, H ≤ {FIELD_SPECS['hidden_size'].hi:g}, B ≤ "
        f"{FIELD_SPECS['batch_size'].hi:g}, "
        "and an estimated working set ≤ 4 GiB."
    )


def config_from_widgets(values: dict[str, Any]) -> RunConfig:
    """Raises :class:`ConfigError` with a plain-words message."""
    return RunConfig.from_mapping(values)


def sync_url(cfg: RunConfig) -> None:
    """Mirror the config into the URL (only when it changed, to avoid reruns)."""
    want = config_to_params(cfg)
    # UI_PARAMS (the active tab) are bound to widgets: Streamlit owns them, leave them be.
    for key in list(st.query_params):
        if key not in want and key not in UI_PARAMS:
            del st.query_params[key]
    for key, value in want.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


__all__ = [
    "ConfigError",
    "apply_preset",
    "config_from_widgets",
    "init_from_url",
    "limits_caption",
    "sidebar",
    "sync_url",
]

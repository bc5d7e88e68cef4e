"""Teaching presets and the URL ↔ config mapping (pure: no Streamlit here)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

from rnnviz.config import FIELD_SPECS, BudgetError, ConfigError, RunConfig, check_field, coerce, fit_to_budget


class Preset(NamedTuple):
    """One teaching preset: a config to load and the lesson it shows.

    Attributes:
        title: the name shown in the list of presets (and the key of :data:`PRESETS`).
        lesson: what to look at, one or two sentences.
        changes: the :class:`~rnnviz.config.RunConfig` fields it sets (the others keep their defaults).
        training: the Training tab's settings (``train_<name>`` widgets) when the lesson trains, else None.
    """

    title: str
    lesson: str  # what to look at, one or two sentences
    changes: dict[str, Any]
    training: dict[str, Any] | None = (
        None  # the Training tab's settings (train_<name> widgets), when the lesson trains
    )

    def config(self) -> RunConfig:
        """The validated :class:`~rnnviz.config.RunConfig` of ``changes`` (raises ConfigError if invalid)."""
        return RunConfig(**self.changes)


PRESETS: dict[str, Preset] = {
    p.title: p
    for p in (
        Preset(
            "Vanishing: tanh RNN, gain 0.8",
            "σ₁·γ = 0.8 < 1: every step back multiplies the gradient by at most 0.8, so after 100 steps it "
            "is ~10⁻¹⁰ of its size at T.",
            dict(cell="simple", activation="tanh", recurrent_gain=0.8, seq_len=100),
        ),
        Preset(
            "Exploding: linear RNN, gain 1.2",
            "With the identity activation and W_h = 1.2·Q, ‖∂L/∂h_t‖ = 1.2^{T−t}·‖h_T‖ exactly: a straight "
            "line of slope log₁₀1.2 on the log axis.",
            dict(cell="simple", activation="identity", recurrent_gain=1.2, seq_len=100),
        ),
        Preset(
            "Edge: linear RNN, gain 1.0",
            "An orthogonal W_h preserves norms: the gradient neither vanishes nor explodes.",
            dict(cell="simple", activation="identity", recurrent_gain=1.0, seq_len=100),
        ),
        Preset(
            "LSTM with forget bias 1",
            "A forget gate near 1 lets ∂L/∂c flow back almost unchanged (c_{t} = f⊙c_{t−1} + …): compare "
            "with forget bias 0.",
            dict(cell="lstm", forget_bias=1.0, seq_len=100),
        ),
        Preset(
            "LSTM with forget bias 0",
            "The baseline for the forget-bias preset: f ≈ σ(0) = 0.5 halves the cell gradient per step.",
            dict(cell="lstm", forget_bias=0.0, seq_len=100),
        ),
        Preset(
            "GRU vs LSTM at T=200",
            "A GRU over 200 steps; pin it in Compare, then switch the cell to lstm to overlay both.",
            dict(cell="gru", seq_len=200),
        ),
        Preset(
            "bf16 underflow",
            "Gain 0.5 over 200 steps needs 10⁻⁶⁰: far below bfloat16's smallest number, so the early "
            "gradients are exactly 0.",
            dict(cell="simple", activation="tanh", recurrent_gain=0.5, seq_len=200, dtype="bfloat16"),
        ),
        Preset(
            "float16 underflow",
            "float16 stops at 6·10⁻⁸: a tanh RNN at gain 0.8 reaches that within 100 steps and the "
            "gradient becomes exactly 0.",
            dict(cell="simple", activation="tanh", recurrent_gain=0.8, seq_len=100, dtype="float16"),
        ),
        Preset(
            "Linear recurrence: LRU, T=1000",
            "A diagonal linear recurrence with |λ| on the ring [0.9, 0.999]: each unit's gradient decays "
            "by exactly |λ_j| per step, "
            "so the slowest units carry the gradient across all 1000 steps (dashed: the closed form).",
            dict(cell="lru", seq_len=1000, hidden_size=64),
        ),
        *(
            Preset(
                f"Lyapunov: {name} (gain {g})",
                "A random tanh network (W_h normal with variance g²/H, H = 128) running on its own (input "
                f"scale 0): {what} "
                "Open the Jacobians tab for the spectrum and the Phase diagram tab for λ₁ over the gain.",
                dict(
                    cell="simple",
                    activation="tanh",
                    hidden_size=128,
                    seq_len=300,
                    recurrent_init="normal",
                    recurrent_gain=g,
                    carry_init="normal",
                    input_scale=0.0,
                ),
            )
            for name, g, what in (
                (
                    "ordered",
                    0.8,
                    "λ₁ ≈ −0.1 < 0: every perturbation and every gradient shrinks by about e^λ₁ per step.",
                ),
                (
                    "edge of chaos",
                    1.0,
                    "λ₁ ≈ 0: perturbations neither grow nor shrink on average, and neither does the "
                    "gradient.",
                ),
                (
                    "chaotic",
                    2.0,
                    "λ₁ ≈ +0.12 > 0: nearby trajectories separate and the gradient grows going back in time.",
                ),
            )
        ),
        Preset(
            "Training: LSTM vs tanh RNN on adding, T=100",
            "Train this LSTM (forget bias 1) on the adding problem, pin it, then switch the cell to "
            "simple/tanh and train again: "
            "the LSTM gets below 10 % of the baseline; the tanh RNN's gradient from the marked steps "
            "vanishes and it stays near 1/6.",
            dict(cell="lstm", forget_bias=1.0, hidden_size=64, input_size=2, seq_len=100),
            dict(
                task="adding",
                steps=1500,
                optimizer="adam",
                lr=1e-3,
                clip_on=True,
                clip=1.0,
                batch=64,
                log_every=100,
            ),
        ),
        Preset(
            "Training: IRNN learns adding",
            "ReLU with an identity recurrent init (Le, Jaitly & Hinton 2015): at init every step passes "
            "the gradient back "
            "unchanged where units are active, so the marked inputs stay within reach.",
            dict(
                cell="simple",
                activation="relu",
                recurrent_init="identity",
                hidden_size=64,
                input_size=2,
                seq_len=100,
            ),
            dict(
                task="adding",
                steps=1500,
                optimizer="adam",
                lr=1e-3,
                clip_on=True,
                clip=1.0,
                batch=64,
                log_every=100,
            ),
        ),
        Preset(
            "Training: clipping rescues an exploding RNN",
            "A linear RNN at gain 1.3 multiplies gradients by 1.3 per step back: without clipping (toggle "
            "it off) the first "
            "updates blow the weights up and the loss turns NaN; with clipping at 1 every step moves a "
            "bounded distance.",
            dict(
                cell="simple",
                activation="identity",
                recurrent_gain=1.3,
                hidden_size=32,
                input_size=2,
                seq_len=50,
            ),
            dict(
                task="adding",
                steps=1000,
                optimizer="sgd",
                lr=0.01,
                clip_on=True,
                clip=1.0,
                batch=64,
                log_every=50,
            ),
        ),
        Preset(
            "Per-step tangents: LSTM",
            "One tangent per step shows which steps contribute to ∂L/∂W; the accumulator only has their sum.",
            dict(cell="lstm", seq_len=100, strategy="per_step"),
        ),
    )
}


class PagePreset(NamedTuple):
    """One teaching page (``rnnviz explorable --preset NAME``): a base config and the grid of
    fields its lesson is about, precomputed so the page's sliders and menus only look up.

    Attributes:
        name: the short name on the command line (``vanishing``).
        title: the page's heading.
        lesson: what to try, one or two sentences.
        changes: the base :class:`~rnnviz.config.RunConfig` fields it sets.
        over: ``{field: values}``, the page's controls in order (each combination is computed).
        shows: the dashboard presets (:data:`PRESETS`) whose lesson this page is, for the
            Learn tab's "page for your class".
    """

    name: str
    title: str
    lesson: str
    changes: dict[str, Any]
    over: dict[str, tuple[Any, ...]]
    shows: tuple[str, ...] = ()

    def config(self) -> RunConfig:
        """The validated base configuration (raises ConfigError if invalid)."""
        return RunConfig(**self.changes)


def _steps(lo: float, hi: float, step: float) -> tuple[float, ...]:
    """``lo, lo + step, …, hi`` rounded to 4 decimals (no 0.30000000000000004 on a slider)."""
    return tuple(round(lo + i * step, 4) for i in range(int(round((hi - lo) / step)) + 1))


PAGES: dict[str, PagePreset] = {
    p.name: p
    for p in (
        PagePreset(
            "vanishing",
            "Vanishing gradients in a tanh RNN",
            "Move the gain below 1 and lengthen the sequence: every step back multiplies the gradient by "
            "at most σ₁·γ, so it falls along (and under) the dashed Pascanu bound.",
            dict(cell="simple", activation="tanh"),
            dict(recurrent_gain=_steps(0.5, 1.5, 0.1), seq_len=(25, 50, 100, 200), seed=(0, 1, 2)),
            ("Vanishing: tanh RNN, gain 0.8",),
        ),
        PagePreset(
            "exploding",
            "Exploding gradients in a linear RNN",
            "With the identity activation and W_h = g·Q the gradient is g^{T−t}·‖h_T‖ exactly: a straight "
            "line whose slope is log₁₀ g. Above g = 1 it grows going back in time.",
            dict(cell="simple", activation="identity"),
            dict(recurrent_gain=_steps(0.8, 1.3, 0.05), seq_len=(25, 50, 100, 200), seed=(0, 1, 2)),
            ("Exploding: linear RNN, gain 1.2",),
        ),
        PagePreset(
            "edge",
            "The edge: gain 1 and the activation",
            "An orthogonal W_h at gain 1 keeps norms: the linear RNN neither vanishes nor explodes. tanh and "
            "ReLU shrink the gradient wherever they saturate or switch off, so their edge lies above 1.",
            dict(cell="simple", seq_len=100),
            dict(
                activation=("identity", "tanh", "relu"),
                recurrent_gain=_steps(0.9, 1.1, 0.025),
                seed=(0, 1, 2),
            ),
            ("Edge: linear RNN, gain 1.0",),
        ),
        PagePreset(
            "forget-bias",
            "The LSTM's forget bias",
            "The cell state's gradient is multiplied by the forget gate f = σ(… + b_f) at every step back: "
            "raise the forget bias and it reaches across the whole sequence.",
            dict(cell="lstm"),
            dict(forget_bias=(-2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0), seq_len=(50, 100, 200), seed=(0, 1, 2)),
            ("LSTM with forget bias 1", "LSTM with forget bias 0"),
        ),
        PagePreset(
            "lru",
            "A linear recurrence against gated cells over long sequences",
            "The LRU's units decay by exactly |λ_j| per step (dashed: the closed form), so its slowest "
            "units carry the gradient across 1000 steps; compare the LSTM and the GRU at the same length.",
            dict(hidden_size=32),
            dict(cell=("lru", "lstm", "gru"), seq_len=(100, 300, 1000), seed=(0, 1, 2)),
            ("Linear recurrence: LRU, T=1000", "GRU vs LSTM at T=200"),
        ),
        PagePreset(
            "underflow",
            "Where low precision runs out",
            "The magnitudes drawn are exact; the dotted line is the smallest normal number of the dtype. "
            "Below it bfloat16 and float16 hold 0: their early gradients are lost, not small.",
            dict(cell="simple", activation="tanh"),
            dict(
                dtype=("float32", "bfloat16", "float16"),
                recurrent_gain=_steps(0.5, 1.0, 0.1),
                seq_len=(50, 100, 200),
            ),
            ("bf16 underflow", "float16 underflow"),
        ),
        PagePreset(
            "chaos",
            "Order, the edge of chaos, and chaos",
            "A random tanh network (W_h normal, variance g²/H) running on its own: λ₁ < 0 below g ≈ 1, the "
            "gradient shrinks by about e^λ₁ per step; above it λ₁ > 0 and the gradient grows back in time.",
            dict(
                cell="simple",
                activation="tanh",
                hidden_size=128,
                seq_len=300,
                recurrent_init="normal",
                carry_init="normal",
                input_scale=0.0,
            ),
            dict(recurrent_gain=_steps(0.6, 2.0, 0.2), seed=(0, 1, 2)),
            tuple(p for p in PRESETS if p.startswith("Lyapunov:")),
        ),
        PagePreset(
            "carry-init",
            "Where the carry starts",
            "The initial carry (zeros, or drawn at a scale) changes the first steps of the trajectory and "
            "how saturated the tanh units are, and with it how much gradient gets through.",
            dict(cell="simple", activation="tanh", seq_len=100),
            dict(
                carry_init=("zeros", "normal", "uniform"),
                carry_scale=(0.5, 1.0, 2.0, 4.0),
                recurrent_gain=(0.8, 1.0, 1.2),
            ),
        ),
    )
}


def page_for(preset_title: str) -> PagePreset | None:
    """The teaching page whose lesson the dashboard preset ``preset_title`` is, if any."""
    return next((p for p in PAGES.values() if preset_title in p.shows), None)


def config_to_params(cfg: RunConfig) -> dict[str, str]:
    """URL query params for ``cfg``: only fields that differ from the defaults."""
    defaults = RunConfig()
    out = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if value != getattr(defaults, f.name):
            out[f.name] = "none" if value is None else str(value)
    return out


def config_from_params(
    params: Mapping[str, Any], *, ignore: tuple[str, ...] = ()
) -> tuple[RunConfig, list[str]]:
    """Parse URL query params into a valid config; every bad value falls back to its
    default with a warning, never an exception. ``ignore`` names params owned by the UI."""
    warnings: list[str] = []
    good: dict[str, Any] = {}
    for key, raw in params.items():
        if key in ignore:
            continue
        value = raw[-1] if isinstance(raw, (list, tuple)) and raw else raw
        if key not in FIELD_SPECS:
            warnings.append(f"ignored unknown URL parameter {key!r}")
            continue
        try:
            good[key] = coerce(key, value)
            check_field(FIELD_SPECS[key], good[key])
        except ConfigError as err:
            good.pop(key, None)
            warnings.append(f"URL: {err} Using the default.")
    for _ in range(len(good) + 1):  # cross-field conflicts: drop the named field, retry
        try:
            cfg, changes = fit_to_budget(good)
        except ConfigError as err:
            warnings.append(f"URL: {err} Using the default.")
            if err.field not in good:
                break
            good.pop(err.field)
            continue
        if changes:
            warnings.append(_over_budget_message(good, changes))
        return cfg, warnings
    return RunConfig(), warnings


def _over_budget_message(linked: Mapping[str, Any], changes: Mapping[str, tuple[Any, Any]]) -> str:
    """One message for a link that is over budget as a whole: what it asked, why it does
    not fit, and exactly which fields were shrunk (everything else is kept)."""
    asked = ", ".join(f"{k}={v}" for k, v in linked.items())
    try:
        RunConfig(**linked)
        why = "it is over the budget"
    except BudgetError as err:
        why = err.allowed.split(";")[0].replace("this configuration ", "it ")
    shrunk = ", ".join(f"{k} {a} → {b}" for k, (a, b) in changes.items())
    return (
        f"This link asks for {asked}, but {why}. Shown with {shrunk} (the largest that fits); every "
        "other field is as linked."
    )

"""The dashboard's views: each takes an Analysis (or config) and draws with charts.py.

Computation goes through the cached functions passed in from app.py; nothing here
touches JAX directly.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import streamlit as st

from rnnviz import charts, frames
from rnnviz.analysis import Analysis
from rnnviz.cells import cell_spec
from rnnviz.cells.theory import simple_cell_theory
from rnnviz.config import FIELD_SPECS, MAX_SEQ_LEN, RunConfig, max_seq_len_within_budget
from rnnviz.diagnostics import verdict
from rnnviz.fits import decay_fit, regime
from rnnviz.presets import PRESETS
from rnnviz.tables.strategies import strategy_rules
from rnnviz.text import pow10_text
from rnnviz.train import training_verdict
from rnnviz.ui import budget
from rnnviz.ui.state import apply_preset


def cost_of(a: Analysis) -> budget.Cost:
    """What the analysis of ``a.config`` cost here: the unit every view's budget counts in."""
    return budget.Cost(a.timing.run_s, a.timing.compile_s)


def within_budget(plan: budget.Plan, key: str) -> bool:
    """Show the plan's note; True when the view may compute (it fits, or the user asked for
    the over-budget version with the button, which names the estimate)."""
    if plan.note:
        st.info(plan.note)
    if plan.fits:
        return True
    return st.button(f"Run anyway (≈ {plan.estimate_s:.0f} s)", key=f"anyway_{key}")


def _csv_button(df: pd.DataFrame, name: str, key: str, label: str = "Download CSV") -> None:
    keep_index = not isinstance(df.index, pd.RangeIndex)  # e.g. a units × time matrix
    st.download_button(
        label,
        df.to_csv(index=keep_index).encode(),
        file_name=name,
        mime="text/csv",
        key=key,
        on_click="ignore",
    )


def header(a: Analysis) -> None:
    v = verdict(a)
    text = f"**Verdict:** {v.text}"
    if v.kind == "overflow":
        st.warning(text)
    else:
        st.markdown(text)
    t = a.timing
    cols = st.columns(5)
    cols[0].metric("loss", f"{a.loss:.4g}")
    cols[1].metric(
        "‖∂L/∂carry₀‖",
        pow10_text(float(a.log10_grad_norms[0])),
        help="exact magnitude ("
        + ("float32 held it" if a.log10_source == "float32" else "log-magnitude reverse pass")
        + f"); float32 value {a.grad_norms[0]:.3e}",
    )
    cols[2].metric(
        "compile",
        f"{t.compile_s:.2f} s",
        help="compiling this shape, once; cached afterwards" + (" (reused now)" if t.cache_hit else ""),
    )
    cols[3].metric(
        f"run (median of {t.repeats})",
        f"{t.run_s * 1e3:.2f} ms",
        help=f"median of {t.repeats} run{'s' if t.repeats != 1 else ''} on {t.device} with the "
        f"'{a.config.strategy}' strategy ({strategy_rules(a.config.strategy).summary}); the dashboard times runs until "
        "about 0.3 s is spent (at least one, at most five) and draws the last one",
    )
    cols[4].metric(
        "peak memory",
        f"{t.peak_bytes / 2**20:.1f} MB",
        help="temp + arguments + outputs of the compiled reverse pass",
    )


def gradients_view(a: Analysis, overlays: list[Analysis]) -> None:
    label = frames.config_label(a)
    df = pd.concat(
        [frames.gradient_long_frame(a, label)] + [frames.gradient_long_frame(o) for o in overlays],
        ignore_index=True,
    )
    bound = frames.bound_frame(a) if not overlays else None
    st.plotly_chart(charts.gradient_figure(df, bound), key="chart_gradients")
    theory = simple_cell_theory(a)
    if theory is not None:
        cond = (
            "< 1: vanishing is guaranteed (sufficient condition)"
            if theory.product < 1
            else "≥ 1: exploding is possible (necessary condition met)"
        )
        st.markdown(
            f"Theory (Pascanu et al., 2013): σ₁(W_h) = **{theory.sigma1:.4f}**, γ = max|φ′| = {theory.gamma:g}, so σ₁·γ = **{theory.product:.4f}** {cond}."
        )
        if theory.bound is None:
            st.caption(
                "The bound curve is drawn for loss = last only (with loss = all each step also feeds the loss directly)."
            )
    spec = cell_spec(a.config.cell)
    others = [c for c in spec.components if c != spec.output]
    if others and a.config.loss == "last":
        names = ", ".join(f"∂L/∂{c}_T" for c in others)
        st.caption(
            f"{names} is exactly 0 with loss = last (a true zero): the carry is taken as handed on, holding "
            f"{spec.output}_T fixed; the chart leaves it out."
        )
    elif bound is not None and a.config.cell != "simple":
        st.caption(
            f"Closed form ({spec.description.split(';')[0]}): the step Jacobian is diagonal, so the dashed curve is exact; "
            "it should lie on the measured total."
        )
    true_zero = np.isneginf(a.log10_grad_norms)
    under = (a.grad_norms == 0) & np.isfinite(a.log10_grad_norms)
    if under.any():
        st.caption(
            f"At {int(under.sum())} steps the {a.config.dtype} gradient underflows to 0 (t ≤ {int(np.flatnonzero(under).max())}); "
            "the curve shows its exact magnitude from the log-magnitude reverse pass (δ rescaled by powers of two each step)."
        )
    if true_zero.any():
        st.caption(
            f"{int(true_zero.sum())} steps have a gradient of exactly 0 (no dependence of the loss on that carry): gaps in the curve."
        )
    conn = pd.concat(
        [frames.input_grad_frame(a, label)] + [frames.input_grad_frame(o) for o in overlays],
        ignore_index=True,
    )
    st.plotly_chart(
        charts.line_figure(
            conn,
            "Connectivity ‖∂L/∂x_t‖: how much each input affects the loss",
            "‖∂L/∂x_t‖ (log)",
            log_y=True,
        ),
        key="chart_connectivity",
    )
    _csv_button(
        frames.timestep_frame(a), "rnnviz_timesteps.csv", "csv_timesteps", "Download per-timestep table (CSV)"
    )


def carry_view(a: Analysis, overlays: list[Analysis]) -> None:
    norms = pd.concat(
        [frames.carry_norm_frame(a)] + [frames.carry_norm_frame(o) for o in overlays], ignore_index=True
    )
    spans = charts.decades(norms["value"].tolist())
    st.plotly_chart(
        charts.line_figure(norms, "Carry norm over time", "‖carry_t‖", log_y=spans > 2),
        key="chart_carry_norms",
    )
    comps = a.config.carry_components
    c1, c2 = st.columns(2)
    comp = c1.radio("Component", comps, index=len(comps) - 1, horizontal=True, key="carry_component")
    n_ex = a.config.batch_size or 1
    example = c2.number_input("Example", 0, n_ex - 1, 0, key="carry_example", disabled=n_ex == 1)
    heat = frames.carry_heatmap_frame(a, comp, int(min(example, n_ex - 1)))
    st.plotly_chart(
        charts.heatmap_figure(heat, f"{comp}_t: units × time (example {example})", colorbar=comp),
        key="chart_carry_heatmap",
    )
    proj, explained = frames.projection_frame(a, component=comp)
    st.plotly_chart(
        charts.projection_figure(
            proj,
            f"Path of {comp}_t in its top two principal components ({explained[0]:.0%} + {explained[1]:.0%} of variance)",
        ),
        key="chart_projection",
    )
    gates = frames.gates_frame(a)
    if not gates.empty:
        st.plotly_chart(
            charts.line_figure(gates, "Mean gate activation over time", "mean activation"), key="chart_gates"
        )
        if "f" in cell_spec(a.config.cell).gates:
            f = gates[gates["series"] == "gate f"]["value"]
            st.caption(
                f"Forget gate mean {f.mean():.3f} (range {f.min():.3f}–{f.max():.3f}); a gate near 1 lets ∂L/∂c pass almost unchanged."
            )
    _csv_button(norms, "rnnviz_carry_norms.csv", "csv_carry")


def strategies_view(
    a: Analysis,
    compare: Callable[[RunConfig, int], pd.DataFrame],
    by_step: Callable[[RunConfig], Analysis],
    scaling: Callable[[RunConfig, tuple[int, ...]], pd.DataFrame],
    available: tuple[str, ...],
    hidden: dict[str, str],
) -> None:
    st.markdown(
        "Every strategy gives the same ∂L/∂W; they differ in memory and speed. "
        + " ".join(f"**{name}**: {strategy_rules(name).summary}." for name in available)
    )
    for name, why in hidden.items():
        st.caption(f"{name} is not offered: {why}.")
    plan = budget.strategies_plan(cost_of(a), len(available))
    if not within_budget(plan, "strategies"):
        return
    df = compare(a.config, plan.settings["repeats"])
    missing = [s for s in available if s not in set(df["strategy"])]
    if missing:
        st.info(f"Left out, over the memory or FLOP budget for this configuration: {', '.join(missing)}.")
    show = df.assign(run_ms=df["run_s"] * 1e3, peak_MB=df["peak_bytes"] / 2**20)
    st.plotly_chart(
        charts.bar_panels(
            show,
            "strategy",
            [("compile_s", "compile (s)"), ("run_ms", "run, median (ms)"), ("peak_MB", "peak memory (MB)")],
            "Cost of each strategy (full analysis)",
            color="strategy",
        ),
        key="chart_strategy_bars",
    )
    st.dataframe(
        show[["strategy", "compile_s", "run_ms", "peak_MB", "max_abs_diff", "rel_diff", "device"]],
        hide_index=True,
        key="table_strategies",
    )
    worst = float(df["rel_diff"].max())
    st.caption(
        f"Largest relative difference of ∂L/∂W from the accumulator: {worst:.2e}"
        + (" — equal to float rounding." if worst < 1e-4 else "")
    )
    _csv_button(df, "rnnviz_strategies.csv", "csv_strategies")
    source = next((name for name in ("fused", "per_step") if name in available and name not in missing), None)
    if source is None:
        st.info(
            "The per-step contribution heatmap needs the fused or per-step strategy within the budget: shorten T or H to see it."
        )
        return
    contrib = frames.contributions_frame(by_step(a.config.replace(strategy=source)))
    how = (
        "fused: from the stored gate cotangents, ‖Σ_b h_{t−1,b} dz_{t,b}ᵀ‖ by the O(T·B²) Gram identity"
        if source == "fused"
        else "per-step tangents: one [T, …] copy of the parameter gradient"
    )
    st.plotly_chart(
        charts.heatmap_figure(
            contrib,
            f"Per-step contributions to ∂L/∂W ({how})",
            y_title="parameter group",
            colorbar="‖contribution‖",
            log10=True,
        ),
        key="chart_contributions",
    )
    st.subheader("Scaling with sequence length")
    top = min(MAX_SEQ_LEN, max_seq_len_within_budget(a.config, strategy="per_step"))
    lens = tuple(t for t in (25, 50, 100, 200, 400, 800) if t <= top)
    if st.button(f"Measure T ∈ {list(lens)} for every strategy", key="run_scaling"):
        st.session_state["scaling_for"] = a.config.replace(seed=0)
    if st.session_state.get("scaling_for") == a.config.replace(seed=0):
        sc = scaling(a.config, lens)
        st.plotly_chart(charts.scaling_figure(sc), key="chart_scaling")
        _csv_button(sc, "rnnviz_scaling.csv", "csv_scaling")
    else:
        st.caption("One compile per length and strategy (a few seconds); results are cached.")


def compare_view(
    a: Analysis,
    pins: list[Analysis],
    overlays: list[Analysis],
    on_pin: Callable[[], None],
    on_remove: Callable[[int], None],
    on_clear: Callable[[], None],
) -> None:
    st.markdown("Pin runs to overlay them on the Gradients and Carry charts; change any setting, pin again.")
    c1, c2 = st.columns(2)
    c1.button("📌 Pin current run", key="pin", on_click=on_pin, type="primary")
    c2.button("Clear all pins", key="clear_pins", on_click=on_clear, disabled=not pins)
    if not pins:
        st.info("No pinned runs yet.")
        return
    for i, p in enumerate(pins):
        cols = st.columns([6, 1])
        current = " (current)" if p.config == a.config else ""
        cols[0].markdown(f"`{frames.config_label(p)}`{current} — {verdict(p).text}")
        cols[1].button("Remove", key=f"unpin_{i}", on_click=on_remove, args=(i,))
    runs = [a] + overlays
    df = pd.concat([frames.gradient_long_frame(r) for r in runs], ignore_index=True)
    df = df[~df["series"].str.startswith("example")]
    st.plotly_chart(
        charts.gradient_figure(df[df["series"] == "total"], title="‖∂L/∂carry_t‖: current and pinned"),
        key="chart_compare_gradients",
    )
    table = pd.concat(
        [frames.timestep_frame(r).assign(run=frames.config_label(r)) for r in runs], ignore_index=True
    )
    _csv_button(table, "rnnviz_compare.csv", "csv_compare", "Download all runs (CSV)")


def devices_view(
    live_runs: Callable[[int], pd.DataFrame],
    n_runs: int,
    cost: budget.Cost,
    recorded: pd.DataFrame,
    skipped: list[tuple[str, str]],
    gpu_reason: str | None,
) -> None:
    """Live runs (``live_runs(repeats)``: ``n_runs`` device × strategy pairs, sized to the
    budget from the analysis's ``cost``) next to the recorded ones."""
    st.markdown(
        "Live runs of the current configuration on every device JAX sees, next to recorded runs (shipped in `rnnviz/data/runs/`, plus `RNNVIZ_RUNS_DIR` when set)."
    )
    if gpu_reason:
        st.info(f"No GPU here ({gpu_reason}); the GPU numbers below, if any, are recorded runs.")
    plan = budget.devices_plan(cost, n_runs)
    if within_budget(plan, "devices"):
        _live_runs(live_runs(plan.settings["repeats"]))
    _recorded_runs(recorded, skipped)


def _live_runs(live: pd.DataFrame) -> None:
    live = live.assign(
        run_ms=live["run_s"] * 1e3, device=live["device_kind"] + " · " + live["device_name"] + " (live)"
    )
    st.plotly_chart(
        charts.bar_panels(
            live,
            "device",
            [("compile_s", "compile (s)"), ("run_ms", "run (ms)")],
            "This configuration, live",
            color="strategy",
        ),
        key="chart_devices_live",
    )
    st.dataframe(live, hide_index=True, key="table_devices_live")


def _recorded_runs(recorded: pd.DataFrame, skipped: list[tuple[str, str]]) -> None:
    if skipped:
        st.warning(
            f"Skipped {len(skipped)} unreadable record lines: "
            + "; ".join(f"{w}: {r}" for w, r in skipped[:5])
        )
    if recorded.empty:
        st.info("No recorded runs (shipped or in RNNVIZ_RUNS_DIR).")
        return
    st.subheader("Recorded runs")
    st.caption("Sources: " + ", ".join(sorted(set(recorded["device"] + " — " + recorded["source"]))))
    suites = sorted(set(recorded["suite"]))
    suite = st.selectbox(
        "Suite", suites, index=suites.index("devices") if "devices" in suites else 0, key="devices_suite"
    )
    rec = recorded[(recorded["suite"] == suite) & (recorded["strategy"] != "plain_grad")]
    for over in ("seq_len", "hidden_size"):
        sp = frames.speedup_frame(rec, over)
        if not sp.empty:
            st.plotly_chart(
                charts.speedup_figure(sp, over, f"GPU speed-up over CPU vs {over} (above 1: GPU faster)"),
                key=f"chart_speedup_{over}",
            )
    measure = st.radio(
        "Measure",
        ["analyze", "grad"],
        horizontal=True,
        key="devices_measure",
        help="analyze: the full analysis (accumulator); grad: the parameter gradient alone",
    )
    strategy = (
        st.selectbox("Strategy", sorted(set(rec["strategy"])), key="devices_strategy")
        if measure == "grad"
        else "accumulate"
    )
    sel = rec[(rec["measure"] == measure) & (rec["strategy"] == strategy)]
    agg = sel.groupby(["device", "hidden_size", "batch_size", "seq_len"], as_index=False, dropna=False)[
        "run_s"
    ].median()
    lines = pd.DataFrame(
        {
            "seq_len": agg["seq_len"],
            "value": agg["run_s"] * 1e3,
            "series": agg["device"]
            + " · H="
            + agg["hidden_size"].astype(str)
            + " B="
            + agg["batch_size"].astype(str),
        }
    )
    st.plotly_chart(
        charts.line_figure(
            lines,
            f"Recorded run time vs sequence length ({measure}, {strategy})",
            "run, median (ms, log)",
            log_y=True,
            x="seq_len",
            x_title="seq_len T",
        ),
        key="chart_devices_recorded",
    )
    _csv_button(recorded, "rnnviz_recorded_runs.csv", "csv_recorded")


LEARN = [
    (
        "Backpropagation through time",
        "An RNN applies the same step to every input: carry_t = f(carry_{t−1}, x_t; W). The loss depends on an early carry only "
        "through all later steps, so the chain rule multiplies one Jacobian per step:",
        r"\frac{\partial L}{\partial h_t} = \sum_{s \ge t} \Big(\prod_{k=t+1}^{s} \frac{\partial h_k}{\partial h_{k-1}}\Big)^{\!\top} \frac{\partial L_s}{\partial h_s},\qquad \frac{\partial h_k}{\partial h_{k-1}} = \operatorname{diag}\big(\varphi'(a_k)\big)\, W_h^{\top}",
        None,
    ),
    (
        "Why gradients vanish",
        "Each factor has norm at most σ₁(W_h)·γ, with γ = max|φ′| (1 for tanh). If σ₁·γ < 1 the product shrinks geometrically: "
        "the gradient from step T reaches step t scaled by at most (σ₁γ)^{T−t} (Pascanu et al., 2013).",
        r"\Big\|\frac{\partial L}{\partial h_t}\Big\| \le (\sigma_1 \gamma)^{T-t}\, \Big\|\frac{\partial L}{\partial h_T}\Big\|",
        "Vanishing: tanh RNN, gain 0.8",
    ),
    (
        "Why gradients explode",
        "If the Jacobians stretch (σ₁·γ > 1 along the path) the product grows geometrically. A linear RNN with W_h = g·Q "
        "(Q orthogonal) is exact: ‖∂L/∂h_t‖ = g^{T−t}‖∂L/∂h_T‖.",
        r"h_t = g\,Q^{\top} h_{t-1} + U x_t \;\Rightarrow\; \Big\|\frac{\partial L}{\partial h_t}\Big\| = g^{\,T-t}\,\|h_T\|",
        "Exploding: linear RNN, gain 1.2",
    ),
    (
        "How LSTM and GRU gates help",
        "The LSTM's cell state is updated additively, c_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t, so along c the Jacobian is diag(f_t): "
        "with f near 1 the gradient flows back almost unchanged. A forget bias of 1 starts f at σ(1) ≈ 0.73 instead of 0.5. "
        "The GRU's update gate z plays the same role: h_t = (1 − z) ⊙ n + z ⊙ h_{t−1}.",
        r"\frac{\partial c_t}{\partial c_{t-1}}\Big|_{h_{t-1}} = \operatorname{diag}(f_t)",
        "LSTM with forget bias 1",
    ),
    (
        "Low precision",
        "float16 cannot hold numbers below ~6·10⁻⁸; a gradient that vanishes past that becomes exactly 0. bfloat16 keeps "
        "float32's range but only 8 bits of mantissa.",
        None,
        "float16 underflow",
    ),
    (
        "Two ways to gather ∂L/∂W",
        "W is used at every step, so ∂L/∂W sums one term per step. A single accumulator adds them into one buffer while the "
        "reverse scan walks back (what lax.scan does for closed-over params, like Zygote's accumulator). Per-step tangents keep "
        "one copy of W per step, get one tangent each and sum them afterwards (a ChainRules rrule for Flux's Recur): same "
        "answer, T times the memory, and a picture of which steps matter.",
        r"\frac{\partial L}{\partial W} = \sum_{t=1}^{T} \underbrace{\frac{\partial L}{\partial h_t}\,\frac{\partial h_t}{\partial W}\Big|_{h_{t-1}}}_{\text{step } t\text{'s tangent}}",
        "Per-step tangents: LSTM",
    ),
    (
        "Linear recurrences: LRU, minGRU",
        "Since 2023 the usual answer to vanishing gradients is a recurrence that is linear in the carry and diagonal: "
        "h_t = λ ⊙ h_{t−1} + B x_t (LRU, with complex λ) or h_t = (1 − z_t) ⊙ h_{t−1} + z_t ⊙ h̃_t with gates that read only x_t (minGRU). "
        "The Jacobian is then diagonal and known: unit j's gradient shrinks by exactly |λ_j| per step — never faster, and never "
        "growing while |λ_j| < 1. Initialising |λ| on a ring close to 1 (0.9 … 0.999) keeps gradients alive for hundreds of steps, "
        "and γ = √(1 − |λ|²) keeps the carry's size fixed. Because each step is an affine map h ↦ A_t h + B_t, steps compose "
        "associatively, so all T carries come from a prefix scan of depth log T (the `parallel` strategy).",
        r"\Big\|\frac{\partial L}{\partial h_t}\Big\| = \Big\|\prod_{s=t+1}^{T} \operatorname{diag}(\lambda)^{\!*}\,\frac{\partial L}{\partial h_T}\Big\| \;\;\text{with } |(\cdot)_j| = |\lambda_j|^{T-t}\,\Big|\frac{\partial L}{\partial h_{T,j}}\Big|,"
        r"\qquad (A_1, B_1) \circ (A_2, B_2) = (A_2 A_1,\; A_2 B_1 + B_2)",
        "Linear recurrence: LRU, T=1000",
    ),
]


LEARN.append(
    (
        "Jacobians and Lyapunov exponents",
        "Backpropagation multiplies one Jacobian J_t = ∂h_t/∂h_{t−1} per step. Each J_t's singular values σ_i say how much that "
        "step can stretch (σ > 1) or shrink (σ < 1) a direction, but the gradient feels the whole product, and stretching along "
        "one step can be undone by the next. The Lyapunov exponents λ_i are the average log stretching of that product per "
        "step: the QR method pushes k directions through each step and re-orthonormalises them, so the log of R's diagonal "
        "counts how much each new direction grew. If λ₁ < 0 every perturbation dies out (ordered) and so does every "
        "gradient; if λ₁ > 0 nearby trajectories separate exponentially (chaos) and the gradient, which travels the "
        "same product backwards, explodes. Random tanh networks cross from one to the other near gain g ≈ 1 "
        "(Sompolinsky, Crisanti & Sommers 1988); inputs push the edge to larger gains.",
        r"\frac{\partial L}{\partial h_{T-k}} = J_{T-k+1}^{\top}\cdots J_T^{\top}\,\frac{\partial L}{\partial h_T},\qquad "
        r"\lambda_i = \lim_{T\to\infty} \frac{1}{T}\sum_{t=1}^{T} \log |R^{(t)}_{ii}|,\;\; J_t Q_{t-1} = Q_t R^{(t)},\qquad "
        r"\Big\|\frac{\partial L}{\partial h_{T-k}}\Big\| \approx e^{\lambda_1 k}",
        (
            "Lyapunov: ordered (gain 0.8)",
            "Lyapunov: edge of chaos (gain 1.0)",
            "Lyapunov: chaotic (gain 2.0)",
        ),
    )
)


LEARN += [
    (
        "Learning a long-range dependency: the adding problem",
        "Seeing a gradient vanish is one thing; the cost is that the network cannot learn. In the adding problem the target is "
        "the sum of two inputs marked somewhere in the sequence, the first in its first half. The weights get credit for using "
        "the first marked value only through ∂L/∂h_t at that early step, which is the product of T − t step Jacobians: if it "
        "has shrunk by 10⁻¹⁰, the update that would teach the network to remember is lost among the others, and the loss stays "
        "at the trivial predictor's 1/6 (always answer 1). The LSTM's additive cell path (f ≈ 1 with forget bias 1) keeps that "
        "product near 1. The Training tab's heatmap shows ∂L/∂carry_t over training: learning starts when the left columns light up.",
        r"L = \big(\hat y - (u_{t_1} + u_{t_2})\big)^2,\qquad \frac{\partial L}{\partial W}\ni \Big(\prod_{s=t_1+1}^{T} J_s\Big)^{\!\top}\frac{\partial L}{\partial h_T}\,\frac{\partial h_{t_1}}{\partial W},\qquad L_{\text{baseline}} = \operatorname{Var}(u_1 + u_2) = \tfrac{1}{6}",
        "Training: LSTM vs tanh RNN on adding, T=100",
    ),
    (
        "IRNN: ReLU with an identity initialisation",
        "Le, Jaitly & Hinton (2015): with W_h = I and ReLU, J_t = diag(1[a_t > 0])·I, so every active unit passes the gradient "
        "back exactly unchanged at initialisation — neither vanishing nor exploding — and training starts from a network that "
        "remembers. It solves adding at lengths where the tanh RNN does not, at the price of being close to the edge: large "
        "learning rates push the spectral radius above 1.",
        r"h_t = \max(0,\; W_x x_t + I\,h_{t-1} + b) \;\Rightarrow\; J_t = \operatorname{diag}\big(\mathbb{1}[a_t > 0]\big)",
        "Training: IRNN learns adding",
    ),
    (
        "Gradient clipping",
        "When the Jacobian product explodes, one step of gradient descent can throw the weights far away (the loss surface has "
        "cliffs). Pascanu et al. (2013) rescale the whole gradient when its norm exceeds c, keeping its direction: every update "
        "then moves at most lr·c. The Training tab counts how often it clipped and marks those steps.",
        r"g \leftarrow g \cdot \min\!\Big(1, \frac{c}{\|g\|}\Big)",
        "Training: clipping rescues an exploding RNN",
    ),
]


def learn_view() -> None:
    for i, (title, text, formula, preset) in enumerate(LEARN):
        st.subheader(title)
        st.markdown(text)
        if formula:
            st.latex(formula)
        presets = (preset,) if isinstance(preset, str) else preset or ()
        for j, name in enumerate(presets):
            key = f"learn_{i}" if j == 0 else f"learn_{i}_{j}"
            st.button(
                f"Show me: {name}", key=key, on_click=apply_preset, args=(name,), help=PRESETS[name].lesson
            )


def url_warnings(warnings: list[str]) -> None:
    for w in warnings:
        st.warning(w)


def limits_caption() -> None:
    st.sidebar.caption(
        f"Limits: T ≤ {FIELD_SPECS['seq_len'].hi:g}, H ≤ {FIELD_SPECS['hidden_size'].hi:g}, B ≤ {FIELD_SPECS['batch_size'].hi:g}, "
        "and an estimated working set ≤ 4 GiB."
    )


__all__ = [
    "carry_view",
    "compare_view",
    "devices_view",
    "gradients_view",
    "header",
    "jacobians_view",
    "learn_view",
    "phase_view",
    "strategies_view",
    "training_controls",
    "training_results",
]


def jacobians_view(
    a: Analysis,
    compute_lyapunov: Callable[[RunConfig, int], object],
    compute_jacobians: Callable[[RunConfig, int, int], object],
    carry_dim: int,
) -> None:
    """Singular values of each step Jacobian, the Lyapunov spectrum, its convergence, and
    λ₁ next to the measured gradient decay."""
    cfg = a.config
    st.markdown(
        "The gradient reaching step t is a product of step Jacobians J = ∂carry_t/∂carry_{t−1}. Their singular values say "
        "how much one step can stretch or shrink a direction; the Lyapunov exponents say how fast the *product* does, on "
        "average per step (see Learn → Jacobians and Lyapunov exponents)."
    )
    c1, c2 = st.columns(2)
    n_examples, k_max = cfg.batch_size or 1, min(carry_dim, 64)
    # Widgets read session state only (no default argument), clamped to what this config allows.
    st.session_state["jac_k"] = min(st.session_state.get("jac_k", 8), k_max)
    st.session_state["jac_example"] = min(st.session_state.get("jac_example", 0), n_examples - 1)
    k = int(
        c1.number_input(
            "exponents / singular values k",
            1,
            k_max,
            step=1,
            key="jac_k",
            help=f"1 … min(D, 64); D = {carry_dim} is the carry size (all components)",
        )
    )
    example = int(
        c2.number_input(
            "example (for σ_i(J_t))",
            0,
            max(n_examples - 1, 0),
            step=1,
            key="jac_example",
            disabled=n_examples == 1,
        )
    )
    jac = compute_jacobians(cfg, k, example)
    st.plotly_chart(
        charts.line_figure(
            frames.singular_values_frame(jac),
            f"Singular values of J_t = ∂carry_t/∂carry_(t−1), example {example}",
            "σ_i(J_t) (log)",
            log_y=True,
        ),
        key="chart_singular_values",
    )
    how = (
        "exact: J_t built with jax.jacfwd, then its SVD"
        if jac.method == "exact"
        else "matrix-free: block power iteration with Jacobian-vector products (J_t is never built)"
    )
    every = (
        f", at every {jac.stride}th step (a cap for the dashboard; the library computes every step)"
        if jac.stride > 1
        else ""
    )
    st.caption(
        f"σ₁ > 1 means that step can stretch some direction; the product's growth is what the exponents below measure. Method: {how}{every}."
    )
    plan = budget.lyapunov_plan(cfg, cost_of(a), k)
    if not within_budget(plan, "lyapunov"):
        return
    ly = compute_lyapunov(cfg, plan.settings["k"])
    lam1 = ly.lambda1
    cols = st.columns(3)
    cols[0].metric(
        "λ₁ (per step)",
        f"{lam1:+.4f}",
        help=f"mean over {n_examples} example(s) ± {ly.exponents_spread[0]:.4f}",
    )
    cols[1].metric("factor e^λ₁ per step", f"{np.exp(lam1):.4f}")
    fit = decay_fit(a.log10_grad_norms)
    if fit is not None:
        cols[2].metric(
            "measured gradient decay",
            f"{fit.slope:+.4f}",
            delta=f"{fit.slope - lam1:+.4f} vs λ₁",
            delta_color="off",
            help=f"slope of ln‖∂L/∂carry_(T−k)‖ over lags {fit.lag_lo}…{fit.lag_hi} (the ends left out)",
        )
    st.markdown(f"**Regime:** {regime(lam1)}.")
    left, right = st.columns(2)
    with left:
        st.plotly_chart(charts.spectrum_figure(frames.spectrum_frame(ly)), key="chart_spectrum")
    with right:
        st.plotly_chart(charts.running_figure(frames.running_frame(ly)), key="chart_running")
    st.caption(
        f"QR method: {ly.k} tangent directions pushed through every step with jax.jvp inside the forward scan and "
        f"re-orthonormalised; exponent = average log of R's diagonal after {ly.warmup} warm-up steps. Bars: ±1 std over examples."
    )
    st.plotly_chart(charts.decay_figure(frames.decay_frame(a, ly)), key="chart_decay")
    st.caption(
        "Why measured and predicted differ: λ₁ is the growth rate of the *most* stretched direction, in the limit of long "
        "trajectories; the gradient is one particular direction (set by the loss) over a finite T, pulled by the inputs "
        "along the way, so it only aligns with the leading direction after some steps. With loss = all each step also adds "
        "its own term, which flattens the measured curve."
    )
    _csv_button(
        frames.spectrum_frame(ly), "rnnviz_lyapunov.csv", "csv_lyapunov", "Download the spectrum (CSV)"
    )


def phase_view(
    cfg: RunConfig,
    compute: Callable[[RunConfig, float, float, int, int], tuple[pd.DataFrame, float | None]],
    compute_lyapunov: Callable[[RunConfig, float, float, int, int], tuple[pd.DataFrame, float | None]],
    cost: budget.Cost,
) -> None:
    """The gain × lag phase diagram and λ₁ over the gain; ``cost`` (what the config's
    analysis took here) sizes the work to the view's budget."""
    st.markdown(
        "Every recurrent gain at once: one compiled, vmapped call evaluates the whole grid (sharded over all devices). "
        "Colour is log₁₀ of how much of the gradient at T survives back to lag T − t; the black line is the smallest gain "
        "at which at least 1 % survives each lag (grey band: range over seeds)."
    )
    c1, c2, c3, c4 = st.columns(4)
    lo = c1.number_input("gain from", 0.0, 10.0, 0.5, 0.05, key="phase_lo")
    hi = c2.number_input("gain to", 0.0, 10.0, 1.5, 0.05, key="phase_hi")
    n = c3.number_input("gains", 2, 256, 41, 1, key="phase_n")
    seeds = c4.number_input("seeds", 1, 16, 3, 1, key="phase_seeds")
    if hi <= lo:
        st.error(f"'gain to' ({hi:g}) must be larger than 'gain from' ({lo:g}).")
        return
    plan = budget.phase_plan(cfg, cost, int(n), int(seeds))
    if not within_budget(plan, "phase"):
        return
    n, seeds = plan.settings["gains"], plan.settings["seeds"]
    df, boundary = compute(cfg, float(lo), float(hi), int(n), int(seeds))
    matrix, survival = frames.phase_frames(df)
    st.plotly_chart(charts.phase_figure(matrix, survival, boundary), key="chart_phase")
    if boundary is not None:
        st.caption(
            f"Dashed: the Pascanu boundary σ₁(W_h)·γ = 1 at g = {boundary:.3f}; left of it vanishing is guaranteed."
        )
    _csv_button(df, "rnnviz_sweep.csv", "csv_sweep")
    lam, edge = compute_lyapunov(cfg, float(lo), float(hi), int(n), int(seeds))
    st.plotly_chart(charts.lyapunov_phase_figure(lam, edge), key="chart_lyapunov_phase")
    where = (
        f"λ₁ crosses 0 at g ≈ {edge:.3f}: below it the trajectory is ordered and gradients vanish, above it nearby "
        "trajectories separate (chaos) and gradients explode."
        if edge is not None
        else "λ₁ does not cross 0 in this range"
        + (" (it stays below 0: ordered everywhere)." if (lam["lyapunov"] < 0).all() else ".")
    )
    st.caption(
        f"The largest Lyapunov exponent λ₁ for every gain and seed, in one vmapped compiled call (QR method, after T/10 "
        f"warm-up steps). {where} The inputs drive the network and tame chaos: the edge moves with the input scale."
    )
    _csv_button(lam, "rnnviz_lyapunov_phase.csv", "csv_lyapunov_phase", "Download λ₁ vs gain (CSV)")


# ---- Training -------------------------------------------------------------------------------

TRAIN_DEFAULTS = dict(
    task="adding",
    steps=1000,
    log_every=50,
    batch=64,
    optimizer="adam",
    lr=1e-3,
    clip_on=True,
    clip=1.0,
    seeds=1,
    lag=0,
)


def training_controls(cfg: RunConfig, tasks: dict, optimizers: tuple[str, ...]) -> dict:
    """The Training tab's settings (widgets keyed ``train_*``, defaults :data:`TRAIN_DEFAULTS`,
    set by presets through session state); the config's cell is trained."""
    for name, value in TRAIN_DEFAULTS.items():
        st.session_state.setdefault(f"train_{name}", value)
    c1, c2, c3, c4 = st.columns(4)
    task = c1.selectbox(
        "Task",
        list(tasks),
        key="train_task",
        help="\n\n".join(f"{n}: {t.description}" for n, t in tasks.items()),
    )
    steps = int(c2.number_input("Steps", 10, 100_000, step=50, key="train_steps"))
    log_every = int(
        c3.number_input(
            "Steps per chunk (and per profile)",
            1,
            1000,
            step=10,
            key="train_log_every",
            help="one compiled call trains this many steps; the gradient profile is taken at the start of each",
        )
    )
    batch = int(
        c4.number_input(
            "Batch per step",
            1,
            1024,
            step=8,
            key="train_batch",
            help="a fresh batch every step, drawn from the seed",
        )
    )
    c1, c2, c3, c4 = st.columns(4)
    optimizer = c1.selectbox(
        "Optimizer", optimizers, key="train_optimizer", help="adam, or sgd with momentum 0.9"
    )
    lr = float(c2.number_input("Learning rate", 1e-6, 10.0, format="%.5f", key="train_lr"))
    clip_on = c3.toggle(
        "Clip the global norm", key="train_clip_on", help="g ← g·min(1, c/‖g‖) (Pascanu et al. 2013)"
    )
    clip = (
        float(c3.number_input("clip c", 1e-3, 1e6, key="train_clip", disabled=not clip_on))
        if clip_on
        else None
    )
    seeds = int(c4.number_input("Seeds (one vmapped call)", 1, 8, step=1, key="train_seeds"))
    lag = 0
    if task == "recall":
        if st.session_state["train_lag"] > cfg.seq_len - 1:
            st.session_state["train_lag"] = 0
        lag = int(st.slider("Lag k (target x_(T−k))", 0, max(1, cfg.seq_len - 1), key="train_lag"))
    return dict(
        task=task,
        steps=steps,
        log_every=min(log_every, steps),
        batch=batch,
        optimizer=optimizer,
        learning_rate=lr,
        clip=clip,
        seeds=seeds,
        lag=lag,
    )


def training_results(records: list, pinned: list[tuple[str, list]], running: bool) -> None:
    """Charts and verdict of one set of runs (all seeds), with pinned runs overlaid."""
    r0 = records[0]
    text = (
        f"**Training:** {training_verdict(records)}"
        if not running
        else f"Training… {r0.steps_run} of {r0.steps} steps so far."
    )
    (st.warning if any(r.nonfinite_step is not None for r in records) and not running else st.markdown)(text)
    df = frames.training_frame(records)
    over = pd.concat([df] + [frames.training_frame(recs, label) for label, recs in pinned], ignore_index=True)
    st.plotly_chart(
        charts.training_figure(
            over,
            "loss_smooth",
            f"Loss ({r0.task}, mean of the last {frames.SMOOTH_STEPS} steps)",
            "loss (log)",
            baseline=r0.baseline,
        ),
        key="chart_train_loss",
    )
    c1, c2 = st.columns(2)
    with c1:
        st.plotly_chart(
            charts.training_figure(
                over,
                "metric",
                f"Task metric: {r0.metric_name}",
                r0.metric_name,
                log_y=r0.metric_name == "MSE",
            ),
            key="chart_train_metric",
        )
    with c2:
        st.plotly_chart(charts.clipping_figure(df, r0.clip), key="chart_train_clip")
    which = 0
    if len(records) > 1:
        which = st.selectbox(
            "Profile of run",
            range(len(records)),
            format_func=lambda i: f"seed {records[i].config.seed}",
            key="train_profile_run",
        )
    matrix = frames.profile_matrix(records[which])
    st.plotly_chart(
        charts.heatmap_figure(
            matrix,
            "log₁₀ ‖∂L/∂carry_t‖ on a fixed probe batch, as training goes on",
            x_title="timestep t",
            y_title="training step",
            colorbar="log₁₀ ‖∂L/∂carry_t‖",
        ),
        key="chart_train_profile",
    )
    st.caption(
        "Each row is the gradient of the task loss with respect to every carry, taken before that chunk's steps "
        "(zero-perturbation, exact magnitudes). Learning a long-range task needs the left columns — the early "
        "steps where the marked inputs sit — to stay within reach of the loss."
    )
    _csv_button(df, "rnnviz_training.csv", "csv_training", "Download the training curves (CSV)")

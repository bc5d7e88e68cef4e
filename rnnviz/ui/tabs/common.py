"""What several tabs share: the budget gate, the rows of one request per strategy drawn as they
arrive, CSV buttons, and the tabs' prose (a markdown file beside each tab's module)."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import streamlit as st

from rnnviz.base.formatting import layers_text
from rnnviz.base.timing import MIN_PRECISE_REPEATS
from rnnviz.charts.models import layer_heatmap, layer_lines, state_lines, token_connectivity
from rnnviz.config import ConfigError
from rnnviz.frames.models import layer_frame, state_frame, token_connectivity_frame, true_zeros
from rnnviz.serve import budget
from rnnviz.serve.requests import Request, describe, jobs, route
from rnnviz.serve.settings import PART_GAP_S, TIMING_PRECISION
from rnnviz.serve.worker import ComputationTimeout, WorkerDied
from rnnviz.ui.tabs.context import TabContext

if TYPE_CHECKING:
    from rnnviz.base.models import ModelAnalysis
    from rnnviz.serve.requests import ModelSummary


def cost(ctx: TabContext) -> budget.Cost:
    """What one analysis of the session's shape costs here, the unit of every tab's budget: its
    compile, and the faster of the page's run and the workers' quiet timing of the shape."""
    page = budget.Cost.of(ctx.analysis)
    shape = route(ctx.config, ctx.data_source)
    timing = Request(jobs.quiet_run_s, (shape,), shape, f"timing {describe(ctx.config)}")
    try:
        quiet = ctx.get(timing)
    except (ConfigError, ComputationTimeout, WorkerDied):  # the page's own timing is an upper bound
        return page
    return page._replace(run_s=min(page.run_s, quiet))


def asked(ctx: TabContext, plan: budget.Plan, key: str) -> bool:
    """Whether a tab computes under ``plan``: it fits, or the user pressed its "Run anyway"
    (:func:`within_budget` draws the button under that key)."""
    return plan.fits or bool(ctx.state.get(f"anyway_{key}"))


def within_budget(plan: budget.Plan, key: str) -> bool:
    """Show the plan's note; True when the tab may compute: it fits, or the user pressed the
    button naming the estimate. The note of a plan cut to fit is a caption (an info box took
    80 px of a 1366×768 projector); that of one that does not fit, an info box."""
    if plan.fits:
        if plan.note:
            st.caption(plan.note)
        return True
    if plan.note:
        st.info(plan.note)
    return st.button(f"Run anyway (≈ {plan.estimate_s:.0f} s)", key=f"anyway_{key}")


def available(ctx: TabContext) -> tuple[tuple[str, ...], dict[str, str]]:
    """The strategies offered for the session's config, and why each other one is not."""
    return ctx.get(ctx.request(jobs.strategy_availability, what="which strategies apply"))


def per_strategy(
    ctx: TabContext, job: Callable, plan_of: Callable[..., budget.Plan], what: str
) -> tuple[budget.Plan, dict[str, Request]]:
    """The plan ``plan_of(cost, strategies, compiled=…)`` and a timed request of ``job(key,
    repeats, (strategy,))`` per offered strategy (``what``, formatted with both). Idle time plans
    as if every strategy were compiled (it compiles them as it goes), and so does the page once
    those rows are there; else the workers say which are."""
    names, unit = available(ctx)[0], cost(ctx)

    def rows(plan: budget.Plan) -> dict[str, Request]:
        n = plan.settings["repeats"]
        return {s: ctx.request(job, n, (s,), what=what.format(s, n), timed=True) for s in names}

    plan = plan_of(unit, names, compiled=names)
    if not ctx.idle and not all(map(ctx.has, rows(plan).values())):
        compiled = ctx.get(ctx.request(jobs.compiled_strategies, what="a cache look-up", cached=False))
        plan = plan_of(unit, names, compiled=compiled)
    return plan, rows(plan)


def rows_as_they_arrive(
    names: tuple[str, ...],
    row_of: Callable[[str], pd.DataFrame],
    draw: Callable[[pd.DataFrame, bool], None],
    progress: Callable[[int], str] | None = None,
    min_gap_s: float = 0.0,
) -> pd.DataFrame:
    """Every name's rows (``row_of``, empty when left out), asked for in turn, and what has
    arrived drawn after each in one place (``draw(rows so far, final)``: only the final draw's
    elements may carry keys), with a line saying what is left (``progress(done)``).

    A partial picture is drawn again only ``min_gap_s`` after the last (the first and the final
    always are), so the browser redraws less while others need the cores."""
    slot = st.empty()
    frames: list[pd.DataFrame] = []
    done = pd.DataFrame()
    drawn_at = None  # when a partial picture was last drawn (monotonic)
    for i, name in enumerate(names):
        frames.append(row_of(name))
        final = i == len(names) - 1
        if frames[-1].empty and not final:
            continue  # nothing new to draw (and the same chart twice would be one element twice)
        if not final and drawn_at is not None and time.monotonic() - drawn_at < min_gap_s:
            continue  # drawn a moment ago: the next rows come with the next picture
        done = pd.concat(frames, ignore_index=True)
        if done.empty:
            continue
        drawn_at = time.monotonic()
        with slot.container():
            draw(done, final)
            note = st.empty()  # written every time: a line left from an earlier draw would stay
            if not final:
                left = f"{i + 1} of {len(names)} measured; {', '.join(names[i + 1 :])} next"
                note.caption(f"⏳ {progress(i + 1) if progress else left}…")
    return done


def interleaved_parts(
    parts: int,
    part_of: Callable[[int], pd.DataFrame],
    draw: Callable[[pd.DataFrame, bool], None],
    unit: str,
) -> pd.DataFrame:
    """:func:`rows_as_they_arrive` over the parts of an interleaved job, part p holding every
    ``parts``-th ``unit`` ("gain", "step") from the p-th on: the whole range at once, then finer."""
    return rows_as_they_arrive(
        tuple(str(p) for p in range(parts)),
        lambda name: part_of(int(name)),
        draw,
        lambda done: (
            f"{done} of {parts} parts of the {unit}s in (every {parts}th {unit} each); "
            f"the {unit}s between next"
        ),
        min_gap_s=PART_GAP_S,
    )


def timing_note(repeats: int, rows: pd.DataFrame | None = None) -> str:
    """How the run times were measured (Strategies, Devices), and, when one of ``rows`` ran
    code compiled for compile speed, that it did."""
    note = (
        "run_ms: the median of the timed runs after one warm-up; ± the 90 % confidence interval of "
        f"their mean. Each was timed until that interval was within ± {TIMING_PRECISION:.0%} "
        f"(at least {min(MIN_PRECISE_REPEATS, repeats)}, at most {repeats} runs: the 'repeats' column)."
    )
    if rows is not None and bool(rows.get("quick_compiled", pd.Series(dtype=bool)).any()):
        note += " " + QUICK_NOTE
    return note


#: What a small shape's times are of (:func:`rnnviz.engine.compile.quick_compile`).
QUICK_NOTE = (
    "This shape is small, so its code was compiled for compile speed (LLVM -O0), which runs "
    "1.5–3× slower but still in milliseconds; `rnnviz bench` records the optimised code's times."
)


def csv_button(df: pd.DataFrame, name: str, key: str, label: str = "Download CSV") -> None:
    """A download button for ``df`` as CSV (its index too when it is not a plain range)."""
    keep_index = not isinstance(df.index, pd.RangeIndex)  # e.g. a units × time matrix
    download(label, df.to_csv(index=keep_index).encode(), name, key, "text/csv")


def download(
    label: str, data: Any, name: str, key: str, mime: str | None = None, help: str | None = None
) -> None:
    """A download button of ``data`` (bytes, or a function making them when clicked) as the file
    ``name``; clicking it does not rerun the page."""
    st.download_button(label, data, file_name=name, mime=mime, key=key, on_click="ignore", help=help)


def markdown_sections(markdown: str) -> dict[str, str]:
    """The ``## name`` sections of a tab's markdown text, as written, by name (text before the
    first, a title or a note to the editor, is left out)."""
    return {name.strip(): body for name, _, body in (s.partition("\n") for s in markdown.split("\n## ")[1:])}


def parse_sections(markdown: str) -> dict[str, str]:
    """:func:`markdown_sections`, each paragraph on one line (as Streamlit draws them)."""
    sections = {}
    for name, body in markdown_sections(markdown).items():
        paragraphs = [" ".join(p.split("\n")).strip() for p in body.strip().split("\n\n")]
        sections[name] = "\n\n".join(p for p in paragraphs if p)
    return sections


def tab_markdown(module: str) -> str:
    """The markdown file beside a tab's module (``rnnviz.ui.tabs.phase`` reads ``phase.md``)."""
    package, _, name = module.rpartition(".")
    return resources.files(package).joinpath(f"{name}.md").read_text(encoding="utf-8")


@functools.cache
def _sections(module: str) -> dict[str, str]:
    return parse_sections(tab_markdown(module))


def prose(module: str, section: str, **values: object) -> str:
    """The section ``## section`` of the markdown file beside a tab's module (its ``__name__``),
    with ``{name}`` fields filled from ``values`` (used as written when none are given)."""
    text = _sections(module)[section]
    return text.format(**values) if values else text


#: The layer × step heatmap's height: with the controls above it, it stays above a projector's fold.
HEATMAP_HEIGHT = 360


def model_charts(a: ModelAnalysis, summary: ModelSummary) -> None:
    """A model's analysis (the Your model tab's, a reference block's): the layer × step heatmap
    and the summary line, the lines per layer and per state, the connectivity, and the record
    to download."""
    layers = layer_frame(a)
    heatmap = layer_heatmap(layers)
    heatmap.update_layout(height=HEATMAP_HEIGHT)
    st.plotly_chart(heatmap, key="chart_model_heatmap")
    if (zeros := true_zeros(layers)) is not None:
        st.caption(zeros)
    compiled = f"compiled in {a.compile_s:.2f} s" if a.compile_s else "compiled already"
    exact = "" if a.log10_source == "float32" else f" · exact log₁₀: {a.log10_source}"
    st.markdown(
        f"**{summary.model_type}** · {layers_text(summary.n_layers)} · {summary.n_params:,} parameters · "
        f"loss **{a.loss:.4g}** · {compiled}, run in {a.run_s * 1e3:.1f} ms{exact} · "
        f"{Path(summary.source).name}"
    )
    st.plotly_chart(layer_lines(layers), key="chart_model_layers")
    labels = layers.drop_duplicates("t").set_index("t")["token"]
    states = state_frame(a)
    st.plotly_chart(state_lines(states.assign(token=states["t"].map(labels))), key="chart_model_states")
    last = a.position == len(a.connectivity) - (2 if summary.vocab_size else 1)
    reads = "the last prediction" if last else f"the prediction at p = {a.position}"
    connectivity = token_connectivity(token_connectivity_frame(a), f"How much {reads} reads each token")
    st.plotly_chart(connectivity, key="chart_model_connectivity")
    c_csv, c_json = st.columns(2)
    with c_csv:
        label = "Download the layer × step gradients (CSV)"
        csv_button(layers, "rnnviz_model_layers.csv", "model_csv", label)
    with c_json:
        record = json.dumps(a.to_json()).encode()
        download(
            "Download the whole record (JSON)", record, "rnnviz_model.json", "model_json", "application/json"
        )

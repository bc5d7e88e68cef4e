"""What several tabs share: the budget gate, CSV buttons, and the tabs' prose (a markdown
file beside each tab's module)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from importlib import resources

import pandas as pd
import streamlit as st

from rnnviz.base.timing import MIN_PRECISE_REPEATS
from rnnviz.config import ConfigError
from rnnviz.serve import budget
from rnnviz.serve.requests import Request, describe, jobs, route
from rnnviz.serve.settings import PART_GAP_S, TIMING_PRECISION
from rnnviz.serve.worker import ComputationTimeout, WorkerDied
from rnnviz.ui.tabs.context import TabContext


def cost(ctx: TabContext) -> budget.Cost:
    """What one analysis of the session's shape costs here, the unit of every tab's budget:
    its compile, and the faster of the page's run and the worker's quiet timing of the shape
    (:func:`rnnviz.serve.jobs.quiet_run_s`, a request like any other: idle time takes it
    first)."""
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
    """Show the plan's note; True when the tab may compute (it fits, or the user asked for
    the over-budget version with the button, which names the estimate).

    A plan cut to fit says so in a caption, a line above the chart it sized (an info box took
    80 px of a 1366×768 projector); one that does not fit at all says so in an info box, with
    the button: that is then the tab's picture."""
    if plan.fits:
        if plan.note:
            st.caption(plan.note)
        return True
    if plan.note:
        st.info(plan.note)
    return st.button(f"Run anyway (≈ {plan.estimate_s:.0f} s)", key=f"anyway_{key}")


def rows_as_they_arrive(
    names: tuple[str, ...],
    row_of: Callable[[str], pd.DataFrame],
    draw: Callable[[pd.DataFrame, bool], None],
    progress: Callable[[int], str] | None = None,
    min_gap_s: float = 0.0,
) -> pd.DataFrame:
    """Ask for each name's rows in turn and draw what has arrived after each, in one place:
    the first row is on the screen while the others are measured, with a line saying how
    many are left (draw as results arrive).

    Args:
      names: what to ask for, in order (strategies).
      row_of: ``name -> DataFrame`` of its rows (empty when it was left out).
      draw: ``(rows so far, final)`` draws them; ``final`` on the last call (its elements
        may then carry keys, drawn once per run).
      progress: ``done -> line`` under a partial picture (default: how many of the names
        are in, and which come next).
      min_gap_s: a partial picture is drawn again only this long after the last (the first
        and the final always are): rows that come quickly are drawn together, so the
        browser redraws the chart less often while another visitor's page needs the cores.

    Returns:
      Every name's rows, in order.
    """
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
                line = (
                    progress(i + 1)
                    if progress
                    else f"{i + 1} of {len(names)} measured; {', '.join(names[i + 1 :])} next"
                )
                note.caption(f"⏳ {line}…")
    return done


def interleaved_parts(
    parts: int,
    part_of: Callable[[int], pd.DataFrame],
    draw: Callable[[pd.DataFrame, bool], None],
    unit: str,
) -> pd.DataFrame:
    """:func:`rows_as_they_arrive` over the parts 0 … ``parts``−1 of an interleaved job (part p
    holds every ``parts``-th of its ``unit``s, from the p-th on): the whole range at once, then
    finer, with a line saying how many parts are in.

    Args:
      parts: how many parts (1: the whole at once, no line).
      part_of: ``part -> DataFrame`` of its rows.
      draw: ``(rows so far, final)``, as for :func:`rows_as_they_arrive`.
      unit: what a part holds every ``parts``-th of, singular ("gain", "step").

    Returns:
      Every part's rows, in order.
    """
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
    """How the run times were measured, for the tables that show them (Strategies, Devices),
    and, when one of ``rows`` ran code compiled for compile speed, that it did."""
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
    st.download_button(
        label,
        df.to_csv(index=keep_index).encode(),
        file_name=name,
        mime="text/csv",
        key=key,
        on_click="ignore",
    )


def parse_sections(markdown: str) -> dict[str, str]:
    """The ``## name`` sections of a tab's markdown file, by name.

    A section's lines are joined into paragraphs (one line each, as Streamlit draws them);
    a blank line separates paragraphs. Text before the first section (a title, a note to
    the editor) is left out.

    Args:
        markdown: the file's text.

    Returns:
        ``{name: text}`` in the file's order.
    """
    sections = {}
    for section in markdown.split("\n## ")[1:]:
        name, _, body = section.partition("\n")
        paragraphs = [" ".join(p.split("\n")) for p in body.strip().split("\n\n")]
        sections[name.strip()] = "\n\n".join(p.strip() for p in paragraphs if p.strip())
    return sections


@functools.cache
def _sections(module: str) -> dict[str, str]:
    package, _, name = module.rpartition(".")
    return parse_sections(resources.files(package).joinpath(f"{name}.md").read_text(encoding="utf-8"))


def prose(module: str, section: str, **values: object) -> str:
    """A section of the markdown file beside a tab's module, with ``{name}`` fields filled.

    Args:
        module: the tab module's ``__name__`` (``rnnviz.ui.tabs.phase`` reads ``phase.md``).
        section: the ``## `` heading's text.
        **values: fields to fill (the text is used as written when none are given).

    Returns:
        The section's text.
    """
    text = _sections(module)[section]
    return text.format(**values) if values else text

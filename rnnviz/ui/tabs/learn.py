"""The Learn tab: short lessons on vanishing and exploding gradients, each with its maths,
buttons that load a preset showing it and, where it has one, its teaching page for a class.
The lessons are the sections of ``learn.md`` beside this module."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import streamlit as st

from rnnviz.base.presets import PAGES, PRESETS, PagePreset, page_for
from rnnviz.report.explorable import explorable_html
from rnnviz.serve.requests import Request, jobs
from rnnviz.ui.sidebar.configuration import apply_preset
from rnnviz.ui.tabs.common import download, markdown_sections, tab_markdown
from rnnviz.ui.tabs.context import TabContext

TITLE = "Learn"
_PRESET_LINE = "Show me: "


class Lesson(NamedTuple):
    """One lesson: its heading, Markdown prose, LaTeX for ``st.latex`` (or None), and the names
    of the :data:`rnnviz.base.presets.PRESETS` it offers to load."""

    title: str
    text: str
    formula: str | None
    presets: tuple[str, ...]


def parse(markdown: str) -> list[Lesson]:
    """The lessons of a ``learn.md`` text: per ``## title`` section, paragraphs of prose, an
    optional ``$$ … $$`` formula and ``Show me: <preset>`` lines.

    Raises:
        ValueError: a section names a preset that does not exist.
    """
    lessons = []
    for title, body in markdown_sections(markdown).items():
        formula = None
        if "$$" in body:
            before, _, rest = body.partition("$$")
            formula, _, after = rest.partition("$$")
            body, formula = before + after, " ".join(formula.split())
        lines = body.splitlines()
        presets = tuple(line[len(_PRESET_LINE) :].strip() for line in lines if line.startswith(_PRESET_LINE))
        unknown = [p for p in presets if p not in PRESETS]
        if unknown:
            raise ValueError(f"learn.md, lesson {title!r}: no preset named {unknown[0]!r}")
        prose = "\n".join(line for line in lines if not line.startswith(_PRESET_LINE))
        lessons.append(Lesson(title, prose.strip(), formula, presets))
    return lessons


@functools.cache
def lessons() -> tuple[Lesson, ...]:
    """The Learn tab's lessons, read from the package's ``learn.md`` once."""
    return tuple(parse(tab_markdown(__name__)))


def pages(lesson: Lesson) -> list[PagePreset]:
    """The teaching pages of a lesson's presets, each once, in the order of its presets."""
    found = {p.name: p for p in map(page_for, lesson.presets) if p is not None}
    return list(found.values())


def _points(page: PagePreset) -> int:
    return math.prod(len(v) for v in page.over.values())


def _page_request(name: str) -> Request:
    """The data of the teaching page ``name``, computed in a worker once for every session."""
    what = f"the page for your class ({_points(PAGES[name])} configurations)"
    return Request(jobs.teaching_page, (name,), "teaching pages", what)


def requests(ctx: TabContext) -> list[Request]:
    """The teaching pages the user asked for."""
    return [_page_request(name) for name in PAGES if ctx.state.get(f"learn_page_{name}")]


def _ask_for(name: str) -> None:
    st.session_state[f"learn_page_{name}"] = True


def page_offer(page: PagePreset, ctx: TabContext) -> None:
    """The lesson's page for a class: a button that makes it (in a worker, once for every
    session), then the download of the one ``.html`` file."""
    if not st.session_state.get(f"learn_page_{page.name}"):
        st.button(
            f"Make a page for your class: {page.title.lower()}",
            key=f"learn_make_{page.name}",
            on_click=_ask_for,
            args=(page.name,),
            help=f"One .html file that needs no server: sliders over {', '.join(page.over)} move through "
            f"{_points(page)} precomputed configurations, offline (from a USB stick, a shared drive, any web "
            "space). Computing it takes up to a minute, once.",
        )
        return
    html = explorable_html(ctx.get(_page_request(page.name))).encode("utf-8")
    label, name = f"Download the page for your class ({page.name}.html)", f"rnnviz_{page.name}.html"
    download(label, html, name, f"learn_page_download_{page.name}", "text/html")


def render(ctx: TabContext) -> None:
    """Every lesson: heading, prose, formula, one button per preset and its teaching pages."""
    for i, lesson in enumerate(lessons()):
        st.subheader(lesson.title)
        st.markdown(lesson.text)
        if lesson.formula:
            st.latex(lesson.formula)
        for j, name in enumerate(lesson.presets):
            key = f"learn_{i}" if j == 0 else f"learn_{i}_{j}"
            tip = PRESETS[name].lesson
            st.button(f"Show me: {name}", key=key, on_click=apply_preset, args=(name,), help=tip)
        for page in pages(lesson):
            page_offer(page, ctx)


#: On a reference block's page the same lessons: they read the widgets, not the page's model (a
#: preset loads a bare cell).
render_block, block_requests = render, requests

"""The shareable comparison report: several cell designs at one shape, or your own models on
the same text, as one self-contained HTML file (opens offline in any browser) or as JSON.

* :mod:`~rnnviz.report.numbers` — the records and their JSON, in NumPy (no JAX, no plotly):
  :class:`Comparison` and :class:`Design`, :class:`ModelComparison` and :class:`ModelRow`,
  :func:`comparison_json`, :func:`model_comparison_json`, :func:`reach` (how far back a
  gradient reaches);
* :mod:`~rnnviz.report.compare` — the designs' numbers computed: :func:`comparison`
  (analysis, decay and λ₁, optionally training, per design), :func:`comparison_of` (from
  analyses in hand);
* :mod:`~rnnviz.report.models` — your own models' numbers computed: :func:`model_comparison`;
  designs as their reference blocks: :func:`block_comparison`;
* :mod:`~rnnviz.report.html` — the page: :func:`report_html`, :func:`model_report_html`,
  :func:`write_report` (either), :func:`report_figures`, :func:`model_report_figures` (drawn
  by :mod:`rnnviz.charts`).

Example::

    from rnnviz import RunConfig
    from rnnviz.report import comparison, write_report
    c = comparison(["lstm", "gru", "mamba"], RunConfig(hidden_size=16, seq_len=50))
    write_report(c, "compare.html")

Names load on first use (PEP 562), so the numbers are at hand without plotly installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "Comparison": "rnnviz.report.numbers",
    "Design": "rnnviz.report.numbers",
    "block_comparison": "rnnviz.report.models",
    "comparison": "rnnviz.report.compare",
    "comparison_json": "rnnviz.report.numbers",
    "comparison_of": "rnnviz.report.compare",
    "design_of": "rnnviz.report.numbers",
    "ModelComparison": "rnnviz.report.numbers",
    "ModelRow": "rnnviz.report.numbers",
    "model_comparison": "rnnviz.report.models",
    "model_comparison_json": "rnnviz.report.numbers",
    "reach": "rnnviz.report.numbers",
    "model_report_figures": "rnnviz.report.html",
    "model_report_html": "rnnviz.report.html",
    "report_figures": "rnnviz.report.html",
    "report_html": "rnnviz.report.html",
    "write_report": "rnnviz.report.html",
}

__all__ = [
    "Comparison",
    "Design",
    "ModelComparison",
    "ModelRow",
    "block_comparison",
    "comparison",
    "comparison_json",
    "comparison_of",
    "design_of",
    "model_comparison",
    "model_comparison_json",
    "model_report_figures",
    "model_report_html",
    "reach",
    "report_figures",
    "report_html",
    "write_report",
]

if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from rnnviz.report.compare import comparison, comparison_of
    from rnnviz.report.html import (
        model_report_figures,
        model_report_html,
        report_figures,
        report_html,
        write_report,
    )
    from rnnviz.report.models import block_comparison, model_comparison
    from rnnviz.report.numbers import (
        Comparison,
        Design,
        ModelComparison,
        ModelRow,
        comparison_json,
        design_of,
        model_comparison_json,
        reach,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rnnviz.report' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

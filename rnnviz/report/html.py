"""A :class:`~rnnviz.report.compare.Comparison` as one self-contained HTML file: the figures
(drawn by :mod:`rnnviz.charts` from :mod:`rnnviz.frames`' frames), the numbers as a table and
as JSON, every design's config, and the versions and machine that computed them.

Self-contained: plotly.js is inlined once, there is no CDN, no external style sheet, font or
image, so the file opens offline in any browser. Every text put into the page is escaped.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import pandas as pd

from rnnviz.base.formatting import pow10_text
from rnnviz.charts.costs import bar_panels
from rnnviz.charts.embed import figure_div, plotly_js
from rnnviz.charts.lines import gradient_figure
from rnnviz.charts.training import training_figure
from rnnviz.config import FIELD_SPECS, ConfigError
from rnnviz.frames.training import training_frame
from rnnviz.report.compare import Comparison, comparison_json

if TYPE_CHECKING:  # a type only: the figures are drawn, and embedded, by rnnviz.charts
    from rnnviz.charts.embed import PlotlyFigure

#: The ``id`` of the ``<script type="application/json">`` holding :func:`comparison_json`.
NUMBERS_ID = "rnnviz-numbers"
#: Plotly's options for every figure: no logo link, and the modebar's image export offline.
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.differs td { background: #fff8e1; }
.figure { margin: 1em 0; } .note { color: #555; font-size: 0.9em; }
"""


class Figure(NamedTuple):
    """One figure of a report: its ``key`` (the ``id`` of its ``<div>``: ``rnnviz-<key>``),
    its section heading and the Plotly figure."""

    key: str
    heading: str
    figure: PlotlyFigure


def gradient_frame(c: Comparison) -> pd.DataFrame:
    """``t, series, value, log10_value, run``: every design's total ‖∂L/∂carry_t‖ (float32's
    value and its exact log₁₀), run = the design's label; the frame
    :func:`rnnviz.charts.gradient_figure` draws (as
    :func:`~rnnviz.frames.gradients.gradient_long_frame`'s ``total`` rows)."""
    parts = [
        pd.DataFrame(
            {
                "t": range(d.log10_grad_norms.size),
                "series": "total",
                "value": d.grad_norms.astype(float),
                "log10_value": d.log10_grad_norms.astype(float),
                "run": d.label,
            }
        )
        for d in c.designs
    ]
    return pd.concat(parts, ignore_index=True)


def dynamics_frame(c: Comparison) -> pd.DataFrame:
    """``design, quantity, value``: λ₁ (where computed) and the measured decay per step
    (where fittable), both natural log per step, one row each."""
    rows = []
    for d in c.designs:
        if d.lambda1 is not None:
            rows.append((d.label, "λ₁ (predicted, QR method)", d.lambda1))
        if d.decay_per_step is not None:
            rows.append((d.label, "measured decay of ln‖∂L/∂carry‖", d.decay_per_step))
    return pd.DataFrame(rows, columns=["design", "quantity", "value"])


def report_figures(c: Comparison) -> list[Figure]:
    """The report's figures, in page order: the gradients of every design overlaid; λ₁ and
    the measured decay per design; the learning curves when the designs were trained.

    Example:
        >>> from rnnviz import RunConfig, analyze
        >>> from rnnviz.report import comparison_of, report_figures
        >>> a = analyze(RunConfig(cell="gru", hidden_size=4, seq_len=5), repeats=1)
        >>> tuple(f.key for f in report_figures(comparison_of([a])))
        ('gradients', 'dynamics')
    """
    figures = [
        Figure(
            "gradients",
            "Gradients through time",
            gradient_figure(gradient_frame(c), title="‖∂L/∂carry_t‖ through time, per design"),
        ),
        Figure(
            "dynamics",
            "λ₁ and the decay per step",
            bar_panels(
                dynamics_frame(c),
                "design",
                [("value", "natural log per step (< 0: vanishing, > 0: exploding)")],
                "λ₁ against the measured decay of ‖∂L/∂carry_{T−k}‖ per step k",
                color="quantity",
            ),
        ),
    ]
    trained = [d for d in c.designs if d.training is not None]
    if trained:
        df = pd.concat([training_frame([d.training], label=d.label) for d in trained], ignore_index=True)
        figures.append(
            Figure(
                "learning",
                "Learning curves",
                training_figure(
                    df,
                    "loss_smooth",
                    f"Training loss on {c.task or trained[0].training.task} (trailing mean)",
                    "loss (log)",
                    baseline=trained[0].training.baseline,
                ),
            )
        )
    return figures


def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _number(x: float | None, fmt: str = "{:+.4f}") -> str:
    return "—" if x is None or not math.isfinite(x) else fmt.format(x)


def _table(
    header: list[str],
    rows: list[list[str]],
    numeric: Collection[int] = (),
    classes: Sequence[str] | None = None,
) -> str:
    """An escaped HTML table; the columns in ``numeric`` right-aligned, row i of class ``classes[i]``."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(
            f'<td class="num">{_e(v)}</td>' if j in numeric else f"<td>{_e(v)}</td>"
            for j, v in enumerate(row)
        )
        cls = f' class="{_e(classes[i])}"' if classes and classes[i] else ""
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _numbers_table(c: Comparison) -> str:
    header = ["design", "loss", "‖∂L/∂carry_0‖", "‖∂L/∂carry_T‖", "decay / step (ln)", "decades / step", "λ₁"]
    trained = any(d.training is not None for d in c.designs)
    if trained:
        header += ["final loss", "baseline", "solved at step"]
    header.append("verdict")
    rows = []
    for d in c.designs:
        logs = d.log10_grad_norms
        row = [
            d.label,
            f"{d.loss:.6g}",
            pow10_text(float(logs[0])),
            pow10_text(float(logs[-1])),
            _number(d.decay_per_step),
            _number(d.decades_per_step),
            _number(d.lambda1),
        ]
        if trained:
            r = d.training
            row += (
                ["—", "—", "—"]
                if r is None
                else [
                    f"{r.final_loss():.4g}",
                    f"{r.baseline:.4g}",
                    "not solved" if r.solved_step is None else str(r.solved_step),
                ]
            )
        rows.append([*row, d.verdict])
    return _table(header, rows, numeric=set(range(1, len(header) - 1)))


def _config_table(c: Comparison) -> str:
    rows, classes = [], []
    for name in FIELD_SPECS:
        values = [getattr(d.config, name) for d in c.designs]
        rows.append([name, *("None" if v is None else str(v) for v in values)])
        classes.append("differs" if len({repr(v) for v in values}) > 1 else "")
    return _table(["field", *c.labels], rows, classes=classes)


def _environment_table(c: Comparison) -> str:
    env = c.environment
    rows = [[name, version or "not installed"] for name, version in c.packages]
    rows += [
        ["python", env.python],
        ["machine", c.machine],
        ["CPUs", str(env.cpu_count)],
        ["GPUs", ", ".join(env.gpus) or "none"],
        ["analysed on", ", ".join(dict.fromkeys(d.device for d in c.designs))],
        ["allocator", env.allocator],
        ["created", c.created],
    ]
    return _table(["what", "value"], rows)


def _numbers_script(c: Comparison) -> str:
    """The numbers as JSON inside a ``<script>``: ``<``, ``>`` and ``&`` written as ``\\u003c``
    … so no text can close the element (``json.loads`` reads them back as the characters)."""
    text = json.dumps(comparison_json(c), ensure_ascii=False, allow_nan=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{NUMBERS_ID}">{text}</script>'


def _title(c: Comparison) -> str:
    return "rnnviz comparison: " + ", ".join(c.labels)


def _summary(c: Comparison) -> str:
    shapes = dict.fromkeys(
        f"H={d.config.hidden_size}, T={d.config.seq_len}, B={d.config.batch_size or 'unbatched'}, "
        f"{d.config.dtype}"
        for d in c.designs
    )
    inputs = f"a batch of {c.data} drawn by the seed, with its task loss" if c.data else "synthetic inputs"
    parts = [f"{len(c.designs)} designs at {'; '.join(shapes)}, on {inputs}."]
    if c.train_steps is not None:
        parts.append(f"Each trained for {c.train_steps} steps on {c.task} (Adam, clipping at 1).")
    parts.append(
        "λ₁: the leading Lyapunov exponent (QR method); decay: the least-squares slope of "
        "ln‖∂L/∂carry_(T−k)‖ over the lags k between T/10 and 9T/10. Both are natural log per step: "
        "a gradient that follows λ₁ changes by about e^(λ₁·k) over k steps."
    )
    return "".join(f'<p class="note">{_e(p)}</p>' for p in parts)


def report_html(c: Comparison) -> str:
    """The report: one HTML document, self-contained (plotly.js inlined once, no external
    resource), opening offline in any browser.

    It holds, in order: a summary line; the numbers as a table (loss, ‖∂L/∂carry_0‖ and
    ‖∂L/∂carry_T‖, the decay per step, λ₁, the verdict, the training's final loss); the
    figures of :func:`report_figures`; every :class:`~rnnviz.config.RunConfig` field per
    design (rows that differ marked); the package versions and the machine; and
    :func:`~rnnviz.report.compare.comparison_json` in ``<script type="application/json"
    id="rnnviz-numbers">`` for reading the numbers back exactly.

    Args:
        c: the comparison (:func:`~rnnviz.report.compare.comparison` or
            :func:`~rnnviz.report.compare.comparison_of`).

    Returns:
        The document's text (about 5 MB, nearly all of it plotly.js).

    Example:
        >>> import json, re
        >>> from rnnviz import RunConfig, analyze
        >>> from rnnviz.report import comparison_of, report_html
        >>> a = analyze(RunConfig(cell="gru", hidden_size=4, seq_len=5), repeats=1)
        >>> page = report_html(comparison_of([a]))
        >>> page.startswith("<!DOCTYPE html>"), "<script src" in page  # plotly.js inlined
        (True, False)
        >>> found = re.search(r'id="rnnviz-numbers">(.*?)</script>', page, re.S)
        >>> first = json.loads(found.group(1))["designs"].pop(0)
        >>> first["grad_norms"] == a.grad_norms.tolist()
        True
    """
    figures = report_figures(c)
    sections = []
    for f in figures:
        div = figure_div(f.figure, f"rnnviz-{f.key}", PLOTLY_CONFIG)
        sections.append(f'<h2>{_e(f.heading)}</h2><div class="figure">{div}</div>')
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<meta name="generator" content="rnnviz {_e(dict(c.packages).get("rnnviz"))}">',
            f"<title>{_e(_title(c))}</title>",
            f"<style>{_STYLE}</style>",
            "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>",
            f"<script>{plotly_js()}</script>",
            "</head><body>",
            f"<h1>{_e(_title(c))}</h1>",
            _summary(c),
            "<h2>Numbers</h2>",
            _numbers_table(c),
            *sections,
            "<h2>Configurations</h2>",
            '<p class="note">Every RunConfig field of every design; the rows where they differ are '
            "marked.</p>",
            _config_table(c),
            "<h2>Versions and machine</h2>",
            _environment_table(c),
            _numbers_script(c),
            "</body></html>",
        ]
    )


def report_path(path: str | Path) -> Path:
    """``path`` checked as a place to write a report, before anything is computed.

    Raises:
        ConfigError: ``path`` is a folder, or its folder does not exist.
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise ConfigError("report", str(path), "a file name (e.g. compare.html), not a folder")
    if not path.parent.is_dir():
        raise ConfigError("report", str(path), f"a file in a folder that exists ({path.parent} does not)")
    return path


def write_report(c: Comparison, path: str | Path) -> Path:
    """Write :func:`report_html` to ``path`` (UTF-8; its folder must exist).

    Args:
        c: the comparison.
        path: the file to write (replaced when it exists).

    Returns:
        The path written.

    Raises:
        ConfigError: ``path`` is a folder, or its folder does not exist (:func:`report_path`).

    Example:
        >>> import pathlib, tempfile
        >>> from rnnviz import RunConfig, analyze
        >>> from rnnviz.report import comparison_of, write_report
        >>> a = analyze(RunConfig(cell="gru", hidden_size=4, seq_len=5), repeats=1)
        >>> path = write_report(comparison_of([a]), pathlib.Path(tempfile.mkdtemp()) / "gru.html")
        >>> path.stat().st_size > 1_000_000  # plotly.js inlined
        True
    """
    path = report_path(path)
    path.write_text(report_html(c), encoding="utf-8")
    return path


__all__ = [
    "Figure",
    "NUMBERS_ID",
    "PLOTLY_CONFIG",
    "dynamics_frame",
    "gradient_frame",
    "report_figures",
    "report_html",
    "report_path",
    "write_report",
]

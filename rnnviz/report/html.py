"""A :class:`~rnnviz.report.compare.Comparison` (cell designs) or a
:class:`~rnnviz.report.models.ModelComparison` (your own models, or designs as their reference
blocks) as one self-contained HTML file: the figures (drawn by :mod:`rnnviz.charts` from
:mod:`rnnviz.frames`' frames), the numbers as a table and as JSON, every design's config or
model's sizes, and the versions and machine that computed them.

Self-contained: plotly.js is inlined once, there is no CDN, no external style sheet, font or
image, so the file opens offline in any browser. Every text put into the page is escaped.
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import json
import math
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd

from rnnviz.base.formatting import pow10_text
from rnnviz.charts.costs import bar_panels
from rnnviz.charts.embed import figure_div, plotly_js
from rnnviz.charts.lines import gradient_figure
from rnnviz.charts.models import layer_heatmap, layer_lines, state_lines, token_connectivity
from rnnviz.charts.training import training_figure
from rnnviz.config import FIELD_SPECS, ConfigError
from rnnviz.frames.models import layer_frame, state_frame, token_connectivity_frame, true_zeros
from rnnviz.frames.training import training_frame
from rnnviz.report.explorable import fit_js
from rnnviz.report.numbers import (
    BLOCK_INPUTS,
    REACH_FRACTION,
    Comparison,
    ModelComparison,
    ModelRow,
    comparison_json,
    model_comparison_json,
    reach_text,
)

if TYPE_CHECKING:  # types only: the figures are drawn, and embedded, by rnnviz.charts
    from rnnviz.base.environment import Environment
    from rnnviz.base.models import ModelAnalysis
    from rnnviz.charts.embed import PlotlyFigure
    from rnnviz.config import RunConfig

#: The ``id`` of the ``<script type="application/json">`` holding :func:`comparison_json`.
NUMBERS_ID = "rnnviz-numbers"
#: Plotly's options for every figure: no logo link, and the modebar's image export offline.
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
#: At most this many figures share a row (more wrap): the page is 1200 px wide at most.
PER_ROW = 3

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.differs td { background: #fff8e1; }
.figure { margin: 1em 0; } .note { color: #555; font-size: 0.9em; }
.side-by-side { display: grid; gap: 0 1em; } .side-by-side > .figure { min-width: 0; }
"""


class Figure(NamedTuple):
    """One figure of a report: its ``key`` (the ``id`` of its ``<div>``: ``rnnviz-<key>``),
    its section heading, the Plotly figure and a note printed under it (or None)."""

    key: str
    heading: str
    figure: PlotlyFigure
    note: str | None = None


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


class ModelFigureKind(NamedTuple):
    """One kind of figure drawn for every model: its key (``rnnviz-<key>-<i>``, i the model's
    place from 1), its section heading, the frame it draws and the chart that draws it, the
    title after the model's label, and what says in words what the chart cannot (from the
    frame, or None)."""

    key: str
    heading: str
    frame: Callable[[ModelAnalysis], pd.DataFrame]
    chart: Callable[..., PlotlyFigure]
    title: str
    note: Callable[[pd.DataFrame], str | None] = lambda df: None


#: The figures of a model comparison, in page order: one section per kind, the models side by side.
MODEL_FIGURES = (
    ModelFigureKind(
        "layers",
        "The gradient through every layer and step",
        layer_frame,
        layer_heatmap,
        "‖∂L/∂x_t‖",
        true_zeros,
    ),
    ModelFigureKind("layer-lines", "One line per layer", layer_frame, layer_lines, "‖∂L/∂x_t‖ per layer"),
    ModelFigureKind(
        "states", "The recurrent states", state_frame, state_lines, "‖∂L/∂state_t‖ of each recurrent layer"
    ),
    ModelFigureKind(
        "connectivity",
        "What the last prediction reads",
        token_connectivity_frame,
        token_connectivity,
        "‖∂ℓ_p/∂x_t‖ per token",
    ),
)


def model_report_figures(c: ModelComparison) -> list[Figure]:
    """A model comparison's figures, in page order: for each kind of :data:`MODEL_FIGURES`,
    one per model (the layer × step heatmap, the per-layer lines, the state lines, the
    connectivity over the tokens), drawn by :mod:`rnnviz.charts.models`.

    Example:
        >>> import tempfile, transformers
        >>> from rnnviz.report import model_comparison, model_report_figures
        >>> folder = tempfile.mkdtemp()
        >>> config = transformers.MambaConfig(vocab_size=32, hidden_size=8, state_size=2, num_hidden_layers=1)
        >>> transformers.MambaForCausalLM(config).save_pretrained(folder)
        >>> tuple(f.key for f in model_report_figures(model_comparison([folder], [3, 1, 4, 1])))
        ('layers-1', 'layer-lines-1', 'states-1', 'connectivity-1')
    """
    figures = []
    for kind in MODEL_FIGURES:
        for i, r in enumerate(c.rows, start=1):
            df = kind.frame(r.analysis)
            chart = kind.chart(df, title=f"{r.label}: {kind.title}")
            figures.append(Figure(f"{kind.key}-{i}", kind.heading, chart, kind.note(df)))
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


def _config_table(labels: Sequence[str], configs: Sequence[RunConfig]) -> str:
    """Every :class:`~rnnviz.config.RunConfig` field, a column per design; rows that differ marked."""
    rows, classes = [], []
    for name in FIELD_SPECS:
        values = [getattr(cfg, name) for cfg in configs]
        rows.append([name, *("None" if v is None else str(v) for v in values)])
        classes.append("differs" if len({repr(v) for v in values}) > 1 else "")
    return _table(["field", *labels], rows, classes=classes)


def _environment_table(c: Comparison | ModelComparison, devices: Sequence[str]) -> str:
    """The packages' versions, the host, the ``devices`` the analyses ran on, and when."""
    env: Environment = c.environment
    rows = [[name, version or "not installed"] for name, version in c.packages]
    rows += [
        ["python", env.python],
        ["machine", c.machine],
        ["CPUs", str(env.cpu_count)],
        ["GPUs", ", ".join(env.gpus) or "none"],
        ["analysed on", ", ".join(dict.fromkeys(devices))],
        ["allocator", env.allocator],
        ["created", c.created],
    ]
    return _table(["what", "value"], rows)


def _numbers_script(numbers: dict[str, Any]) -> str:
    """The numbers as JSON inside a ``<script>``: ``<``, ``>`` and ``&`` written as ``\\u003c``
    … so no text can close the element (``json.loads`` reads them back as the characters)."""
    text = json.dumps(numbers, ensure_ascii=False, allow_nan=False)
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
    return _page(
        _title(c),
        dict(c.packages).get("rnnviz"),
        [
            _summary(c),
            "<h2>Numbers</h2>",
            _numbers_table(c),
            *_sections(report_figures(c)),
            "<h2>Configurations</h2>",
            '<p class="note">Every RunConfig field of every design; the rows where they differ are '
            "marked.</p>",
            _config_table(c.labels, [d.config for d in c.designs]),
            "<h2>Versions and machine</h2>",
            _environment_table(c, [d.device for d in c.designs]),
            _numbers_script(comparison_json(c)),
        ],
    )


def _sections(figures: Sequence[Figure]) -> list[str]:
    """One section per heading: its figures in a row (side by side where several share it)."""
    sections = []
    for heading, group in itertools.groupby(figures, key=lambda f: f.heading):
        divs = [
            figure_div(f.figure, f"rnnviz-{f.key}", PLOTLY_CONFIG)
            + ("" if f.note is None else f'<p class="note">{_e(f.note)}</p>')
            for f in group
        ]
        divs = [f'<div class="figure">{div}</div>' for div in divs]
        # The columns are fixed before the first figure draws: plotly sizes a figure to its box
        # once (and again only when the window resizes), so a box must not change as more arrive.
        columns = f"grid-template-columns: repeat({min(len(divs), PER_ROW)}, minmax(0, 1fr))"
        body = (
            divs[0]
            if len(divs) == 1
            else f'<div class="side-by-side" style="{columns}">{"".join(divs)}</div>'
        )
        sections.append(f"<h2>{_e(heading)}</h2>{body}")
    return sections


def _page(title: str, version: str | None, body: Sequence[str]) -> str:
    """The document around ``body`` (HTML, already escaped): the head, the style and plotly.js
    inlined once, so that the page needs nothing else to open."""
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f'<meta name="generator" content="rnnviz {_e(version)}">',
            f"<title>{_e(title)}</title>",
            f"<style>{_STYLE}</style>",
            "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>",
            f"<script>{plotly_js()}</script>",
            "</head><body>",
            f"<h1>{_e(title)}</h1>",
            *body,
            # side by side, a figure is a third of the page: its title wrapped, clear of its legend
            f"<script>{fit_js()}</script>",
            '<script>window.addEventListener("load", () => rnnvizFitAll());</script>',
            "</body></html>",
        ]
    )


def _notes(parts: Sequence[str]) -> str:
    return "".join(f'<p class="note">{_e(p)}</p>' for p in parts)


def _tokens_text(r: ModelRow) -> str:
    """The tokens a model read, as their text where a tokenizer gave it, else their ids."""
    tokens = r.analysis.tokens
    shown = " · ".join(tokens) if tokens is not None else ", ".join(map(str, r.token_ids[0].tolist()))
    return shown if r.token_ids.shape[0] == 1 else f"{shown} (the first of {r.token_ids.shape[0]} sequences)"


def _reach_note(back_from: str, whole: str) -> str:
    """What the table's reach means, counted back from ``back_from`` over ``whole``."""
    return (
        f"Reach: the number of positions back (from {back_from}) at which the norm has fallen below "
        f"{REACH_FRACTION:.0%} of its largest value and stays below to the first position "
        f"(rnnviz.report.models.reach). “> k (all of {whole})”: it is still above that at the first one."
    )


def _model_summary(c: ModelComparison) -> str:
    steps = sorted({r.steps for r in c.rows})
    read = "through its own tokenizer.json" if c.text is not None else "as the same token ids"
    parts = [f"{len(c.rows)} models on the same text, each {read} (T = {', '.join(map(str, steps))})."]
    if not c.same_tokens:
        parts.append(
            "The models tokenise the text differently (their tokens are listed under Inputs): position t "
            "is not the same piece of text in each, so compare the figures by token, not by position."
        )
    parts += [
        "L: the mean next-token cross-entropy over the positions that have a next token, as transformers "
        "computes it with labels=input_ids. x_t^(0): the embeddings entering the first block. ℓ_p: the "
        "loss of the prediction at p alone, the last position with a next token.",
        _reach_note(
            "the last position with a loss for ‖∂L/∂x_t^(0)‖, from p for ‖∂ℓ_p/∂x_t^(0)‖", "the text"
        ),
    ]
    return _notes(parts)


def _block_summary(c: ModelComparison) -> str:
    shapes = dict.fromkeys(
        f"T={cfg.seq_len}, B={cfg.batch_size or 'unbatched'}, I={cfg.input_size}, {cfg.inputs} inputs, "
        f"seed {cfg.seed}, {cfg.dtype}"
        for cfg in (r.config for r in c.rows)
    )
    return _notes(
        [
            f"{len(c.rows)} designs, each as its reference block, on the bare cells' inputs "
            f"({'; '.join(shapes)}): x_t passes through a linear projection to the block's width H, "
            "the blocks, the design's final norm and a linear readout ŷ.",
            "L = ½ Σ_b ‖ŷ_(b,T)‖², the bare cell's loss of the last step, on the readout. x_t^(0): the "
            "inputs themselves, before the projection, so row 0 reads the same x in every design. L "
            "reads the last step alone, so the connectivity of step T − 1 is ‖∂L/∂x_t^(0)‖ itself.",
            "vs the mean: each design's parameters against the mean over the designs.",
            _reach_note("the last step, T − 1", BLOCK_INPUTS),
        ]
    )


def _model_numbers_table(c: ModelComparison) -> str:
    """A row per model: its facts, loss and reaches; for reference blocks their width and one
    reach (their connectivity is the loss's gradient), for language models their vocabulary,
    p and the connectivity's reach."""
    blocks = c.blocks
    whole = BLOCK_INPUTS if blocks else "the text"
    mean = sum(r.n_params for r in c.rows) / len(c.rows)
    reads = f"below {REACH_FRACTION:.0%} from (positions back)"
    columns = [
        ("design" if blocks else "model", lambda r: r.label),
        ("type", lambda r: r.model_type),
        ("layers", lambda r: str(r.n_layers)),
        *([("width H", lambda r: str(r.config.hidden_size))] if blocks else []),
        ("parameters", lambda r: f"{r.n_params:,}"),
        ("vs the mean", lambda r: f"{r.n_params / mean - 1:+.1%}"),
        *([] if blocks else [("vocabulary", lambda r: f"{r.vocab_size:,}")]),
        ("steps T" if blocks else "tokens T", lambda r: str(r.steps)),
        ("loss", lambda r: f"{r.analysis.loss:.6g}"),
        (f"‖∂L/∂x_t^(0)‖ {reads}", lambda r: reach_text(r.input_reach, r.loss_end, whole)),
    ]
    if not blocks:
        columns += [
            ("p", lambda r: str(r.analysis.position)),
            (f"‖∂ℓ_p/∂x_t^(0)‖ {reads}", lambda r: reach_text(r.connectivity_reach, r.analysis.position)),
        ]
    rows = [[cell(r) for _, cell in columns] for r in c.rows]
    return _table([name for name, _ in columns], rows, numeric=range(2, len(columns)))


def _inputs_table(c: ModelComparison) -> str:
    rows = [[r.label, str(r.steps), _tokens_text(r)] for r in c.rows]
    return _table(["model", "T", "tokens"], rows, numeric={1})


def _sizes_table(c: ModelComparison) -> str:
    """Each model's source, its type and every field of its family's sizes; rows that differ
    marked. The type is every model's own (only some families' sizes hold it as a field)."""
    specs = [dataclasses.asdict(r.spec) if dataclasses.is_dataclass(r.spec) else {} for r in c.rows]
    fields = [k for k in dict.fromkeys(k for spec in specs for k in spec) if k != "model_type"]
    rows = [["source", *(r.source for r in c.rows)], ["model_type", *(r.model_type for r in c.rows)]]
    rows += [[name, *("—" if name not in spec else str(spec[name]) for spec in specs)] for name in fields]
    classes = ["differs" if len(set(row[1:])) > 1 else "" for row in rows]
    return _table(["field", *c.labels], rows, classes=classes)


def model_report_html(c: ModelComparison) -> str:
    """The report of your own models, or of designs as their reference blocks, side by side:
    one self-contained HTML document (plotly.js inlined once, no external resource), opening
    offline in any browser.

    It holds, in order: a summary (the inputs, what L, ℓ_p and the reach mean); the numbers as
    a table (type, layers, parameters and their difference from the mean, vocabulary, T, loss,
    and how far back ‖∂L/∂x_t^{(0)}‖ and ‖∂ℓ_p/∂x_t^{(0)}‖ reach:
    :func:`~rnnviz.report.models.reach`; for blocks their width H, and the one reach: L reads
    the last step, so the two are the same); the figures of :func:`model_report_figures`, the
    models side by side; the tokens each model read and every model's sizes (rows that differ
    marked), or for blocks every design's config; the package versions and the machine; and
    :func:`~rnnviz.report.models.model_comparison_json` in ``<script type="application/json"
    id="rnnviz-numbers">`` for reading the numbers back exactly.

    Args:
        c: the comparison (:func:`~rnnviz.report.models.model_comparison` or
            :func:`~rnnviz.report.models.block_comparison`).

    Returns:
        The document's text (about 5 MB, nearly all of it plotly.js).

    Example:
        >>> import json, re, tempfile, transformers
        >>> from rnnviz.report import model_comparison, model_report_html
        >>> folder = tempfile.mkdtemp()
        >>> config = transformers.MambaConfig(vocab_size=32, hidden_size=8, state_size=2, num_hidden_layers=1)
        >>> transformers.MambaForCausalLM(config).save_pretrained(folder)
        >>> c = model_comparison([folder], [3, 1, 4, 1])
        >>> page = model_report_html(c)
        >>> found = re.search(r'id="rnnviz-numbers">(.*?)</script>', page, re.S)
        >>> first = json.loads(found.group(1))["models"].pop(0)
        >>> first["grad_norms"] == c.rows[0].analysis.grad_norms.tolist()
        True
    """
    if c.blocks:
        title, summary = "rnnviz comparison of reference blocks: ", _block_summary(c)
        facts = [
            "<h2>Configurations</h2>",
            '<p class="note">Every RunConfig field of every design; the rows where they differ are '
            "marked.</p>",
            _config_table(c.labels, [r.config for r in c.rows]),
        ]
    else:
        title, summary = "rnnviz comparison of models: ", _model_summary(c)
        facts = [
            "<h2>Inputs</h2>",
            _notes(["The text: “" + c.text + "”."] if c.text is not None else []),
            _inputs_table(c),
            "<h2>Models</h2>",
            '<p class="note">Where each model was read from, and its sizes; the rows where they differ '
            "are marked.</p>",
            _sizes_table(c),
        ]
    return _page(
        title + ", ".join(c.labels),
        dict(c.packages).get("rnnviz"),
        [
            summary,
            "<h2>Numbers</h2>",
            _model_numbers_table(c),
            *_sections(model_report_figures(c)),
            *facts,
            "<h2>Versions and machine</h2>",
            _environment_table(c, [r.device for r in c.rows]),
            _numbers_script(model_comparison_json(c)),
        ],
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


def write_report(c: Comparison | ModelComparison, path: str | Path) -> Path:
    """Write :func:`report_html` (cell designs) or :func:`model_report_html` (your own models,
    or designs as their reference blocks) to ``path`` (UTF-8; its folder must exist).

    Args:
        c: the comparison of designs or of models.
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
    page = model_report_html(c) if isinstance(c, ModelComparison) else report_html(c)
    path.write_text(page, encoding="utf-8")
    return path


__all__ = [
    "MODEL_FIGURES",
    "Figure",
    "ModelFigureKind",
    "NUMBERS_ID",
    "PER_ROW",
    "PLOTLY_CONFIG",
    "dynamics_frame",
    "gradient_frame",
    "model_report_figures",
    "model_report_html",
    "report_figures",
    "report_html",
    "report_path",
    "write_report",
]

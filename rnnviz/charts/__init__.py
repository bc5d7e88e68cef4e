"""Pure chart builders: tidy pandas frames in, ``plotly.graph_objects.Figure`` out.

No JAX, no Streamlit. One theme (Okabe–Ito colours, safe for colour-blind readers;
Cividis for heatmaps). Every builder returns a figure with titles even for an empty
frame, never raises on NaN/Inf: non-finite values are left out of lines and marked.

* :mod:`~rnnviz.charts.base` — the theme, thinning, log axes, non-finite marks;
* :mod:`~rnnviz.charts.lines` — per-step series (gradient norms, lines, heatmaps, PCA path);
* :mod:`~rnnviz.charts.costs` — strategy and device costs;
* :mod:`~rnnviz.charts.dynamics` — phase diagram, spectra, Lyapunov exponents;
* :mod:`~rnnviz.charts.training` — training curves;
* :mod:`~rnnviz.charts.data` — one sequence of a data set (the digit, the series);
* :mod:`~rnnviz.charts.connectivity` — connectivity drawn on the input, λ over training.
"""

from rnnviz.base.formatting import superscript
from rnnviz.charts.base import (
    HEATMAP_SCALE,
    MAX_COLUMNS,
    MAX_POINTS,
    OKABE_ITO,
    POW10_HOVER,
    decades,
    empty_figure,
    pow10_ticks,
    thin,
)
from rnnviz.charts.connectivity import (
    connectivity_figure,
    digit_connectivity_figure,
    over_training_figure,
    series_connectivity_figure,
    shade,
    shaded_text_html,
)
from rnnviz.charts.costs import bar_panels, scaling_figure, speedup_figure
from rnnviz.charts.data import preview_figure
from rnnviz.charts.dynamics import (
    decay_figure,
    lyapunov_phase_figure,
    phase_figure,
    running_figure,
    singular_values_figure,
    spectrum_figure,
)
from rnnviz.charts.lines import gradient_figure, heatmap_figure, line_figure, projection_figure
from rnnviz.charts.training import clipping_figure, training_figure

__all__ = [
    "connectivity_figure",
    "digit_connectivity_figure",
    "over_training_figure",
    "series_connectivity_figure",
    "shade",
    "shaded_text_html",
    "HEATMAP_SCALE",
    "MAX_COLUMNS",
    "MAX_POINTS",
    "OKABE_ITO",
    "POW10_HOVER",
    "bar_panels",
    "clipping_figure",
    "decades",
    "decay_figure",
    "empty_figure",
    "gradient_figure",
    "heatmap_figure",
    "line_figure",
    "lyapunov_phase_figure",
    "phase_figure",
    "pow10_ticks",
    "preview_figure",
    "projection_figure",
    "running_figure",
    "scaling_figure",
    "singular_values_figure",
    "spectrum_figure",
    "speedup_figure",
    "superscript",
    "thin",
    "training_figure",
]

"""The dashboard's views: each takes an Analysis (or config) and draws it with
:mod:`rnnviz.charts`.

Computation goes through the functions app.py passes in (its worker pool); nothing here
touches JAX. One module per kind of view:

* :mod:`~rnnviz.ui.views.common` — the header, budgets, CSV buttons, captions;
* :mod:`~rnnviz.ui.views.gradients` — Gradients, Carry and Compare;
* :mod:`~rnnviz.ui.views.costs` — Strategies and Devices;
* :mod:`~rnnviz.ui.views.dynamics` — Jacobians / Lyapunov and the Phase diagram;
* :mod:`~rnnviz.ui.views.training` — the Training tab's controls and results;
* :mod:`~rnnviz.ui.views.memory` — the Memory tab (connectivity on the input, gates);
* the Learn tab is :mod:`rnnviz.ui.learn`.
"""

from rnnviz.ui.learn import learn_view
from rnnviz.ui.views.common import cost_of, header, limits_caption, url_warnings, within_budget
from rnnviz.ui.views.costs import devices_view, strategies_view
from rnnviz.ui.views.dynamics import jacobians_view, phase_view
from rnnviz.ui.views.gradients import carry_view, compare_view, gradients_view
from rnnviz.ui.views.memory import memory_view
from rnnviz.ui.views.training import TRAIN_DEFAULTS, over_training_view, training_controls, training_results

__all__ = [
    "TRAIN_DEFAULTS",
    "carry_view",
    "compare_view",
    "cost_of",
    "devices_view",
    "gradients_view",
    "header",
    "jacobians_view",
    "learn_view",
    "limits_caption",
    "memory_view",
    "over_training_view",
    "phase_view",
    "strategies_view",
    "training_controls",
    "training_results",
    "url_warnings",
    "within_budget",
]

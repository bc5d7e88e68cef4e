"""The dashboard's tabs, one module per tab: ``TITLE`` (its label, and its value in the URL's
``?tab=``), ``requests(ctx)`` and ``render(ctx)`` of a :class:`~rnnviz.ui.tabs.context.TabContext`
(``docs/dev/adding-a-tab.md``). What several tabs share is in :mod:`~rnnviz.ui.tabs.common`;
each tab's longer prose sits beside it in ``<tab>.md``.
"""

from rnnviz.ui.tabs import (
    carry,
    compare,
    devices,
    gradients,
    jacobians,
    learn,
    memory,
    model,
    phase,
    strategies,
    training,
)

#: The tabs, in the page's order: app.py, idle time and the tests iterate this one tuple.
TABS = (gradients, carry, strategies, phase, jacobians, training, memory, model, devices, compare, learn)

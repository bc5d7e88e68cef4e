"""The dashboard's tabs, one module per tab, in the order the page shows them.

Each tab module exposes ``TITLE`` (its label, and its value in the URL's ``?tab=``) and
``render(ctx)``, which draws the tab from a :class:`~rnnviz.ui.tabs.context.TabContext`.
app.py draws :data:`TABS` and nothing else, so adding a tab is one new module and one line
below (``docs/dev/adding-a-tab.md``). What several tabs share is in
:mod:`~rnnviz.ui.tabs.common`; each tab's longer prose sits beside it in ``<tab>.md``.
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

#: The tabs, in the page's order: app.py and the tests iterate this one tuple.
TABS = (
    gradients,
    carry,
    strategies,
    phase,
    jacobians,
    training,
    memory,
    model,
    devices,
    compare,
    learn,
)

__all__ = ["TABS"]

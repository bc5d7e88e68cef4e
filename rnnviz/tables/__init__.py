"""Plain-data tables that :mod:`rnnviz.config` validates against (no JAX).

* :mod:`rnnviz.tables.cells` — every cell's :class:`~rnnviz.tables.cells.CellSpec`, the
  built-in cells' rows from :mod:`rnnviz.tables.builtin_cells` (imported here, so the table
  holds them before anything asks it) and the installed plugins';
* :mod:`rnnviz.tables.strategies` — every strategy's
  :class:`~rnnviz.tables.strategies.StrategyRules` (cells it can run, memory it holds).
* :mod:`rnnviz.tables.tasks` — every synthetic training task's
  :class:`~rnnviz.tables.tasks.TaskRules` (its input size, outputs, metric, description).
"""

from rnnviz.tables import builtin_cells  # noqa: F401  (the built-in cells' rows of the table)

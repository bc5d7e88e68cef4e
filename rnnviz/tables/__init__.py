"""Plain-data tables that :mod:`rnnviz.config` validates against (no JAX).

* :mod:`rnnviz.tables.cells` — every cell's :class:`~rnnviz.tables.cells.CellSpec`;
* :mod:`rnnviz.tables.strategies` — every strategy's
  :class:`~rnnviz.tables.strategies.StrategyRules` (cells it can run, memory it holds).
* :mod:`rnnviz.tables.tasks` — every synthetic training task's
  :class:`~rnnviz.tables.tasks.TaskRules` (its input size, outputs, metric, description).
"""

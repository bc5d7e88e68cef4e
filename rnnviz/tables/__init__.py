"""Plain-data tables that :mod:`rnnviz.config` validates against (no JAX).

* :mod:`rnnviz.tables.cells` — every cell's :class:`~rnnviz.tables.cells.CellSpec`;
* :mod:`rnnviz.tables.strategies` — every strategy's
  :class:`~rnnviz.tables.strategies.StrategyRules` (cells it can run, memory it holds).
"""

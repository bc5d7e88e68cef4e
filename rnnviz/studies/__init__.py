"""Studies built on :func:`rnnviz.analyze`: sweeps, strategy comparisons, step Jacobians,
Lyapunov exponents, connectivity, λ over training, the tasks and training.

Each module is named for the function it defines (:mod:`rnnviz.studies.lyapunov` defines
:func:`~rnnviz.studies.lyapunov.lyapunov`); nothing is re-exported here, so no function
shadows its module."""

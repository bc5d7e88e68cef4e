"""How parameter gradients are gathered through time: the table of implementations
(:mod:`rnnviz.engine.strategies.registry`) and the two that need a module of their own, ``fused``
(:mod:`~rnnviz.engine.strategies.fused`) and ``parallel`` (:mod:`~rnnviz.engine.strategies.parallel`)."""

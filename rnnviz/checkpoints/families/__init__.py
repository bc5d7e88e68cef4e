"""One module per family of checkpoints, each defining ``FAMILY``
(:class:`~rnnviz.checkpoints.record.Family`); :mod:`rnnviz.checkpoints.registry` lists them."""

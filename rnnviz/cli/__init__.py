"""The command line, ``rnnviz …``: the parser and its commands (:mod:`~rnnviz.cli.main`),
the config/data/weights flags (:mod:`~rnnviz.cli.inputs`), the trained-network commands
(:mod:`~rnnviz.cli.trained`), ``rnnviz app`` (:mod:`~rnnviz.cli.launch`) and the argparse types."""

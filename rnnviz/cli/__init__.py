"""The command line, ``rnnviz …``: the parser and its commands (:mod:`~rnnviz.cli.main.main`),
the config/data/weights flags (:mod:`~rnnviz.cli.main.inputs`), the trained-network commands
(:mod:`~rnnviz.cli.main.trained`), ``rnnviz app`` (:mod:`~rnnviz.cli.main.launch`) and the argparse types."""

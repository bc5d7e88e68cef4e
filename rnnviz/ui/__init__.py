"""The Streamlit dashboard (imported only by app.py and ``rnnviz app``): the page
(:mod:`~rnnviz.ui.app`), its tabs (:mod:`~rnnviz.ui.tabs`, one module per tab), the
sidebar's sections (:mod:`~rnnviz.ui.sidebar`), and the client that calls into the worker
processes (:mod:`~rnnviz.ui.calls` → :mod:`rnnviz.serve`: the jobs, the pool, the cache)."""

"""The Streamlit dashboard (imported only by app.py and ``rnnviz app``): the page
(:mod:`~rnnviz.ui.app`), its tabs (:mod:`~rnnviz.ui.tabs`, one module per tab), the
sidebar's sections (:mod:`~rnnviz.ui.sidebar`), and the worker processes the tabs compute
in (:mod:`~rnnviz.ui.calls` → :mod:`~rnnviz.ui.jobs` in :mod:`~rnnviz.ui.worker`)."""

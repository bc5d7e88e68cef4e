"""The dashboard's runtime, apart from the Streamlit page: the worker processes and the
result cache (:mod:`~rnnviz.serve.worker`), what the workers run (:mod:`~rnnviz.serve.jobs`),
idle-time preparation (:mod:`~rnnviz.serve.idle`) and the tabs' budgets
(:mod:`~rnnviz.serve.budget`), the server's settings (:mod:`~rnnviz.serve.settings`), the
folders users fill and their caps (:mod:`~rnnviz.serve.folders`,
:mod:`~rnnviz.serve.trained_runs`, :mod:`~rnnviz.serve.model_files`), the heap
(:mod:`~rnnviz.serve.heap`) and the warm-up (:mod:`~rnnviz.serve.warm`).
Nothing here imports Streamlit or plotly (a contract in ``pyproject.toml``).
"""

"""The dashboard's sidebar, one module per section: :mod:`~rnnviz.ui.sidebar.configuration`
(the run's settings ↔ the URL, the presets), :mod:`~rnnviz.ui.sidebar.data` (the Data
section and its preview) and :mod:`~rnnviz.ui.sidebar.weights` (the Weights section)."""

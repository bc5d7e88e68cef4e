"""The dashboard's entry for ``streamlit run app.py`` in a checkout; the code lives in
:mod:`rnnviz.ui.app` (an installed rnnviz starts the same page with ``rnnviz app``)."""

from rnnviz.ui.app import main

main()

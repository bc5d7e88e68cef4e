"""The dashboard's entry for ``streamlit run app.py`` in a checkout: Streamlit finds ``app``, an
``st.App``, and serves the page (:mod:`rnnviz.ui.entry`, the script each run executes) with a
lifespan that warms it before the first visitor (:mod:`rnnviz.ui.lifespan`). An installed
rnnviz starts the same page with ``rnnviz app``."""

from pathlib import Path

import streamlit as st

from rnnviz.ui.lifespan import lifespan

app = st.App(Path(__file__).resolve().parent / "rnnviz" / "ui" / "entry.py", lifespan=lifespan)

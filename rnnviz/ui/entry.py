"""The script Streamlit runs for ``rnnviz app`` (each rerun executes it again)."""

from rnnviz.ui.app import main

main()

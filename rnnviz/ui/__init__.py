"""Streamlit UI layer (imported only by app.py): widgets ↔ config, and the views."""

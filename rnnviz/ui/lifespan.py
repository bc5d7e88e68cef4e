"""The lifespan of the dashboard's ``st.App`` (``streamlit run app.py``): as the server starts,
a thread of its own runs the page once (:func:`rnnviz.serve.warm.warm_and_report`), so the
first visitor finds the imports, the worker processes and the default analysis ready."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from streamlit import config

from rnnviz.serve.warm import base_url, warm_and_report

if TYPE_CHECKING:
    from streamlit.starlette import App


@asynccontextmanager
async def lifespan(app: App) -> AsyncIterator[None]:
    """Start the warm-up, a daemon thread that waits for the server's health check and ends when
    the page has run (``app`` is unused: ``streamlit run`` puts the port it bound in its settings)."""
    url = base_url(*(config.get_option(f"server.{name}") for name in ("address", "port", "baseUrlPath")))
    threading.Thread(target=warm_and_report, args=(url,), name="rnnviz-warm-up", daemon=True).start()
    yield

"""Rendering one dashboard page with Streamlit's AppTest, its URL parameters set, and no exception raised."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def render(app: AppTest, page: str, **params: str) -> AppTest:
    """Switch ``app`` to ``page`` with ``params`` as query parameters, run it, and check it raised nothing."""
    app.switch_page(page)
    for key, value in params.items():
        app.query_params[key] = value
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app

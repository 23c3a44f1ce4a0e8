"""The controls every chart page shares: the y axis (log, zoom, a fixed range, each bound to the URL) and buttons that
download a chart as PNG or SVG."""

from __future__ import annotations

from functools import partial

import altair as alt
import streamlit as st

from dashboard.curves_chart import EXPORTS, YAxis, export


def y_axis_choices() -> YAxis:
    """The y axis of every panel: log or linear, zoomed by scrolling or not, and an optional fixed range."""
    log, zoom, low, high = st.columns([1, 1, 1, 1])
    return YAxis(
        log=log.toggle("Log y axis", key="log_y", bind="query-params", help="values at or below 0 are left out"),
        zoom_y=zoom.toggle(
            "Zoom y too",
            key="zoom_y",
            bind="query-params",
            help="scroll or drag a panel to zoom and pan its values (that panel only: the others keep their ranges)",
        ),
        low=low.number_input("y from", value=None, key="y_min", bind="query-params", placeholder="each panel's own"),
        high=high.number_input("y to", value=None, key="y_max", bind="query-params", placeholder="each panel's own"),
    )


def export_buttons(chart: alt.ConcatChart, name: str) -> None:
    """Buttons downloading ``chart`` as ``name.png`` and ``name.svg`` (drawn when clicked, not before)."""
    for column, fmt in zip(st.columns(len(EXPORTS) + 4)[: len(EXPORTS)], EXPORTS, strict=True):
        column.download_button(
            f"Chart as {fmt.upper()}",
            partial(export, chart, fmt),
            file_name=f"{name}.{fmt}",
            mime=EXPORTS[fmt],
            key=f"export-{name}-{fmt}",
            icon=":material/download:",
            on_click="ignore",  # no rerun: the chart stays as it is, zoom included
        )

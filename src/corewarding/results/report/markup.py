"""The HTML pieces the reproduction report's sections share: a number or a dash, and a table of escaped cells."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape

import pandas as pd


def num(value: object, digits: int = 2) -> str:
    """A float with ``digits`` decimals, any other value escaped, a missing one as a dash.

    >>> num(81.234), num(None), num("<b>")
    ('81.23', '–', '&lt;b&gt;')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return "–"
    return f"{float(value):.{digits}f}" if isinstance(value, float) else escape(str(value))


def table(headers: Sequence[str], rows: Iterable[tuple[Sequence[str], str]]) -> str:
    """An HTML table; each row is (cells already escaped, a CSS class or '')."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(f'<tr class="{css}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>" for cells, css in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

"""Two runs' resolved configs compared key by key (the Compare page). A pure function, tested without Streamlit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd


def flat(config: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted.key, value)`` of every leaf of a nested config."""
    if isinstance(config, dict) and config:
        for key, value in config.items():
            yield from flat(value, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), config


def config_diff(a: dict[str, Any], b: dict[str, Any]) -> pd.DataFrame:
    """Every key of either config with both values, the differing keys first (each part sorted by key)."""
    left, right = dict(flat(a)) if a else {}, dict(flat(b)) if b else {}  # a run ingested before configs were kept
    keys = sorted(set(left) | set(right))
    rows = [(k, repr(left.get(k, "—")), repr(right.get(k, "—"))) for k in keys]
    frame = pd.DataFrame(rows, columns=["key", "a", "b"])
    frame["differs"] = frame["a"] != frame["b"]
    return frame.sort_values(["differs", "key"], ascending=[False, True], ignore_index=True)

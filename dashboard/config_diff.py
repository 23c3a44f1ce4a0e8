"""Runs' resolved configs compared key by key (the Compare page). Pure functions, tested without Streamlit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd

ABSENT = "—"  # a key the run's config lacks


def flat(config: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted.key, value)`` of every leaf of a nested config."""
    if isinstance(config, dict) and config:
        for key, value in config.items():
            yield from flat(value, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), config


def config_table(configs: Mapping[str, dict[str, Any]]) -> pd.DataFrame:
    """Every key of any config, one column per config (named by its key in ``configs``) holding the value's repr,
    and ``differs``: not every column holds the same; the differing keys first (each part sorted by key).

    >>> config_table({"r1": {"lr": 1, "seed": 0}, "r2": {"lr": 2, "seed": 0}, "r3": {"lr": 1}}).values.tolist()
    [['lr', '1', '2', '1', True], ['seed', '0', '0', "'—'", True]]
    """
    flats = {name: dict(flat(config)) if config else {} for name, config in configs.items()}  # {}: none stored
    keys = sorted(set().union(*flats.values())) if flats else []
    frame = pd.DataFrame({"key": keys, **{n: [repr(f.get(k, ABSENT)) for k in keys] for n, f in flats.items()}})
    columns = list(flats)
    frame["differs"] = frame[columns].nunique(axis=1) > 1 if columns else False
    return frame.sort_values(["differs", "key"], ascending=[False, True], ignore_index=True)


def config_diff(a: dict[str, Any], b: dict[str, Any]) -> pd.DataFrame:
    """Two configs compared: columns key, a, b, differs (see config_table)."""
    return config_table({"a": a, "b": b})

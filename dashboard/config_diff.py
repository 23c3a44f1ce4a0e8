"""Runs' resolved configs compared key by key (the Compare page). Pure functions, tested without Streamlit."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd

ABSENT = "—"  # a key the run's config lacks
_MISSING = object()  # stands for an absent key when telling values apart: no stored value equals it


def shown(value: Any) -> str:
    """A config value as a researcher writes it in YAML: a string as itself, ``null``, ``true``/``false``, numbers
    and lists plainly, never a Python repr with quotes.

    >>> [shown(v) for v in ("sdpa", None, True, 1e-06, [1, "é"], {"k": None})]
    ['sdpa', 'null', 'true', '1e-06', '[1, "é"]', '{"k": null}']
    """
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool | list | dict):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def flat(config: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted.key, value)`` of every leaf of a nested config."""
    if isinstance(config, dict) and config:
        for key, value in config.items():
            yield from flat(value, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), config


def config_table(configs: Mapping[str, dict[str, Any]]) -> pd.DataFrame:
    """Every key of any config, one column per config (named by its key in ``configs``) holding the value as
    :func:`shown` writes it (an absent key as ``—``), and ``differs``: not every config holds the same value, told
    apart by type too (the string ``"1"`` differs from the number 1, though both show as 1); the differing keys first
    (each part sorted by key).

    >>> config_table({"r1": {"lr": 1, "seed": 0}, "r2": {"lr": 2, "seed": 0}, "r3": {"lr": 1}}).values.tolist()
    [['lr', '1', '2', '1', True], ['seed', '0', '0', '—', True]]
    """
    flats = {name: dict(flat(config)) if config else {} for name, config in configs.items()}  # {}: none stored
    keys = sorted(set().union(*flats.values())) if flats else []
    frame = pd.DataFrame(
        {"key": keys, **{n: [ABSENT if k not in f else shown(f[k]) for k in keys] for n, f in flats.items()}}
    )
    frame["differs"] = [len({_identity(f.get(k, _MISSING)) for f in flats.values()}) > 1 for k in keys]
    return frame.sort_values(["differs", "key"], ascending=[False, True], ignore_index=True)


def _identity(value: Any) -> str:
    """What tells two config values apart: their type and value (an absent key is unlike any stored value)."""
    return "absent" if value is _MISSING else f"{type(value).__name__}:{value!r}"


def config_diff(a: dict[str, Any], b: dict[str, Any]) -> pd.DataFrame:
    """Two configs compared: columns key, a, b, differs (see config_table)."""
    return config_table({"a": a, "b": b})

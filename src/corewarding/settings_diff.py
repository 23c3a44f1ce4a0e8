"""Which of the settings a stored score was produced with differ between two scores (bottom floor: read by the
evaluation that writes the settings and by the results reads that compare them).

The settings are those of evaluation/provenance.py, kept as one JSON object per metric row; the model revision is
recorded but never compared (it always differs between a released checkpoint and a reproduction).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

NOT_KEYED = ("model_revision",)
UNKNOWN = "settings unknown"  # one side stored before the settings were kept (store v4)


def settings_dict(value: Mapping[str, Any] | str | None) -> dict[str, Any] | None:
    """The settings as a dict (from JSON text or a mapping); None when missing (None, NaN) or not a JSON object.

    >>> settings_dict('{"seed": 0}'), settings_dict(None), settings_dict("[1]")
    ({'seed': 0}, None, None)
    """
    if not isinstance(value, str | Mapping):  # None, or NaN (a missing pandas value)
        return None
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return dict(value)


def differing_settings(a: Mapping[str, Any] | str | None, b: Mapping[str, Any] | str | None) -> list[str]:
    """The keyed settings whose values differ between two scores (JSON text or dicts); ``settings unknown`` when a
    side has none.

    >>> differing_settings('{"seed": 0, "n": 4, "model_revision": "x"}', {"seed": 1, "n": 4, "model_revision": "y"})
    ['seed']
    >>> differing_settings(None, {"seed": 1})
    ['settings unknown']
    """
    left, right = settings_dict(a), settings_dict(b)
    if left is None or right is None:  # stored before store v4: never called comparable
        return [UNKNOWN]
    keys = sorted((set(left) | set(right)) - set(NOT_KEYED))
    return [k for k in keys if left.get(k) != right.get(k)]


def spread(settings: list[Mapping[str, Any] | str | None]) -> list[str]:
    """The keyed settings that differ anywhere among several scores (each compared with the first), in order.

    >>> spread(['{"seed": 0, "n": 4}', '{"seed": 1, "n": 4}', '{"seed": 0, "n": 8}'])
    ['seed', 'n']
    """
    found: list[str] = []
    for other in settings[1:]:
        found += [k for k in differing_settings(settings[0], other) if k not in found]
    return found


def settings_key(settings: Mapping[str, Any]) -> str:
    """A 12-hex key of the settings that make scores comparable (all but the model revision).

    >>> a = {"seed": 0, "model_revision": "org/m@1"}
    >>> settings_key(a) == settings_key({**a, "model_revision": "org/m@2"})
    True
    >>> settings_key(a) == settings_key({**a, "seed": 1})
    False
    """
    keyed = {k: v for k, v in settings.items() if k not in NOT_KEYED}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True, default=str).encode()).hexdigest()[:12]


def settings_json(settings: Mapping[str, Any]) -> str:
    """The settings as one sorted JSON object (what the store keeps)."""
    return json.dumps(dict(settings), sort_keys=True, default=str)

"""What a cell job may change on a worker: a short, typed allow-list of overrides; every other one is refused.

A job's overrides are composed on the worker's machine, so an override is a way into it: a data path that names
the worker's venv, an interpolation that reads its environment, a Hydra key that moves its files. Only the keys
below are taken, each as a plain override (``key=value``) whose value, parsed by Hydra's own override parser, has
the key's type and range; an interpolation, escaped or not, is never one of those. Refusals name the key and the
rule, never the value (a value may be a secret the sender did not mean to send).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import OverrideType, ValueType
from hydra.errors import HydraException


class OverrideRefused(ValueError):
    """An override a work pool's job may not carry; one line naming the key and the rule."""


@dataclass(frozen=True)
class Allowed:
    """One key a job may set: what its value must be, as words and as a test."""

    rule: str
    ok: Callable[[Any], bool]


def _whole(low: int, high: int) -> Allowed:
    return Allowed(f"a whole number in [{low}, {high}]", lambda v: type(v) is int and low <= v <= high)


def _choice(*names: str) -> Allowed:
    return Allowed(f"one of {', '.join(names)}", lambda v: type(v) is str and v in names)


# the training overrides a pipeline run may send to its cells (the matrix and the cell come from the worker's checkout)
TRAINING: dict[str, Allowed] = {
    "seed": _whole(0, 2**31 - 1),
    "schedule.total_steps": _whole(1, 10**7),
    "schedule.save_freq": _whole(1, 10**7),
    "schedule.test_freq": _whole(1, 10**7),
    "schedule.val_max_samples": _whole(1, 10**9),
}
# the evaluation overrides (pipeline run --eval-override, audit's trailing overrides and --generation)
EVALUATION: dict[str, Allowed] = {
    "seed": _whole(0, 2**31 - 1),
    "generation": _choice("transformers", "vllm"),
    "benchmark.limit": _whole(1, 10**7),
    "math_verify.workers": _whole(1, 1024),
    "bootstrap.samples": _whole(1, 10**7),
}

_PARSER = OverridesParser.create()


def check_overrides(overrides: Iterable[str], allowed: dict[str, Allowed], what: str) -> None:
    """Raise OverrideRefused for the first override that is not a plain ``key=value`` of an allowed key with a
    value of the key's type and range."""
    for number, override in enumerate(overrides, 1):
        where = f"{what} {number}"
        if not isinstance(override, str):
            raise OverrideRefused(f"{where}: not a string")
        try:
            (parsed,) = _PARSER.parse_overrides([override])
        except (HydraException, ValueError):
            raise OverrideRefused(f"{where}: not a Hydra override (key=value)") from None
        key = parsed.get_key_element()
        if parsed.key_or_group not in allowed or parsed.package is not None:
            names = ", ".join(sorted(allowed))
            raise OverrideRefused(f"{where} ({_shown(key)}): a work pool's job may set only {names}")
        if parsed.type != OverrideType.CHANGE or parsed.value_type != ValueType.ELEMENT:
            raise OverrideRefused(f"{where} ({key}): only key=value is accepted (no +, ~, ++ or sweeps)")
        rule = allowed[parsed.key_or_group]
        if not rule.ok(parsed.value()):
            raise OverrideRefused(f"{where} ({key}): must be {rule.rule} (an interpolation never is)")


def _shown(key: str) -> str:
    """A refused key, printable on one line (it came from outside: never shown raw)."""
    return ascii(key[:60])[1:-1]

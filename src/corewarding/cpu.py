"""The CPU a process runs on, as far as it changes CPU results: ``/proc/cpuinfo``'s model name and the vector flags
that pick torch's kernels, and the kernels asked for through ``ATEN_CPU_CAPABILITY``. Read by allow-list: nothing
else of ``/proc/cpuinfo`` (no serials, ids or microcode) and no other variable of the environment."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
CPU_FIELDS = ("model name", "flags")  # the only /proc/cpuinfo fields read
VECTOR_FLAGS = re.compile(r"^(sse4|avx|amx|fma|f16c)")  # the flags that pick torch's CPU kernels
KERNELS_VARIABLE = "ATEN_CPU_CAPABILITY"  # torch's cap on its CPU kernels (make demo sets avx2)


def cpu_fields(path: Path = CPUINFO) -> dict[str, str]:
    """The first processor's ``model name`` and ``flags`` from ``/proc/cpuinfo`` (empty where it is unreadable)."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() in CPU_FIELDS:
            fields.setdefault(name.strip(), value.strip())
    return fields


def describe_cpu(fields: dict[str, str], capability: str | None = None) -> str:
    """``<model name> (<vector flags>)`` for a warning: the flags that choose torch's CPU kernels, and the kernels
    asked for when ``ATEN_CPU_CAPABILITY`` (``capability``) caps them.

    >>> describe_cpu({"model name": "AMD EPYC", "flags": "fpu avx2 avx512f sse4_2 vme"}, "avx2")
    'AMD EPYC (avx2 avx512f sse4_2), ATEN_CPU_CAPABILITY=avx2'
    """
    vector = vector_flags(fields)
    model = fields.get("model name", "unknown CPU")
    shown = f"{model} ({' '.join(vector)})" if vector else model
    return f"{shown}, ATEN_CPU_CAPABILITY={capability}" if capability else shown


def vector_flags(fields: dict[str, str]) -> list[str]:
    """The flags of ``fields`` that pick torch's CPU kernels, in /proc/cpuinfo's order."""
    return [flag for flag in fields.get("flags", "").split() if VECTOR_FLAGS.match(flag)]


def cpu_record(path: Path = CPUINFO) -> dict[str, Any]:
    """What a run records of its CPU (run.json's ``cpu``): model, vector flags and the kernels asked for (None: the
    CPU's best).

    >>> sorted(cpu_record(Path("/no/such/cpuinfo")))
    ['kernels', 'model', 'vector_flags']
    """
    fields = cpu_fields(path)
    return {
        "model": fields.get("model name"),
        "vector_flags": vector_flags(fields),
        "kernels": os.environ.get(KERNELS_VARIABLE) or None,
    }

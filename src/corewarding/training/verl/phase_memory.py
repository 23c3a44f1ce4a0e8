"""Opt-in peak memory per worker phase (``perf/memory_plan_check.py``; ``docs/gpu-plan.md``).

With ``COREWARDING_PHASE_MEMORY=<folder>`` in a worker's environment, each phase the worker wraps with ``measured``
(old log-prob, reference/teacher log-prob, update, save) appends one JSON line to ``<folder>/rank_<r>.jsonl``: the
process's resident memory at the phase's start, its peak during the phase and at its end (bytes), and the sequence
lengths of the phase's batch. On CPU (``verl.platform=cpu``) a rank's "device" memory is its process's memory.

The peak is the kernel's high-water mark: writing ``5`` to ``/proc/self/clear_refs`` resets ``VmHWM`` to the current
resident size, so ``VmHWM`` at the end is the phase's own peak, with nothing missed between samples. Where that file
cannot be written, a thread samples ``VmRSS`` every millisecond instead. Run with ``MALLOC_MMAP_THRESHOLD_=65536`` so
glibc hands large tensors back to the kernel when they are freed (otherwise a phase starts above the last one's
garbage and the increments shrink). Without the variable nothing is measured and nothing is written.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ENV = "COREWARDING_PHASE_MEMORY"
F = TypeVar("F", bound=Callable[..., Any])


def _status(*keys: str) -> dict[str, int]:
    """Fields of ``/proc/self/status`` in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in keys:
                out[name] = int(rest.split()[0]) * 1024
    return out


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class _Sampler:
    """The fallback: the largest ``VmRSS`` seen by a thread polling every millisecond."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _status("VmRSS")["VmRSS"])
            self._stop.wait(0.001)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, _status("VmRSS")["VmRSS"])


def lengths_of(data: Any) -> list[int]:
    """The sequence lengths of a phase's batch (verl's nested ``input_ids``), or [] where there is none."""
    try:
        ids = data["input_ids"]
        if getattr(ids, "is_nested", False):
            return [int(n) for n in ids.offsets().diff().tolist()]
        return [int(ids.shape[-1])] * int(ids.shape[0])
    except (KeyError, TypeError, AttributeError, RuntimeError):
        return []


def measured(phase: str) -> Callable[[F], F]:
    """Wrap a worker method: with ``COREWARDING_PHASE_MEMORY`` set, record the phase's memory (see the module)."""

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def inner(self: Any, *args: Any, **kwargs: Any) -> Any:
            folder = os.environ.get(ENV)
            if not folder:
                return func(self, *args, **kwargs)
            start = _status("VmRSS")["VmRSS"]
            sampler = None if _reset_peak() else _Sampler()
            t0 = time.perf_counter()
            result = func(self, *args, **kwargs)
            seconds = time.perf_counter() - t0
            peak = _status("VmHWM")["VmHWM"] if sampler is None else sampler.stop()
            end = _status("VmRSS")["VmRSS"]
            rank = int(getattr(self, "rank", 0))
            row = {
                "phase": phase,
                "rank": rank,
                "pid": os.getpid(),
                "start": start,
                "peak": max(peak, start, end),
                "end": end,
                "seconds": round(seconds, 3),
                "how": "clear_refs" if sampler is None else "sampled",
                "lengths": lengths_of(args[0]) if args else [],
            }
            path = Path(folder) / f"rank_{rank}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            return result

        return inner  # type: ignore[return-value]  # functools.wraps gives inner func's signature; mypy cannot see it

    return wrap

"""Telling a dead cell run from a slow one: a running cell refreshes its lease in the shared store; the parent
calls it dead when the lease has not changed for a while, by the parent's own clock (no clock is compared
across machines)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LeaseWatch:
    """Remembers, per cell run, the last lease seen and when (parent's monotonic clock)."""

    timeout_s: float
    _seen: dict[str, tuple[object, float]] = field(default_factory=dict)

    def stale(self, run_key: str, lease: object, now: float) -> bool:
        """True once ``lease`` (None when absent) has stayed the same for longer than the timeout.

        >>> watch = LeaseWatch(timeout_s=10)
        >>> watch.stale("run-1", {"time": 1}, now=0), watch.stale("run-1", {"time": 1}, now=9)
        (False, False)
        >>> watch.stale("run-1", {"time": 2}, now=15), watch.stale("run-1", {"time": 2}, now=26)
        (False, True)
        """
        last = self._seen.get(run_key)
        if last is None or last[0] != lease:
            self._seen[run_key] = (lease, now)
            return False
        return now - last[1] > self.timeout_s

    def forget(self, run_key: str) -> None:
        self._seen.pop(run_key, None)

"""SIGTERM that unwinds like Ctrl-C, and blocks that a signal must not cut half-way.

Every long command runs inside ``interruptible()``: a SIGINT or SIGTERM becomes a KeyboardInterrupt in the main thread,
so every ``finally`` and context manager on the way out runs (the training run is recorded ``interrupted``, the
private Prefect server stops, a dvc child finishes writing its lock), and the command ends with ``Interrupted``, whose
exit code is the shell's for that signal. Cleanup that must finish runs inside ``deferred_interrupts()``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class _SignalGate:
    """Shared by ``interruptible``'s handler and ``deferred_interrupts``: while ``deferring``, a signal is recorded
    and raised only when the deferred block ends."""

    deferring = False
    pending: str | None = None


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Inside, a SIGINT or SIGTERM that ``interruptible`` catches is held back until the block ends, then raised
    as the ``KeyboardInterrupt`` it would have been. For cleanup that must not stop half-way: a drain of Prefect's log
    queue cut by a signal leaves its worker without the stop marker, and Prefect's exit hook then waits on it forever.
    Every such block is bounded (timeouts inside), so a held-back signal waits seconds at most."""
    outer = _SignalGate.deferring
    _SignalGate.deferring = True
    try:
        yield
    finally:
        _SignalGate.deferring = outer
    if not outer and _SignalGate.pending is not None:
        name, _SignalGate.pending = _SignalGate.pending, None
        raise KeyboardInterrupt(name)


class Interrupted(Exception):
    """The run was stopped by a signal (SIGINT or SIGTERM) after everything was cleaned up."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"interrupted by {signal_name}")
        self.signal_name = signal_name

    @property
    def exit_code(self) -> int:
        """The shell's convention for death by this signal: 128 + its number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + int(signal.Signals[self.signal_name])


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside, SIGTERM (like SIGINT) raises KeyboardInterrupt in the main thread, so every ``finally`` and context
    manager on the way out runs for both; leaving on such an interruption raises ``Interrupted(<signal name>)``.
    Once a signal came, the block ends in ``Interrupted`` however it ends (a library may have swallowed the
    KeyboardInterrupt or wrapped it in its own error). The previous handlers are restored on exit. Main thread only
    (Python delivers signals there)."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("interruptible() sets signal handlers, which only the main thread can do")
    received: list[str] = []

    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        if _SignalGate.deferring:
            _SignalGate.pending = received[-1]
            return
        raise KeyboardInterrupt(received[-1])

    previous = {sig: signal.signal(sig, raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except KeyboardInterrupt as interrupt:
        raise Interrupted(received[0] if received else "SIGINT") from interrupt
    except BaseException as other:
        # A library may catch the KeyboardInterrupt and raise its own error (pydantic's serializer wraps it in a
        # PydanticSerializationError): once a signal came, whatever ends the block is that interruption.
        if received:
            raise Interrupted(received[0]) from other
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _SignalGate.pending = None
    if received:  # the interruption was swallowed on the way (turned into a failed state): still an interruption
        raise Interrupted(received[0])


def resume_hint(command: str) -> str:
    """The one line printed after an interruption."""
    return f"interrupted; nothing is lost: run `{command}` to resume (finished steps are skipped)"

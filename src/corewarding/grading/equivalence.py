"""math-verify equivalence with hard per-item timeouts, computed in worker processes.

math-verify enforces its own timeouts with ``signal.alarm``, which only works in the main thread
(in other threads it raises, or, with the timeouts disabled, a pathological input can hang for
ever). :class:`MathVerifyChecker` therefore runs ``parse``/``verify`` with their timeouts disabled
inside long-lived worker processes and enforces a hard deadline per item by
killing the worker that overruns it and starting a fresh one. It can be used from any thread.

Verdicts never raise: a timeout gives ``Verdict(False, "timeout")``, an exception inside
math-verify or a crashed worker gives ``Verdict(False, "error", message)``; both are logged and
counted in :attr:`MathVerifyChecker.stats`.

Inputs are either whole responses (anything containing ``\\boxed``, ``$`` or ``\\(``/``\\[``,
parsed as is) or bare answers such as ``"142.0"`` or ``"(-\\infty, 3]"``, which are wrapped in
``$...$`` first (math-verify's default extraction reads bare intervals and tuples wrongly, e.g.
``"(1, 2)"`` as ``2``). If the wrapped string yields nothing, the raw string is parsed instead.

Throughput: identical pairs are scored once per call; the distinct pairs are grouped by gold and sent
to the workers in small batches (one message per batch, one reply per item); each worker keeps a
bounded cache of parsed strings, so a gold shared by many samples is parsed once per worker. The
hard timeout stays per item: the deadline of an item starts when the previous item of its batch
replied. When a worker overruns it (or dies), the item it was working on gets the timeout (error)
verdict, the worker is killed, and the batch's items without a verdict go back to the front of the
queue for a fresh worker, so one pathological item never costs the others their verdicts. Caching
does not change verdicts: parsing is deterministic, and :func:`compare_in_process` (the plain,
uncached path a sequential loop would take) gives the same verdicts (``perf/eval_perf.py``).

Workers are forked by multiprocessing's ``forkserver``, which preloads
:mod:`corewarding.grading.math_verify_preload` (math-verify imported and its parser caches warmed once), so a
worker, or the replacement of a killed one, starts warm in milliseconds; the forkserver process lives
as long as the parent. Where there is no forkserver, workers are spawned and warm up themselves. As
with any spawn/forkserver multiprocessing, a script that creates a checker at import time must guard
its entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import multiprocessing
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, Literal

from corewarding.grading.math_verify_worker import compare_in_process, prepare_for_parse, worker_main

logger = logging.getLogger(__name__)

__all__ = [
    "MathVerifyChecker",
    "Verdict",
    "compare_in_process",
    "default_workers",
    "prepare_for_parse",
    "resolve_workers",
]

Status = Literal["ok", "timeout", "error"]

_STARTUP_TIMEOUT_S = 120.0
_MAX_STARTUP_FAILURES = 3
_REPR_CHARS = 80
_MAX_BATCH = 32  # items per message to a worker
_BATCHES_PER_WORKER = 4  # small calls use smaller batches so that every worker gets work


def default_workers() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count): one worker each."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


WORKERS_REQUIREMENT = "an integer >= 1, or null (one per core)"


def valid_workers(value: object) -> bool:
    """Whether ``value`` is a math-verify worker count: null (one per core) or an integer >= 1 (a bool is not)."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1)


def resolve_workers(workers: int | None, key: str = "workers") -> int:
    """``workers`` math-verify processes, or one per core when None (the config default, null).

    16 workers on 16 cores checked 13.8x faster than one; a fixed 2 gave 5.5x there. The only place null is resolved.

    >>> resolve_workers(3)
    3
    >>> resolve_workers(None) == default_workers()
    True
    """
    if not valid_workers(workers):
        raise ValueError(f"{key}={workers!r}: must be {WORKERS_REQUIREMENT}")
    return default_workers() if workers is None else workers


@dataclass(frozen=True)
class Verdict:
    """Outcome of one equivalence check."""

    equal: bool
    status: Status
    detail: str = ""


def _short(text: str) -> str:
    """Return a short repr of ``text`` for log messages."""
    if len(text) <= _REPR_CHARS:
        return repr(text)
    return repr(text[:_REPR_CHARS]) + f"...(+{len(text) - _REPR_CHARS} chars)"


def _batches(items: list[tuple[str, str]], todo: list[int], workers: int) -> collections.deque[list[int]]:
    """Split the item ids ``todo`` into batches of one gold each (so a worker's gold parse is reused)."""
    size = max(1, min(_MAX_BATCH, len(todo) // (_BATCHES_PER_WORKER * workers)))
    by_gold: dict[str, list[int]] = {}
    for i in todo:
        by_gold.setdefault(items[i][1], []).append(i)
    return collections.deque(
        group[start : start + size] for group in by_gold.values() for start in range(0, len(group), size)
    )


def _worker_context() -> Any:  # a ForkServerContext or a SpawnContext
    """The ``forkserver`` context preloading warm math-verify (``spawn`` where there is no forkserver)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # Process-wide: takes effect if the forkserver is not running yet; otherwise workers simply warm up themselves.
    ctx.set_forkserver_preload(["corewarding.grading.math_verify_preload"])
    return ctx


@dataclass
class _Slot:
    """One worker process and its state as seen by the parent."""

    proc: BaseProcess
    conn: Connection
    started_at: float
    ready: bool = False
    pending: collections.deque[int] = field(default_factory=collections.deque)  # sent, no verdict yet, in order
    deadline: float = 0.0  # for pending[0]


def _stop_process(proc: BaseProcess, conn: Connection | None, graceful: bool) -> None:
    """Stop ``proc`` (politely first if ``graceful``), reap it and close ``conn``."""
    try:
        if graceful and proc.is_alive() and conn is not None:
            with contextlib.suppress(OSError, ValueError):
                conn.send(None)
            proc.join(1.0)
        if proc.is_alive():
            proc.terminate()
            proc.join(0.5)
        if proc.is_alive():
            proc.kill()
            proc.join(2.0)
        if not proc.is_alive():
            proc.close()
    except ValueError:  # already closed
        pass
    finally:
        if conn is not None:
            conn.close()


def _shutdown_slots(slots: list[_Slot]) -> None:
    """Stop every worker in ``slots`` (also used as the checker's finalizer)."""
    while slots:
        slot = slots.pop()
        _stop_process(slot.proc, slot.conn, graceful=True)


class MathVerifyChecker:
    """math-verify equivalence with a hard per-item timeout, computed in worker processes.

    Workers start on first use and are restarted when one overruns its timeout or dies.
    Thread-safe (calls are serialised). ``close()`` stops all workers; a later call starts new ones.
    """

    def __init__(self, workers: int | None = None, timeout_s: float = 5.0) -> None:
        """Configure ``workers`` processes (None: one per core) and a per-item timeout of ``timeout_s`` seconds."""
        if timeout_s <= 0:
            raise ValueError("timeout_s must be > 0")
        self.workers = resolve_workers(workers)
        self.timeout_s = float(timeout_s)
        self.stats: collections.Counter[str] = collections.Counter()
        self._ctx = _worker_context()
        self._slots: list[_Slot] = []
        self._lock = threading.RLock()
        self._startup_failures = 0
        self._finalizer = weakref.finalize(self, _shutdown_slots, self._slots)

    # -- public API --------------------------------------------------------------------------------

    def equivalent(self, answer: str, gold: str) -> Verdict:
        """Return whether ``answer`` is mathematically equivalent to ``gold``."""
        return self.equivalent_many([(answer, gold)])[0]

    def equivalent_many(self, pairs: Sequence[tuple[str, str]]) -> list[Verdict]:
        """Check many ``(answer, gold)`` pairs; identical pairs are scored once."""
        index: dict[tuple[str, str], int] = {}
        unique: list[tuple[str, str]] = []
        keys: list[tuple[str, str]] = []
        for answer, gold in pairs:
            key = ("" if answer is None else str(answer), "" if gold is None else str(gold))
            keys.append(key)
            if key not in index:
                index[key] = len(unique)
                unique.append(key)
        if not unique:
            return []
        with self._lock:
            verdicts = self._run(unique)
        return [verdicts[index[key]] for key in keys]

    def start(self, wait_ready: bool = True) -> None:
        """Start the workers now (otherwise the first call does it); without ``wait_ready`` they warm up meanwhile."""
        with self._lock:
            while len(self._slots) < self.workers:
                self._slots.append(self._spawn())
            while wait_ready and not all(slot.ready for slot in self._slots):
                wait([slot.conn for slot in self._slots] + [slot.proc.sentinel for slot in self._slots], timeout=1.0)
                for slot in list(self._slots):
                    self._poll(slot, [], [], collections.deque())

    def close(self) -> None:
        """Stop all worker processes (no child process is left behind)."""
        with self._lock:
            _shutdown_slots(self._slots)

    def __enter__(self) -> MathVerifyChecker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------------

    def _spawn(self) -> _Slot:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(target=worker_main, args=(child_conn,), name="math-verify-worker", daemon=True)
        proc.start()
        child_conn.close()
        return _Slot(proc=proc, conn=parent_conn, started_at=time.monotonic())

    def _replace(self, slot: _Slot) -> None:
        """Kill ``slot``'s worker and put a fresh one in its place."""
        _stop_process(slot.proc, slot.conn, graceful=False)
        self._slots[self._slots.index(slot)] = self._spawn()

    def _record(self, verdict: Verdict, item: tuple[str, str]) -> Verdict:
        self.stats[verdict.status] += 1
        if verdict.status != "ok":
            logger.warning(
                "math-verify %s (%s) for answer=%s gold=%s",
                verdict.status,
                verdict.detail,
                _short(item[0]),
                _short(item[1]),
            )
        return verdict

    def _startup_failed(self, slot: _Slot, why: str) -> None:
        self._startup_failures += 1
        logger.warning("math-verify worker failed to start (%s)", why)
        if self._startup_failures >= _MAX_STARTUP_FAILURES:
            _stop_process(slot.proc, slot.conn, graceful=False)
            self._slots.remove(slot)
            raise RuntimeError(f"math-verify workers keep failing to start: {why}")
        self._replace(slot)

    def _run(self, items: list[tuple[str, str]]) -> list[Verdict]:
        results: list[Verdict | None] = [None] * len(items)
        todo: list[int] = []
        for i, (answer, gold) in enumerate(items):
            if not answer.strip() or not gold.strip():
                results[i] = self._record(Verdict(False, "ok", "empty input"), items[i])
            else:
                todo.append(i)
        if todo:
            while len(self._slots) < self.workers:
                self._slots.append(self._spawn())
            try:
                self._dispatch(items, results, _batches(items, todo, self.workers))
            except BaseException:
                # Interrupted (KeyboardInterrupt, startup failure): drop busy workers so that no stale
                # result reaches a later call; missing workers are started again on the next call.
                for slot in [slot for slot in self._slots if slot.pending]:
                    _stop_process(slot.proc, slot.conn, graceful=False)
                    self._slots.remove(slot)
                raise
        return [v if v is not None else Verdict(False, "error", "lost") for v in results]

    def _dispatch(
        self, items: list[tuple[str, str]], results: list[Verdict | None], queue: collections.deque[list[int]]
    ) -> None:
        """Feed queued batches to idle workers and collect verdicts until every item has one."""
        while queue or any(slot.pending for slot in self._slots):
            for slot in list(self._slots):
                if slot.ready and not slot.pending and queue:
                    batch = queue[0]
                    try:
                        slot.conn.send([(task_id, *items[task_id]) for task_id in batch])
                    except (OSError, ValueError):
                        self._replace(slot)  # a dead worker; the batch stays queued
                        continue
                    queue.popleft()
                    slot.pending.extend(batch)
                    slot.deadline = time.monotonic() + self.timeout_s

            now = time.monotonic()
            deadlines = [slot.deadline for slot in self._slots if slot.pending]
            deadlines += [slot.started_at + _STARTUP_TIMEOUT_S for slot in self._slots if not slot.ready]
            wait_s = max(0.0, min(deadlines) - now) if deadlines else None
            waitables: list[Any] = [slot.conn for slot in self._slots]
            waitables += [slot.proc.sentinel for slot in self._slots]
            wait(waitables, timeout=wait_s)

            for slot in list(self._slots):
                self._poll(slot, items, results, queue)

    def _fail_head(
        self,
        slot: _Slot,
        verdict: Verdict,
        items: list[tuple[str, str]],
        results: list[Verdict | None],
        queue: collections.deque[list[int]],
    ) -> None:
        """Give ``slot``'s current item ``verdict``, re-queue the rest of its batch, and replace the worker."""
        task_id = slot.pending.popleft()
        results[task_id] = self._record(verdict, items[task_id])
        if slot.pending:
            queue.appendleft(list(slot.pending))
            slot.pending.clear()
        self._replace(slot)

    def _poll(
        self,
        slot: _Slot,
        items: list[tuple[str, str]],
        results: list[Verdict | None],
        queue: collections.deque[list[int]],
    ) -> None:
        """Collect messages from ``slot`` and handle deaths, timeouts and startup failures."""
        broken = False
        try:
            while slot.conn.poll():
                message = slot.conn.recv()
                kind = message[0]
                if kind == "ready":
                    slot.ready = True
                    self._startup_failures = 0
                elif kind == "result":
                    _, task_id, equal, status, detail = message
                    if slot.pending and slot.pending[0] == task_id:
                        slot.pending.popleft()
                        results[task_id] = self._record(Verdict(bool(equal), status, detail), items[task_id])
                        slot.deadline = time.monotonic() + self.timeout_s  # the next item's clock starts
                elif kind == "fatal":
                    _stop_process(slot.proc, slot.conn, graceful=False)
                    self._slots.remove(slot)
                    raise RuntimeError(f"math-verify worker could not start:\n{message[1]}")
        except (EOFError, OSError):
            broken = True

        if broken or not slot.proc.is_alive():
            exitcode = slot.proc.exitcode
            if slot.pending:
                verdict = Verdict(False, "error", f"worker died (exitcode={exitcode})")
                self._fail_head(slot, verdict, items, results, queue)
            elif not slot.ready:
                self._startup_failed(slot, f"worker exited with code {exitcode}")
            else:
                self._replace(slot)
            return

        now = time.monotonic()
        if slot.pending and now > slot.deadline:
            verdict = Verdict(False, "timeout", f"no verdict within {self.timeout_s:g}s")
            self._fail_head(slot, verdict, items, results, queue)
        elif not slot.ready and now > slot.started_at + _STARTUP_TIMEOUT_S:
            self._startup_failed(slot, f"not ready after {_STARTUP_TIMEOUT_S:g}s")

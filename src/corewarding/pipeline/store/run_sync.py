"""A run folder kept in the shared store while its cell trains: a thread pushes each new complete checkpoint and
refreshes the cell's lease; one final push on the way out."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from types import TracebackType

from corewarding.pipeline.store.run_files import newest_step, read_local, read_pointers
from corewarding.pipeline.store.transport import ArtifactStore, StoreError

log = logging.getLogger(__name__)


class RunSyncer:
    """Context manager: while a cell trains, a daemon thread pushes the run folder whenever a new complete checkpoint
    appears (polling every interval_s) and refreshes the lease each interval; on exit one final push."""

    def __init__(
        self, store: ArtifactStore, cell_id: str, run_dir: Path, holder: dict[str, object], interval_s: float = 2.0
    ) -> None:
        self.store, self.cell_id, self.run_dir = store, cell_id, Path(run_dir)
        self.holder, self.interval_s = dict(holder), interval_s
        self.pushes = 0  # pushes done by the thread
        self.failures = 0  # ticks that failed (logged; the next tick tries again)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pushed: int | None = None  # the newest step the last push carried

    def __enter__(self) -> RunSyncer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
        if self._thread is not None:
            self._thread.join()  # a push in flight ends after its current file; never two pushes at once
        try:
            self.store.push_run(self.cell_id, self.run_dir)
        except StoreError:
            if exc is None:
                raise
            log.exception("final push of %s failed (the run itself failed too)", self.run_dir)

    def start(self) -> None:
        """Write the lease (a store that cannot take it fails here, before training), then start the thread."""
        self.store.write_lease(self.cell_id, self.holder)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"sync-{self.cell_id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to stop and wait up to about a second for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            if self._thread.is_alive():
                log.info("syncer of %s is finishing its current file", self.cell_id)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.tick()

    def tick(self) -> None:
        """Refresh the lease; push when a pointer names a step newer than the last push carried."""
        try:
            self.store.write_lease(self.cell_id, self.holder)
            step = newest_step(read_pointers(lambda rel: read_local(self.run_dir, rel)))
            if step is not None and step != self._pushed:
                self.store.push_run(self.cell_id, self.run_dir, cancel=self._stop)
                if not self._stop.is_set():
                    self._pushed = step
                    self.pushes += 1
        except Exception:  # a flaky store must not kill training: counted, logged, retried next tick
            self.failures += 1
            log.exception("sync of %s to %s failed (%d so far)", self.run_dir, self.store.url, self.failures)

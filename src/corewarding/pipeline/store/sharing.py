"""What crosses machines through the shared store: the cells' data files (parent -> workers), each cell's run
folder (worker -> store -> the next worker, or the parent's ingestion), the lease a running cell keeps, and the
cell's report."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from corewarding.files import file_sha256
from corewarding.pipeline.cells import CellPlan, data_files
from corewarding.pipeline.run_summary import CellReport
from corewarding.pipeline.settings import PipelineSettings
from corewarding.pipeline.store.run_sync import RunSyncer
from corewarding.pipeline.store.transport import ArtifactStore, StoreError, store_from_config

log = logging.getLogger(__name__)

_STORES: dict[str, ArtifactStore] = {}
DATA_ROOTS = ("data", "artifacts")  # the checkout's folders a cell's data files may live in (runs/ holds run folders)
_NEVER = frozenset({"..", ".venv", ".git", "site-packages", "dist-packages"})


class DataPathError(StoreError):
    """A cell's data file outside the checkout's data roots: a job never writes it (a config naming ``.venv/...`` would
    otherwise have the worker install code from the store)."""


def checkout_data_path(rel: Path, where: str = "a data file") -> Path:
    """``rel`` when a job may share and write it: relative, and inside the checkout's ``data/`` or ``artifacts/``
    folder once joined to the checkout (the working folder), with no hidden, ``..``, ``.venv``, ``.git`` or
    ``site-packages`` part; else DataPathError naming the path and the rule."""
    rel = Path(rel)
    checkout = Path.cwd()
    inside = Path(os.path.normpath(checkout / rel))
    if (
        rel.is_absolute()
        or not any(inside.is_relative_to(checkout / root) and inside != checkout / root for root in DATA_ROOTS)
        or any(part.startswith(".") or part in _NEVER for part in rel.parts)
    ):
        raise DataPathError(
            f"{where}: {rel} is refused: a shared data file lies under the checkout's data/ or artifacts/ folder, "
            "with no hidden, .., .venv, .git or site-packages part"
        )
    return rel


def open_store(url: str) -> ArtifactStore:
    """The store at ``url`` (one object per URL and process)."""
    if url not in _STORES:
        _STORES[url] = ArtifactStore(url)
    return _STORES[url]


def store_url(settings: PipelineSettings, root: Path) -> str | None:
    """The configured store's URL (``store.url``, or ``store.dvc_remote`` resolved in the checkout at ``root``)."""
    store = store_from_config(settings.store_url, settings.store_dvc_remote, root)
    return store.resolved_url if store else None  # resolved once: every job of the run names the same folder


def worker_name() -> str | None:
    """Who runs this cell: ``$COREWARDING_WORKER``, else host and checkout on a work pool's worker, else None."""
    if os.environ.get("COREWARDING_WORKER"):
        return os.environ["COREWARDING_WORKER"]
    if os.environ.get("PREFECT__FLOW_RUN_ID"):  # set by a worker for the flow run process it starts
        return f"{socket.gethostname()}:{Path.cwd()}"
    return None


def shared_paths(plans: Sequence[CellPlan]) -> list[Path]:
    """The cells' data files that live inside the checkout (an absolute path is the user's own shared disk); one
    elsewhere than the checkout's data roots is refused (checkout_data_path)."""
    paths = {
        Path(p) if Path(p).is_absolute() else checkout_data_path(Path(p), f"{plan.cell_id} ({key})")
        for plan in plans
        for key, p in data_files(plan).items()
    }
    outside = sorted(str(p) for p in paths if p.is_absolute())
    if outside:
        log.info("not shared through the store (absolute paths, expected on every worker): %s", ", ".join(outside))
    return sorted(p for p in paths if not p.is_absolute())


def share_data_files(store: ArtifactStore, paths: Sequence[Path]) -> int:
    """Upload these data files (``shared_paths``) whose content the store does not hold yet; returns how many were
    copied. Every path is checked (checkout_data_path) before anything is copied."""
    paths = [checkout_data_path(path) for path in paths]
    copied = 0
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: a data file of the selected cells is missing (run the data step)")
        digest = file_sha256(path)
        if store.read_bytes(f"data/{path}.sha256") != digest.encode():
            store.upload(path, f"data/{path}")
            store.write_bytes(f"data/{path}.sha256", digest.encode())
            copied += 1
    return copied


def fetch_data_files(store: ArtifactStore, plan: CellPlan) -> int:
    """Download the cell's data files that are missing here or differ from the parent's; returns how many. Only
    files under the checkout's data roots are written (shared_paths refuses any other before anything is fetched)."""
    copied = 0
    for path in shared_paths([plan]):
        wanted = store.read_bytes(f"data/{path}.sha256")
        if wanted is None:
            if not path.is_file():
                raise FileNotFoundError(f"{path}: missing here and not in the store {store.url}")
            continue
        if not path.is_file() or file_sha256(path).encode() != wanted:
            store.download(f"data/{path}", path)
            copied += 1
    return copied


def fetch_cell(store: ArtifactStore, plan: CellPlan, training: bool = True) -> dict[str, Any]:
    """On a worker: the cell's data files and its run folder (checkpoints included, to resume) from the store;
    ``training=False`` (an audit, which reads only the released checkpoint and its record): neither data files nor
    checkpoints."""
    fetched = fetch_data_files(store, plan) if training else 0
    has_run = store.has_run(plan.cell_id)
    pulled = store.pull_run(plan.cell_id, plan.run_dir, checkpoints=training) if has_run else None
    return {"status": "done", "data_files": fetched, "run_files": pulled.files if pulled else 0}


def syncing(
    store: ArtifactStore, cell_id: str, run_dir: Path, holder: dict[str, object], interval_s: float
) -> AbstractContextManager[RunSyncer]:
    """While the cell runs: its lease refreshed and each new checkpoint pushed; the run folder pushed at the end."""
    return RunSyncer(store, cell_id, run_dir, holder, interval_s)


def write_cell_report(store: ArtifactStore, report: CellReport) -> None:
    """The cell's report beside its run folder in the store (what the parent reads when the cell run ends)."""
    store.write_bytes(f"reports/{report.cell_id}.json", json.dumps(report.__dict__).encode())


def read_cell_report(store: ArtifactStore, cell_id: str, run_dir: str) -> CellReport | None:
    """The report a cell run left in the store, with this checkout's run folder; None when there is none."""
    raw = store.read_bytes(f"reports/{cell_id}.json")
    if raw is None:
        return None
    try:
        values = json.loads(raw)
        return CellReport(**{**values, "run_dir": run_dir})
    except (ValueError, TypeError) as exc:
        log.warning("%s: unreadable cell report in %s (%s)", cell_id, store.url, exc)
        return None


def pull_results(store: ArtifactStore, plan: CellPlan) -> None:
    """In the parent: the cell's metrics, run record and evaluation tables (not its checkpoints), for ingestion."""
    store.pull_run(plan.cell_id, plan.run_dir, checkpoints=False)


class LeaseKeeper:
    """For the whole cell run, a daemon thread refreshes the cell's lease every ``interval_s``, whatever the run is
    doing (fetching, training, pushing a large checkpoint), so only a dead worker lets it go stale."""

    def __init__(self, store: ArtifactStore, cell_id: str, holder: dict[str, object], interval_s: float) -> None:
        self.store, self.cell_id, self.holder, self.interval_s = store, cell_id, dict(holder), interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{cell_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self.store.write_lease(self.cell_id, self.holder)  # a store that cannot take it fails before any work
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.store.write_lease(self.cell_id, self.holder)
            except Exception:  # a flaky store must not end the cell: logged, tried again next interval
                log.exception("%s: refreshing the lease in %s failed", self.cell_id, self.store.url)

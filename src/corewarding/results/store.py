"""Opening the results store: one writer at a time (a file lock), readers read-only, both wait out the other.

DuckDB lets one process hold a database file for writing, and no process read it meanwhile. Writers therefore take
an exclusive ``flock`` on ``<store>.lock`` for their whole session (so parallel ingests queue instead of failing), and
both writers and readers retry while DuckDB reports the file locked by another process.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from corewarding.results.schema import check_readable, migrate

log = logging.getLogger(__name__)

DEFAULT_DB = Path("results/results.duckdb")
DB_ENV = "COREWARDING_RESULTS_DB"


class StoreBusyError(TimeoutError):
    """The store stayed locked by another process for longer than the timeout."""


def default_db() -> Path:
    """``$COREWARDING_RESULTS_DB``, else ``results/results.duckdb``."""
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    return "lock" in str(exc).lower()


# A reader touches nothing but the store: no COPY TO, no read_csv('/etc/passwd'), no ATTACH, no extensions to
# install; the setting is locked so that SQL cannot turn it back on. The store's own file is still read.
SANDBOX: dict[str, str | bool | int | float | list[str]] = {"enable_external_access": False, "lock_configuration": True}


def _open(path: Path, read_only: bool, timeout: float) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + timeout
    delay = 0.02
    config = dict(SANDBOX) if read_only else {}
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=config)
        except duckdb.IOException as exc:
            if not _is_lock_conflict(exc) or time.monotonic() > deadline:
                if _is_lock_conflict(exc):
                    raise StoreBusyError(f"{path}: still locked by another process after {timeout:.0f} s") from exc
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


@contextmanager
def _file_lock(path: Path, timeout: float) -> Iterator[None]:
    lock_path = path.with_name(path.name + ".lock")
    with lock_path.open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreBusyError(f"{lock_path}: another writer held it for over {timeout:.0f} s") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def writer(path: str | Path | None = None, timeout: float = 300.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection, the store created or migrated first; other writers wait on the file lock."""
    db = Path(path) if path is not None else default_db()
    db.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(db, timeout):
        con = _open(db, read_only=False, timeout=timeout)
        try:
            migrate(con)
            yield con
        finally:
            con.close()


@contextmanager
def reader(path: str | Path | None = None, timeout: float = 30.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection that reaches no file but the store (see SANDBOX); the schema must be this code's."""
    db = Path(path) if path is not None else default_db()
    if not db.is_file():
        raise FileNotFoundError(f"no results store at {db}: run `corewarding results ingest` first")
    con = _open(db, read_only=True, timeout=timeout)
    try:
        check_readable(con)
        yield con
    finally:
        con.close()

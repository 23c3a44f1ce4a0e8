"""Opening the results store: one writer at a time (a file lock), readers read-only, both wait out the other.

DuckDB lets one process hold a database file for writing, and no process read it meanwhile. Writers therefore take
an exclusive ``flock`` on ``<store>.lock`` for their whole session (so parallel ingests queue instead of failing), and
both writers and readers retry while DuckDB reports the file locked by another process. The lock file holds the
writer's pid and command while it is held, so a writer that waits more than 2 s says whom it waits for.

A damaged store is found before it is used: writers (ingest) and checked readers (the report, the dashboard) first
read every table once, and DuckDB verifies each block's checksum as it reads it (see verify).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from corewarding.files import open_lock_file
from corewarding.results.store.schema import check_readable, migrate

log = logging.getLogger(__name__)

DEFAULT_DB = Path("results/results.duckdb")
DB_ENV = "COREWARDING_RESULTS_DB"


class StoreBusyError(TimeoutError):
    """The store stayed locked by another process for longer than the timeout."""


class StoreDamagedError(RuntimeError):
    """The store is not a DuckDB database, or DuckDB found a damaged block in it."""


class LockFileError(StoreDamagedError):
    """The store's lock file is a link, a hard link or not a regular file: never opened through, never truncated."""


REPAIR = "restore it from a backup, or move it aside and run `corewarding results ingest` to build a new one"
NOTICE_AFTER = 2.0  # seconds a writer waits in silence before it says what it waits for


def default_db() -> Path:
    """``$COREWARDING_RESULTS_DB``, else ``results/results.duckdb``."""
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB)


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    return "could not set lock" in str(exc).lower()  # not "lock" alone: "... in block at location ..." holds it


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (DuckDB's can span several)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# A reader touches nothing but the store: no COPY TO, no read_csv('/etc/passwd'), no ATTACH, no extensions to
# install; the setting is locked so that SQL cannot turn it back on. The store's own file is still read.
SANDBOX: dict[str, str | bool | int | float | list[str]] = {"enable_external_access": False, "lock_configuration": True}


def _open(path: Path, read_only: bool, timeout: float) -> duckdb.DuckDBPyConnection:
    start = time.monotonic()
    delay, told = 0.02, False
    config = dict(SANDBOX) if read_only else {}
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=config)
        except duckdb.Error as exc:
            if not (isinstance(exc, duckdb.IOException) and _is_lock_conflict(exc)):
                advice = "check its permissions" if "permission denied" in str(exc).lower() else REPAIR
                raise StoreDamagedError(
                    f"{path}: cannot be read as a results store ({first_line(exc)}); {advice}"
                ) from exc
            waited = time.monotonic() - start
            if waited > timeout:
                raise StoreBusyError(f"{path}: still locked by another process after {timeout:.0f} s") from exc
            if not told and waited >= NOTICE_AFTER:
                log.warning("%s: waiting up to %.0f s for another process (%s)", path, timeout, first_line(exc))
                told = True
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def lock_holder(fd: int) -> str:
    """What the writer holding the lock file open at ``fd`` wrote there: ``pid N: its command``; empty when unknown.
    Read through our own checked descriptor, never by path (which a link could point at another file)."""
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", errors="replace").strip()
    except OSError:
        return ""
    return text.splitlines()[0] if text else ""


def _acquire(fd: int, lock_path: Path, timeout: float) -> None:
    """Take the exclusive lock, saying after NOTICE_AFTER s who holds it; StoreBusyError after ``timeout`` s."""
    start, told = time.monotonic(), False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        waited = time.monotonic() - start
        if waited > timeout:
            holder = lock_holder(fd) or "holder unknown"
            raise StoreBusyError(
                f"{lock_path}: another writer ({holder}) held it for over {timeout:.0f} s; "
                "run again when it has finished, or wait longer with --lock-timeout"
            )
        if not told and waited >= NOTICE_AFTER:
            holder = lock_holder(fd) or "holder unknown"
            log.warning("%s: waiting up to %.0f s for another writer (%s)", lock_path, timeout, holder)
            told = True
        time.sleep(0.05)


@contextmanager
def _file_lock(path: Path, timeout: float) -> Iterator[None]:
    """Hold ``<store>.lock`` exclusively, with this process's pid and command written in it while held. The file is
    opened without following a link and without truncating; only our checked descriptor is ever cut or written."""
    lock_path = path.with_name(path.name + ".lock")
    fd = open_lock_file(lock_path, LockFileError)
    try:
        _acquire(fd, lock_path, timeout)
        try:
            os.ftruncate(fd, 0)
            command = shlex.join(sys.orig_argv).replace("\n", "\\n")[:500]  # one line: a -c script has several
            os.pwrite(fd, f"pid {os.getpid()}: {command}\n".encode(errors="replace"), 0)
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY 1"
        ).fetchall()
    ]


def _keyed_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT table_name FROM duckdb_constraints() WHERE database_name = current_database() "
            "AND constraint_type = 'PRIMARY KEY' ORDER BY 1"
        ).fetchall()
    ]


def verify(con: duckdb.DuckDBPyConnection, path: Path, indexes: bool = False) -> None:
    """DuckDB's own checks, before anything is read or written: every column of every table is read once (DuckDB
    checks the checksum of each block it reads). With ``indexes`` (a read-write connection), each primary-key index
    is also looked up by inserting a row it already holds, rolled back. A damaged block: StoreDamagedError."""
    table = ""
    try:
        for table in _tables(con):  # names from the catalog, quoted
            con.execute(f'SELECT count(*), bit_xor(hash(COLUMNS(*))) FROM "{table}"').fetchall()
        for table in _keyed_tables(con) if indexes else []:
            con.begin()
            try:
                con.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" LIMIT 1')
            except duckdb.ConstraintException:
                pass  # the index was read and found the row: what the probe is for
            finally:
                con.rollback()
    except duckdb.Error as exc:
        raise StoreDamagedError(
            f"{path}: the results store is damaged (table {table}: {first_line(exc)}); {REPAIR}"
        ) from exc


@contextmanager
def writer(path: str | Path | None = None, timeout: float = 300.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection, the store created or migrated first; other writers wait on the file lock."""
    db = Path(path) if path is not None else default_db()
    db.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(db, timeout):
        con = _open(db, read_only=False, timeout=timeout)
        try:
            verify(con, db, indexes=True)
            migrate(con)
            yield con
        finally:
            con.close()


@contextmanager
def reader(
    path: str | Path | None = None, timeout: float = 30.0, check: bool = False
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection that reaches no file but the store (see SANDBOX); the schema must be this code's.
    With ``check``, every table is read once first (see verify)."""
    db = Path(path) if path is not None else default_db()
    if not db.is_file():
        raise FileNotFoundError(f"no results store at {db}: run `corewarding results ingest` first")
    con = _open(db, read_only=True, timeout=timeout)
    try:
        if check:
            verify(con, db)
        check_readable(con)
        yield con
    finally:
        con.close()

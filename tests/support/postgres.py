"""A private PostgreSQL cluster on 127.0.0.1 for a Prefect server (Prefect's advice for a server many workers share):
initdb in a folder of its own, a free port, stopped and removed at the end. Uses the machine's PostgreSQL binaries
(Debian's ``postgresql`` package); PostgreSQL will not run as root, so as root it runs as the ``postgres`` user."""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.net import free_port

_USER = "prefect"  # the cluster's superuser; local TCP connections are trusted, nothing else listens


def postgres_bin() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: on PATH, else Debian's /usr/lib/postgresql/<version>/bin."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    return Path(found[-1]).parent if found else None


def why_no_postgres() -> str | None:
    """Why a private cluster cannot be started here (None: it can)."""
    if postgres_bin() is None:
        return "PostgreSQL's initdb and pg_ctl are not installed (Debian: apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run PostgreSQL as"
    return None


def _as_owner(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def postgres_cluster() -> Iterator[Callable[[], str]]:
    """Start a cluster in a temporary folder of its own (the postgres user cannot enter a root-only test folder);
    yields a function that creates a new, empty database and returns its SQLAlchemy URL for Prefect
    (``PREFECT_SERVER_DATABASE_CONNECTION_URL``)."""
    why = why_no_postgres()
    if why:
        raise RuntimeError(why)
    bindir = postgres_bin()
    assert bindir is not None
    folder = Path(tempfile.mkdtemp(prefix="corewarding-postgres-"))
    data, port = folder / "data", free_port()
    try:
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres")
        _run(_as_owner([str(bindir / "initdb"), "-D", str(data), "-U", _USER, "--auth=trust"]))
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
        _run(_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(folder / "server.log"),
                        "-w", "start"]))  # fmt: skip
        numbers, server = itertools.count(1), f"postgresql+asyncpg://{_USER}@127.0.0.1:{port}"

        def new_database() -> str:
            name = f"prefect_{next(numbers)}"
            psql(f"{server}/postgres", f"CREATE DATABASE {name}")
            return f"{server}/{name}"

        yield new_database
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                           capture_output=True, check=False)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


def psql(url: str, sql: str) -> str:
    """Run ``sql`` on the database at ``url`` (a URL that ``new_database`` returned); its rows, one a line."""
    parts, bindir = urlsplit(url), postgres_bin()
    assert bindir is not None and parts.hostname and parts.port and parts.username
    return _run([str(bindir / "psql"), "-h", parts.hostname, "-p", str(parts.port), "-U", parts.username,
                 "-d", parts.path.lstrip("/"), "-q", "-At", "-c", sql])  # fmt: skip


def _run(command: list[str]) -> str:
    """Run a PostgreSQL command and return its output; a failure names it and shows what it printed."""
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
    return done.stdout

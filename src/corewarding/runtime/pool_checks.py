"""Pool and store mistakes found before any cell runs, each as one line (exit status 2 at the CLI): a Prefect
server that does not answer, a work pool that does not exist, a store path that is missing or read-only."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

from corewarding.errors import ExpectedError
from corewarding.pipeline import job_overrides
from corewarding.pipeline.job_checks import JobRefused, check_overrides
from corewarding.pipeline.pool_key import PoolKeyError, load_keys
from corewarding.pipeline.store.transport import STORE_SUBDIR, ArtifactStore, dvc_remote_url

log = logging.getLogger(__name__)


class PoolError(ExpectedError, RuntimeError):
    """The Prefect server or the work pool cannot be used; the message names it."""


def require_api_url(what: str) -> str:
    """``$PREFECT_API_URL``, or PoolError naming it: without it the command would start a private server that has no
    pool, no workers and no schedules, and stops when the command ends."""
    url = os.environ.get("PREFECT_API_URL", "")
    if not url:
        raise PoolError(
            f"{what} needs the pool's Prefect server, and PREFECT_API_URL is not set (without it a private server is "
            "started, with no pool and no workers, and stopped at the end); export PREFECT_API_URL=http://<server>:"
            "4200/api and PREFECT_API_AUTH_STRING (docs/work-pool.md)"
        )
    return url


def require_pool_key(what: str) -> None:
    """This machine has a usable pool key (it signs or verifies cell jobs), or PoolError saying how to make one."""
    try:
        load_keys()
    except PoolKeyError as exc:
        raise PoolError(f"{what}: {exc}") from None


def check_job_overrides(overrides: list[str] | tuple[str, ...], eval_overrides: list[str] | tuple[str, ...]) -> None:
    """The run's overrides are on the pool's allow-list (the workers refuse any other), or PoolError naming one."""
    try:
        check_overrides(overrides, job_overrides.TRAINING, "override")
        check_overrides(eval_overrides, job_overrides.EVALUATION, "evaluation override")
    except JobRefused as refused:
        raise PoolError(f"{refused} (docs/work-pool.md#what-a-job-may-change)") from None


def check_server(api_url: str, timeout_s: float = 10.0) -> None:
    """The Prefect API at ``api_url`` answers its health check."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout_s) as reply:
            if reply.status == 200:
                return
            reason = f"HTTP {reply.status}"
    except (OSError, urllib.error.URLError) as exc:
        reason = str(getattr(exc, "reason", exc))
    raise PoolError(f"the Prefect server at {api_url} does not answer ({reason}); start it or fix PREFECT_API_URL")


def check_pool(name: str, api_url: str) -> None:
    """The work pool ``name`` exists on the server (a typo would otherwise wait forever)."""
    # here, not at the top: the CLI imports PoolError on every start, and Prefect takes seconds to import
    from prefect.client.orchestration import get_client  # prefect: imported when used
    from prefect.exceptions import ObjectNotFound  # prefect: imported when used

    with get_client(sync_client=True) as client:
        try:
            client.read_work_pool(name)
            return
        except ObjectNotFound:
            known = ", ".join(sorted(p.name for p in client.read_work_pools())) or "none"
    raise PoolError(f"work pool {name!r} does not exist on {api_url} (known pools: {known})")


def check_store(store: ArtifactStore) -> None:
    """The store's folder exists (it is never created here: an unmounted shared disk must not go unnoticed) and
    takes a file (a read-only store fails now, not after the first cell has trained)."""
    if not store.fs.isdir(store.root):
        raise PoolError(f"store {store.url} does not exist (not created: mount the shared disk or create the folder)")
    probe = f"{store.root}/.write-probe-{uuid.uuid4().hex[:8]}"
    try:
        store.fs.pipe_file(probe, b"")
        store.fs.rm_file(probe)
    except OSError as exc:
        raise PoolError(f"store {store.url} cannot be written ({exc.strerror or exc})") from exc


def check_pipeline(api_url: str, pool: str, store_url: str | None, dvc_remote: str | None, root: Path) -> None:
    """Before a pipeline run on ``pool``: the server answers, the pool exists, the store exists and is writable
    (under a DVC remote, the remote's folder must exist; the store's own folder in it is made)."""
    check_server(api_url)
    check_pool(pool, api_url)
    if store_url:
        check_store(ArtifactStore(store_url))
    elif dvc_remote:
        remote = ArtifactStore(dvc_remote_url(root, dvc_remote))
        check_store(remote)
        remote.fs.makedirs(f"{remote.root}/{STORE_SUBDIR}", exist_ok=True)


def is_loopback(api_url: str) -> bool:
    """Whether the API's host is this machine only (127.0.0.0/8, ::1, localhost); a name is looked up."""
    host = urllib.parse.urlsplit(api_url).hostname or ""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)


def answers_without_auth(api_url: str, timeout_s: float = 10.0) -> bool:
    """Whether the Prefect API serves a request that carries no credentials (a server without
    ``PREFECT_SERVER_API_AUTH_STRING``); False when it refuses it or does not answer."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/admin/version", timeout=timeout_s) as reply:
            return bool(reply.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def warn_if_open(api_url: str) -> bool:
    """Log one warning when the API answers without authentication on an address other machines can reach:
    whoever reaches it can create runs for every worker (docs/work-pool.md); returns whether it warned."""
    if is_loopback(api_url) or not answers_without_auth(api_url):
        return False
    log.warning(
        "the Prefect server at %s answers without authentication on a non-loopback address: anyone who reaches it "
        "can start runs on every worker; set PREFECT_SERVER_API_AUTH_STRING on the server and PREFECT_API_AUTH_STRING "
        "on every client, or keep it on a private network (docs/work-pool.md)",
        api_url,
    )
    return True

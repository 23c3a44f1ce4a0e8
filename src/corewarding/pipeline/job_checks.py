"""What a worker accepts from the Prefect API: the trust boundary of a work pool (docs/work-pool.md).

Whoever reaches the Prefect API can create flow runs with any parameters. A worker runs only the platform's own
flows, from its own checkout, with its own store; everything in a job that could make it run other code, read its
machine's environment or files, or send a run elsewhere is refused with one line naming what.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from corewarding.pipeline.jobs import CellJob

STORE_VARIABLE = "COREWARDING_STORE"  # a worker's own store (``corewarding worker --store``), for its cell runs
# keys a parent never sends to another machine: where a worker keeps its files is the worker's, as is Hydra's runtime
_MACHINE_KEYS = ("paths", "hydra")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class JobRefused(RuntimeError):
    """A job that a worker does not run; the message is one line naming the reason."""


def override_key(override: str) -> str:
    """The config key of a Hydra override (``+a.b=1`` -> ``a.b``, ``~a`` -> ``a``)."""
    return override.split("=", 1)[0].lstrip("+~").strip()


def check_overrides(overrides: Iterable[str], what: str) -> None:
    """Refuse an override that interpolates (``${...}``: ``${oc.env:HF_TOKEN}`` would read the worker's environment,
    and its value is stored with the run) or that sets where the worker keeps its files (``paths.*``, ``hydra.*``)."""
    for override in overrides:
        if "${" in override:
            raise JobRefused(f"{what} {override!r}: interpolation is not accepted in a job (it would be resolved on "
                             "the worker's machine); give the value itself")  # fmt: skip
        key = override_key(override)
        if key.split(".", 1)[0].split("@", 1)[0] in _MACHINE_KEYS:
            raise JobRefused(f"{what} {override!r}: {key} is the worker's own setting, not a job's")


def same_store(a: str, b: str) -> bool:
    """Whether two store URLs name the same store (a local path compared after resolving it)."""
    if "://" in a or "://" in b:
        return a.rstrip("/") == b.rstrip("/")
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def worker_store() -> str | None:
    """The store this worker was started with (``$COREWARDING_STORE``, set by ``corewarding worker --store``)."""
    return os.environ.get(STORE_VARIABLE) or None


def check_job(job: CellJob, own_store: str | None) -> None:
    """Raise JobRefused unless ``job`` is one a parent of this platform sends: both versions present, a plain
    matrix name, overrides without interpolation or machine keys, and the worker's own store (or none)."""
    where = f"{job.cell_id}: job"
    if not job.config_hash or not job.code_version:
        raise JobRefused(f"{where} has no config hash or code version (not sent by a corewarding parent)")
    if not _NAME.fullmatch(job.matrix) or not _NAME.fullmatch(job.cell_id):
        raise JobRefused(f"{where}: matrix {job.matrix!r} or cell {job.cell_id!r} is not a plain name")
    check_overrides(job.overrides, f"{where} override")
    check_overrides(job.eval_overrides, f"{where} evaluation override")
    if job.store_url is not None:
        if own_store is None:
            raise JobRefused(f"{where} names store {job.store_url}, and this worker has none (corewarding worker "
                             "--store URL)")  # fmt: skip
        if not same_store(job.store_url, own_store):
            raise JobRefused(f"{where} names store {job.store_url}, not this worker's store {own_store}")

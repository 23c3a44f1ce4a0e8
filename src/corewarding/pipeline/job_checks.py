"""What a worker accepts from the Prefect API: the trust boundary of a work pool (docs/work-pool.md).

Whoever reaches the Prefect API can create flow runs with any parameters. A worker runs only the platform's own
flows, from its own checkout, with its own store, and a cell job only when the pool's key signed it (a parent of
the pool made it). What a signed job may carry is checked field by field against an allow-list: plain names, typed
numbers, the allowed overrides (``job_overrides``). A refusal is one line naming the field and the rule, never its
value; it ends that run only, never the worker.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

from corewarding.matrix import PLAIN_NAME_RULE, is_plain_name
from corewarding.pipeline import job_overrides
from corewarding.pipeline.job_overrides import OverrideRefused
from corewarding.pipeline.jobs import CELL_FLOW_STEPS, CellJob
from corewarding.pipeline.pool_key import SIGNATURE_FIELD, PoolKeyError, load_keys, verify

STORE_VARIABLE = "COREWARDING_STORE"  # a worker's own store (``corewarding worker --store``), for its cell runs
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_NAMES = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.,-]{0,1023}")  # a comma-separated list of names (audit benchmarks)
_HEX = re.compile(r"[0-9a-f]{16,64}")
_CODE = re.compile(r"[0-9a-z]{7,40}(\+[0-9a-f]{12})?/py-[0-9a-f]{8}")
# the parameters a scheduled pipeline run may carry: the worker builds the rest from its own checkout's configs
SCHEDULED_PARAMETERS = ("schedule", "work_pool")


class JobRefused(RuntimeError):
    """A job that a worker does not run; the message is one line naming the reason."""


def check_overrides(overrides: Iterable[str], allowed: dict[str, job_overrides.Allowed], what: str) -> None:
    """``job_overrides.check_overrides`` with its refusal as JobRefused."""
    try:
        job_overrides.check_overrides(overrides, allowed, what)
    except OverrideRefused as refused:
        raise JobRefused(str(refused)) from None


def same_store(a: str, b: str) -> bool:
    """Whether two store URLs name the same store (a local path compared after resolving it)."""
    if "://" in a or "://" in b:
        return a.rstrip("/") == b.rstrip("/")
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def worker_store() -> str | None:
    """The store this worker was started with (``$COREWARDING_STORE``, set by ``corewarding worker --store``)."""
    return os.environ.get(STORE_VARIABLE) or None


def check_signature(job: dict[str, Any], keys: list[bytes]) -> None:
    """Raise JobRefused unless the pool's key signed this job (``CellJob.to_parameters()``, its cell id included)."""
    cell = job.get("cell_id")
    where = cell if isinstance(cell, str) and is_plain_name(cell) else "cell job"
    if not job.get(SIGNATURE_FIELD):
        raise JobRefused(f"{where}: the job is not signed with the pool's key (not sent by a parent of this pool)")
    if not verify(job, keys):
        raise JobRefused(f"{where}: the job's signature does not verify with this worker's pool key (changed after "
                         "it was signed, or signed with another key)")  # fmt: skip


def worker_keys() -> list[bytes]:
    """This machine's pool keys, or JobRefused (a worker without a usable key runs no job; its message says why)."""
    try:
        return load_keys()
    except PoolKeyError as exc:
        raise JobRefused(f"this worker has no usable pool key ({exc})") from None


def signed_job(raw: dict[str, Any], keys: list[bytes]) -> CellJob:
    """The cell job of a flow run's parameters (``job`` with its ``cell_id``), once its signature verifies with one
    of ``keys``; JobRefused for an unsigned or badly signed job, or one whose fields are not a cell job's. Its
    field values are checked by ``check_job``."""
    check_signature(raw, keys)  # first: nothing unsigned is read further
    try:
        return CellJob.from_parameters(raw)
    except (TypeError, ValueError):
        raise JobRefused("cell job: its fields are not a cell job's") from None


def _typed(job: CellJob) -> str | None:
    """The first field of a job whose value has the wrong type, or None."""
    for field in fields(job):
        value = getattr(job, field.name)
        kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "")
        if kind == "str" and not isinstance(value, str):
            return f"{field.name}: must be a string"
        if kind == "bool" and not isinstance(value, bool):
            return f"{field.name}: must be true or false"
        if kind == "int" and (type(value) is not int or not 0 <= value <= 100):
            return f"{field.name}: must be a whole number in [0, 100]"
        if kind == "float" and (type(value) not in (int, float) or not 0 <= value <= 86400):
            return f"{field.name}: must be a number of seconds in [0, 86400]"
        if kind.startswith("tuple") and not (isinstance(value, tuple) and all(isinstance(v, str) for v in value)):
            return f"{field.name}: must be a list of strings"
        if kind == "str | None" and value is not None and not isinstance(value, str):
            return f"{field.name}: must be a string or null"
    return None


def check_job(job: CellJob, own_store: str | None) -> None:
    """Raise JobRefused unless every field of ``job`` is one a parent of this platform sends: both versions,
    plain names, the cell flow's steps, typed numbers, the allowed overrides, and the worker's own store (or none)."""
    if not isinstance(job.cell_id, str) or not is_plain_name(job.cell_id):
        raise JobRefused(f"cell job: the cell id is not a plain name ({PLAIN_NAME_RULE})")
    where = f"{job.cell_id}: job"
    wrong = _typed(job)
    if wrong:
        raise JobRefused(f"{where} field {wrong}")
    if not job.config_hash or not job.code_version:
        raise JobRefused(f"{where} has no config hash or code version (not sent by a corewarding parent)")
    if not _HEX.fullmatch(job.config_hash) or not _CODE.fullmatch(job.code_version):
        raise JobRefused(f"{where}: config_hash or code_version is not of the form a parent writes")
    if not NAME.fullmatch(job.matrix):
        raise JobRefused(f"{where} field matrix: must be a plain name (letters, digits, _ . -)")
    if job.org is not None and not NAME.fullmatch(job.org):
        raise JobRefused(f"{where} field org: must be a plain name or null")
    if job.audit_benchmarks is not None and not _NAMES.fullmatch(job.audit_benchmarks):
        raise JobRefused(f"{where} field audit_benchmarks: must be comma-separated plain names or null")
    if not set(job.steps) <= set(CELL_FLOW_STEPS) or job.publish_steps not in ("last", "all"):
        raise JobRefused(f"{where} field steps or publish_steps: must be among {', '.join(CELL_FLOW_STEPS)}; last/all")
    check_overrides(job.overrides, job_overrides.TRAINING, f"{where} override")
    check_overrides(job.eval_overrides, job_overrides.EVALUATION, f"{where} evaluation override")
    if job.store_url is not None:
        if own_store is None:
            raise JobRefused(f"{where} names a store, and this worker has none (corewarding worker --store URL)")
        if not same_store(job.store_url, own_store):
            raise JobRefused(f"{where} names a store other than this worker's (corewarding worker --store)")


def check_scheduled(parameters: dict[str, Any], schedules: Iterable[str]) -> str:
    """The schedule a scheduled pipeline run names; JobRefused for any other parameter, or an unknown schedule
    (``schedules``: the deployments of the worker's own ``configs/pipeline.yaml``)."""
    extra = sorted(k for k, v in parameters.items() if k not in SCHEDULED_PARAMETERS and v is not None)
    if extra:
        shown = ", ".join(ascii(k[:40])[1:-1] for k in extra[:5])
        raise JobRefused(f"pipeline run parameters {shown}: a scheduled run carries only its schedule's name (the "
                         "worker takes the rest from its own configs/pipeline.yaml)")  # fmt: skip
    name, pool = parameters.get("schedule"), parameters.get("work_pool")
    if not isinstance(name, str) or name not in set(schedules):
        raise JobRefused("pipeline run parameter schedule: must name a deployment of this worker's own "
                         "configs/pipeline.yaml")  # fmt: skip
    if pool is not None and not (isinstance(pool, str) and NAME.fullmatch(pool)):
        raise JobRefused("pipeline run parameter work_pool: must be a plain name or null")
    return name

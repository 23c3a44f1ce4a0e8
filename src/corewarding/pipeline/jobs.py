"""What one cell's flow run is given: the cell, the run's overrides and options, where the shared store is.

A job travels as a Prefect flow run's parameters (plain JSON), so a worker on another machine runs the cell
exactly as the parent planned it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from corewarding.pipeline.cells import CellPlan
from corewarding.pipeline.pool_key import sign
from corewarding.pipeline.settings import PipelineSettings
from corewarding.pipeline.versions import config_hash

# what a cell's own flow run does (audit: its released checkpoint, corewarding audit); ingest is the parent's
CELL_FLOW_STEPS = ("train", "evaluate", "publish", "audit")


@dataclass(frozen=True)
class CellJob:
    """One cell of one pipeline run, as plain values."""

    matrix: str
    cell_id: str
    overrides: tuple[str, ...] = ()
    eval_overrides: tuple[str, ...] = ()
    steps: tuple[str, ...] = CELL_FLOW_STEPS
    force_evaluate: bool = False
    push: bool = False
    org: str | None = None
    publish_steps: str = "last"
    retries_network: int = 3
    retries_io: int = 2
    retry_delay_s: float = 10.0
    store_url: str | None = None
    sync_interval_s: float = 5.0
    audit_benchmarks: str | None = None
    config_hash: str = ""  # the parent's resolved training config and code version: a worker must have the same
    code_version: str = ""
    signature: str = ""  # the pool key's HMAC of every other field (``signed``): a worker runs only signed jobs

    def to_parameters(self) -> dict[str, Any]:
        """JSON-ready parameters of the cell flow (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_parameters(cls, values: dict[str, Any]) -> CellJob:
        """Inverse of ``to_parameters``; an unknown key is an error naming it."""
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"cell job: unknown key(s) {', '.join(sorted(unknown))}")
        plain: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        return cls(**plain)

    def signed(self, key: bytes) -> CellJob:
        """This job with its signature under the pool's ``key`` (docs/work-pool.md#the-pool-key)."""
        return replace(self, signature=sign(replace(self, signature="").to_parameters(), key))


def cell_job(plan: CellPlan, settings: PipelineSettings, store_url: str | None, code_version: str = "") -> CellJob:
    """The job of one planned cell under the run's settings (only the cell-flow steps the run selected), with the
    hash of its resolved config and the parent's ``code_version`` (a worker checks both)."""
    return CellJob(
        matrix=plan.matrix.name,
        cell_id=plan.cell_id,
        overrides=tuple(plan.overrides),
        eval_overrides=tuple(plan.eval_overrides),
        steps=tuple(s for s in CELL_FLOW_STEPS if s in settings.steps),
        force_evaluate=settings.force_evaluate,
        push=settings.push,
        org=settings.org,
        publish_steps=settings.publish_steps,
        retries_network=settings.retries_network,
        retries_io=settings.retries_io,
        retry_delay_s=settings.retry_delay_s,
        store_url=store_url,
        sync_interval_s=settings.sync_interval_s,
        audit_benchmarks=settings.audit_benchmarks,
        config_hash=config_hash(plan.cfg),
        code_version=code_version,
    )

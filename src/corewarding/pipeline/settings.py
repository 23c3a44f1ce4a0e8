"""The pipeline's settings: ``configs/pipeline.yaml`` composed with Hydra, then the run options (``RunOptions``: the
flow's parameters, ``pipeline run``'s options) on top."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from corewarding.config import ConfigError, compose_config, config_dir
from corewarding.pipeline import options
from corewarding.pipeline.cells import Selection
from corewarding.pipeline.dvc import is_dvc_repo
from corewarding.pipeline.options import RunOptions
from corewarding.results.store.store import default_db
from corewarding.schemas import ALERT_EVENTS, AlertsConfig, CellsConfig, StoreConfig, typed

STEPS = ("data", "train", "evaluate", "ingest", "publish", "audit")


@dataclass(frozen=True)
class PipelineSettings:
    """Everything one pipeline run needs to know, as plain values (a Prefect flow's parameters map onto it)."""

    selection: Selection
    steps: tuple[str, ...]
    overrides: tuple[str, ...]  # training overrides of every cell (paths.* also apply to evaluation)
    eval_overrides: tuple[str, ...]
    force_evaluate: bool
    results_db: Path
    data_dir: Path
    work_pool: str | None  # None: cells run in this process; else one flow run per cell on this pool
    max_attempts: int
    lease_timeout_s: float
    poll_s: float
    store_url: str | None
    store_dvc_remote: str | None
    sync_interval_s: float
    retries_network: int
    retries_io: int
    retry_delay_s: float
    push: bool
    org: str | None
    publish_steps: str
    record_dvc: bool
    params_file: Path
    audit_benchmarks: str | None = None  # the audit step's benchmarks; None: the matrix's evaluation benchmarks
    alerts_block: str | None = None  # the Prefect notification block alerts go through; None: no alerts
    alert_events: tuple[str, ...] = ALERT_EVENTS
    claims_file: Path | None = None  # the claims whose verdict changes are sent; None: configs/claims.yaml
    # every run option, the configured value filled in (a new option is read here: settings.options.<name>); its
    # lists make it unhashable, so it is left out of comparisons (the fields above hold the same values)
    options: RunOptions = field(default_factory=RunOptions, compare=False)


def _strings(value: object, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{key}={value!r}: must be a list of strings")
    items = tuple(value)
    if not all(isinstance(v, str) for v in items):
        raise ConfigError(f"{key}={value!r}: must be a list of strings")
    return items


def _optional(value: object) -> str | None:
    """A configured name or URL; null and the empty string mean none."""
    return str(value) if value not in (None, "") else None


def _configured(cfg: DictConfig, key: str | None) -> object:
    """The value at ``key`` of the composed config as plain Python (None: no key, or not there)."""
    value = OmegaConf.select(cfg, key) if key else None  # raw read: a run option's key, named by its field
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


def resolve_options(cfg: DictConfig, given: Mapping[str, object]) -> RunOptions:
    """Every run option: the one given (not None) wins, else ``configs/pipeline.yaml``'s (its field's key)."""
    values = {s.name: _configured(cfg, s.option.config) for s in options.specs()}
    values.update((name, value) for name, value in given.items() if value is not None or name not in values)
    return options.make(values)  # an unknown name: TypeError


def load_settings(config: Sequence[str] = (), **given: Any) -> PipelineSettings:
    """Compose ``configs/pipeline.yaml`` with ``config`` overrides; the run options given (``RunOptions``' fields:
    matrix, methods, steps, overrides, push, work_pool...), when not None, win."""
    cfg = compose_config(config, config_name="pipeline")
    run = resolve_options(cfg, given)
    chosen_steps = _strings(run.steps, "steps")
    unknown = [s for s in chosen_steps if s not in STEPS]
    if unknown or not chosen_steps:
        raise ConfigError(f"steps={list(chosen_steps)}: each must be one of {', '.join(STEPS)}")
    cell_runs, store = typed(CellsConfig, cfg.cells, "cells"), typed(StoreConfig, cfg.store, "store")
    alerts = typed(AlertsConfig, cfg.alerts, "alerts")
    if str(cfg.publish.steps) not in ("last", "all"):
        raise ConfigError(f"publish.steps={cfg.publish.steps!r}: must be last or all")
    train_overrides = _strings(run.overrides, "overrides")
    moved = [o for o in train_overrides if o.lstrip("+").split("=")[0] in ("paths.data_dir", "paths.artifacts_dir")]
    if moved and "data" in chosen_steps:
        raise ConfigError(
            f"overrides {moved}: the data stages (dvc.yaml) write to the default data and artifacts folders; "
            "run without the data step (steps without 'data') to train on files kept elsewhere"
        )
    if _optional(run.work_pool) and not store.configured:
        raise ConfigError(
            "work_pool: cells on a work pool need a shared store (store.url or store.dvc_remote): "
            "their run folders reach this machine through it"
        )
    selection = Selection(
        matrix=str(run.matrix or cfg.matrix),
        methods=_strings(run.methods, "methods"),
        base_models=_strings(run.base_models, "base_models"),
        datasets=_strings(run.datasets, "datasets"),
        cells=_strings(run.cells, "cells"),
    )
    return PipelineSettings(
        selection=selection,
        steps=chosen_steps,
        overrides=train_overrides,
        eval_overrides=_strings(run.eval_overrides, "eval_overrides"),
        force_evaluate=bool(run.force_evaluate),
        results_db=Path(str(cfg.results_db)) if cfg.results_db else default_db(),
        data_dir=Path(str(cfg.paths.data_dir)),
        work_pool=_optional(run.work_pool),
        max_attempts=int(cell_runs.max_attempts),
        lease_timeout_s=float(cell_runs.lease_timeout_s),
        poll_s=float(cell_runs.poll_s),
        store_url=_optional(store.url),
        store_dvc_remote=_optional(store.dvc_remote),
        sync_interval_s=float(store.sync_interval_s),
        retries_network=int(cfg.retries.network),
        retries_io=int(cfg.retries.io),
        retry_delay_s=float(cfg.retries.delay_s),
        push=bool(run.push),
        org=None if cfg.publish.org is None else str(cfg.publish.org),
        publish_steps=str(cfg.publish.steps),
        record_dvc=bool(cfg.dvc.record),
        params_file=Path(str(cfg.dvc.params_file)),
        audit_benchmarks=_optional(cfg.audit.benchmarks),
        alerts_block=_optional(alerts.block),
        alert_events=alerts.events,
        claims_file=Path(alerts.claims_file) if alerts.claims_file else config_dir() / "claims.yaml",
        options=run,
    )


def io_retries(settings: PipelineSettings) -> dict[str, float]:
    """Prefect task options of the I/O steps (ingest, DVC bookkeeping; publish without push)."""
    return {"retries": settings.retries_io, "retry_delay_seconds": settings.retry_delay_s}


def should_record(settings: PipelineSettings, root: Path) -> bool:
    """Whether this run records its cells' stages in DVC: asked for, in a DVC repository, training or evaluating,
    with the cells run in this checkout (not on a work pool)."""

    if settings.work_pool:  # the run folders are on the workers and in the store, not in this checkout
        return False
    return settings.record_dvc and is_dvc_repo(root) and bool({"train", "evaluate"} & set(settings.steps))


def deployment_specs(config: Sequence[str] = ()) -> dict[str, dict[str, object]]:
    """``configs/pipeline.yaml: deployments``: name -> {description, cron, timezone, parameters}."""
    cfg = compose_config(config, config_name="pipeline")
    specs = OmegaConf.to_container(cfg.deployments, resolve=True)
    assert isinstance(specs, dict)
    for name, spec in specs.items():
        name = str(name)
        if not isinstance(spec, dict) or not spec.get("cron"):
            raise ConfigError(f"deployments.{name}: needs a cron schedule")
        unknown = set(spec.get("parameters") or {}) - {"config", *options.names()}  # the flow's parameters
        if unknown:
            raise ConfigError(f"deployments.{name}.parameters: unknown {', '.join(sorted(unknown))}")
    return specs  # type: ignore[return-value]  # a YAML mapping of names to dicts, each checked above

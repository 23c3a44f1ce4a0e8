"""One evaluation unit (a checkpoint step x a benchmark) on disk: its keys, resumable chunks, and atomic outputs.

``<out>/eval/units/<step label>/<benchmark>/`` (``<benchmark>@<settings key>`` when every protocol is kept) holds
``generations.parquet`` (the sampled responses) with ``generation.json`` (the key of what shaped them), then
``samples.parquet`` and ``metrics.parquet`` with ``unit.json`` (both keys), written last: a unit whose
``unit.json`` matches the current keys is done. Chunks of an unfinished generation wait in
``.chunks/<generation key>/`` and are reused by the next attempt. The keys come from ``provenance.UnitSettings``.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from corewarding.eval_rows import GENERATION_COLUMNS, METRIC_TABLE, SAMPLE_TABLE, arrow_schema, columns
from corewarding.files import atomic_path, write_json_atomic


@dataclass
class UnitOutcome:
    """What happened to one unit: evaluated, rescored, unchanged or skipped, and its headline numbers."""

    step: int | None
    benchmark: str
    status: str
    message: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)  # generation_seconds (loading excluded), scoring_seconds


SAMPLE_SCHEMA = arrow_schema(SAMPLE_TABLE)
METRIC_SCHEMA = arrow_schema(METRIC_TABLE)
GENERATION_SCHEMA = arrow_schema(columns(SAMPLE_TABLE, GENERATION_COLUMNS))  # as the samples spell them


def write_table_atomic(rows: list[dict[str, Any]], schema: pa.Schema, path: Path) -> None:
    """Write ``rows`` with ``schema`` to ``path`` as parquet, all or nothing."""
    table = pa.Table.from_pylist(rows, schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object, or None when the file is missing or unreadable (an unfinished write)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class UnitPaths:
    """The files of one unit."""

    root: Path

    @classmethod
    def at(cls, units_dir: Path, label: str, name: str, key: str | None) -> UnitPaths:
        """``units/<step label>/<benchmark>``, or with a settings ``key`` (an audit keeps every protocol's scores)
        ``units/<step label>/<benchmark>@<key>``."""
        return cls(units_dir / label / (name if key is None else f"{name}@{key}"))

    @property
    def generations(self) -> Path:
        return self.root / "generations.parquet"

    @property
    def generation_key(self) -> Path:
        return self.root / "generation.json"

    @property
    def samples(self) -> Path:
        return self.root / "samples.parquet"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.parquet"

    @property
    def unit(self) -> Path:
        return self.root / "unit.json"

    def chunk(self, key: str, index: int) -> Path:
        return self.root / ".chunks" / key / f"chunk_{index:05d}.parquet"

    def is_done(self, generation_key: str, scoring_key: str) -> bool:
        record = read_json(self.unit) or {}
        return record.get("generation_key") == generation_key and record.get("scoring_key") == scoring_key

    def stored_generations(self, key: str) -> list[dict[str, Any]] | None:
        """The generations committed under ``key``, or None (none yet, or made with other settings)."""
        record = read_json(self.generation_key) or {}
        if not self.generations.is_file() or record.get("generation_key") != key:
            return None
        rows: list[dict[str, Any]] = pq.read_table(self.generations).to_pylist()
        return rows

    def read_chunk(self, key: str, index: int) -> list[dict[str, Any]] | None:
        """A finished chunk's rows, or None (a chunk file is written atomically, so it is whole or absent)."""
        path = self.chunk(key, index)
        return pq.read_table(path).to_pylist() if path.is_file() else None

    def write_chunk(self, key: str, index: int, rows: list[dict[str, Any]]) -> None:
        write_table_atomic(rows, GENERATION_SCHEMA, self.chunk(key, index))

    def commit_generations(self, key: str, rows: list[dict[str, Any]], material: dict[str, Any]) -> None:
        """Write all generations and their key, then drop the chunks they came from."""
        write_table_atomic(rows, GENERATION_SCHEMA, self.generations)
        write_json_atomic({"generation_key": key, **material}, self.generation_key)
        shutil.rmtree(self.root / ".chunks", ignore_errors=True)

    def write_outputs(
        self, samples: list[dict[str, Any]] | None, metrics: list[dict[str, Any]], record: dict[str, Any]
    ) -> None:
        """Write the unit's samples (None: an external unit has none) and metrics, then its ``unit.json`` (the marker
        that the unit is complete)."""
        self.unit.unlink(missing_ok=True)
        if samples is not None:
            write_table_atomic(samples, SAMPLE_SCHEMA, self.samples)
        else:
            self.samples.unlink(missing_ok=True)
        write_table_atomic(metrics, METRIC_SCHEMA, self.metrics)
        write_json_atomic(record, self.unit)

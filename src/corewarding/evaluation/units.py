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

import pyarrow.parquet as pq

from corewarding.eval_rows import GENERATION_COLUMNS, METRIC_TABLE, SAMPLE_TABLE, arrow_schema, columns
from corewarding.files import write_json_atomic, write_table_atomic


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


@dataclass(frozen=True)
class UnitOutputs:
    """What a finished unit writes: its per-sample records (None: an external unit has none), its metric rows, and
    the record of its keys (``unit.json``)."""

    samples: list[dict[str, Any]] | None
    metrics: list[dict[str, Any]]
    record: dict[str, Any]


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object, or None when the file is missing or unreadable (an unfinished write)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def complete_units(units_dir: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every complete unit under ``units_dir`` (its ``unit.json`` readable and its metrics written), with that record,
    in path order."""
    units = []
    for marker in sorted(units_dir.glob("*/*/unit.json")):
        record = read_json(marker)
        if record is not None and (marker.parent / "metrics.parquet").is_file():
            units.append((marker.parent, record))
    return units


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

    def write_outputs(self, outputs: UnitOutputs) -> None:
        """Write the unit's samples (an external unit has none) and metrics, then its ``unit.json`` (the marker that
        the unit is complete)."""
        self.unit.unlink(missing_ok=True)
        if outputs.samples is not None:
            write_table_atomic(outputs.samples, SAMPLE_SCHEMA, self.samples)
        else:
            self.samples.unlink(missing_ok=True)
        write_table_atomic(outputs.metrics, METRIC_SCHEMA, self.metrics)
        write_json_atomic(outputs.record, self.unit)

"""One evaluation unit (a checkpoint step x a benchmark) on disk: its keys, resumable chunks, and atomic outputs.

``<out>/eval/units/<step label>/<benchmark>/`` (``<benchmark>@<settings key>`` when every protocol is kept) holds
``generations.parquet`` (the sampled responses) with ``generation.json`` (the key of what shaped them), then
``samples.parquet`` and ``metrics.parquet`` with ``unit.json`` (both keys), written last: a unit whose
``unit.json`` matches the current keys is done. Chunks of an unfinished generation wait in
``.chunks/<generation key>/`` and are reused by the next attempt.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

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


GENERATION_SCHEMA = pa.schema(
    [
        ("problem_id", pa.string()),
        ("sample_index", pa.int32()),
        ("response", pa.string()),
        ("length", pa.int32()),
        ("finish_reason", pa.string()),
    ]
)


def digest(material: Any) -> str:
    """A short stable hash of JSON-able ``material``."""
    text = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def unit_folder(units_dir: Path, label: str, name: str, key: str | None) -> Path:
    """``units/<step label>/<benchmark>``, or with a settings ``key`` (an audit keeps every protocol's scores)
    ``units/<step label>/<benchmark>@<key>``."""
    return units_dir / label / (name if key is None else f"{name}@{key}")


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

    def has_generations(self, key: str) -> bool:
        record = read_json(self.generation_key) or {}
        return self.generations.is_file() and record.get("generation_key") == key

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

    def read_generations(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = pq.read_table(self.generations).to_pylist()
        return rows

"""Read a data source: a Hugging Face dataset id or a local parquet / json / jsonl file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from corewarding.files import SourceError, parse_json, read_json_lines, read_text
from corewarding.schemas import DatasourceConfig

log = logging.getLogger(__name__)

LOCAL_SUFFIXES = (".parquet", ".json", ".jsonl")


Records = list[dict[str, Any]]


def columns_of(records: Records) -> list[str]:
    """Every key that appears in any record, in first-seen order."""
    return list(dict.fromkeys(key for record in records for key in record))


def _read_json_list(path: Path) -> Records:
    value = parse_json(read_text(path), path)
    if not isinstance(value, list):
        raise SourceError(f"{path}: expected a JSON list of objects, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise SourceError(f"{path}: item {i}: expected a JSON object, got {type(item).__name__}")
    return value


def read_local(path: Path) -> Records:
    """Read a local parquet, JSON (a list of objects) or JSON-lines file as plain records.

    Records keep each value's own type (pandas would turn an integer column holding a null into floats,
    so "204" would become "204.0"). Errors name the file and the line or item.
    """
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"{path}: no such file")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            records: Records = pq.read_table(path).to_pylist()
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise SourceError(f"{path}: unreadable or truncated parquet ({exc})") from exc
    elif suffix == ".jsonl":
        records = read_json_lines(path)
    elif suffix == ".json":
        records = _read_json_list(path)
    else:
        raise SourceError(f"{path}: unknown file type {suffix!r}; expected one of {', '.join(LOCAL_SUFFIXES)}")
    if not records:
        raise SourceError(f"{path}: no records")
    return records


def read_hub(hub_id: str, config: str | None, split: str) -> Records:
    """Load one split of a Hugging Face dataset (needs network access or the local datasets cache)."""
    import datasets  # datasets: imported when used

    try:
        dataset = datasets.load_dataset(hub_id, config, split=split)
    except Exception as exc:  # datasets raises many types (connection, missing config, offline mode)
        raise SourceError(
            f"hub dataset {hub_id} (config {config}, split {split}) could not be loaded: {exc}; "
            "set datasource.local_file to a local copy instead"
        ) from exc
    records: Records = dataset.to_list()
    if not records:
        raise SourceError(f"hub dataset {hub_id} (config {config}, split {split}): no records")
    return records


def load_source(spec: DatasourceConfig) -> tuple[Records, str]:
    """The source records of a datasource config and a label naming where they came from."""
    if spec.local_file:
        path = Path(spec.local_file)
        log.info("reading %s", path)
        return read_local(path), str(path)
    if not spec.hub_id:
        raise SourceError(f"datasource {spec.name}: neither local_file nor hub_id is set")
    label = f"hf://{spec.hub_id}" + (f"/{spec.hub_config}" if spec.hub_config else "") + f":{spec.hub_split}"
    log.info("loading %s", label)
    return read_hub(spec.hub_id, spec.hub_config, str(spec.hub_split)), label

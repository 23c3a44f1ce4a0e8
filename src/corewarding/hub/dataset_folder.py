"""The folder uploaded for a rephrased training set ``data/<set>/``: the pair file (required), the aligned
original/rephrased parquets and the quality reports when present, and the dataset card ``README.md``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from omegaconf import OmegaConf

from corewarding.config import config_dir, load_group_option
from corewarding.hub.dataset_card import CONFIGS, SetFacts, dataset_card
from corewarding.hub.errors import PublishInputError
from corewarding.hub.folder import FolderPlan, PublishFolder, content_files, plan_manifest, write_folder
from corewarding.hub.run_source import read_optional_json
from corewarding.matrix import DEFAULT_HUB_ORG

log = logging.getLogger(__name__)

PAIRS = "train_pairs.parquet"
REPHRASE_REPORT = "train_rephrased.quality.json"


def dataset_repo_id(set_name: str, org: str) -> str:
    """``{org}/<name>``: the name of the set's released rephrasing (``dataset.rephrased_release`` in
    ``configs/dataset/<set>.yaml``, e.g. ``Co-rewarding-RephrasedDAPO-14k``), else ``Co-rewarding-Rephrased{hub_name}``.
    """
    try:
        dataset = load_group_option("dataset", set_name).dataset
    except KeyError as exc:
        raise PublishInputError(str(exc.args[0])) from None
    release = dataset.get("rephrased_release")
    return f"{org}/{str(release).split('/')[-1] if release else f'Co-rewarding-Rephrased{dataset.hub_name}'}"


def default_org() -> str:
    """The ``hub.org`` of the root config (``configs/config.yaml``)."""
    root = OmegaConf.load(config_dir() / "config.yaml")
    org = OmegaConf.select(root, "hub.org")  # raw read: one key of the root file, not composed
    return str(org or DEFAULT_HUB_ORG)


def _rephraser(set_name: str) -> tuple[str | None, dict[str, Any]]:
    """The set's configured rephraser and its settings (none for a set without a datasource file)."""
    try:
        name = load_group_option("datasource", set_name).datasource.get("rephraser")
        spec = load_group_option("rephrase", str(name)).rephrase if name else None
    except KeyError:
        return None, {}
    if spec is None:
        return None, {}
    settings = OmegaConf.to_container(spec, resolve=False)
    return str(name), {str(k): v for k, v in settings.items()} if isinstance(settings, dict) else {}


def _report(set_dir: Path) -> dict[str, Any]:
    missing = "no rephrase report; the card will not say how the rephrasings were made"
    return read_optional_json(set_dir / REPHRASE_REPORT, missing)


def plan_dataset(set_dir: Path, repo_id: str) -> FolderPlan:
    """Everything the folder of a rephrased set will hold."""
    pairs = set_dir / PAIRS
    if not pairs.is_file():
        raise PublishInputError(
            f"{pairs}: no such file (run: corewarding data rephrase {set_dir.name}, or data import-rephrased)"
        )
    try:
        meta = pq.read_metadata(pairs)
    except (OSError, ValueError) as exc:
        raise PublishInputError(f"{pairs}: cannot read parquet ({exc})") from exc
    data_files = [f for _, f, _ in CONFIGS] + sorted(p.name for p in set_dir.glob("*.quality.json"))
    plan = FolderPlan(copies={f: set_dir / f for f in data_files if (set_dir / f).is_file()})
    try:
        dataset = load_group_option("dataset", set_dir.name).dataset
    except KeyError as exc:
        raise PublishInputError(str(exc.args[0])) from None
    source = dataset.get("source")
    rephraser, settings = _rephraser(set_dir.name)
    facts = SetFacts(
        name=set_dir.name,
        hub_name=str(dataset.get("hub_name") or set_dir.name),
        source=str(source) if source and "/" in str(source) else None,
        rows=meta.num_rows,
        columns=list(meta.schema.names),
        files=plan_manifest(plan),
        report=_report(set_dir),
        rephraser=rephraser,
        settings=settings,
    )
    plan.texts["README.md"] = str(dataset_card(facts, repo_id)).encode()
    return plan


def build_dataset_folder(set_dir: Path, out: Path, *, repo_id: str) -> PublishFolder:
    """The exact folder that would be uploaded for a rephrased set ``set_dir`` (``data/<set>``), written atomically."""
    set_dir, out = Path(set_dir), Path(out)
    if not set_dir.is_dir():
        raise PublishInputError(f"{set_dir}: no such data folder")
    status, digest = write_folder(plan_dataset(set_dir, repo_id), out)
    return PublishFolder(out, repo_id, "dataset", None, digest, tuple(content_files(out)), status)

"""The paper's reference numbers (``reference/paper_v2_results.csv``), mapped to the project's config names."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from corewarding.config import config_dir
from corewarding.results.names import benchmark_key, benchmark_name, name_key

REFERENCE_CSV = Path(__file__).with_name("reference") / "paper_v2_results.csv"
COLUMNS = ["table", "train_set", "model", "method", "benchmark", "value", "suspect"]
# The paper reports pass@1 everywhere except AMC, where it reports avg@8 (methods.md section 9).
PAPER_METRIC = {"amc": "avg@8"}
DEFAULT_METRIC = "pass@1"
# Why a Co-rewarding-III cell has no paper value here: the v3 paper reports it, but this CSV holds v2's numbers only
V3_NOT_AVAILABLE = (
    "the v3 paper's Co-rewarding-III values are not available here (the reference CSV holds the v2 paper's numbers; "
    "it gains them when a source is found)"
)


def _hub_names(group: str) -> dict[str, str]:
    """name_key(hub_name) -> config option name, for every option of a config group."""
    names = {}
    for path in sorted((config_dir() / group).glob("*.yaml")):
        node = OmegaConf.to_container(OmegaConf.load(path))
        node = (node.get(group) if isinstance(node, dict) else None) or {}
        if node.get("hub_name"):
            names[name_key(str(node["hub_name"]))] = path.stem
    return names


def load_reference(path: Path = REFERENCE_CSV) -> pd.DataFrame:
    """The reference rows with ``metric``, ``base_model``, ``dataset`` and ``benchmark_key`` added."""
    frame = pd.read_csv(path, dtype={"value": float})
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    frame["suspect"] = frame["suspect"].astype(str).str.lower().eq("true")
    models, datasets = _hub_names("base_model"), _hub_names("dataset")
    frame["base_model"] = frame["model"].map(lambda m: models.get(name_key(m)))
    frame["dataset"] = frame["train_set"].map(lambda d: datasets.get(name_key(d)))
    unmapped = frame[frame["base_model"].isna() | frame["dataset"].isna()]
    if len(unmapped):
        first = unmapped.iloc[0]
        raise ValueError(f"{path}: no config option for model {first['model']!r} / set {first['train_set']!r}")
    frame["benchmark"] = frame["benchmark"].map(benchmark_name)  # the canonical spelling (the paper's already)
    frame["benchmark_key"] = frame["benchmark"].map(benchmark_key)
    frame["metric"] = frame["benchmark_key"].map(lambda k: PAPER_METRIC.get(k, DEFAULT_METRIC))
    return frame[[*COLUMNS, "metric", "base_model", "dataset", "benchmark_key"]]

"""The publish folder of a rephrased training set: files, dataset card read back with huggingface_hub, a push."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from huggingface_hub import DatasetCard

from corewarding.hub.dataset_folder import build_dataset_folder, dataset_repo_id
from corewarding.hub.errors import PublishInputError
from corewarding.hub.publish import PushOptions, publish_dataset


def write_set(data_dir: Path, name: str, n: int, report: dict[str, Any] | None) -> Path:
    """A rephrased set as `corewarding data rephrase` leaves it: pairs, aligned parquets, the report."""
    folder = data_dir / name
    folder.mkdir(parents=True)
    questions = [(f"What is {i} + {i}?", f"Compute the sum of {i} and {i}.", str(2 * i)) for i in range(n)]
    pairs = [{"idx": i, "original_question": q, "rephrased_question": r, "solution": a}
             for i, (q, r, a) in enumerate(questions)]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(pairs), folder / "train_pairs.parquet")
    for view, column in (("original", 0), ("rephrased", 1)):
        rows = [{"data_source": name, "prompt": [{"role": "user", "content": q[column]}],
                 "reward_model": {"ground_truth": q[2], "style": "rule"}} for q in questions]  # fmt: skip
        pq.write_table(pa.Table.from_pylist(rows), folder / f"train_{view}.parquet")
    if report is not None:
        (folder / "train_rephrased.quality.json").write_text(json.dumps(report))
    return folder


REPHRASE_REPORT = {
    "dataset": "tiny", "stage": "rephrase", "rows_in": 12, "rows_out": 12, "dropped": {"rephrase_rejected": 0},
    "flagged": {"numbers_changed": 2}, "generations": 15, "model": "base_model", "backend": "transformers",
    "on_failure": "keep_original", "rejected": {"missing_markers": 1},
}  # fmt: skip


def test_dataset_folder_and_card(tmp_path: Path) -> None:
    set_dir = write_set(tmp_path / "data", "tiny", 12, REPHRASE_REPORT)
    repo_id = dataset_repo_id("tiny", "my-lab")
    assert repo_id == "my-lab/Co-rewarding-RephrasedTiny"  # no release: the name from hub_name
    # With a release, its name (the paper's DAPO release is "DAPO-14k", not the set's hub_name "DAPO14k").
    assert dataset_repo_id("dapo14k", "my-lab") == "my-lab/Co-rewarding-RephrasedDAPO-14k"
    folder = build_dataset_folder(set_dir, tmp_path / "out", repo_id=repo_id)
    assert folder.repo_type == "dataset" and folder.step is None
    assert set(folder.files) == {"README.md", "train_pairs.parquet", "train_original.parquet",
                                 "train_rephrased.parquet", "train_rephrased.quality.json"}  # fmt: skip
    for name in folder.files:
        if name != "README.md":
            assert (folder.path / name).read_bytes() == (set_dir / name).read_bytes()
    card = DatasetCard.load(folder.path / "README.md")
    data = card.data.to_dict()
    assert data["license"] == "apache-2.0" and data["task_categories"] == ["text-generation"]
    assert data["size_categories"] == ["n<1K"] and "source_datasets" not in data  # tiny is generated
    assert {"corewarding", "co-rewarding", "rephrasing", "arxiv:2508.00410"} <= set(data["tags"])
    assert [c["config_name"] for c in data["configs"]] == ["pairs", "original", "rephrased"]
    assert data["configs"][0]["data_files"] == [{"split": "train", "path": "train_pairs.parquet"}]
    text = card.text
    assert "The 12 training questions of **Tiny**" in text and "model `base_model`" in text
    assert "| temperature | `0.7` |" in text and "configs/rephrase/transformers_tiny.yaml" in text  # its settings
    assert "missing_markers 1" in text and "numbers_changed 2" in text and "@article{zhang2025corewarding" in text
    assert build_dataset_folder(set_dir, tmp_path / "out", repo_id=repo_id).status == "unchanged"


def test_an_imported_release_of_math(tmp_path: Path) -> None:
    report = {"stage": "import-rephrased", "source": "TMLR-Group-HF/Co-rewarding-RephrasedMATH", "rows_in": 3,
              "rows_out": 3}  # fmt: skip
    set_dir = write_set(tmp_path / "data", "math", 3, report)
    (set_dir / "train_original.parquet").unlink()
    repo_id = dataset_repo_id("math", "TMLR-Group-HF")
    assert repo_id == "TMLR-Group-HF/Co-rewarding-RephrasedMATH"
    card = DatasetCard.load(build_dataset_folder(set_dir, tmp_path / "out", repo_id=repo_id).path / "README.md")
    assert card.data.source_datasets == ["DigitalLearningGmbH/MATH-lighteval"]
    assert [c["config_name"] for c in card.data.configs] == ["pairs", "rephrased"]
    assert "Imported from the released rephrasings `TMLR-Group-HF/Co-rewarding-RephrasedMATH`" in card.text


def test_bad_input_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(PublishInputError, match="unknown dataset 'nope'; known: dapo14k, math, openrs, tiny"):
        dataset_repo_id("nope", "org")
    (tmp_path / "data" / "tiny").mkdir(parents=True)
    with pytest.raises(PublishInputError, match=f"{tmp_path / 'data' / 'tiny' / 'train_pairs.parquet'}: no such"):
        build_dataset_folder(tmp_path / "data" / "tiny", tmp_path / "out", repo_id="o/d")
    assert not (tmp_path / "out").exists()


def test_publish_dataset_pushes_a_dataset_repo_once(tmp_path: Path, hub) -> None:
    write_set(tmp_path / "data", "tiny", 12, REPHRASE_REPORT)
    options = PushOptions(backoff=0.01)
    result = publish_dataset("tiny", org="my-lab", push=True, data_dir=tmp_path / "data", options=options)
    repo = "my-lab/Co-rewarding-RephrasedTiny"
    assert result.folder.path == tmp_path / "data" / "tiny" / "publish" and result.created_commit
    remote = hub.state.files(repo, repo_type="dataset")
    assert remote["train_pairs.parquet"] == (tmp_path / "data" / "tiny" / "train_pairs.parquet").read_bytes()
    assert remote["README.md"] == (result.folder.path / "README.md").read_bytes()
    again = publish_dataset("tiny", org="my-lab", push=True, data_dir=tmp_path / "data", options=options)
    assert again.skipped and not again.created_commit and len(hub.state.history(repo, repo_type="dataset")) == 2

"""The parent shares the cells' data files through the store: each file once per content, a missing one named."""

from __future__ import annotations

from pathlib import Path

import pytest

from corewarding.pipeline.store.sharing import share_data_files, shared_paths
from corewarding.pipeline.store.transport import ArtifactStore


def test_share_copies_new_or_changed_files_only_and_names_a_missing_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = ArtifactStore(str(tmp_path / "store"))
    data = [Path("data/tiny/train.parquet"), Path("data/tiny/val.parquet")]
    for path in data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(path.name.encode())

    assert share_data_files(store, data) == 2
    assert (tmp_path / "store/data/data/tiny/train.parquet").read_bytes() == b"train.parquet"
    assert share_data_files(store, data) == 0  # same content: nothing copied
    data[1].write_bytes(b"new rows")
    assert share_data_files(store, data) == 1
    assert (tmp_path / "store/data/data/tiny/val.parquet").read_bytes() == b"new rows"

    with pytest.raises(FileNotFoundError, match=r"data/tiny/test.parquet: a data file of the selected cells"):
        share_data_files(store, [Path("data/tiny/test.parquet")])


def test_shared_paths_are_the_cells_files_inside_the_checkout(tmp_path: Path) -> None:
    from corewarding.pipeline.cells import Selection, plan_cells

    plans = plan_cells(Selection(matrix="demo", cells=("gt_grpo__tiny__tiny", "co_rewarding_1__tiny__tiny")))
    paths = shared_paths(plans)
    assert all(not p.is_absolute() for p in paths)
    assert [p.name for p in paths] == ["test.parquet", "train.parquet", "train_rephrased.parquet"]  # CR-I's pairs too
    outside = plan_cells(Selection(matrix="demo", cells=("gt_grpo__tiny__tiny",)), [f"paths.artifacts_dir={tmp_path}"])
    assert shared_paths(outside) == []  # an absolute data folder is the user's own shared disk

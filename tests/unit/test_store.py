"""The shared artifact store: incremental push/pull of run folders, checkpoint completeness, DVC remotes, the syncer."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from corewarding.pipeline.store.run_sync import RunSyncer
from corewarding.pipeline.store.transport import ArtifactStore, StoreError, store_from_config

CELL = "entropy__tiny__tiny"
DVC = str(Path(sys.executable).parent / "dvc")


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, hidden ones included (so stray temporaries show up)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def save_local_checkpoint(run_dir: Path, step: int) -> None:
    """What the local backend does: fill ``.tmp_global_step_N``, rename it into place, then rewrite ``latest``."""
    checkpoints = run_dir / "checkpoints"
    tmp = checkpoints / f".tmp_global_step_{step}"
    (tmp / "model").mkdir(parents=True)
    (tmp / "model" / "config.json").write_text(json.dumps({"step": step}))
    (tmp / "model" / "model.safetensors").write_bytes(os.urandom(4096 + step))
    (tmp / "trainer_state.json").write_text(json.dumps({"step": step, "total_steps": 10}))
    tmp.rename(checkpoints / f"global_step_{step}")
    (checkpoints / ".latest.tmp").write_text(f"global_step_{step}")
    (checkpoints / ".latest.tmp").replace(checkpoints / "latest")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished-looking run: config, metrics, record, evaluation files and one complete checkpoint."""
    run = tmp_path / "runs" / CELL
    (run / "eval").mkdir(parents=True)
    (run / "config.yaml").write_text("method: entropy\n")
    (run / "metrics.jsonl").write_text('{"step": 1, "loss": 0.5}\n{"step": 2, "loss": 0.4}\n')
    (run / "run.json").write_text(json.dumps({"cell_id": CELL}))
    (run / "inputs.json").write_text("{}")
    (run / "eval" / "math500.parquet").write_bytes(os.urandom(2048))
    (run / "eval" / "pipeline.json").write_text('{"steps": [2]}')
    save_local_checkpoint(run, 2)
    return run


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(str(tmp_path / "store"))


def test_push_then_pull_gives_identical_files_and_repeats_copy_nothing(
    run_dir: Path, store: ArtifactStore, tmp_path: Path
) -> None:
    assert not store.has_run(CELL)
    first = store.push_run(CELL, run_dir)
    assert store.has_run(CELL)
    assert first.files == len(tree(run_dir)) == 10 and first.bytes == sum(map(len, tree(run_dir).values()))
    stored = tree(tmp_path / "store" / "runs" / CELL)
    assert [rel for rel in stored if rel.startswith(".") or "/." in rel] == [".manifest.json"]  # no temporaries

    fresh = tmp_path / "elsewhere" / CELL
    pulled = store.pull_run(CELL, fresh)
    assert tree(fresh) == tree(run_dir) and pulled.files == first.files
    assert store.push_run(CELL, run_dir).files == 0
    assert store.pull_run(CELL, fresh).files == 0
    assert ArtifactStore(str(tmp_path / "store")).push_run(CELL, fresh).files == 0  # another worker, same content

    with (run_dir / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 3, "loss": 0.3}\n')
    assert store.push_run(CELL, run_dir).files == 1
    (fresh / "notes.txt").write_text("local only")
    assert store.pull_run(CELL, fresh).files == 1
    assert (fresh / "metrics.jsonl").read_bytes() == (run_dir / "metrics.jsonl").read_bytes()
    assert (fresh / "notes.txt").is_file()  # pull never deletes


def test_incomplete_checkpoints_stay_local_and_the_pointer_goes_last(
    run_dir: Path, store: ArtifactStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoints = run_dir / "checkpoints"
    (checkpoints / ".tmp_global_step_4" / "model").mkdir(parents=True)  # being written
    (checkpoints / ".tmp_global_step_4" / "model" / "config.json").write_text("{}")
    store.push_run(CELL, run_dir)
    stored = tmp_path / "store" / "runs" / CELL / "checkpoints"
    assert sorted(p.name for p in stored.iterdir()) == ["global_step_2", "latest"]

    (checkpoints / ".tmp_global_step_4").rename(checkpoints / "global_step_4")  # renamed, pointer not yet rewritten
    store.push_run(CELL, run_dir)
    assert not (stored / "global_step_4").exists() and (stored / "latest").read_text() == "global_step_2"

    save_local_checkpoint(run_dir, 6)
    (checkpoints / "latest").write_text("global_step_4")  # now the pointer names step 4; step 6 is newer than it
    with caplog.at_level(logging.DEBUG, logger="corewarding.pipeline.store"):
        summary = store.push_run(CELL, run_dir)
    order = [r.getMessage().removeprefix("pushed ") for r in caplog.records if r.levelno == logging.DEBUG]
    assert order == ["checkpoints/global_step_4/model/config.json", "checkpoints/latest"]
    assert summary.files == 2
    assert (stored / "latest").read_text() == "global_step_4"
    assert tree(stored / "global_step_4") == tree(checkpoints / "global_step_4")
    assert not (stored / "global_step_6").exists()
    step_file = stored / "global_step_4" / "model" / "config.json"
    assert (stored / "latest").stat().st_mtime_ns >= step_file.stat().st_mtime_ns


def test_verl_checkpoints_travel_up_to_latest_checkpointed_iteration(store: ArtifactStore, tmp_path: Path) -> None:
    run = tmp_path / "verl_run"
    for step in (3, 4):
        actor = run / "checkpoints" / f"global_step_{step}" / "actor"
        actor.mkdir(parents=True)
        (actor / "model_world_size_1_rank_0.pt").write_bytes(os.urandom(1000))
    (run / "checkpoints" / "global_step_3" / "actor" / "fsdp_config.json").write_text("{}")
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("3")  # step 4 is still being written
    store.push_run(CELL, run)
    pulled = tmp_path / "pulled"
    store.pull_run(CELL, pulled)
    assert sorted(tree(pulled)) == [
        "checkpoints/global_step_3/actor/fsdp_config.json",
        "checkpoints/global_step_3/actor/model_world_size_1_rank_0.pt",
        "checkpoints/latest_checkpointed_iteration.txt",
    ]


def test_pull_without_checkpoints_brings_only_the_small_files(
    run_dir: Path, store: ArtifactStore, tmp_path: Path
) -> None:
    store.push_run(CELL, run_dir)
    parent = tmp_path / "parent" / CELL
    summary = store.pull_run(CELL, parent, checkpoints=False)
    assert sorted(tree(parent)) == [
        "config.yaml",
        "eval/math500.parquet",
        "eval/pipeline.json",
        "inputs.json",
        "metrics.jsonl",
        "run.json",
    ]
    assert summary.files == 6 and not (parent / "checkpoints").exists()
    with pytest.raises(StoreError, match=r"no run at .*other__tiny__tiny"):
        store.pull_run("other__tiny__tiny", parent)


def test_pull_keeps_a_newer_local_pointer(run_dir: Path, store: ArtifactStore, tmp_path: Path) -> None:
    store.push_run(CELL, run_dir)
    ahead = tmp_path / "ahead"
    store.pull_run(CELL, ahead)
    save_local_checkpoint(ahead, 5)
    store.pull_run(CELL, ahead)
    assert (ahead / "checkpoints" / "latest").read_text() == "global_step_5"


def test_file_url_and_a_non_local_filesystem_use_the_same_code(run_dir: Path, tmp_path: Path) -> None:
    for url in (f"file://{tmp_path}/file_store", f"memory://corewarding-test-{uuid.uuid4().hex}"):
        store = ArtifactStore(url)
        assert store.push_run(CELL, run_dir).files == 10
        assert store.push_run(CELL, run_dir).files == 0
        store.pull_run(CELL, tmp_path / url.split(":")[0] / CELL)
        assert tree(tmp_path / url.split(":")[0] / CELL) == tree(run_dir)
        store.fs.rm(store.root, recursive=True)


def test_leases_round_trip_and_unreadable_ones_read_as_absent(store: ArtifactStore, tmp_path: Path) -> None:
    assert store.read_lease(CELL) is None
    store.write_lease(CELL, {"host": "worker-1", "pid": 42})
    lease = store.read_lease(CELL)
    assert lease is not None and lease["host"] == "worker-1" and lease["pid"] == 42
    assert abs(float(lease["time"]) - time.time()) < 5  # type: ignore[arg-type]
    (tmp_path / "store" / "leases" / f"{CELL}.json").write_text("{not json")
    assert store.read_lease(CELL) is None


@pytest.fixture
def dvc_repo(tmp_path: Path) -> Path:
    """A git + DVC repository with a local remote ``store`` at ``../remote`` (as typed in the repository root)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    for cmd in (["git", "init", "-q"], [DVC, "init", "-q"], [DVC, "remote", "add", "store", "../remote"]):
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True, env=env)
    return repo


def test_store_from_config_resolves_a_dvc_remote(dvc_repo: Path, run_dir: Path, tmp_path: Path) -> None:
    store = store_from_config(None, "store", dvc_repo)
    assert store is not None
    assert store.url == os.path.abspath(tmp_path / "remote" / "corewarding")
    store.push_run(CELL, run_dir)
    assert (tmp_path / "remote" / "corewarding" / "runs" / CELL / "run.json").is_file()
    explicit = store_from_config(str(tmp_path / "explicit"), "store", dvc_repo)
    assert explicit is not None and explicit.url == str(tmp_path / "explicit")
    assert store_from_config(None, None, dvc_repo) is None
    with pytest.raises(StoreError, match=r"DVC remote 'nowhere' is not configured .*known remotes: store"):
        store_from_config(None, "nowhere", dvc_repo)


@pytest.fixture
def trainer(run_dir: Path) -> Iterator[threading.Event]:
    """A fake training loop saving checkpoints 3, 4, 5 every 0.15 s until told to stop."""
    done = threading.Event()

    def train() -> None:
        for step in (3, 4, 5):
            time.sleep(0.15)
            save_local_checkpoint(run_dir, step)
        done.set()

    thread = threading.Thread(target=train, daemon=True)
    thread.start()
    yield done
    thread.join()


def test_run_syncer_pushes_new_checkpoints_refreshes_the_lease_and_stops_fast(
    run_dir: Path, store: ArtifactStore, tmp_path: Path, trainer: threading.Event
) -> None:
    stored = tmp_path / "store" / "runs" / CELL / "checkpoints"
    with RunSyncer(store, CELL, run_dir, {"host": "worker-1"}, interval_s=0.1) as syncer:
        first = store.read_lease(CELL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (
            (stored / "latest").is_file() and (stored / "latest").read_text() == "global_step_5"
        ):
            time.sleep(0.05)
        assert trainer.is_set() and (stored / "global_step_5" / "trainer_state.json").is_file()
        later = store.read_lease(CELL)
        assert first is not None and later is not None and later["host"] == "worker-1"
        assert float(later["time"]) > float(first["time"])  # type: ignore[arg-type]
        assert syncer.pushes >= 2 and syncer.failures == 0
        (run_dir / "run.json").write_text(json.dumps({"cell_id": CELL, "finished": True}))
        started = time.monotonic()
        syncer.stop()
        assert time.monotonic() - started < 2
    assert tree(tmp_path / "store" / "runs" / CELL).items() >= tree(run_dir).items()  # the final push


def test_stop_cancels_a_push_in_flight_and_the_exit_push_completes_it(
    run_dir: Path, store: ArtifactStore, tmp_path: Path
) -> None:
    big = run_dir / "checkpoints" / "global_step_2" / "model" / "shards"
    big.mkdir()
    for i in range(500):
        (big / f"shard_{i:04d}.bin").write_bytes(b"x" * 64)
    stored = tmp_path / "store" / "runs" / CELL
    with RunSyncer(store, CELL, run_dir, {"host": "worker-1"}, interval_s=0.01) as syncer:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (stored / "checkpoints" / "global_step_2").is_dir():
            time.sleep(0.002)
        started = time.monotonic()
        syncer.stop()
        assert time.monotonic() - started < 2
        assert not (stored / "checkpoints" / "latest").exists()  # cancelled before its pointer
        assert len(tree(stored)) < len(tree(run_dir))
    assert tree(stored).items() >= tree(run_dir).items()


def test_a_checkpoint_travels_with_its_manifest_and_verifies_where_it_is_pulled(
    run_dir: Path, store: ArtifactStore, tmp_path: Path
) -> None:
    from corewarding.training.local.checkpoint import MANIFEST, manifest_problem, write_manifest

    step = run_dir / "checkpoints" / "global_step_2"
    write_manifest(step)
    store.push_run(CELL, run_dir)
    assert (tmp_path / "store" / "runs" / CELL / "checkpoints" / "global_step_2" / MANIFEST).is_file()
    pulled = tmp_path / "elsewhere" / CELL / "checkpoints" / "global_step_2"
    store.pull_run(CELL, pulled.parents[1])
    assert tree(pulled) == tree(step) and manifest_problem(pulled) is None
    (pulled / "model" / "model.safetensors").write_bytes(b"\0" * 4098)  # same size, other bytes
    assert manifest_problem(pulled) == f"model/model.safetensors does not match its SHA-256 in {MANIFEST}"


def test_a_link_in_the_store_is_refused_and_nothing_is_pulled(
    run_dir: Path, store: ArtifactStore, tmp_path: Path
) -> None:
    """Whoever can write the store plants a link to a worker's secret; the pull names it and copies nothing."""
    store.push_run(CELL, run_dir)
    secret = tmp_path / "hf_token"
    secret.write_text("hf_secret")
    stored = tmp_path / "store" / "runs" / CELL
    (stored / "notes.txt").symlink_to(secret)
    fresh = tmp_path / "worker" / CELL
    with pytest.raises(StoreError, match=r"notes\.txt is a link or not a regular file"):
        store.pull_run(CELL, fresh)
    assert not fresh.exists() or tree(fresh) == {}
    (stored / "notes.txt").unlink()
    (stored / "eval" / "linked").symlink_to(tmp_path, target_is_directory=True)  # a folder link: not entered either
    with pytest.raises(StoreError, match=r"eval/linked is a link"):
        store.pull_run(CELL, fresh)
    with pytest.raises(StoreError, match="is a link"):  # nor read as a single file
        store.download(f"runs/{CELL}/eval/linked", tmp_path / "out")


def test_a_link_in_the_run_folder_is_refused_and_nothing_is_pushed(
    run_dir: Path, store: ArtifactStore, tmp_path: Path
) -> None:
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    (run_dir / "notes.txt").symlink_to(secret)
    with pytest.raises(StoreError, match=r"notes\.txt is a link; run folders are synced without following links"):
        store.push_run(CELL, run_dir)
    assert not store.has_run(CELL) and b"PRIVATE KEY" not in b"".join(tree(tmp_path / "store").values())
    (run_dir / "notes.txt").unlink()
    (run_dir / "eval" / "more").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(StoreError, match=r"eval/more is a link"):
        store.push_run(CELL, run_dir)
    (run_dir / "eval" / "more").unlink()
    assert store.push_run(CELL, run_dir).files == 10  # once the links are gone, the run goes up

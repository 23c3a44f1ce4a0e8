"""A lab member who can write the shared store (or a run folder) plants links above the checked level, hard links,
pipes and folder chains 10,000 deep: each sync is refused with one line, and nothing is read, copied or written."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from corewarding.pipeline.run_summary import CellReport
from corewarding.pipeline.store.local_disk import LocalDisk
from corewarding.pipeline.store.run_files import MAX_DEPTH
from corewarding.pipeline.store.sharing import read_cell_report, write_cell_report
from corewarding.pipeline.store.transport import ArtifactStore, StoreError
from tests.unit.test_store import CELL, save_local_checkpoint, tree

SECRET = b"hf_0123456789abcdefghijklmnopqrstu"  # 33 bytes: a token the attacker wants copied into a run


def one_line(exc: pytest.ExceptionInfo[BaseException], *needles: str) -> None:
    text = str(exc.value)
    assert "\n" not in text, text
    for needle in needles:
        assert needle in text, text


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished-looking run of 10 files (as in test_store): config, metrics, record, evaluation, one checkpoint."""
    run = tmp_path / "runs" / CELL
    (run / "eval").mkdir(parents=True)
    files = {"config.yaml": "method: entropy\n", "metrics.jsonl": '{"step": 1}\n', "inputs.json": "{}"}
    files |= {"run.json": "{}", "eval/math500.parquet": "rows", "eval/pipeline.json": "{}"}
    for name, text in files.items():
        (run / name).write_text(text)
    save_local_checkpoint(run, 2)
    return run


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(str(tmp_path / "store"))


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "token"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    return path


def pushed(into: ArtifactStore, run: Path, tmp_path: Path) -> Path:
    """The run pushed once; its folder in the store."""
    into.push_run(CELL, run)
    return tmp_path / "store" / "runs" / CELL


# --- the store is resolved once ---------------------------------------------------------------------------------
def test_a_store_opened_through_a_link_keeps_its_folder_when_the_link_is_retargeted(
    run_dir: Path,
    tmp_path: Path,
) -> None:
    real, other, link = tmp_path / "real", tmp_path / "other", tmp_path / "store-link"
    real.mkdir()
    other.mkdir()
    link.symlink_to(real, target_is_directory=True)
    store = ArtifactStore(str(link))
    assert store.url == str(link) and store.root == str(real)
    retarget = tmp_path / "retarget"
    retarget.symlink_to(other, target_is_directory=True)
    os.replace(retarget, link)  # the link now names another folder
    assert store.push_run(CELL, run_dir).files == 10
    assert (real / "runs" / CELL / "run.json").is_file() and list(other.iterdir()) == []


# --- links above the checked level --------------------------------------------------------------------------------
@pytest.mark.parametrize("level", ["runs", f"runs/{CELL}", f"runs/{CELL}/eval"])
def test_a_link_at_any_level_of_a_run_is_refused_and_nothing_is_pulled(
    level: str,
    run_dir: Path,
    store: ArtifactStore,
    tmp_path: Path,
) -> None:
    """The attacker moves a level of the run aside and links it back: the worker would read through the link."""
    pushed(store, run_dir, tmp_path)
    where = tmp_path / "store" / level
    aside = tmp_path / "aside"
    where.rename(aside)
    where.symlink_to(aside, target_is_directory=True)
    fresh = tmp_path / "worker" / CELL
    with pytest.raises(StoreError) as refused:
        store.pull_run(CELL, fresh)
    one_line(refused, f"{store.url}: {level} is a link or not a regular file; the store never follows one")
    assert not fresh.exists() or tree(fresh) == {}


@pytest.mark.parametrize("level", ["runs", f"runs/{CELL}"])
def test_a_link_above_the_run_is_refused_and_nothing_is_pushed_through_it(
    level: str,
    run_dir: Path,
    store: ArtifactStore,
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    where = tmp_path / "store" / level
    where.parent.mkdir(parents=True, exist_ok=True)
    where.symlink_to(victim, target_is_directory=True)
    with pytest.raises(StoreError) as refused:
        store.push_run(CELL, run_dir)
    one_line(refused, f"{level} is a link or not a regular file")
    with pytest.raises(StoreError, match="is a link"):
        store.has_run(CELL)
    assert tree(victim) == {"keep.txt": b"mine"}


def test_links_at_data_reports_and_leases_are_refused_for_reads_and_writes(
    store: ArtifactStore,
    secret: Path,
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    root.mkdir()
    for name in ("data", "reports", "leases"):
        (root / name).symlink_to(secret.parent, target_is_directory=True)
    (secret.parent / f"{CELL}.json").write_text("{}")  # what a followed link would read as the report / the lease
    (secret.parent / "token.sha256").write_text("x")
    upload = tmp_path / "train.parquet"
    upload.write_bytes(b"rows")
    report = CellReport(cell_id=CELL, run_dir="runs/x")
    attempts: dict[str, list[Callable[[], object]]] = {
        "data": [
            lambda: store.read_bytes("data/token"),
            lambda: store.read_bytes("data/token.sha256"),
            lambda: store.download("data/token", tmp_path / "got" / "token"),
            lambda: store.upload(upload, "data/train.parquet"),
            lambda: store.write_bytes("data/train.parquet.sha256", b"x"),
        ],
        "reports": [lambda: read_cell_report(store, CELL, "runs/x"), lambda: write_cell_report(store, report)],
        "leases": [lambda: store.read_lease(CELL), lambda: store.write_lease(CELL, {"host": "w"})],
    }
    before = tree(secret.parent)
    for name, calls in attempts.items():
        for call in calls:
            with pytest.raises(StoreError) as refused:
                call()
            one_line(refused, f"{store.url}: {name} is a link or not a regular file; the store never follows one")
    assert tree(secret.parent) == before and not (tmp_path / "got" / "token").exists()


def test_a_pipe_in_the_store_is_refused_without_waiting(
    run_dir: Path,
    store: ArtifactStore,
    tmp_path: Path,
) -> None:
    stored = pushed(store, run_dir, tmp_path)
    os.mkfifo(stored / "notes.txt")
    started = time.monotonic()
    with pytest.raises(StoreError) as refused:
        store.download(f"runs/{CELL}/notes.txt", tmp_path / "out")
    one_line(refused, f"runs/{CELL}/notes.txt is a link or not a regular file")
    with pytest.raises(StoreError, match="is a link or not a regular file"):
        store.pull_run(CELL, tmp_path / "worker" / CELL)
    assert time.monotonic() - started < 5 and not (tmp_path / "out").exists()


# --- hard links ----------------------------------------------------------------------------------------------------
def test_a_hard_link_in_the_store_is_refused_and_nothing_is_pulled(
    run_dir: Path,
    store: ArtifactStore,
    secret: Path,
    tmp_path: Path,
) -> None:
    stored = pushed(store, run_dir, tmp_path)
    os.link(secret, stored / "notes.txt")
    fresh = tmp_path / "worker" / CELL
    hard = f"{store.url}: runs/{CELL}/notes.txt is a hard link (2 names); the store never copies one"
    with pytest.raises(StoreError) as refused:
        store.pull_run(CELL, fresh)
    one_line(refused, hard)
    for call in (
        lambda: store.download(f"runs/{CELL}/notes.txt", tmp_path / "out"),
        lambda: store.read_bytes(f"runs/{CELL}/notes.txt"),
    ):
        with pytest.raises(StoreError) as refused:
            call()
        one_line(refused, hard)
    assert not fresh.exists() or tree(fresh) == {}
    assert not (tmp_path / "out").exists() and secret.read_bytes() == SECRET


def test_a_hard_link_in_the_run_folder_is_refused_and_nothing_is_pushed(
    run_dir: Path,
    store: ArtifactStore,
    secret: Path,
    tmp_path: Path,
) -> None:
    os.link(secret, run_dir / "eval" / "notes.txt")
    with pytest.raises(StoreError) as refused:
        store.push_run(CELL, run_dir)
    one_line(refused, f"{run_dir}/eval/notes.txt is a hard link (2 names); the store never copies one")
    assert not store.has_run(CELL) and SECRET not in b"".join(tree(tmp_path / "store").values())


# --- bounded depth -------------------------------------------------------------------------------------------------
def deep_chain(top: Path, depth: int, name: str = "d") -> None:
    """``depth`` folders, each inside the last, made through descriptors (a path that long would pass PATH_MAX)."""
    top.mkdir(parents=True, exist_ok=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("f.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))  # a file at the bottom
    finally:
        os.close(fd)


def remove_chain(top: Path, name: str = "d") -> None:
    """Remove a chain one level at a time, what lies below moved up each time (every path stays short)."""
    first, below = top / name, top / f"{name}.below"
    while first.is_dir():
        if (first / name).is_dir():
            (first / name).rename(below)
        (first / "f.txt").unlink(missing_ok=True)
        first.rmdir()
        if below.is_dir():
            below.rename(first)


@pytest.fixture
def chains() -> Iterator[list[Path]]:
    """Folders whose deep chains are removed here, before tmp_path's own cleanup (which would recurse 10,000 deep)."""
    made: list[Path] = []
    yield made
    for top in made:
        remove_chain(top)


def test_a_10000_deep_chain_in_the_store_is_refused_at_once_and_nothing_is_pulled(
    run_dir: Path,
    store: ArtifactStore,
    tmp_path: Path,
    chains: list[Path],
) -> None:
    stored = pushed(store, run_dir, tmp_path)
    chains.append(stored / "eval")
    deep_chain(stored / "eval", 10_000)
    fresh = tmp_path / "worker" / CELL
    started = time.monotonic()
    with pytest.raises(StoreError) as refused:
        store.pull_run(CELL, fresh)
    assert time.monotonic() - started < 1.0
    one_line(refused, f"{store.url}/runs/{CELL}: folders nested deeper than {MAX_DEPTH} levels; refused")
    assert not fresh.exists() or tree(fresh) == {}


def test_a_10000_deep_chain_in_the_run_folder_is_refused_at_once_and_nothing_is_pushed(
    run_dir: Path,
    store: ArtifactStore,
    tmp_path: Path,
    chains: list[Path],
) -> None:
    chains.append(run_dir / "eval")
    deep_chain(run_dir / "eval", 10_000)
    started = time.monotonic()
    with pytest.raises(StoreError) as refused:
        store.push_run(CELL, run_dir)
    assert time.monotonic() - started < 1.0
    one_line(refused, f"{run_dir}: folders nested deeper than {MAX_DEPTH} levels; refused")
    assert not store.has_run(CELL) and not (tmp_path / "store" / "runs" / CELL / "config.yaml").exists()


def test_a_run_32_folders_deep_syncs_and_one_more_level_is_refused_both_ways(
    run_dir: Path,
    store: ArtifactStore,
    tmp_path: Path,
) -> None:
    deep_chain(run_dir / "eval", MAX_DEPTH - 1)  # eval/d/.../d: MAX_DEPTH folders below the run folder
    assert store.push_run(CELL, run_dir).files == 11
    fresh = tmp_path / "worker" / CELL
    assert store.pull_run(CELL, fresh).files == 11 and tree(fresh) == tree(run_dir)
    bottom = run_dir / "eval" / "/".join(["d"] * (MAX_DEPTH - 1))
    (bottom / "d").mkdir()
    with pytest.raises(StoreError, match=f"{run_dir}: folders nested deeper than {MAX_DEPTH} levels; refused"):
        store.push_run(CELL, run_dir)
    stored = tmp_path / "store" / "runs" / CELL / "eval" / "/".join(["d"] * (MAX_DEPTH - 1))
    (stored / "d").mkdir()
    with pytest.raises(StoreError, match=f"runs/{CELL}: folders nested deeper than {MAX_DEPTH} levels; refused"):
        store.pull_run(CELL, tmp_path / "another" / CELL)


def test_a_deep_chain_in_a_store_without_links_is_refused_too(run_dir: Path) -> None:
    """memory:// (like s3://) lists flat: the depth is checked on the listing's paths."""
    store = ArtifactStore(f"memory://corewarding-test-{uuid.uuid4().hex}")
    try:
        store.push_run(CELL, run_dir)
        store.fs.pipe_file(f"{store.root}/runs/{CELL}/eval/{'d/' * (MAX_DEPTH + 1)}f.txt", b"x")
        with pytest.raises(StoreError) as refused:
            store.pull_run(CELL, run_dir.parent / "worker")
        one_line(refused, f"runs/{CELL}: folders nested deeper than {MAX_DEPTH} levels; refused")
    finally:
        store.fs.rm(store.root, recursive=True)


def test_a_link_swapped_in_after_the_check_is_never_written_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write's check passes, then a folder of the store is replaced by a link to another folder before the file
    is written: the write opens its folders without following links, so it refuses and writes nothing there."""
    store_dir, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    (store_dir / "reports").mkdir(parents=True)
    elsewhere.mkdir()
    store = ArtifactStore(str(store_dir))
    checked = LocalDisk.check

    def check_then_swap(self: LocalDisk, path: str) -> None:
        checked(self, path)
        (store_dir / "reports").rmdir()
        (store_dir / "reports").symlink_to(elsewhere)  # the race: after the check, before the write

    monkeypatch.setattr(LocalDisk, "check", check_then_swap)
    with pytest.raises(StoreError, match=r"reports is a link or not a regular file; the store never follows one"):
        store.write_bytes("reports/cell.json", b'{"flow_run_id": "forged"}')
    assert list(elsewhere.iterdir()) == []

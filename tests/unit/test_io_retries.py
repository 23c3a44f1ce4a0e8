"""A full disk is not retried as if it were transient (issue 32, item 5): the I/O steps' Prefect retry condition
gives it one attempt, and the report's line says "disk full" and names the path; a dropped connection is still
retried."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from corewarding.pipeline import steps
from corewarding.runtime.prefect_session import prefect_api
from flows import tasks

attempts: list[str] = []


@task(name="io-probe", cache_policy=NO_CACHE, retry_condition_fn=tasks._retry_if_transient)
def io_probe(kind: str, path: str) -> None:
    """Fails as an I/O step does when pushing to the shared store: a full disk, or a dropped connection."""
    attempts.append(kind)
    if kind == "full":
        raise OSError(errno.ENOSPC, "No space left on device", path)
    if kind == "quota":
        raise OSError(errno.EDQUOT, "Disk quota exceeded", path)
    raise ConnectionResetError("the store dropped the connection")


@flow(name="io-probe-flow")
def probe_flow(kind: str, path: str) -> tuple[str, str | None]:
    state = io_probe.with_options(retries=2, retry_delay_seconds=0)(kind, path, return_state=True)
    status, _, error = tasks.outcome(state)
    return status, error


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prefect_api(tmp_path_factory.mktemp("checkout")) as url:
        yield url


@pytest.mark.parametrize(("kind", "words"), [("full", "No space left"), ("quota", "Disk quota exceeded")])
def test_a_full_disk_in_an_io_step_is_attempted_once_and_said_in_one_line(api: str, kind: str, words: str) -> None:
    attempts.clear()
    status, error = probe_flow(kind, "/shared/store/runs/gt_grpo__tiny__tiny/metrics.jsonl")
    assert attempts == [kind]  # retries=2 configured, one attempt made
    assert status == "failed" and error is not None
    assert error.startswith("disk full: OSError: ") and words in error
    assert "/shared/store/runs/gt_grpo__tiny__tiny/metrics.jsonl" in error and "\n" not in error


def test_a_dropped_connection_is_still_retried(api: str) -> None:
    attempts.clear()
    status, error = probe_flow("dropped", "/unused")
    assert attempts == ["dropped"] * 3  # the first try and both retries
    assert status == "failed" and error == "ConnectionResetError: the store dropped the connection"


def test_the_classification_reuses_the_full_disk_check_through_wrapped_errors(tmp_path: Path) -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path))
        except OSError as inner:
            raise RuntimeError("pushing the run folder failed") from inner  # raised while handling: its context
    except RuntimeError as outer:
        wrapped = outer
    assert not steps.is_transient(wrapped)
    assert not steps.is_transient(OSError(errno.EFBIG, "File too large"))
    assert steps.is_transient(OSError(errno.EIO, "Input/output error"))  # other OS errors still get their retries

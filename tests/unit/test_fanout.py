"""The parent's watch over its cell runs: one request per look, however many cells (a real private server)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect import flow
from prefect.client.orchestration import get_client

from corewarding.pipeline.prefect_session import prefect_api
from flows import fanout
from flows.fanout import read_runs


@flow(name="fanout-probe")
def probe() -> None:
    """Never run: only its flow runs are created."""


def test_read_runs_pages_past_the_apis_limit_and_names_a_deleted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fanout, "_PAGE", 4)  # the API's 200, scaled down: 11 runs take three pages
    with prefect_api(tmp_path), get_client(sync_client=True) as client:
        runs = {f"cell-{i:03d}": client.create_flow_run(probe, name=f"cell-{i:03d}").id for i in range(11)}
        found = read_runs(client, runs)
        assert list(found) == list(runs)  # every cell, in the caller's order
        assert all(found[cell].id == run_id and found[cell].name == cell for cell, run_id in runs.items())

        client.delete_flow_run(runs["cell-007"])
        with pytest.raises(RuntimeError, match=r"deleted from the Prefect server.*: cell-007$"):
            read_runs(client, runs)

"""A Prefect server on PostgreSQL, the README's advice for a server that many workers share: the cell deployment
registers on it and a cell run created there is stored in PostgreSQL's tables, with its cell id as its name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.postgres import postgres_cluster, psql, why_no_postgres
from tests.support.prefect_server import prefect_server
from tests.support.repo import clone_project

BIN = Path(sys.executable).parent

CREATE_RUN = """
from prefect import get_client
from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName
with get_client(sync_client=True) as client:
    [deployment] = client.read_deployments(deployment_filter=DeploymentFilter(name=DeploymentFilterName(any_=["pg"])))
    run = client.create_flow_run_from_deployment(
        deployment.id, name="gt_grpo__tiny__tiny", parameters={"cell_id": "gt_grpo__tiny__tiny", "job": {}}
    )
    print(run.id)
"""


def test_cell_runs_live_in_postgres(tmp_path: Path) -> None:
    why = why_no_postgres()
    if why:
        pytest.skip(why)
    parent = clone_project(tmp_path / "parent")
    (tmp_path / "home").mkdir()
    with postgres_cluster() as new_database:
        url = new_database()
        with prefect_server(tmp_path / "home", database_url=url) as env:
            deploy = subprocess.run(
                [str(BIN / "corewarding"), "deploy", "--work-pool", "pg", "--root", str(parent)],
                env=env, cwd=parent, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert deploy.returncode == 0, deploy.stdout[-2000:] + deploy.stderr[-2000:]
            created = subprocess.run([sys.executable, "-c", CREATE_RUN], env=env, capture_output=True, text=True)
            assert created.returncode == 0, created.stderr[-2000:]
            run_id = created.stdout.split()[-1]
        rows = psql(url, f"SELECT name, state_type FROM flow_run WHERE id = '{run_id}'").split()
    assert rows == ["gt_grpo__tiny__tiny|SCHEDULED"]
    assert not (tmp_path / "home" / "prefect.db").exists()  # nothing went to the SQLite default

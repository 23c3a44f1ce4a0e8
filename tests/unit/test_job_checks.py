"""The pool's trust boundary as plain functions: what a worker refuses in a job, before anything is composed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from corewarding.pipeline.job_checks import JobRefused, check_job, check_overrides, same_store
from corewarding.pipeline.jobs import CellJob
from corewarding.runtime.cell_worker import OtherCode, vet_parameters
from corewarding.runtime.pool_checks import is_loopback

GOOD = CellJob(
    matrix="demo", cell_id="gt_grpo__tiny__tiny", overrides=("schedule.total_steps=8",), store_url="/shared/store",
    config_hash="3f0c1a2b3c4d5e6f", code_version="1a2b3c4d5e6f/py-0a1b2c3d",
)  # fmt: skip


def test_a_parents_job_passes() -> None:
    check_job(GOOD, "/shared/store/")  # the same store, written another way
    check_job(dataclasses.replace(GOOD, store_url=None), None)  # no store: nothing leaves the worker


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"config_hash": "", "code_version": ""}, "has no config hash or code version"),
        ({"code_version": ""}, "has no config hash or code version"),
        ({"overrides": ("+leak=${oc.env:HF_TOKEN}",)}, "interpolation is not accepted"),
        ({"overrides": ("model.name=${hydra:runtime.cwd}",)}, "interpolation is not accepted"),
        ({"eval_overrides": ("x=${oc.decode:${oc.env:HOME}}",)}, "interpolation is not accepted"),
        ({"overrides": ("paths.runs=/home/someone/.ssh",)}, "paths.runs is the worker's own setting"),
        ({"overrides": ("++hydra.run.dir=/tmp",)}, "hydra.run.dir is the worker's own setting"),
        ({"matrix": "../../etc/x"}, "is not a plain name"),
        ({"store_url": "/home/attacker/store"}, "not this worker's store /shared/store"),
        ({"store_url": "s3://attacker/bucket"}, "not this worker's store"),
    ],
)
def test_a_hand_made_job_is_refused_with_one_line(change: dict[str, object], reason: str) -> None:
    with pytest.raises(JobRefused, match=r"^gt_grpo__tiny__tiny: job") as refused:
        check_job(dataclasses.replace(GOOD, **change), "/shared/store")  # type: ignore[arg-type]
    assert reason in str(refused.value) and "\n" not in str(refused.value)


def test_a_job_naming_a_store_is_refused_by_a_worker_without_one() -> None:
    with pytest.raises(JobRefused, match="this worker has none"):
        check_job(GOOD, None)


def test_same_store_resolves_local_paths(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert same_store(str(tmp_path / "a"), f"{tmp_path}/./a/")
    assert not same_store(str(tmp_path / "a"), str(tmp_path / "b"))
    assert same_store("s3://bucket/prefix/", "s3://bucket/prefix") and not same_store("s3://b/p", "s3://b/q")


def test_pipeline_run_parameters_may_not_interpolate_either() -> None:
    vet_parameters("pipeline", {"matrix": "paper", "overrides": ["trainer.lr=1e-6"], "config": ["push=true"]}, None, "")
    with pytest.raises(JobRefused, match="pipeline run parameter config"):
        vet_parameters("pipeline", {"config": ["store.url=${oc.env:HOME}"]}, None, "")


def test_a_cell_of_a_parent_with_other_code_is_left_to_other_workers() -> None:
    parameters = {"cell_id": GOOD.cell_id, "job": {k: v for k, v in GOOD.to_parameters().items() if k != "cell_id"}}
    vet_parameters("cell", parameters, "/shared/store", GOOD.code_version)
    with pytest.raises(OtherCode, match="the parent runs code 1a2b3c4d5e6f/py-0a1b2c3d, this checkout 99"):
        vet_parameters("cell", parameters, "/shared/store", "99")
    with pytest.raises(JobRefused, match="unknown key"):
        vet_parameters("cell", {**parameters, "job": {**parameters["job"], "command": "touch pwned"}}, None, "")


def test_check_overrides_keeps_plain_values() -> None:
    check_overrides(["schedule.total_steps=8", "+extra=1", "~method.kl", "data.name=a:b"], "override")


def test_loopback_addresses_are_told_from_others() -> None:
    assert is_loopback("http://127.0.0.1:4200/api") and is_loopback("http://localhost:4200/api")
    assert is_loopback("http://[::1]:4200/api")
    assert not is_loopback("http://10.1.2.3:4200/api") and not is_loopback("http://0.0.0.0:4200/api")

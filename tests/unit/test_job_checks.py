"""The pool's trust boundary as plain functions: a job is signed with the pool's key, every field is on the
allow-list, a refusal names the field and the rule but never the value, and a signed job of other code is left to
other workers (never an unsigned one)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from corewarding.pipeline.job_checks import JobRefused, check_job, check_scheduled, check_signature, same_store
from corewarding.pipeline.jobs import CellJob
from corewarding.pipeline.pool_key import KEY_FILE_VARIABLE, KEY_VARIABLE, PoolKeyError, create_key, load_keys, sign
from corewarding.runtime.cell_worker import OtherCode, vet_parameters
from corewarding.runtime.pool_checks import is_loopback
from corewarding.schemas import without_values

KEY = bytes.fromhex("3a" * 31 + "07")
OTHER_KEY = bytes.fromhex("5c" * 32)
CANARY = "hf_canary_7Qz"
GOOD = CellJob(
    matrix="demo", cell_id="gt_grpo__tiny__tiny", overrides=("schedule.total_steps=8", "seed=3"),
    eval_overrides=("generation=transformers", "benchmark.limit=4"), store_url="/shared/store",
    config_hash="3f0c1a2b3c4d5e6f", code_version="1a2b3c4d5e6f/py-0a1b2c3d",
)  # fmt: skip


def _parameters(job: CellJob) -> dict[str, object]:
    """The flow run's parameters, as fanout submits them."""
    return {"cell_id": job.cell_id, "job": job.to_parameters(), "attempt": 1}


def _vet(job: CellJob, own_code: str = GOOD.code_version, keys: tuple[bytes, ...] = (KEY,)) -> None:
    vet_parameters("cell", _parameters(job), "/shared/store", own_code, list(keys))


def test_a_signed_parents_job_passes() -> None:
    _vet(GOOD.signed(KEY))
    check_job(GOOD, "/shared/store/")  # the same store, written another way
    check_job(dataclasses.replace(GOOD, store_url=None), None)  # no store: nothing leaves the worker


@pytest.mark.parametrize(
    "change",
    [
        {"overrides": ("schedule.total_steps=9", "seed=3")},  # one value changed after signing
        {"cell_id": "majority_voting__tiny__tiny"},  # the same job for another cell
        {"store_url": "/shared/other"},
        {"code_version": "ffffffffffff/py-0a1b2c3d"},  # a forged version is refused, never "left to others"
    ],
)
def test_a_job_changed_after_signing_is_refused(change: dict[str, object]) -> None:
    forged = dataclasses.replace(GOOD.signed(KEY), **change)  # type: ignore[arg-type]
    with pytest.raises(JobRefused, match="signature does not verify") as refused:
        _vet(forged)
    assert "\n" not in str(refused.value)


def test_an_unsigned_job_or_one_signed_with_another_key_is_refused() -> None:
    with pytest.raises(JobRefused, match="not signed with the pool's key"):
        _vet(GOOD)
    with pytest.raises(JobRefused, match="signature does not verify"):
        _vet(GOOD.signed(OTHER_KEY))
    _vet(GOOD.signed(OTHER_KEY), keys=(KEY, OTHER_KEY))  # while a key is rotated, both verify
    with pytest.raises(JobRefused, match="not signed"):  # a forged cell with made-up code: refused, not OtherCode
        _vet(dataclasses.replace(GOOD, code_version="0000000000aa/py-00000000"))


def test_a_signed_cell_of_other_code_is_left_to_other_workers() -> None:
    with pytest.raises(OtherCode, match="the parent runs code 1a2b3c4d5e6f/py-0a1b2c3d, this checkout 99"):
        _vet(GOOD.signed(KEY), own_code="99")


def test_cell_run_parameters_other_than_the_job_are_refused() -> None:
    with pytest.raises(JobRefused, match="only cell_id, job and attempt"):
        vet_parameters("cell", {**_parameters(GOOD.signed(KEY)), "command": "touch x"}, None, "", [KEY])
    with pytest.raises(JobRefused, match="attempt: must be a whole number"):
        vet_parameters("cell", {**_parameters(GOOD.signed(KEY)), "attempt": "1; rm"}, None, "", [KEY])
    job = {**GOOD.to_parameters(), "command": "touch pwned"}  # an unknown field, signed by whoever holds the key
    job["signature"] = sign(job, KEY)
    with pytest.raises(JobRefused, match="its fields are not a cell job's"):
        vet_parameters("cell", {"cell_id": GOOD.cell_id, "job": job}, None, GOOD.code_version, [KEY])


@pytest.mark.parametrize(
    ("overrides", "eval_overrides", "reason"),
    [
        ((f"+leak=${{oc.env:{CANARY}}}",), (), "may set only"),
        ((r"+x=$\{oc.env:" + CANARY + r"\}",), (), "may set only"),  # escaped: Hydra would unescape and resolve it
        ((f"seed=${{oc.env:{CANARY}}}",), (), "seed): must be a whole number"),
        ((r"seed=$\{oc.env:" + CANARY + r"\}",), (), "seed): must be a whole number"),
        ((), (r"generation=$\{now:%s\}",), "generation): must be one of transformers, vllm"),
        (("dataset.val_files=.venv/lib/python3.11/site-packages/zz.pth",), (), "may set only"),
        (("paths.runs=/home/someone/.ssh",), (), "may set only"),
        (("++hydra.run.dir=/tmp",), (), "may set only"),
        (("seed=1,2",), (), "only key=value"),
        (("~seed",), (), "only key=value"),
        (("+seed=4",), (), "only key=value"),
        (("seed='5'",), (), "must be a whole number"),
        (("seed=true",), (), "must be a whole number"),
        (("schedule.total_steps=0",), (), "in [1, 10000000]"),
        (("seed=1",), ("schedule.total_steps=8",), "evaluation override 1"),  # a training key is not an eval key
        (("seed=(",), (), "not a Hydra override"),
    ],
)
def test_an_override_off_the_allow_list_is_refused_without_its_value(
    overrides: tuple[str, ...], eval_overrides: tuple[str, ...], reason: str
) -> None:
    job = dataclasses.replace(GOOD, overrides=overrides, eval_overrides=eval_overrides)
    with pytest.raises(JobRefused, match=r"^gt_grpo__tiny__tiny: job") as refused:
        check_job(job, "/shared/store")
    message = str(refused.value)
    assert reason in message and "\n" not in message, message
    assert CANARY not in message and ".venv" not in message and ".ssh" not in message and "%s" not in message


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"config_hash": "", "code_version": ""}, "has no config hash or code version"),
        ({"code_version": "$(touch x)/py-0a1b2c3d"}, "not of the form a parent writes"),
        ({"matrix": "../../etc/x"}, "field matrix: must be a plain name"),
        ({"org": "a/../b"}, "field org"),
        ({"audit_benchmarks": "math500;rm"}, "field audit_benchmarks"),
        ({"steps": ("train", "shell")}, "field steps"),
        ({"publish_steps": "every"}, "field steps or publish_steps"),
        ({"retries_network": "3"}, "field retries_network: must be a whole number"),
        ({"retries_io": 10**6}, "field retries_io: must be a whole number in [0, 100]"),
        ({"push": "yes"}, "field push: must be true or false"),
        ({"sync_interval_s": -1.0}, "field sync_interval_s"),
        ({"overrides": ["seed=1"]}, "field overrides: must be a list of strings"),
        ({"store_url": "/home/attacker/store"}, "names a store other than this worker's"),
        ({"store_url": "s3://attacker/bucket"}, "names a store other than this worker's"),
    ],
)
def test_a_field_off_the_allow_list_is_refused_with_one_line(change: dict[str, object], reason: str) -> None:
    with pytest.raises(JobRefused, match=r"^gt_grpo__tiny__tiny: job") as refused:
        check_job(dataclasses.replace(GOOD, **change), "/shared/store")  # type: ignore[arg-type]
    assert reason in str(refused.value) and "\n" not in str(refused.value)
    assert "attacker" not in str(refused.value)  # the value is not echoed


def test_a_cell_id_that_is_not_a_plain_name_is_refused() -> None:
    for cell_id in ("gt_grpo__tiny__tiny\u202e", "gt_grp\u043e__tiny__tiny", "../x"):
        with pytest.raises(JobRefused, match="the cell id is not a plain name"):
            check_job(dataclasses.replace(GOOD, cell_id=cell_id), "/shared/store")


def test_a_job_naming_a_store_is_refused_by_a_worker_without_one() -> None:
    with pytest.raises(JobRefused, match="this worker has none"):
        check_job(GOOD, None)


def test_same_store_resolves_local_paths(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert same_store(str(tmp_path / "a"), f"{tmp_path}/./a/")
    assert not same_store(str(tmp_path / "a"), str(tmp_path / "b"))
    assert same_store("s3://bucket/prefix/", "s3://bucket/prefix") and not same_store("s3://b/p", "s3://b/q")


def test_a_scheduled_run_carries_only_its_schedules_name() -> None:
    assert check_scheduled({"schedule": "nightly", "work_pool": "gpu"}, ("nightly", "weekly-eval")) == "nightly"
    assert check_scheduled({"schedule": "weekly-eval", "overrides": None}, ("nightly", "weekly-eval")) == "weekly-eval"
    with pytest.raises(JobRefused, match="pipeline run parameters config, overrides: a scheduled run carries only"):
        check_scheduled({"schedule": "nightly", "overrides": ["seed=1"], "config": [f"x={CANARY}"]}, ("nightly",))
    with pytest.raises(JobRefused, match="must name a deployment of this worker's own"):
        check_scheduled({"schedule": "hourly"}, ("nightly",))
    with pytest.raises(JobRefused, match="work_pool: must be a plain name"):
        check_scheduled({"schedule": "nightly", "work_pool": "a b"}, ("nightly",))
    with pytest.raises(JobRefused, match="parameters matrix: a scheduled run carries only"):
        vet_parameters("pipeline", {"matrix": "paper"}, None, "", [KEY], ("nightly",))


def test_check_signature_names_the_cell_only_when_it_is_a_plain_name() -> None:
    with pytest.raises(JobRefused, match=r"^cell job: the job is not signed"):
        check_signature({"cell_id": "x\u202ey"}, [KEY])


def test_a_pool_key_file_is_made_private_and_never_overwritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "keys" / "pool.key"
    create_key(path)
    assert os.stat(path).st_mode & 0o777 == 0o600
    first = path.read_text()
    with pytest.raises(PoolKeyError, match="never overwritten"):
        create_key(path)
    assert path.read_text() == first
    monkeypatch.setenv(KEY_FILE_VARIABLE, str(path))
    assert load_keys() == [bytes.fromhex(first.strip())]
    path.write_text(first + "5c" * 32 + "\n")  # rotation: the new key first signs, the old one still verifies
    assert load_keys() == [bytes.fromhex(first.strip()), OTHER_KEY]


def test_an_unsafe_or_missing_pool_key_is_refused_with_how_to_make_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(PoolKeyError, match="corewarding pool-key create"):
        load_keys()
    path = tmp_path / "pool.key"
    create_key(path)
    monkeypatch.setenv(KEY_FILE_VARIABLE, str(path))
    path.chmod(0o644)
    with pytest.raises(PoolKeyError, match="can be read by others"):
        load_keys()
    path.chmod(0o600)
    link = tmp_path / "link.key"
    link.symlink_to(path)
    monkeypatch.setenv(KEY_FILE_VARIABLE, str(link))
    with pytest.raises(PoolKeyError, match="cannot be opened"):
        load_keys()
    monkeypatch.setenv(KEY_VARIABLE, "not-a-key")
    with pytest.raises(PoolKeyError, match="not a pool key") as refused:
        load_keys()
    assert "not-a-key" not in str(refused.value)


def test_a_config_error_of_a_job_run_keeps_the_key_and_the_rule_only() -> None:
    said = without_values(f"dataset.rephrased_source='{CANARY}': must be one of llm, paper")
    assert said == "dataset.rephrased_source: must be one of llm, paper"
    assert without_values(f"grpo: must be a mapping of its keys, got {{'x': '{CANARY}'}}") == (
        "grpo: must be a mapping of its keys"
    )
    assert CANARY not in without_values(f"schedule.total_steps={CANARY}: not usable")


def test_loopback_addresses_are_told_from_others() -> None:
    assert is_loopback("http://127.0.0.1:4200/api") and is_loopback("http://localhost:4200/api")
    assert is_loopback("http://[::1]:4200/api")

"""The pipeline's plain parts: cell selection, data stages, the DVC cell list, settings, retry classification."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from corewarding import CHECKOUT
from corewarding.config import ConfigError, compose_config
from corewarding.data.rephrase.importer import release_paths
from corewarding.matrix import load_matrix
from corewarding.pipeline import dvc, dvc_lock, steps
from corewarding.pipeline.cells import (
    Selection,
    all_data_stages,
    data_stages,
    dvc_entry,
    method_parent,
    plan_cells,
)
from corewarding.pipeline.run_summary import CellReport, PipelineFailed, PipelineReport
from corewarding.pipeline.settings import deployment_specs, load_settings
from corewarding.results.store.store import StoreBusyError
from corewarding.training.inputs import prompt_length_tokenizer

REPO = Path(__file__).resolve().parents[2]


def test_selection_by_method_model_dataset_and_cell_id() -> None:
    paper = Selection(matrix="paper", methods=("co_rewarding_1",), datasets=("dapo14k",))
    assert [p.cell_id for p in plan_cells(paper)] == [
        "co_rewarding_1__qwen3-4b-base__dapo14k",
        "co_rewarding_1__qwen3-8b-base__dapo14k",
        "co_rewarding_1__llama-3.2-3b-instruct__dapo14k",
    ]
    by_model = plan_cells(Selection(matrix="paper", base_models=("qwen2.5-7b",)))
    assert len(by_model) == 6 and {p.cell.dataset for p in by_model} == {"math"}
    one = plan_cells(Selection(matrix="demo", cells=("entropy__tiny__tiny",)))
    assert [p.cell_id for p in one] == ["entropy__tiny__tiny"]
    assert len(plan_cells(Selection(matrix="demo"))) == 8  # gt_grpo runs two seeds


def test_a_bad_selection_names_what_is_wrong() -> None:
    with pytest.raises(ConfigError, match=r"^cell gt_grpo__qwen3-8b-base__math: not in matrix demo \(valid: co_"):
        plan_cells(Selection(matrix="demo", cells=("gt_grpo__qwen3-8b-base__math",)))
    with pytest.raises(ConfigError, match=r"^dataset tiny: not in matrix paper \(valid: dapo14k, math, openrs\)"):
        plan_cells(Selection(matrix="paper", methods=("gt_grpo",), datasets=("tiny",)))
    with pytest.raises(ConfigError, match=r"^base model qwen2\.5-7b, dataset openrs: no cell of matrix paper matches"):
        plan_cells(Selection(matrix="paper", base_models=("qwen2.5-7b",), datasets=("openrs",)))
    with pytest.raises(ConfigError, match=r"grpo\.n"):
        plan_cells(Selection(matrix="demo", cells=("gt_grpo__tiny__tiny",)), ["grpo.n=0"])


def test_paper_cells_train_with_verl_and_evaluate_the_paper_suite() -> None:
    paper = load_matrix("paper")
    assert paper.train_overrides == ("backend=verl",) and paper.eval_benchmarks == "paper"
    plan = plan_cells(Selection(matrix="paper", cells=("gt_grpo__qwen3-8b-base__math",)))[0]
    assert plan.cfg.backend == "verl" and plan.cfg.base_model.hf_id == "Qwen/Qwen3-8B-Base"
    assert plan.run_dir == Path("runs/gt_grpo__qwen3-8b-base__math")
    demo = plan_cells(Selection(matrix="demo", cells=("gt_grpo__tiny__tiny",)), ["paths.runs_dir=elsewhere", "seed=3"])
    assert demo[0].evaluation_overrides() == ["paths.runs_dir=elsewhere"]


def test_data_stages_follow_the_dataset_and_whether_the_method_needs_rephrasings() -> None:
    plans = plan_cells(Selection(matrix="paper", base_models=("qwen3-4b-base",), datasets=("math", "openrs")))
    by_id = {p.cell_id: data_stages(p) for p in plans}
    assert by_id["gt_grpo__qwen3-4b-base__math"] == ["prepare@math", "prepare@math_test"]
    assert by_id["co_rewarding_1__qwen3-4b-base__math"] == [
        "prepare@math", "prepare@math_test", "import_rephrased@math",
    ]  # fmt: skip
    assert all_data_stages(plans) == [
        "prepare@math", "prepare@math_test", "import_rephrased@math", "prepare@openrs", "import_rephrased@openrs",
    ]  # fmt: skip
    tiny = plan_cells(Selection(matrix="demo"))
    assert all_data_stages(tiny) == ["tiny_data"]


@pytest.mark.parametrize("dataset", ["math", "dapo14k", "openrs"])
def test_co_rewarding_1_paper_cells_default_to_the_released_rephrasings(dataset: str) -> None:
    """The paper's pairs are its released Qwen3-32B rephrasings (import-rephrased); generating anew is a choice."""
    cell = f"co_rewarding_1__qwen3-8b-base__{dataset}"
    default = plan_cells(Selection(matrix="paper", cells=(cell,)))[0]
    assert default.cfg.dataset.rephrased_source == "release"
    assert data_stages(default) == [f"prepare@{dataset}", "prepare@math_test", f"import_rephrased@{dataset}"]
    assert dvc_entry(default)["paired_data"] == f"data/{dataset}/release/train_rephrased.parquet"
    fresh = plan_cells(Selection(matrix="paper", cells=(cell,)), ["dataset.rephrased_source=generate"])[0]
    assert data_stages(fresh) == [f"prepare@{dataset}", "prepare@math_test", f"rephrase@{dataset}"]
    assert (dvc_entry(fresh)["data"], dvc_entry(fresh)["paired_data"]) == (
        f"data/{dataset}/train_original.parquet", f"data/{dataset}/train_rephrased.parquet",
    )  # fmt: skip
    # The stages named get their params.yaml entries, and dvc.yaml's stage writes exactly the files the cell reads.
    entries = dvc.data_stage_entries(data_stages(default) + data_stages(fresh))
    assert dataset in entries["import_rephrased"] and dataset in entries["rephrase"]
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert stages["import_rephrased"]["foreach"] == "${data_stages.import_rephrased}"
    outs = [next(iter(o)) for o in stages["import_rephrased"]["do"]["outs"]]
    release_files = {o.replace("${key}", dataset) for o in outs}
    assert {dvc_entry(default)["data"], dvc_entry(default)["paired_data"]} <= release_files
    # The import writes where the cell reads (datasource.release_dir = the dataset's release folder).
    data_cfg = compose_config([f"datasource={dataset}", "rephrase=release"], "data")
    assert str(release_paths(data_cfg).rephrased) == dvc_entry(default)["paired_data"]
    with pytest.raises(ConfigError, match="rephrased_source='hub'"):
        plan_cells(Selection(matrix="paper", cells=(cell,)), ["dataset.rephrased_source=hub"])


def test_each_cell_checks_prompt_lengths_with_its_own_base_model_tokenizer() -> None:
    """Prepared training files are shared by every base model, so they are not length-filtered; each cell drops its
    prompts over grpo.max_prompt_length at training load with its own tokenizer (no download to check that)."""
    for dataset in ("math", "dapo14k", "openrs", "amc_ttt"):
        data_cfg = compose_config([f"datasource={dataset}"], "data")
        assert data_cfg.datasource.tokenizer is None and "prompt_too_long" not in data_cfg.validate.drop
    expected = {
        "co_rewarding_1__llama-3.2-3b-instruct__dapo14k": "meta-llama/Llama-3.2-3B-Instruct",
        "gt_grpo__llama-3.2-3b-instruct__math": "meta-llama/Llama-3.2-3B-Instruct",
        "gt_grpo__qwen3-8b-base__math": "Qwen/Qwen3-8B-Base",
        "gt_grpo__qwen2.5-3b__math": "Qwen/Qwen2.5-3B",
    }
    plans = plan_cells(Selection(matrix="paper", cells=tuple(expected)))
    assert {p.cell_id: prompt_length_tokenizer(p.cfg) for p in plans} == expected
    assert all(p.cfg.grpo.filter_overlong_prompts and p.cfg.grpo.max_prompt_length == 512 for p in plans)


def test_cells_are_added_to_params_keeping_comments_and_other_cells(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text("# my note\nother: 1\ncells:\n  kept__a__b: {matrix: demo}\n")
    plans = plan_cells(Selection(matrix="demo", methods=("gt_grpo", "entropy")), ["schedule.total_steps=2"])
    assert dvc.add_cells_to_params(params, plans) is True
    text = params.read_text()
    assert text.startswith("# my note\nother: 1\n") and "kept__a__b" in text
    entry = dvc_entry(plans[0])
    assert entry["train_args"] == "schedule.total_steps=2" and entry["eval_args"] == ""
    assert entry["run_dir"] == "runs/gt_grpo__tiny__tiny" and entry["method_parent"] == "gt_grpo"
    assert (entry["data"], entry["paired_data"], entry["val_data"]) == (
        "artifacts/tiny-data/train.parquet", "artifacts/tiny-data/train.parquet", "artifacts/tiny-data/test.parquet",
    )  # fmt: skip
    before = params.stat().st_mtime_ns
    assert dvc.add_cells_to_params(params, plans) is False  # unchanged: not rewritten
    assert params.stat().st_mtime_ns == before
    # A later run with other overrides changes a listed cell's arguments only for the steps it ran.
    again = plan_cells(Selection(matrix="demo", methods=("gt_grpo", "entropy")), ["seed=7"], ["seed=3"])
    assert dvc.add_cells_to_params(params, again, trained=["entropy__tiny__tiny"], evaluated=[]) is True
    from ruamel.yaml import YAML

    cells = YAML().load(params.read_text())["cells"]
    assert cells["gt_grpo__tiny__tiny"]["train_args"] == "schedule.total_steps=2"  # kept: it did not train now
    assert cells["entropy__tiny__tiny"]["train_args"] == "seed=7" and cells["entropy__tiny__tiny"]["eval_args"] == ""


def test_cells_train_on_exactly_their_files_and_ablations_track_their_parent() -> None:
    cr1 = plan_cells(Selection(matrix="paper", cells=("co_rewarding_1__qwen3-4b-base__math",)))[0]
    gt = plan_cells(Selection(matrix="paper", cells=("gt_grpo__qwen3-4b-base__math",)))[0]
    assert (dvc_entry(cr1)["data"], dvc_entry(cr1)["paired_data"]) == (
        "data/math/release/train_original.parquet", "data/math/release/train_rephrased.parquet",
    )  # fmt: skip
    assert dvc_entry(gt)["data"] == dvc_entry(gt)["paired_data"] == "data/math/train.parquet"
    assert dvc_entry(gt)["val_data"] == "data/math_test/test.parquet"
    assert method_parent("co_rewarding_2_frozen_teacher") == "co_rewarding_2"
    assert method_parent("majority_voting_rephrased") == "majority_voting"
    assert method_parent("entropy") == "entropy"


def test_one_failing_group_of_data_stages_fails_only_its_cells(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    dvc.run_dvc(repo, "init", "-q")
    (repo / "dvc.yaml").write_text("stages:\n  ok:\n    cmd: echo made > made.txt\n    outs: [made.txt]\n"
                                   "  broken:\n    cmd: exit 3\n    outs: [never.txt]\n")  # fmt: skip
    failed = dvc.reproduce_groups(repo, {("ok",): ["a__b__c"], ("broken",): ["d__e__f", "g__h__i"], (): ["j__k__l"]})
    assert set(failed) == {"d__e__f", "g__h__i"} and "broken" in failed["d__e__f"]
    assert (repo / "made.txt").read_text() == "made\n"


def test_a_malformed_matrix_file_is_an_error_naming_the_file_and_key(tmp_path: Path) -> None:
    configs = tmp_path / "configs"
    shutil.copytree(REPO / "configs", configs)
    cells = "cells:\n  - {method: gt_grpo, base_model: tiny, dataset: tiny}\n"
    for body, message in (
        ("training: [backend=verl]\n", "training must be a mapping"),
        ("training: {overrides: backend=verl}\n", "training.overrides must be a list"),
        ("training: {override: [backend=verl]}\n", r"unknown key\(s\) training.override"),
        ("evaluation: {benchmarks: [math500, amc]}\n", "evaluation.benchmarks must be a comma-separated string"),
    ):
        (configs / "matrix/bad.yaml").write_text(body + cells)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("COREWARDING_CONFIG_DIR", str(configs))
            with pytest.raises(ValueError, match=message) as caught:
                load_matrix("bad")
        assert "bad.yaml" in str(caught.value)


def test_the_dvc_record_of_local_runs_stays_out_of_git_status_and_dvc_yaml_parses_without_it(tmp_path: Path) -> None:
    """`pipeline run` lists its cells and data sets in params.yaml and records their stages in dvc.lock: both are the
    checkout's own record (a run never changes what git shows, which would change the code version that a worker
    compares). params.yaml is ignored; dvc.lock cannot be (DVC refuses an ignored lock), so git tracks it empty and
    the first dvc call marks it skip-worktree. dvc.yaml declares empty lists for a checkout that has none yet."""
    ignored = subprocess.run(["git", "check-ignore", "params.yaml", "dvc.lock"], cwd=CHECKOUT, capture_output=True,
                             text=True, check=False).stdout.split()  # fmt: skip
    assert ignored == ["params.yaml"]
    tracked = subprocess.run(["git", "show", ":dvc.lock"], cwd=CHECKOUT, capture_output=True, text=True, check=True)
    assert yaml.safe_load(tracked.stdout) == {"schema": "2.0", "stages": {}}
    assert yaml.safe_load((CHECKOUT / "dvc.yaml").read_text())["vars"] == [
        {"cells": {}},
        {"data_stages": {"prepare": {}, "rephrase": {}, "import_rephrased": {}}},
    ]

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "dvc.lock").write_text(tracked.stdout)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["init", "-q"], ["add", "dvc.lock"], ["commit", "-qm", "c"]):
        subprocess.run([*git, *cmd], cwd=repo, check=True)
    dvc_lock.keep_local(repo)
    dvc_lock.keep_local(repo)  # once marked, left as it is
    (repo / "dvc.lock").write_text("schema: '2.0'\nstages:\n  train@a: {cmd: x}\n")
    shown = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert shown.stdout == ""
    flags = subprocess.run(["git", "ls-files", "-v"], cwd=repo, capture_output=True, text=True, check=True)
    assert flags.stdout == "S dvc.lock\n"


def test_data_stages_are_listed_with_their_upstream_prepare_and_an_unknown_set_is_named(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    assert dvc.add_data_stages(params, ["import_rephrased@math", "prepare@math_test", "tiny_data"])
    listed = yaml.safe_load(params.read_text())["data_stages"]
    assert listed == {
        "prepare": {"math": {"split": "train"}, "math_test": {"split": "test"}},
        "rephrase": {},
        "import_rephrased": {"math": {"release": "TMLR-Group-HF/Co-rewarding-RephrasedMATH"}},
    }
    assert not dvc.add_data_stages(params, ["prepare@math"])  # already listed: the file is left as it is
    assert dvc.add_data_stages(params, ["rephrase@tiny"])
    assert yaml.safe_load(params.read_text())["data_stages"]["rephrase"] == {"tiny": {"rephraser": "transformers_tiny"}}
    assert dvc.set_stages("math") == ["prepare@math", "rephrase@math", "import_rephrased@math"]
    assert dvc.set_stages("math500") == ["prepare@math500"]  # an evaluation set is neither rephrased nor released
    before = params.read_text()
    with pytest.raises(dvc.DvcError, match="prepare@nope: unknown datasource 'nope'"):
        dvc.add_data_stages(params, ["prepare@nope"])
    with pytest.raises(dvc.DvcError, match=r"math500\.yaml names no rephraser"):
        dvc.add_data_stages(params, ["rephrase@math500"])
    assert params.read_text() == before


def test_a_malformed_params_file_is_an_error_naming_it(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text("cells: [a, b]\n")
    plans = plan_cells(Selection(matrix="demo", cells=("gt_grpo__tiny__tiny",)))
    with pytest.raises(dvc.DvcError, match=r"params\.yaml: 'cells' must map"):
        dvc.add_cells_to_params(params, plans)
    params.write_text("cells: {a: [\n")
    with pytest.raises(dvc.DvcError, match="not valid YAML"):
        dvc.add_cells_to_params(params, plans)
    assert params.read_text() == "cells: {a: [\n"  # nothing written


def test_an_override_with_white_space_cannot_become_a_stage_command() -> None:
    plan = plan_cells(Selection(matrix="demo", cells=("gt_grpo__tiny__tiny",)), ["hub.org='my lab'"])[0]
    with pytest.raises(ConfigError, match="white space"):
        dvc_entry(plan)


def test_settings_defaults_parameters_and_bad_values() -> None:
    settings = load_settings()
    assert settings.selection.matrix == "demo" and settings.work_pool is None and settings.push is False
    assert settings.store_url is None and settings.max_attempts == 2
    assert settings.steps == ("data", "train", "evaluate", "ingest", "publish")
    chosen = load_settings(["store.url=/shared/store"], matrix="paper", methods=["gt_grpo"], steps=["evaluate"],
                           push=True, work_pool="gpu")  # fmt: skip
    assert chosen.work_pool == "gpu" and chosen.store_url == "/shared/store"
    assert chosen.selection.methods == ("gt_grpo",) and chosen.push
    with pytest.raises(ConfigError, match=r"steps=.*each must be one of"):
        load_settings(steps=["train", "deploy"])
    with pytest.raises(ConfigError, match=r"cells\.max_attempts=0: must be a number > 0"):
        load_settings(["cells.max_attempts=0"])
    with pytest.raises(ConfigError, match=r"work_pool: .*shared store \(store\.url or store\.dvc_remote\)"):
        load_settings(work_pool="gpu")
    with pytest.raises(ConfigError, match=r"methods=.*list of strings"):
        load_settings(methods=[1])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=r"paths\.data_dir=elsewhere.*without the data step"):
        load_settings(overrides=["paths.data_dir=elsewhere"])
    assert load_settings(overrides=["paths.data_dir=elsewhere"], steps=["train"]).overrides == (
        "paths.data_dir=elsewhere",
    )


def test_deployments_need_a_cron_and_known_parameters() -> None:
    specs = deployment_specs()
    assert specs["nightly"]["cron"] == "0 2 * * *"
    assert specs["weekly-eval"]["parameters"] == {
        "matrix": "paper",
        "steps": ["evaluate", "ingest"],
        "force_evaluate": True,
    }
    with pytest.raises(ConfigError, match=r"deployments\.nightly.*unknown colour"):
        deployment_specs(["+deployments.nightly.parameters.colour=red"])
    with pytest.raises(ConfigError, match="needs a cron"):
        deployment_specs(["deployments.nightly.cron=null"])


def test_only_transient_errors_are_retried() -> None:
    request = httpx.Request("POST", "http://127.0.0.1/api")
    server_error = httpx.HTTPStatusError("boom", request=request, response=httpx.Response(503, request=request))
    denied = httpx.HTTPStatusError("no", request=request, response=httpx.Response(401, request=request))
    assert steps.is_transient(StoreBusyError("locked"))
    assert steps.is_transient(dvc.DvcLockError("Unable to acquire lock"))
    assert not steps.is_transient(dvc.DvcError("stage 'x' failed"))
    assert steps.is_transient(httpx.ConnectError("refused"))
    assert steps.is_transient(ConnectionResetError())
    assert steps.is_transient(server_error)
    assert not steps.is_transient(denied)
    assert not steps.is_transient(FileNotFoundError("runs/x"))
    assert not steps.is_transient(ConfigError("grpo.n=0"))
    assert not steps.is_transient(None)


def test_a_failed_run_names_each_failed_cell() -> None:
    ok, bad = CellReport("a__b__c", "runs/a__b__c"), CellReport("d__e__f", "runs/d__e__f")
    for step in ("train", "evaluate"):
        ok.record(step, "done")
    bad.record("train", "failed", "NotADirectoryError: runs/d__e__f")
    bad.record("evaluate", "not run")
    report = PipelineReport("demo", [ok, bad])
    assert report.ran("train") == ["a__b__c"] and not report.ok
    error = PipelineFailed(report)
    assert str(error) == "1 of 2 cell(s) failed: d__e__f (train: NotADirectoryError: runs/d__e__f)"
    report.dvc_error = "DvcLockError: locked"
    assert str(PipelineFailed(report)).endswith("; recording the DVC stages failed: DvcLockError: locked")
    assert PipelineReport.from_dict(report.to_dict()).to_dict() == report.to_dict()

"""The publish folder of a checkpoint step: its files, the model card read back with huggingface_hub, determinism,
atomicity, and errors that name the path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from huggingface_hub import ModelCard

from corewarding.hub.errors import PublishInputError
from corewarding.hub.model_folder import build_model_folder
from corewarding.hub.run_source import load_run
from corewarding.matrix import hub_repo_id, parse_cell_id

REPO = "TMLR-Group-HF/Co-rewarding-I-Tiny-Tiny"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def reported(rows: list[dict], step: int) -> dict[tuple[str, str], float]:
    """What the card must report for a step: math_verify where a benchmark has it, else strict, else its tool."""
    mine = [r for r in rows if r["step"] == step]
    out = {}
    for bench in {r["benchmark"] for r in mine}:
        checkers = {r["checker"] for r in mine if r["benchmark"] == bench}
        chosen = next((c for c in ("math_verify", "strict") if c in checkers), sorted(checkers)[0])
        out.update(
            {(b, r["metric"]): r["value"] for r in mine if (b := r["benchmark"]) == bench and r["checker"] == chosen}
        )
    return out


def test_folder_holds_the_weights_config_card_and_provenance(trained_run: Path, tmp_path: Path, make_eval_rows) -> None:
    assert hub_repo_id(parse_cell_id(trained_run.name)) == REPO
    folder = build_model_folder(trained_run, tmp_path / "out", repo_id=REPO)
    assert folder.step == 2 and folder.status == "built" and folder.fingerprint.startswith("sha256:")
    checkpoint = trained_run / "checkpoints" / "global_step_2" / "model"
    weights = {p.name for p in checkpoint.iterdir()}
    generated = {"README.md", "training_config.yaml", "provenance.json", "training_metrics.jsonl"}
    assert set(folder.files) == weights | generated
    for name in weights:  # weights, config and tokenizer copied byte for byte
        assert (folder.path / name).read_bytes() == (checkpoint / name).read_bytes()
    assert (folder.path / "training_config.yaml").read_bytes() == (trained_run / "config.yaml").read_bytes()
    logged = [json.loads(line) for line in (folder.path / "training_metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [0, 1, 2]

    record = json.loads((trained_run / "run.json").read_text())
    provenance = json.loads((folder.path / "provenance.json").read_text())
    assert provenance["step"] == 2 and provenance["checkpoint"] == "checkpoints/global_step_2/model"
    assert provenance["code_version"] == record["code_version"] and provenance["config_hash"] == record["config_hash"]
    assert {r: d["sha256"] for r, d in provenance["data_files"].items()} == {
        r: d["sha256"] for r, d in record["data_files"].items()
    }

    card = ModelCard.load(folder.path / "README.md")
    data = card.data.to_dict()
    assert "base_model" not in data  # the tiny model is not on the Hub
    assert "datasets" not in data  # tiny data is generated, with no release
    assert data["license"] == "apache-2.0" and data["library_name"] == "transformers"
    assert data["pipeline_tag"] == "text-generation"
    assert {"corewarding", "co-rewarding", "grpo", "co-rewarding-i", "arxiv:2508.00410"} <= set(data["tags"])
    values = {(r.dataset_name, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert values == reported(make_eval_rows(trained_run), 2)
    checkers = {r.dataset_name: r.metric_args["checker"] for r in card.data.eval_results}
    assert checkers == {"math500": "math_verify", "tiny": "strict", "ifeval": "lm_eval"}
    math500 = next(r for r in card.data.eval_results if r.dataset_name == "math500")
    assert math500.dataset_type == "HuggingFaceH4/MATH-500"  # the benchmark's datasource
    text = card.text
    assert "| math500 | pass@1 | math_verify | 40.6 |" in text  # 0.40625 in percent; the base model's 15.6 beside it
    assert "15.6" in text and "`math_verify`" in text
    assert "@article{zhang2025corewarding" in text and "arXiv:2508.00410" in text and "Zizhuo" in text
    assert record["config_hash"] in text and "Co-rewarding-I (label-free, data side)" in text


def test_card_metadata_of_a_paper_cell(run_copy: Path, tmp_path: Path) -> None:
    """A Co-rewarding-I cell of Qwen3-8B-Base on MATH: base model and both training datasets in the metadata."""
    config = yaml.safe_load((run_copy / "config.yaml").read_text())
    config["base_model"].update(name="qwen3-8b-base", hub_name="Qwen3-8B-Base", hf_id="Qwen/Qwen3-8B-Base")
    config["dataset"].update(name="math", hub_name="MATH", source="DigitalLearningGmbH/MATH-lighteval",
                             rephrased_release="TMLR-Group-HF/Co-rewarding-RephrasedMATH")  # fmt: skip
    paper = run_copy.with_name("co_rewarding_1__qwen3-8b-base__math")
    run_copy.rename(paper)
    (paper / "config.yaml").write_text(yaml.safe_dump(config))
    repo_id = hub_repo_id(parse_cell_id(paper.name))
    assert repo_id == "TMLR-Group-HF/Co-rewarding-I-Qwen3-8B-Base-MATH"
    card = ModelCard.load(build_model_folder(paper, tmp_path / "out", repo_id=repo_id, step=1).path / "README.md")
    assert card.data.base_model == "Qwen/Qwen3-8B-Base"
    assert card.data.datasets == ["DigitalLearningGmbH/MATH-lighteval", "TMLR-Group-HF/Co-rewarding-RephrasedMATH"]
    assert card.data.to_dict()["model-index"][0]["name"] == "Co-rewarding-I-Qwen3-8B-Base-MATH"
    assert "[`Qwen/Qwen3-8B-Base`](https://huggingface.co/Qwen/Qwen3-8B-Base)" in card.text

    # GT-GRPO on the same set trains on the originals only: no rephrased release in its datasets
    config["method"].update(name="gt_grpo", hub_name="GT", reward="gt_grpo", views=["original"])
    gt = paper.rename(paper.with_name("gt_grpo__qwen3-8b-base__math"))
    (gt / "config.yaml").write_text(yaml.safe_dump(config))
    card = ModelCard.load(build_model_folder(gt, tmp_path / "gt", repo_id="o/GT").path / "README.md")
    assert card.data.datasets == ["DigitalLearningGmbH/MATH-lighteval"]
    assert "Ground-truth GRPO" in card.text

    # Co-rewarding-III trains on both copies of a question, with its teacher: its own paragraph, both datasets
    config["method"].update(name="co_rewarding_3", hub_name="Co-rewarding-III", reward="co_rewarding_3",
                            views=["original", "rephrased"])  # fmt: skip
    cr3 = gt.rename(gt.with_name("co_rewarding_3__qwen3-8b-base__math"))
    (cr3 / "config.yaml").write_text(yaml.safe_dump(config))
    repo_id = hub_repo_id(parse_cell_id(cr3.name))
    assert repo_id == "TMLR-Group-HF/Co-rewarding-III-Qwen3-8B-Base-MATH"
    card = ModelCard.load(build_model_folder(cr3, tmp_path / "cr3", repo_id=repo_id).path / "README.md")
    assert card.data.datasets == ["DigitalLearningGmbH/MATH-lighteval", "TMLR-Group-HF/Co-rewarding-RephrasedMATH"]
    assert "Co-rewarding-III (label-free" in card.text and "teacher's majority answer on the other copy" in card.text


def test_a_step_without_evaluation_and_rows_of_other_weights(run_copy: Path, tmp_path: Path, set_eval) -> None:
    other_weights = "sha256:0000000000000000"
    rows = [{"step": 2, "benchmark": "math500", "checker": "strict", "metric": "pass@1", "value": 0.5}]
    rows[0]["model_revision"] = other_weights
    set_eval(run_copy, rows)
    folder = build_model_folder(run_copy, tmp_path / "out", repo_id=REPO)
    card = ModelCard.load(folder.path / "README.md")
    assert card.data.eval_results is None and "model-index" not in card.data.to_dict()
    assert "has not been evaluated yet" in card.text and "1 row(s) evaluated on other weights" in card.text
    assert json.loads((folder.path / "provenance.json").read_text())["evaluation"]["left_out_other_weights"] == 1


def test_rebuild_is_byte_identical_and_an_up_to_date_folder_is_left_alone(trained_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "publish" / "global_step_2"
    first = build_model_folder(trained_run, out, repo_id=REPO)
    before = snapshot(out)
    mtimes = {p: p.stat().st_mtime_ns for p in out.iterdir()}
    again = build_model_folder(trained_run, out, repo_id=REPO)
    assert again.status == "unchanged" and again.fingerprint == first.fingerprint
    assert {p: p.stat().st_mtime_ns for p in out.iterdir()} == mtimes
    shutil.rmtree(out)
    rebuilt = build_model_folder(trained_run, out, repo_id=REPO)
    assert rebuilt.status == "built" and snapshot(out) == before  # no timestamp anywhere
    other = build_model_folder(trained_run, tmp_path / "elsewhere", repo_id=REPO)
    assert snapshot(other.path) == before


def test_a_failed_build_leaves_no_folder_and_an_older_one_untouched(
    run_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, set_eval, make_eval_rows
) -> None:
    import corewarding.hub.folder as folder_module

    real_copy = shutil.copyfile
    copies = []

    def failing_copy(src, dst):  # type: ignore[no-untyped-def]
        copies.append(src)
        if len(copies) == 3:
            raise OSError("disk full (injected)")
        return real_copy(src, dst)

    out = tmp_path / "publish" / "global_step_2"
    monkeypatch.setattr(folder_module.shutil, "copyfile", failing_copy)
    with pytest.raises(OSError, match="disk full"):
        build_model_folder(run_copy, out, repo_id=REPO)
    assert not out.exists() and list(out.parent.iterdir()) == []  # nothing half-written, no temporary left

    monkeypatch.setattr(folder_module.shutil, "copyfile", real_copy)
    build_model_folder(run_copy, out, repo_id=REPO)
    before = snapshot(out)
    rows = make_eval_rows(run_copy)
    set_eval(run_copy, [{**r, "value": r["value"] / 2} for r in rows])  # a new evaluation: the card changes
    copies.clear()
    monkeypatch.setattr(folder_module.shutil, "copyfile", failing_copy)
    with pytest.raises(OSError, match="disk full"):
        build_model_folder(run_copy, out, repo_id=REPO)
    assert snapshot(out) == before and [p.name for p in out.parent.iterdir()] == ["global_step_2"]
    monkeypatch.setattr(folder_module.shutil, "copyfile", real_copy)
    assert build_model_folder(run_copy, out, repo_id=REPO).status == "built" and snapshot(out) != before


def test_bad_input_is_an_error_naming_the_path(run_copy: Path, tmp_path: Path) -> None:
    with pytest.raises(PublishInputError, match=str(tmp_path / "nowhere")):
        build_model_folder(tmp_path / "nowhere", tmp_path / "out", repo_id=REPO)
    with pytest.raises(PublishInputError, match=r"no checkpoint for step 7; saved steps: \[1, 2\]"):
        build_model_folder(run_copy, tmp_path / "out", repo_id=REPO, step=7)
    shutil.rmtree(run_copy / "checkpoints")
    with pytest.raises(PublishInputError, match=f"{run_copy / 'checkpoints'}: no saved checkpoint"):
        build_model_folder(run_copy, tmp_path / "out", repo_id=REPO)
    (run_copy / "config.yaml").unlink()
    with pytest.raises(PublishInputError, match=f"{run_copy / 'config.yaml'}: no such file"):
        build_model_folder(run_copy, tmp_path / "out", repo_id=REPO)
    assert not (tmp_path / "out").exists()


def test_a_verl_checkpoint_is_merged_then_published(
    run_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verl leaves global_step_N/actor (FSDP shards): the step is merged into hf/ once, with the project's merge."""
    import corewarding.training.verl.merge as merge

    step2 = run_copy / "checkpoints" / "global_step_2"
    weights = step2 / "model"
    (step2 / "actor").mkdir()
    (step2 / "actor" / "fsdp_config.json").write_text("{}")  # what marks a complete verl checkpoint
    moved = shutil.move(weights, tmp_path / "weights")
    merged = []

    def fake_merge(run_dir: Path, step: int | None = None, target: Path | None = None) -> Path:
        merged.append(step)
        return Path(shutil.copytree(moved, run_dir / "hf" / f"global_step_{step}"))

    monkeypatch.setattr(merge, "merge_checkpoint", fake_merge)
    assert load_run(run_copy).saved[2].name == "actor"
    folder = build_model_folder(run_copy, tmp_path / "out", repo_id=REPO)
    assert merged == [2] and folder.step == 2
    assert (folder.path / "model.safetensors").read_bytes() == (Path(moved) / "model.safetensors").read_bytes()
    provenance = json.loads((folder.path / "provenance.json").read_text())
    assert provenance["checkpoint"] == "checkpoints/global_step_2/actor (merged with verl)"
    build_model_folder(run_copy, tmp_path / "out", repo_id=REPO)
    assert merged == [2]  # merged once; the second build reads hf/global_step_2


def test_card_names_the_release_only_when_the_cell_trained_on_it() -> None:
    """Co-rewarding-I trains on the released rephrasings by default; a fresh rephrasing is not that release."""
    from types import SimpleNamespace

    from corewarding.hub.model_card import training_datasets

    values = {"dataset.source": "knoveleng/open-rs", "method.views": ["original", "rephrased"],
              "dataset.rephrased_release": "TMLR-Group-HF/Co-rewarding-RephrasedOpenRS"}  # fmt: skip

    def source(rephrased_source: str) -> Any:
        config = {**values, "dataset.rephrased_source": rephrased_source}
        return SimpleNamespace(get=lambda key, default=None: config.get(key, default))

    assert training_datasets(source("release")) == ["knoveleng/open-rs", "TMLR-Group-HF/Co-rewarding-RephrasedOpenRS"]
    assert training_datasets(source("generate")) == ["knoveleng/open-rs"]

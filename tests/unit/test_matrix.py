"""The checkpoint matrix, the names made from a cell, and composing every cell's config."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from corewarding import methods
from corewarding.config import compose_config, config_dir
from corewarding.matrix import Cell, hub_repo_id, load_matrix, parse_cell_id, run_dir, select_cells


def test_paper_matrix_has_the_66_published_cells() -> None:
    cells = load_matrix("paper").cells
    assert len(cells) == 66
    per_dataset = Counter(c.dataset for c in cells)
    assert per_dataset == {"math": 36, "dapo14k": 18, "openrs": 12}
    assert {c.base_model for c in cells if c.dataset == "dapo14k"} == {
        "qwen3-4b-base", "qwen3-8b-base", "llama-3.2-3b-instruct",
    }  # fmt: skip
    assert {c.base_model for c in cells if c.dataset == "openrs"} == {"qwen3-4b-base", "qwen3-8b-base"}
    assert Counter(c.method for c in cells) == dict.fromkeys(
        ["gt_grpo", "majority_voting", "self_certainty", "entropy", "co_rewarding_1", "co_rewarding_2"], 11
    )


def test_paper_v3_matrix_adds_the_six_co_rewarding_3_cells_to_the_66() -> None:
    v2, v3 = load_matrix("paper"), load_matrix("paper_v3")
    assert len(v3.cells) == 72 and v3.cells[:66] == v2.cells
    assert {hub_repo_id(c) for c in v3.cells[66:]} == {
        f"TMLR-Group-HF/Co-rewarding-III-{model}-{data}"
        for model in ("Qwen3-8B-Base", "Qwen3-4B-Base", "Llama-3.2-3B-Instruct")
        for data in ("MATH", "DAPO14k")
    }
    assert {c.method for c in v3.cells[66:]} == {"co_rewarding_3"}
    # the rest of v2's file is taken over: verl training, the paper's benchmarks with vLLM
    assert (v3.train_overrides, v3.eval_benchmarks, v3.eval_overrides) == (
        v2.train_overrides, v2.eval_benchmarks, v2.eval_overrides,
    )  # fmt: skip


def test_the_demo_trains_every_registered_method_once_and_ground_truth_twice() -> None:
    demo = load_matrix("demo")
    assert Counter(c.method for c in demo.cells) == {**dict.fromkeys(methods.names(), 1), "gt_grpo": 2}
    assert {(c.base_model, c.dataset) for c in demo.cells} == {("tiny", "tiny")}
    assert [c.cell_id for c in demo.cells[:2]] == ["gt_grpo__tiny__tiny", "gt_grpo__tiny__tiny__seed1"]


def test_a_matrix_extending_itself_or_an_unknown_one_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(config_dir(), tmp_path / "configs")
    monkeypatch.setenv("COREWARDING_CONFIG_DIR", str(tmp_path / "configs"))
    folder = tmp_path / "configs" / "matrix"
    (folder / "a.yaml").write_text("name: a\nextends: b\ncells: []\n")
    (folder / "b.yaml").write_text("name: b\nextends: a\ncells: []\n")
    with pytest.raises(ValueError, match=r"b\.yaml: extends must name another matrix, not 'a' \(no cycles\)"):
        load_matrix("a")
    (folder / "b.yaml").write_text("name: b\nextends: nowhere\ncells: []\n")
    with pytest.raises(KeyError, match="unknown matrix 'nowhere'"):
        load_matrix("a")


@pytest.mark.parametrize(
    ("cell", "repo"),
    [
        (
            Cell("co_rewarding_2", "qwen3-8b-base", "dapo14k"),
            "TMLR-Group-HF/Co-rewarding-II-Qwen3-8B-Base-DAPO14k",
        ),
        (Cell("gt_grpo", "qwen2.5-3b", "math"), "TMLR-Group-HF/GT-Qwen2.5-3B-MATH"),
        (
            Cell("majority_voting", "llama-3.2-3b-instruct", "math"),
            "TMLR-Group-HF/Majority-Voting-Llama-3.2-3B-Instruct-MATH",
        ),
        (
            Cell("self_certainty", "qwen3-4b-base", "openrs"),
            "TMLR-Group-HF/Self-Certainty-Qwen3-4B-Base-OpenRS",
        ),
        (
            Cell("co_rewarding_1", "qwen3-1.7b-base", "math"),
            "TMLR-Group-HF/Co-rewarding-I-Qwen3-1.7B-Base-MATH",
        ),
        (Cell("entropy", "qwen2.5-7b", "math"), "TMLR-Group-HF/Entropy-Qwen2.5-7B-MATH"),
    ],
)
def test_hub_repo_ids_reproduce_the_published_names(cell: Cell, repo: str) -> None:
    assert hub_repo_id(cell) == repo


def test_names_are_unique_and_round_trip() -> None:
    cells = load_matrix("paper").cells
    assert len({hub_repo_id(c) for c in cells}) == 66
    assert len({c.cell_id for c in cells}) == 66
    for c in cells:
        assert parse_cell_id(c.cell_id) == c
    cell = Cell("co_rewarding_2", "qwen3-8b-base", "dapo14k")
    assert hub_repo_id(cell, org="my-lab") == "my-lab/Co-rewarding-II-Qwen3-8B-Base-DAPO14k"
    assert str(run_dir(cell, "out")) == "out/co_rewarding_2__qwen3-8b-base__dapo14k"
    with pytest.raises(ValueError, match="not a cell id"):
        parse_cell_id("gt_grpo__tiny")


def test_every_paper_cell_composes_with_the_paper_hyperparameters() -> None:
    for cell in load_matrix("paper").cells:
        cfg = compose_config(cell.overrides())
        assert cfg.method.name == cell.method and cfg.base_model.name == cell.base_model
        assert cfg.base_model.hf_id and cfg.dataset.source
        assert cfg.grpo.train_batch_size == 128 and cfg.grpo.n == 8 and cfg.optimizer.lr == 3e-6
        assert cfg.grpo.max_response_length == 3072 and cfg.schedule.epochs == 3
        expected_kl = 0.001 if cell.method == "co_rewarding_2" else 0.005
        assert cfg.grpo.kl_coef == expected_kl


def test_method_overlays_change_only_their_keys() -> None:
    ii = compose_config(["method=co_rewarding_2"])
    assert ii.method.teacher.ema.alpha_start == 0.01 and ii.method.teacher.ema.alpha_end == 1e-5
    assert ii.schedule.save_freq == 30 and ii.method.data_seed == 1234
    frozen = compose_config(["method=co_rewarding_2_frozen_teacher"])
    assert frozen.method.teacher.ema.enable is False and frozen.method.reward == "co_rewarding_2"
    rephrased = compose_config(["method=majority_voting_rephrased"])
    assert rephrased.method.reward == "majority_voting" and rephrased.method.train_on == "rephrased"
    i = compose_config(["method=co_rewarding_1"])
    assert list(i.method.views) == ["original", "rephrased"] and i.method.data_seed == 1


def test_select_cells_and_unknown_names() -> None:
    cells = load_matrix("paper").cells
    assert len(select_cells(cells, methods=["co_rewarding_2"], datasets=["math"])) == 6
    assert len(select_cells(cells, base_models=["qwen3-8b-base"])) == 18
    with pytest.raises(KeyError, match="known: demo, paper"):
        load_matrix("nope")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("grpo.n=0", "grpo.n=0: must be a whole number >= 1"),
        ("vote.canonicalize=fuzzy", "vote.canonicalize='fuzzy'"),
        ("grpo.temperature=0", "grpo.temperature=0: must be > 0"),
        ("schedule.total_steps=0", "schedule.total_steps=0"),
        ("backend=tpu", "backend='tpu'"),
        ("grpo.entropy_coeff=0.01", "grpo.entropy_coeff=0.01: must be 0"),
        ("method=co_rewarding_2 method.teacher.dtype=int8", "method.teacher.dtype='int8'"),
        ("method.reward=ppo", f"method.reward='ppo': must be a registered method; known: {', '.join(methods.names())}"),
        (
            "method=co_rewarding_1 method.views=[original]",
            "method.views=['original']: must be ['original', 'rephrased']"
            ", the views of the registered method 'co_rewarding_1'",
        ),
        (
            "method=co_rewarding_2 method.views=[original,teacher]",
            "method.views=['original', 'teacher']: must be a list",
        ),
        ("+method.note=x", "method.note: unknown key; method has name, hub_name, reward, views"),
        ("+method.train_on=both", "method.train_on='both': must be one of original, rephrased"),
    ],
)
def test_wrong_config_values_name_the_key(override: str, message: str) -> None:
    from corewarding.config import ConfigError

    with pytest.raises(ConfigError, match=re.escape(message)):
        compose_config(override.split())


def test_cli_reports_config_errors_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    from corewarding.cli import main

    assert main(["config", "show", "method=ppo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "co_rewarding_2_frozen_teacher" in err
    assert main(["train", "grpo.nn=3"]) == 2
    assert "Could not override 'grpo.nn'" in capsys.readouterr().err

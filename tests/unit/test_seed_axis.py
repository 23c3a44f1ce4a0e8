"""Seeds as a matrix axis: seed 0 keeps every id it had, seed k > 0 is a cell of its own whose run moves its RNG and
data-order seeds by k; a named selection gives paper_v3's headline cells three seeds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from corewarding.config import compose_config, config_dir
from corewarding.matrix import Cell, cell_from_config, hub_repo_id, load_matrix, parse_cell_id, run_dir
from corewarding.training.common import cell_of


def test_seed_0_keeps_its_ids_and_seed_k_is_a_cell_of_its_own() -> None:
    first, second = Cell("co_rewarding_2", "qwen3-8b-base", "math"), Cell("co_rewarding_2", "qwen3-8b-base", "math", 1)
    assert first.cell_id == "co_rewarding_2__qwen3-8b-base__math" and first.overrides() == [
        "method=co_rewarding_2", "base_model=qwen3-8b-base", "dataset=math",
    ]  # fmt: skip
    assert hub_repo_id(first) == "TMLR-Group-HF/Co-rewarding-II-Qwen3-8B-Base-MATH"
    assert second.cell_id == "co_rewarding_2__qwen3-8b-base__math__seed1" and second.first_seed == first
    assert hub_repo_id(second) == "TMLR-Group-HF/Co-rewarding-II-Qwen3-8B-Base-MATH-seed1"
    assert run_dir(second) == Path("runs/co_rewarding_2__qwen3-8b-base__math__seed1")
    assert parse_cell_id(second.cell_id) == second and parse_cell_id(first.cell_id) == first
    for bad in ("a__b__c__seed0", "a__b__c__run1", "a__b__c__seed"):
        with pytest.raises(ValueError, match="not a cell id"):
            parse_cell_id(bad)


def test_a_seed_cell_trains_with_its_seeds_moved_and_knows_itself() -> None:
    cell = Cell("co_rewarding_2", "tiny", "tiny", 2)
    first = compose_config(cell.first_seed.overrides())
    cfg = compose_config(cell.overrides())
    assert (cfg.seed, cfg.method.data_seed) == (first.seed + 2, first.method.data_seed + 2) == (3, 1236)
    assert cell_of(cfg) == cell and cell_of(first) == cell.first_seed
    assert "seed_index" not in first  # seed 0's config is today's: its training-config hash is unchanged
    with pytest.raises(ValueError, match="seed_index=-1: must be a whole number >= 0"):
        cell_from_config({**first, "seed_index": -1})


def test_a_matrix_with_and_without_seeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    v3, seeds = load_matrix("paper_v3"), load_matrix("paper_v3_seeds")
    rows = ("qwen3-8b-base", "llama-3.2-3b-instruct")
    headline = [c for c in v3.cells if c.dataset == "math" and c.base_model in rows]
    assert len(v3.cells) == 72 and all(c.seed == 0 for c in v3.cells)  # no seeds asked: one per cell, ids unchanged
    assert len(headline) == 14 and len(seeds.cells) == 3 * 14
    assert [c for c in seeds.cells if c.seed == 0] == headline  # seed 0 of each is the paper_v3 cell itself
    assert {c.cell_id for c in seeds.cells if c.seed} == {f"{c.cell_id}__seed{k}" for c in headline for k in (1, 2)}
    assert seeds.overrides == v3.overrides and seeds.eval_benchmarks == v3.eval_benchmarks

    configs = tmp_path / "configs"
    shutil.copytree(config_dir(), configs)
    (configs / "matrix" / "bad.yaml").write_text("name: bad\nextends: demo\nseeds: 0\n")
    monkeypatch.setenv("COREWARDING_CONFIG_DIR", str(configs))
    with pytest.raises(ValueError, match=r"bad\.yaml: seeds=0 must be a whole number >= 1"):
        load_matrix("bad")
    (configs / "matrix" / "two.yaml").write_text(
        "name: two\nextends: demo\nselect: {methods: [gt_grpo]}\ncells:\n"
        "  - {method: gt_grpo, base_model: tiny, dataset: math, seeds: 2}\n"
    )
    two = load_matrix("two")
    assert [c.cell_id for c in two.cells] == [  # the demo's ground truth keeps its own two seeds
        "gt_grpo__tiny__tiny", "gt_grpo__tiny__tiny__seed1", "gt_grpo__tiny__math", "gt_grpo__tiny__math__seed1",
    ]  # fmt: skip

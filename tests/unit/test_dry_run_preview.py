"""The pipeline dry run's preview (issue 45): lines that fit a terminal, each source said once as a footnote, evaluation
GPU-hours beside training's, the model cache per machine, the wall time on N GPUs, and the JSON document with the
table's totals. The paper matrices are composed once for the module (in worker processes, as the command does)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from corewarding import matrix
from corewarding.config import ConfigError, compose_config, config_dir
from corewarding.evaluation.eval_config import benchmark_configs
from corewarding.pipeline import compose_pool
from corewarding.pipeline.audit_plan import samples_per_checkpoint
from corewarding.pipeline.cells import Selection, plan_cell, plan_cells
from corewarding.pipeline.compose_pool import compose_all
from corewarding.pipeline.dry_run import (
    WIDTH,
    Benchmarks,
    CellCost,
    DryRun,
    add_evaluation,
    as_json,
    dry_run,
    footnotes,
    format_dry_run,
    greedy_wall_hours,
    totals,
    wrap,
)
from corewarding.pipeline.training_cost import evaluated_checkpoints

PAPER_MATRICES = ("paper_v3", "paper_v3_seeds")  # paper_v3 holds paper's 66 cells; the seeds have the longest ids


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, DryRun]:
    """Each paper matrix's dry run, without a results store, earlier audits or prepared data."""
    root = tmp_path_factory.mktemp("workspace")
    paths = [f"paths.runs_dir={root / 'runs'}", f"paths.data_dir={root / 'data'}"]
    return {
        name: dry_run(plan_cells(Selection(matrix=name), paths, workers=None), root / "absent.duckdb")
        for name in PAPER_MATRICES
    }


def _cell(cell_id: str, devices: int, device_hours: float, eval_gpu_hours: float | None, source: str = "t") -> CellCost:
    """A hand-made cell on ``devices`` GPUs, evaluated on one."""
    cell = CellCost(
        cell_id, "verl", "cuda", devices, devices, 10, "set", device_hours * 360 / devices, "by hand", False,
        device_hours, device_hours,
    )  # fmt: skip
    cell.train_source, cell.eval_source = f"train h: {source}", "eval h: by hand"
    cell.eval_gpus, cell.eval_gpu_hours = 1, eval_gpu_hours
    return cell


def _run(cells: list[CellCost], gpus: int = 8) -> DryRun:
    return DryRun("hand", cells, [], {}, False, "no store", {"m-1b": 2.5, "m-3b": 6.25}, gpus)


@pytest.mark.parametrize("matrix", PAPER_MATRICES)
def test_every_line_fits_and_every_footnote_is_defined_once(runs: dict[str, DryRun], matrix: str) -> None:
    run = runs[matrix]
    text = format_dry_run(run, default_gpus=True)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH, max(lines, key=len)
    rows = [line for line in lines if re.match(r"^\S+__\S+ ", line)]
    assert len(rows) == len(run.cells)  # one row per cell, each id on its row here
    used = {re.search(r"\[([a-z]+)\]$", row).group(1) for row in rows}  # type: ignore[union-attr]
    defined = [m.group(1) for line in lines if (m := re.match(r"^\[([a-z]+)\] ", line))]
    assert sorted(defined) == sorted(set(defined)) and set(defined) == used  # each key once, each used
    assert "assumed" not in "".join(rows)  # the sources are the footnotes', not repeated on every row
    # the assumed step times of the cells share one source: one footnote for every cell
    assert len(defined) == 1 and text.count("train h: assumed step time") == 1
    assert "wall time on 8 GPUs (--gpus 8, the default): about " in text


def test_wrapping_keeps_words_whole_and_cuts_only_what_cannot_fit() -> None:
    note = "attention: padded sdpa for 72 cells (" + "a long reason, " * 25 + "the end)"
    lines = wrap(note)
    assert len(note) > 370 and all(len(line) <= WIDTH for line in lines)
    assert all(line.startswith("    ") for line in lines[1:]) and " ".join(lines).split() == note.split()
    path = "  /" + "d" * 150 + "/train.parquet (3 cells): corewarding data prepare math"
    assert all(len(line) <= WIDTH for line in wrap(path))
    assert wrap("short") == ["short"]


def test_a_cell_id_too_long_for_its_row_gets_a_line_of_its_own() -> None:
    long_id = "co_rewarding_3__" + "x" * 60 + "__dapo14k"
    text = format_dry_run(_run([_cell(long_id, 4, 10.0, 1.0), _cell("gt_grpo__m-1b__math", 4, 2.0, 0.5)]))
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    at = lines.index(long_id)
    assert lines[at + 1].split() == ["4", "-", "-", "-", "10", "900.0", "10.00", "1.00", "-", "[a]"]
    assert lines[at + 2].startswith("gt_grpo__m-1b__math ")


def test_distinct_sources_get_distinct_keys_in_order_of_first_use() -> None:
    cells = [_cell(f"c{i}__m__d", 4, 1.0, 0.1, source) for i, source in enumerate("xyxzy")]
    run = _run(cells)
    keys = footnotes(run)
    assert list(keys.values()) == ["a", "b", "c"] and [keys[c.source] for c in cells] == ["a", "b", "a", "c", "b"]
    many = _run([_cell(f"c{i}__m__d", 4, 1.0, 0.1, f"s{i}") for i in range(28)])
    assert list(footnotes(many).values())[25:] == ["z", "aa", "ab"]
    assert [c["footnote"] for c in as_json(run)["cells"]] == ["a", "b", "a", "c", "b"]
    assert as_json(run)["footnotes"] == {"a": cells[0].source, "b": cells[1].source, "c": cells[3].source}


def test_wall_time_schedules_the_cells_in_order_on_the_gpus_they_need() -> None:
    assert greedy_wall_hours([(5.0, 1), (3.0, 1), (2.0, 1)], 2) == 5.0  # 5 | 3 + 2
    assert greedy_wall_hours([(2.0, 1), (3.0, 1), (5.0, 1)], 2) == 7.0  # in order: 2 + 5 | 3
    assert greedy_wall_hours([(1.0, 1), (4.0, 2), (1.0, 1)], 2) == 6.0  # the 2-GPU cell waits for the 1-hour one
    assert greedy_wall_hours([(1.0, 1), (4.0, 2), (1.0, 1)], 3) == 4.0  # on 3 it starts at once, the third at 1 h
    assert greedy_wall_hours([(1.0, 4)], 2) is None and greedy_wall_hours([(1.0, 0)], 2) is None

    # each cell trains on 4 GPUs (device-hours / 4), then evaluates its checkpoints on one of them
    cells = [_cell("a__m-3b__d", 4, 20.0, 1.0), _cell("b__m-1b__d", 4, 8.0, 0.5), _cell("c__m-1b__d", 4, 12.0, 1.5)]
    assert [c.wall_hours for c in cells] == [6.0, 2.5, 4.5]
    t = totals(_run(cells, gpus=8))  # a: 0-6 on GPUs 0-3; b: 0-2.5 on 4-7; c: 2.5-7 on 4-7
    assert (t["gpu_hours"], t["eval_gpu_hours"], t["all_gpu_hours"], t["wall_hours"]) == (40.0, 3.0, 43.0, 7.0)
    assert totals(_run(cells, gpus=4))["wall_hours"] == 13.0 and totals(_run(cells, gpus=12))["wall_hours"] == 6.0
    assert t["model_cache_gb"] == 8.8 and t["base_models"] == 2
    text = format_dry_run(_run(cells, gpus=8))
    assert "about 40.0 GPU-hours of training + 3.0 of evaluation = 43.0 GPU-hours" in text
    assert "wall time on 8 GPUs (--gpus 8): about 7.0 h (0.3 days): each cell holds its 4 GPUs" in text
    assert "model cache per machine: 8.8 GB for the 2 base model(s)" in text
    assert "wall time on 2 GPUs (--gpus 2): a cell needs 4 GPUs, more than that" in format_dry_run(_run(cells, 2))

    unknown = [*cells, _cell("d__m-1b__d", 4, 4.0, None)]  # transformers on a GPU: not estimated, not counted
    t = totals(_run(unknown))
    assert (t["eval_gpu_hours"], t["eval_not_estimated"], t["all_gpu_hours"]) == (3.0, 1, 47.0)
    assert "evaluation not estimated for 1 cells" in format_dry_run(_run(unknown))


def test_evaluation_gpu_hours_by_hand(tmp_path: Path) -> None:
    """Two kept checkpoints x (50 MATH500 problems x 1 + 50 AMC problems x 8 samples), each sample half the 3,072-token
    budget, at 16,000 / 8.19 tokens per second per GPU (configs/audit.yaml's assumption for Qwen3-8B-Base)."""
    plan = plan_cell("paper_v3", "gt_grpo__qwen3-8b-base__math", [f"paths.data_dir={tmp_path}"])
    overrides = ["generation=vllm", f"paths.data_dir={tmp_path}", "benchmark.limit=50"]
    audit = compose_config([], config_name="audit")
    configs = benchmark_configs(["math500", "amc"], overrides)
    bench = Benchmarks("two", ["math500", "amc"], configs, samples_per_checkpoint(configs, audit))
    assert (audit.assumed.response_fraction, audit.assumed.tokens_per_s_times_params_b) == (0.5, 16000)
    cell = _cell(plan.cell_id, 4, 100.0, 0.0)
    cell.steps = 174  # MATH: 7,500 rows // 128 x 3 epochs; saved at 10, 20, ..., 170 and 174: 18, of which 2 kept
    add_evaluation(cell, plan, bench, audit, {})
    per_checkpoint = 450 * 1536 / (16000 / 8.19) / 3600  # 0.0983 GPU-hours
    assert (cell.eval_checkpoints, cell.eval_samples, cell.eval_gpus) == (2, 450, 1)
    assert cell.eval_gpu_hours == pytest.approx(2 * per_checkpoint, rel=1e-9)
    assert cell.eval_source.startswith("eval h: 2 checkpoints x 2 benchmarks (two), 450 samples each, generation only")

    measured = {"qwen3-8b-base": {"samples": 100.0, "tokens": 50_000.0, "seconds": 25.0}}  # 2,000 tokens/s, 500 each
    add_evaluation(cell, plan, bench, audit, measured)
    assert cell.eval_gpu_hours == pytest.approx(2 * 450 * 500 / 2000 / 3600)
    assert "the rate measured on 100 samples of earlier audits of qwen3-8b-base" in cell.eval_source

    on_cpu = Benchmarks("two", ["math500"], benchmark_configs(["math500"], ["generation=transformers"]), 500)
    add_evaluation(cell, plan, on_cpu, audit, {})
    assert (cell.eval_gpu_hours, cell.eval_gpus) == (0.0, 0) and "no GPU-hours" in cell.eval_source
    on_gpu = benchmark_configs(["math500"], ["generation=transformers", "generation.device=cuda"])
    add_evaluation(cell, plan, Benchmarks("two", ["math500"], on_gpu, 500), audit, {})
    assert cell.eval_gpu_hours is None and "not estimated" in cell.eval_source


def test_the_evaluated_checkpoints_are_those_training_leaves() -> None:
    def cfg(backend: str, keep: int | None, save_freq: int) -> DictConfig:
        keep_text = "null" if keep is None else keep
        return compose_config([f"backend={backend}", f"verl.checkpoints_to_keep={keep_text}",
                               f"schedule.save_freq={save_freq}"])  # fmt: skip

    assert evaluated_checkpoints(cfg("verl", 2, 10), 174) == 2  # 18 saves, the newest 2 kept
    assert evaluated_checkpoints(cfg("verl", 3, 10), 20) == 2  # 2 saves, fewer than kept
    assert evaluated_checkpoints(cfg("verl", None, 10), 174) == 18  # every save kept
    assert evaluated_checkpoints(cfg("local", 2, 4), 13) == 4  # 4, 8, 12 and the last; local keeps every save
    assert evaluated_checkpoints(cfg("local", 2, 4), 12) == 3


def test_the_paper_matrix_totals_and_the_model_cache(runs: dict[str, DryRun]) -> None:
    run = runs["paper_v3"]
    t = totals(run)
    # six base models in bf16: (3.09 + 7.62 + 1.72 + 4.02 + 8.19 + 3.21) x 1e9 parameters x 2 bytes / 2^30
    assert t["model_cache_gb"] == round(27.85e9 * 2 / 2**30, 1) == 51.9 and t["base_models"] == 6
    assert t["eval_gpu_hours"] == pytest.approx(sum(c.eval_gpu_hours or 0 for c in run.cells), abs=0.05)
    assert all(c.eval_checkpoints == 2 and c.eval_gpus == 1 for c in run.cells)  # verl keeps 2; vLLM on one GPU
    assert t["all_gpu_hours"] == pytest.approx(t["gpu_hours"] + t["eval_gpu_hours"], abs=1e-9)
    # the wall time lies between the GPUs' busy hours spread evenly and that plus the longest cell
    held = sum(c.wall_hours * c.gpus for c in run.cells)
    assert held / 8 <= t["wall_hours"] <= held / 8 + max(c.wall_hours for c in run.cells)


def test_the_json_document_has_the_tables_totals(runs: dict[str, DryRun]) -> None:
    run = runs["paper_v3"]
    text = format_dry_run(run).replace("\n    ", " ")  # a wrapped line joined again
    document = as_json(run)
    total = document["total"]
    number = r"([\d,]+\.\d)"
    found = re.search(rf"about {number} GPU-hours of training \+ {number} of evaluation = {number} GPU-hours", text)
    assert found, text
    shown = [float(g.replace(",", "")) for g in found.groups()]
    assert shown == [total["gpu_hours"], total["eval_gpu_hours"], total["all_gpu_hours"]]
    wall = re.search(rf"wall time on 8 GPUs \(--gpus 8\): about {number} h", text)
    assert wall and float(wall.group(1).replace(",", "")) == total["wall_hours"] == document["total"]["wall_hours"]
    cache = re.search(rf"model cache per machine: {number} GB", text)
    assert cache and float(cache.group(1)) == total["model_cache_gb"]
    for cell, line in zip(document["cells"], text.splitlines()[2 : 2 + len(run.cells)], strict=True):
        fields = line.split()
        assert fields[0] == cell["cell_id"] and fields[-1] == f"[{cell['footnote']}]"
        assert (fields[7], fields[8]) == (f"{cell['device_hours']:.2f}", f"{cell['eval_gpu_hours']:.2f}")
        assert cell["all_gpu_hours"] == pytest.approx(cell["gpu_hours"] + cell["eval_gpu_hours"])
    assert document["footnotes"] == {key: source for source, key in footnotes(run).items()}


def test_composing_in_worker_processes_gives_the_configs_composed_here(monkeypatch: pytest.MonkeyPatch) -> None:
    cells = plan_cells(Selection(matrix="paper_v3", base_models=("qwen3-1.7b-base",)))  # 6 cells, composed here
    lists = [plan.train_overrides() for plan in cells]
    pools: list[int] = []
    real = compose_pool._pool
    monkeypatch.setattr(compose_pool, "_pool", lambda workers: pools.append(workers) or real(workers))
    parallel = compose_all(lists, workers=2)
    assert pools == [2]  # the five after the first went to two processes
    # in other processes: what compose_config makes here
    assert [OmegaConf.to_container(c) for c in parallel] == [OmegaConf.to_container(compose_config(o)) for o in lists]
    assert all(OmegaConf.is_struct(c) for c in parallel)  # as Hydra leaves them: an unknown key is an error
    bad = [*lists[:4], [*lists[4], "grpo.n=many"], *lists[5:]]  # the fifth cell's own error, as composing raises it
    with pytest.raises(ConfigError, match=r"grpo\.n="):
        compose_config(bad[4])
    with pytest.raises(ConfigError, match=r"grpo\.n="):
        compose_all(bad, workers=2)


def test_a_pool_that_cannot_start_composes_here(monkeypatch: pytest.MonkeyPatch) -> None:
    lists = [plan.train_overrides() for plan in plan_cells(Selection(matrix="demo"))[:3]]

    def no_processes(workers: int) -> None:
        raise OSError("no processes here")

    monkeypatch.setattr(compose_pool, "_pool", no_processes)
    configs = compose_all(lists, workers=2)
    assert [c.method.name for c in configs] == ["gt_grpo", "gt_grpo", "majority_voting"]
    assert [OmegaConf.to_container(c) for c in configs] == [OmegaConf.to_container(compose_config(o)) for o in lists]


def test_a_matrix_reads_each_option_file_once_and_still_refuses_an_unknown_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(config_dir(), tmp_path / "configs")
    monkeypatch.setenv("COREWARDING_CONFIG_DIR", str(tmp_path / "configs"))
    cells = [("gt_grpo", "qwen3-4b-base", "math"), ("entropy", "qwen3-4b-base", "math"),
             ("gt_grpo", "qwen3-4b-base", "dapo14k"), ("entropy", "qwen3-4b-base", "dapo14k")]  # fmt: skip
    rows = "".join(f"  - {{method: {m}, base_model: {b}, dataset: {d}}}\n" for m, b, d in cells)
    (tmp_path / "configs" / "matrix" / "mine.yaml").write_text(f"name: mine\ncells:\n{rows}")
    read: list[tuple[str, str]] = []
    real = matrix.load_group_option
    monkeypatch.setattr(matrix, "load_group_option", lambda g, o: read.append((g, o)) or real(g, o))
    assert len(matrix.load_matrix("mine").cells) == 4
    assert sorted(read) == [("base_model", "qwen3-4b-base"), ("dataset", "dapo14k"), ("dataset", "math"),
                            ("method", "entropy"), ("method", "gt_grpo")]  # fmt: skip
    (tmp_path / "configs" / "matrix" / "mine.yaml").write_text(
        f"name: mine\ncells:\n{rows}  - {{method: entropy, base_model: qwen3-4b-bass, dataset: math}}\n"
    )
    with pytest.raises(KeyError, match="unknown base_model 'qwen3-4b-bass'; known: llama"):
        matrix.load_matrix("mine")

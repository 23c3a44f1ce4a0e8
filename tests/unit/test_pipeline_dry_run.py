"""``corewarding pipeline run --dry-run``: GPUs, GPU-hours (measured step times from a store the test builds, else the
assumption, named), memory and disk, missing data, gated models, and nothing started or written."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from corewarding.config import compose_config
from corewarding.pipeline.cells import plan_cell
from corewarding.pipeline.dry_run_inputs import Measured
from corewarding.pipeline.training_cost import Rates, measured_step
from corewarding.results.ingest.ingestion import ingest
from corewarding.training.verl.attention import flash_attn_imports
from corewarding.training.verl.plan import plan_cell as memory_plan

FLASH = flash_attn_imports()  # the dry run's subprocess runs in this environment

ROOT = Path(__file__).resolve().parents[2]
MATRIX = "paper"
MEASURED = "gt_grpo__qwen3-8b-base__math"
SAME_MODEL = "co_rewarding_2__qwen3-8b-base__math"  # no step times of its own: the 8B GT-GRPO run's, scaled
OTHER = "gt_grpo__qwen3-4b-base__math"  # nothing of its model in the store: assumed
LLAMA = "gt_grpo__llama-3.2-3b-instruct__math"  # gated
CO1 = "co_rewarding_1__qwen3-4b-base__math"  # needs the rephrased pairs
STEP_SECONDS = [600.0, 640.0, 620.0]  # measured on the cell's 4 GPUs


def _measured_run(runs: Path) -> Path:
    """A verl run folder of MEASURED: its composed config, three steps with step times, its ledger."""
    run_dir = runs / MEASURED
    run_dir.mkdir(parents=True)
    cfg = plan_cell(MATRIX, MEASURED).cfg
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    lines = [{"step": i + 1, "reward_mean": 0.5, "step_seconds": s} for i, s in enumerate(STEP_SECONDS)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    wall = sum(STEP_SECONDS)
    compute = {"device_type": "cuda", "devices": 4, "gpus": 4, "sessions": [], "wall_seconds": wall,
               "device_hours": 4 * wall / 3600, "gpu_hours": 4 * wall / 3600, "phases": {}}  # fmt: skip
    record = {"cell_id": MEASURED, "backend": "verl", "status": "interrupted", "started_at": "2026-11-20T10:00:00Z",
              "ended_at": "2026-11-20T10:31:00Z", "config_hash": "h", "compute": compute}  # fmt: skip
    (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


def _parquet(path: Path, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"index": list(range(rows))}), path)


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() + f"@{p.stat().st_mtime_ns}"
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture()
def workspace(tmp_path: Path) -> dict[str, Path]:
    """A store holding MEASURED's step times; prepared MATH files (256 training rows) but no rephrased pairs."""
    db = tmp_path / "store" / "results.duckdb"
    ingest(db, [_measured_run(tmp_path / "runs")])
    data = tmp_path / "data"
    _parquet(data / "math" / "train.parquet", 256)
    _parquet(data / "math_test" / "test.parquet", 40)
    return {"db": db, "data": data, "root": tmp_path}


def _dry_run(
    ws: dict[str, Path], cells: list[str], env: dict[str, str] | None = None, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    """The real command in a fresh process, run from the checkout; reports whether Prefect was imported."""
    code = (
        "import sys; from corewarding.cli.main import main; rc = main(sys.argv[1:]); "
        "print('PREFECT_IMPORTED' if 'prefect' in sys.modules else 'NO_PREFECT'); sys.exit(rc)"
    )
    args = [
        *("pipeline", "run", "--dry-run", "--json", "--matrix", MATRIX, "--cell", ",".join(cells)),
        *("--steps", "train,evaluate", "--config", f"results_db={ws['db']}", f"paths.data_dir={ws['data']}"),
        f"paths.runs_dir={ws['root'] / 'runs'}", *extra,
    ]  # fmt: skip
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HOME": str(ws["root"] / "hf"), **(env or {})},
    )  # fmt: skip


def _cells(done: subprocess.CompletedProcess) -> tuple[dict[str, dict], dict]:
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "NO_PREFECT", done.stdout + done.stderr
    (plan,) = lines[:-1]  # stdout is the JSON document alone (then the probe's line)
    report = json.loads(plan)
    return {c["cell_id"]: c for c in report["cells"]}, report


def test_measured_step_times_are_used_and_the_others_are_named_assumptions(workspace: dict[str, Path]) -> None:
    store_before, checkout_before = _tree(workspace["root"]), _tree(ROOT / "configs")
    done = _dry_run(workspace, [MEASURED, SAME_MODEL, OTHER], env={"HF_TOKEN": ""}, extra=("--gpus", "4"))
    assert done.returncode == 0, done.stderr
    cells, report = _cells(done)

    mean = sum(STEP_SECONDS) / len(STEP_SECONDS)  # 620 s per step on 4 GPUs
    steps = 256 // 128 * 3  # from the prepared file's rows, not the assumed 7,500
    measured = cells[MEASURED]
    assert measured["measured"] and measured["step_source"] == "measured: 3 steps of this cell"
    assert measured["steps"] == steps and measured["gpus"] == 4
    assert measured["step_seconds"] == pytest.approx(mean)
    assert measured["gpu_hours"] == pytest.approx(steps * mean * 4 / 3600)
    assert measured["recorded_gpu_hours"] == pytest.approx(4 * sum(STEP_SECONDS) / 3600, abs=1e-3)  # the ledger

    # by hand, the assumption: generation at configs/audit.yaml's rate (tokens/s per GPU = 16000 / params in B, half
    # the response budget per response), scoring and training at configs/cost.yaml's GPU-seconds per B per 1024
    audit = compose_config([], config_name="audit").assumed
    cost = compose_config([], config_name="cost").assumed

    # the kernel's factor (configs/cost.yaml: attention), linear between 1.7B and 8B, the 8B figure above it: here
    # auto takes padded sdpa (0.754 at 1.7B, 1.493 at 8B), or flash_attention_2 priced at flex's (0.401, 0.809)
    kernel, (low, high) = ("packed flash_attention_2", (0.401, 0.809)) if FLASH else ("padded sdpa", (0.754, 1.493))
    factor = {8.19: high, 4.02: low + (4.02 - 1.7) / (8.0 - 1.7) * (high - low)}

    def gpu_s(params_b: float, generations: int) -> float:  # both Qwen3: a 151,936-token vocabulary
        generate = 1024 * audit.response_fraction * 3072 * params_b / audit.tokens_per_s_times_params_b
        update = cost.update_gpu_s_per_b * params_b + cost.update_gpu_s_logits
        return generations * generate + factor[params_b] * update

    # Co-rewarding-II samples twice per step (policy and teacher): the 8B measurement scaled by the two works' ratio
    scaled = cells[SAME_MODEL]
    assert scaled["measured"] and scaled["step_seconds"] == pytest.approx(mean * gpu_s(8.19, 2) / gpu_s(8.19, 1))
    assert scaled["step_source"] == "measured: 3 steps of qwen3-8b-base (gt_grpo/math), scaled to this cell's work"

    other = cells[OTHER]
    assert not other["measured"] and other["step_source"].startswith("assumed: ")
    assert other["step_source"].endswith("(configs/audit.yaml's generation rate, configs/cost.yaml; docs/gpu-plan.md)")
    assert other["step_seconds"] == pytest.approx(gpu_s(4.02, 1) / 4)
    # plus 2 validations (before training, and at step 6 of 6) of the 40 prepared problems, greedy
    validation = 40 * audit.response_fraction * 3072 * 4.02 / audit.tokens_per_s_times_params_b
    assert other["gpu_hours"] == pytest.approx((steps * gpu_s(4.02, 1) + 2 * validation) / 3600)
    assert "configs/audit.yaml" in other["rates"] and "assumed, not measured" in other["rates"]
    assert other["attention"] == kernel and other["rates"].endswith(f"attention {kernel} x{factor[4.02]:.2f}")
    assert ("auto: flash-attn imports here" if FLASH else "auto: flash-attn does not import here") in (
        other["attention_why"]
    )
    assert report["total"]["measured_cells"] == 2 and report["total"]["cells"] == 3
    assert report["total"]["gpu_hours"] == pytest.approx(sum(c["gpu_hours"] for c in cells.values()), abs=0.05)

    # memory and disk: the verl memory plan's figures for the cell
    plan = memory_plan(plan_cell(MATRIX, MEASURED).cfg)
    assert (measured["gpu_gb"], measured["host_gb"], measured["disk_gb"]) == pytest.approx(
        (plan.gpu_gb, plan.host_gb, plan.disk_gb)
    )
    text = done.stderr  # --json: the table is on stderr, stdout is the JSON document alone
    assert "  qwen3-4b-base " in text and "generation 3,980 tokens/s per GPU; " in text  # 16000 / 4.02
    # each source once, below the table, keyed in the matrix's order: the assumed cell [a], the measured one [b],
    # the scaled one [c]
    assert [cells[c]["footnote"] for c in (OTHER, MEASURED, SAME_MODEL)] == ["a", "b", "c"]
    assert "\n[a] train h: assumed step time, not measured: generation at configs/audit.yaml's assumed rate" in text
    assert "\n[b] train h: step time measured: 3 steps of this cell; eval h: 1 checkpoints x 7 benchmarks" in text
    assert "\n[c] train h: step time measured: 3 steps of qwen3-8b-base (gt_grpo/math), scaled" in text
    assert max(len(line) for line in text.splitlines()) <= 120

    # evaluation: 6 steps save one checkpoint (the last); the paper's seven benchmarks draw 16,031 samples from it
    # (configs/audit.yaml's problem counts x each benchmark's n), half the 3,072-token budget each, at 16,000 / 4.02
    # tokens per second per GPU for Qwen3-4B-Base
    assert (other["eval_checkpoints"], other["eval_samples"]) == (1, 16031)
    assert other["eval_gpu_hours"] == pytest.approx(16031 * 1536 / (16000 / 4.02) / 3600)
    assert other["all_gpu_hours"] == pytest.approx(other["gpu_hours"] + other["eval_gpu_hours"])
    # the wall time on 4 GPUs: the three 4-GPU cells one after another, each training then evaluating on one GPU
    walls = [c["device_hours"] / 4 + c["eval_gpu_hours"] for c in cells.values()]
    assert [c["wall_hours"] for c in cells.values()] == pytest.approx(walls)
    total = report["total"]
    assert total["gpus"] == 4 and total["wall_hours"] == round(sum(walls), 1)
    joined = text.replace("\n    ", " ")  # the wrapped lines joined again
    assert f"wall time on 4 GPUs (--gpus 4): about {total['wall_hours']:,.1f} h" in joined
    assert f"+ {total['eval_gpu_hours']:,.1f} of evaluation = {total['all_gpu_hours']:,.1f} GPU-hours" in joined
    assert f"1 run(s) with measured step times in {workspace['db']}" in joined
    # nothing written: the store and the data are byte for byte what they were, and so are the configs
    assert _tree(workspace["root"]) == store_before and _tree(ROOT / "configs") == checkout_before
    assert (
        not (ROOT / "params.yaml").exists() or "gt_grpo__qwen3-8b-base__math" not in (ROOT / "params.yaml").read_text()
    )


def test_missing_data_and_the_gated_model_are_listed(workspace: dict[str, Path]) -> None:
    done = _dry_run(workspace, [CO1, LLAMA], env={"HF_TOKEN": ""})
    assert done.returncode == 0, done.stderr
    cells, report = _cells(done)
    pairs = [str(workspace["data"] / "math" / "release" / f"train_{v}.parquet") for v in ("original", "rephrased")]
    assert [m["path"] for m in report["missing_data"]] == pairs
    assert {m["stage"] for m in report["missing_data"]} == {"import_rephrased@math"}
    assert report["missing_data"][0]["command"].startswith("corewarding data import-rephrased math")
    assert cells[CO1]["missing"] == pairs and cells[LLAMA]["missing"] == []
    assert cells[CO1]["steps"] == 174  # the pairs are not here: the assumed 7,500 rows, said so
    assert "assumed 7500 rows" in cells[CO1]["steps_source"]
    assert report["gated"] == {"meta-llama/Llama-3.2-3B-Instruct": 1} and report["token"] is False
    assert cells[LLAMA]["gated"] == "meta-llama/Llama-3.2-3B-Instruct" and cells[CO1]["gated"] is None
    assert "gated base model: meta-llama/Llama-3.2-3B-Instruct (1 cells)" in done.stderr
    assert "NO token found: set HF_TOKEN" in done.stderr

    with_token = _dry_run(workspace, [LLAMA], env={"HF_TOKEN": "hf_test_not_a_real_token"})
    assert _cells(with_token)[1]["token"] is True and "a token is set" in with_token.stderr
    assert "hf_test_not_a_real_token" not in with_token.stdout + with_token.stderr


def test_gpus_goes_with_the_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    from corewarding.cli.main import main

    assert main(["pipeline", "run", "--matrix", "demo", "--gpus", "4"]) == 2  # before any Prefect server starts
    err = capsys.readouterr().err
    assert err.startswith("error: --gpus goes with --dry-run") and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as usage:
        main(["pipeline", "run", "--matrix", "demo", "--dry-run", "--gpus", "0"])
    assert usage.value.code == 2 and "must be a whole number of at least 1" in capsys.readouterr().err


def test_bad_input_is_one_line(workspace: dict[str, Path]) -> None:
    unknown_cell = _dry_run(workspace, ["no_such__cell__x"])
    assert unknown_cell.returncode == 2 and len(unknown_cell.stderr.strip().splitlines()) == 1, unknown_cell.stderr
    assert unknown_cell.stderr.startswith("error: ") and "no_such__cell__x" in unknown_cell.stderr
    unknown_matrix = subprocess.run(
        [sys.executable, "-c", "import sys; from corewarding.cli.main import main; sys.exit(main(sys.argv[1:]))",
         "pipeline", "run", "--dry-run", "--matrix", "no_such_matrix"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert unknown_matrix.returncode == 2, unknown_matrix.stderr
    assert len(unknown_matrix.stderr.strip().splitlines()) == 1 and "no_such_matrix" in unknown_matrix.stderr


def test_runs_with_the_cells_own_work_per_step_win_over_scaled_ones() -> None:
    """A smoke-sized run of the cell (8 prompts x 4, 512 tokens) is scaled only when no full-sized run is there."""
    paper = {"method": {"views": ["original"]}, "grpo": {"train_batch_size": 128, "n": 8, "max_prompt_length": 512,
             "max_response_length": 3072}}  # fmt: skip
    smoke = {**paper, "grpo": {"train_batch_size": 8, "n": 4, "max_prompt_length": 512, "max_response_length": 512}}
    rates = Rates(1.0, 1.0, "per token")
    cell = ("gt_grpo", "qwen3-8b-base", "math")

    def run(config: dict, steps: int, seconds: float) -> Measured:
        return Measured(*cell, "verl", "cuda", 4, steps, seconds, config)

    full, small = run(paper, 3, 600.0), run(smoke, 10, 20.0)
    assert measured_step(paper, cell, "verl", "cuda", [small, full], rates) == (
        2400.0,
        "measured: 3 steps of this cell",
    )
    seconds, source = measured_step(paper, cell, "verl", "cuda", [small], rates) or (0.0, "")
    work = 1024 * (3072 + 3584) / (32 * (512 + 1024))  # responses x (generated + trained tokens), paper over smoke
    assert (
        seconds == pytest.approx(20.0 * 4 * work)
        and source == "measured: 10 steps of this cell, scaled to this cell's work"
    )
    assert measured_step(paper, cell, "verl", "cpu", [full], rates) is None  # a CPU harness run is not a GPU step
    other = ("co_rewarding_2", "qwen3-8b-base", "math")
    assert measured_step(paper, other, "verl", "cuda", [full], rates) == (
        2400.0,
        "measured: 3 steps of qwen3-8b-base (gt_grpo/math)",
    )

"""External benchmarks: skip messages, call construction, parsing the tools' real output shapes, a real lm-eval run."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from corewarding.config import compose_config
from corewarding.evaluation.external import (
    TOOLS,
    RunSettings,
    ToolMissing,
    external_benchmark,
    external_benchmarks,
    missing_reason,
    run_external,
)
from corewarding.evaluation.external.crux import build_zeroeval_infer_command, parse_crux_row
from corewarding.evaluation.external.livecodebench import build_lcb_command, find_lcb_eval_file, parse_lcb_eval
from corewarding.evaluation.external.lm_eval_tasks import build_lm_eval_call, lm_eval_task, parse_lm_eval_results
from corewarding.lm.generation import SamplingSettings
from corewarding.rows import SYSTEM_PROMPT

HAS_LM_EVAL = importlib.util.find_spec("lm_eval") is not None
HAS_VLLM = importlib.util.find_spec("vllm") is not None
# benchmark -> the tool its configs/benchmark YAML names (the `checker` column)
EXTERNAL = {"ifeval": "lm_eval", "mmlu_pro": "lm_eval", "livecodebench_v6": "livecodebench", "crux": "zeroeval"}
PAPER = SamplingSettings(n=1, temperature=0.8, top_p=1.0, max_new_tokens=3072)


def _pairs(cmd: list[str]) -> dict[str, str]:
    """--flag value pairs of a command line."""
    return {a: b for a, b in itertools.pairwise(cmd) if a.startswith("--") and not b.startswith("--")}


# ---------------------------------------------------------------- registry and skip messages


def test_unknown_benchmark_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ifeval, mmlu_pro, livecodebench_v6, crux"):
        run_external("humaneval", "m", tmp_path)
    with pytest.raises(ValueError, match="known: ifeval"):
        missing_reason("gpqa")


@pytest.mark.parametrize("benchmark", ["ifeval", "mmlu_pro"])
def test_lm_eval_missing_names_what_to_install(benchmark: str, tmp_path: Path) -> None:
    if HAS_LM_EVAL and HAS_VLLM:
        pytest.skip("lm-eval and vllm are both installed: nothing is missing")
    reason = missing_reason(benchmark)
    assert reason is not None and reason.startswith(f"{benchmark} skipped")
    if not HAS_LM_EVAL:  # the default install
        assert "lm-eval==0.4.13" in reason and "pip install 'corewarding[eval]'" in reason
    else:  # eval extra on a CPU machine: the paper's vllm backend is what is missing
        assert "vllm" in reason and "backend='hf'" in reason
    with pytest.raises(ToolMissing) as err:
        run_external(benchmark, "Qwen/Qwen3-4B-Base", tmp_path)
    assert str(err.value) == reason
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.skipif(importlib.util.find_spec("lcb_runner") is not None, reason="lcb_runner is installed")
def test_livecodebench_missing_names_lcb_runner(tmp_path: Path) -> None:
    reason = missing_reason("livecodebench_v6")
    assert reason is not None and "lcb_runner" in reason and "LiveCodeBench/LiveCodeBench" in reason
    with pytest.raises(ToolMissing, match="pip install -e"):
        run_external("livecodebench_v6", "Qwen/Qwen3-4B-Base", tmp_path)


def test_crux_missing_names_zeroeval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZEROEVAL_ROOT", raising=False)
    reason = missing_reason("crux")
    assert reason is not None and "ZEROEVAL_ROOT is not set" in reason and "yuchenlin/ZeroEval" in reason
    with pytest.raises(ToolMissing, match="PyPI 'zeroeval' is an unrelated SDK"):
        run_external("crux", "Qwen/Qwen3-4B-Base", tmp_path / "out")
    # a folder that is not a ZeroEval checkout: the message names the files it lacks
    monkeypatch.setenv("ZEROEVAL_ROOT", str(tmp_path))
    reason = missing_reason("crux")
    assert reason is not None and "src/unified_infer.py, src/evaluation/crux_eval.py" in reason


def test_code_tools_refuse_a_non_vllm_backend(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="generates with vllm"):
        run_external("crux", "m", tmp_path, settings=RunSettings(backend="hf"))


# ---------------------------------------------------------------- Hydra configs


def test_the_registry_reads_the_external_benchmarks_from_their_yaml() -> None:
    found = external_benchmarks()
    assert {name: b.tool for name, b in found.items()} == EXTERNAL and list(found) == list(EXTERNAL)
    assert list(TOOLS) == ["lm_eval", "livecodebench", "zeroeval"]
    assert all(b.sampling == PAPER for b in found.values())  # the paper's sampling, from each YAML


@pytest.mark.parametrize("name", sorted(EXTERNAL))
def test_benchmark_config_composes(name: str) -> None:
    cfg = compose_config([f"+benchmark={name}"])
    assert cfg.benchmark.name == name
    assert cfg.benchmark.kind == "external"
    assert cfg.benchmark.tool == EXTERNAL[name]
    assert (cfg.benchmark.temperature, cfg.benchmark.max_new_tokens, cfg.benchmark.n) == (0.8, 3072, 1)


# ---------------------------------------------------------------- lm-eval: call construction and parsing


def test_lm_eval_call_vllm_paper_settings() -> None:
    call = build_lm_eval_call(lm_eval_task("ifeval"), "/ckpt/global_step_100", PAPER, RunSettings(seed=3))
    assert call["model"] == "vllm"
    assert call["model_args"] == {
        "pretrained": "/ckpt/global_step_100",
        "dtype": "auto",
        "seed": 3,
        "tensor_parallel_size": 1,
        "gpu_memory_utilization": 0.9,
    }
    assert call["tasks"] == ["ifeval"]
    assert call["gen_kwargs"] == {"do_sample": True, "temperature": 0.8, "top_p": 1.0, "max_gen_toks": 3072}
    assert call["apply_chat_template"] is True
    assert call["system_instruction"] == SYSTEM_PROMPT  # the training system prompt by default
    assert (call["random_seed"], call["torch_random_seed"], call["fewshot_random_seed"]) == (3, 3, 3)
    assert call["limit"] is None and call["num_fewshot"] is None and call["batch_size"] == "auto"


def test_lm_eval_call_hf_options_and_greedy() -> None:
    call = build_lm_eval_call(
        lm_eval_task("mmlu_pro"),
        "Qwen/Qwen3-4B-Base",
        replace(PAPER, temperature=0.0, max_new_tokens=64),
        RunSettings(
            backend="hf",
            limit=5,
            system_prompt="",
            options={"device": "cpu", "dtype": "float32", "num_fewshot": 0, "model_args": {"trust_remote_code": True}},
        ),
    )
    assert call["model"] == "hf"
    assert call["model_args"] == {"pretrained": "Qwen/Qwen3-4B-Base", "dtype": "float32", "trust_remote_code": True}
    assert call["tasks"] == ["mmlu_pro"] and call["limit"] == 5 and call["num_fewshot"] == 0
    assert call["gen_kwargs"] == {"do_sample": False, "temperature": 0.0, "top_p": 1.0, "max_gen_toks": 64}
    assert call["system_instruction"] is None and call["device"] == "cpu" and call["batch_size"] == 1
    with pytest.raises(ValueError, match="known: vllm, hf"):
        build_lm_eval_call(lm_eval_task("ifeval"), "m", PAPER, RunSettings(backend="sglang"))


def _ifeval_results() -> dict:
    """Shaped as lm-eval 0.4.13 returns it (evaluator_utils._collect_results; seen in a real run of this version)."""
    return {
        "results": {
            "ifeval": {
                "name": "ifeval",
                "alias": "ifeval",
                "sample_len": 541,
                "prompt_level_strict_acc,none": 0.40,
                "prompt_level_strict_acc_stderr,none": 0.0211,
                "inst_level_strict_acc,none": 0.52,
                "inst_level_strict_acc_stderr,none": "N/A",
                "prompt_level_loose_acc,none": 0.44,
                "prompt_level_loose_acc_stderr,none": 0.0213,
                "inst_level_loose_acc,none": 0.56,
                "inst_level_loose_acc_stderr,none": "N/A",
            }
        },
        "group_subtasks": {"ifeval": []},
        "n-samples": {"ifeval": {"original": 541, "effective": 541}},
        "versions": {"ifeval": 4.0},
    }


def test_parse_ifeval_score_is_the_mean_of_the_four() -> None:
    metrics, stderr, n = parse_lm_eval_results(lm_eval_task("ifeval"), _ifeval_results())
    assert metrics["score"] == pytest.approx((0.40 + 0.52 + 0.44 + 0.56) / 4) == pytest.approx(0.48)
    assert metrics["inst_level_loose_acc"] == 0.56 and metrics["prompt_level_strict_acc"] == 0.40
    assert stderr == {"prompt_level_strict_acc": 0.0211, "prompt_level_loose_acc": 0.0213}  # "N/A" left out
    assert n == 541


MMLU_PRO_SUBJECTS = [
    "biology", "business", "chemistry", "computer_science", "economics", "engineering", "health",
    "history", "law", "math", "other", "philosophy", "physics", "psychology",
]  # fmt: skip


def _mmlu_pro_results() -> dict:
    """Shaped per lm-eval 0.4.13 (api/group.py Group.aggregate for the group; _mmlu_pro.yaml's 14 subtasks)."""
    leaves = [f"mmlu_pro_{s}" for s in MMLU_PRO_SUBJECTS]
    results: dict = {
        "mmlu_pro": {
            "alias": "mmlu_pro",
            "name": "mmlu_pro",
            "sample_len": 28,
            "exact_match,custom-extract": 0.25,
            "exact_match_stderr,custom-extract": 0.0818,
        }
    }
    for i, leaf in enumerate(leaves):
        results[leaf] = {
            "name": leaf,
            "alias": f" - {leaf.removeprefix('mmlu_pro_')}",
            "sample_len": 2,
            "exact_match,custom-extract": 0.5 if i < 7 else 0.0,
            "exact_match_stderr,custom-extract": 0.5 if i < 7 else 0.0,
        }
    return {
        "results": results,
        "groups": {"mmlu_pro": results["mmlu_pro"]},
        "group_subtasks": {"mmlu_pro": leaves},
        "n-samples": {leaf: {"original": 1000, "effective": 2} for leaf in leaves},
    }


def test_parse_mmlu_pro_group_accuracy() -> None:
    metrics, stderr, n = parse_lm_eval_results(lm_eval_task("mmlu_pro"), _mmlu_pro_results())
    assert metrics == {"accuracy": 0.25} and stderr == {"accuracy": 0.0818}
    assert n == 14 * 2  # the effective counts of the 14 subjects


def test_parse_lm_eval_errors_name_the_missing_key() -> None:
    raw = _ifeval_results()
    del raw["results"]["ifeval"]["inst_level_loose_acc,none"]
    with pytest.raises(ValueError, match=r"no key 'inst_level_loose_acc,none'"):
        parse_lm_eval_results(lm_eval_task("ifeval"), raw)
    raw = _mmlu_pro_results()
    del raw["n-samples"]["mmlu_pro_law"]
    with pytest.raises(ValueError, match="no 'n-samples' count for mmlu_pro_law"):
        parse_lm_eval_results(lm_eval_task("mmlu_pro"), raw)
    with pytest.raises(ValueError, match="no entry for task 'mmlu_pro'"):
        parse_lm_eval_results(lm_eval_task("mmlu_pro"), _ifeval_results())


# ---------------------------------------------------------------- LiveCodeBench


def test_lcb_command_hub_id_and_local_folder(tmp_path: Path) -> None:
    sampling = external_benchmark("livecodebench_v6").sampling
    cmd = build_lcb_command("Qwen/Qwen2.5-7B-Instruct", sampling)
    assert cmd[:3] == [sys.executable, "-m", "lcb_runner.runner.main"]
    flags = _pairs(cmd)
    assert flags["--model"] == "Qwen/Qwen2.5-7B-Instruct" and "--local_model_path" not in flags
    assert flags["--scenario"] == "codegeneration" and flags["--release_version"] == "release_v6"
    assert (flags["--n"], flags["--temperature"], flags["--top_p"], flags["--max_tokens"]) == (
        "1",
        "0.8",
        "1.0",
        "3072",
    )
    assert "--evaluate" in cmd and "--debug" not in cmd
    with pytest.raises(ValueError, match=r"set options\.lcb_model"):
        build_lcb_command(str(tmp_path), sampling)
    local = build_lcb_command(str(tmp_path), sampling, {"lcb_model": "Qwen/Qwen2.5-7B-Instruct", "debug": True})
    assert _pairs(local)["--local_model_path"] == str(tmp_path.resolve()) and "--debug" in local


def _lcb_eval_file() -> list:
    """lcb_runner's *_eval.json: [metrics, results, metadata] (runner/main.py, evaluation/pass_k_utils.py)."""
    metrics = {"pass@1": 0.5, "detail": {"pass@1": {"0": 1.0, "1": 0.0, "2": 1.0, "3": 0.0}}}
    results = {"0": [[True, True]], "1": [[-2]], "2": [[True, True, True]], "3": [[True, False]]}
    metadata = [['{"execution time": 0.01}'], ['{"error": "SyntaxError"}'], ["{}"], ['{"output": "3"}']]
    return [metrics, results, metadata]


def test_parse_lcb_eval_and_find_its_file(tmp_path: Path) -> None:
    metrics, n = parse_lcb_eval(_lcb_eval_file())
    assert metrics == {"pass@1": 0.5} and n == 4
    out = tmp_path / "output" / "Qwen2.5-Ins-7B"
    out.mkdir(parents=True)
    (out / "Scenario.codegeneration_1_0.8.json").write_text("[]")
    eval_file = out / "Scenario.codegeneration_1_0.8_eval.json"
    eval_file.write_text(json.dumps(_lcb_eval_file()))
    (out / "Scenario.codegeneration_1_0.8_eval_all.json").write_text("[]")
    assert find_lcb_eval_file(tmp_path, 1, 0.8) == eval_file
    with pytest.raises(FileNotFoundError, match="expected one lcb_runner eval file"):
        find_lcb_eval_file(tmp_path, 1, 0.2)
    with pytest.raises(ValueError, match="no 'pass@1'"):
        parse_lcb_eval([{"pass@5": 0.1}, {}, []])


# ---------------------------------------------------------------- CRUX (ZeroEval)


def test_zeroeval_infer_command(tmp_path: Path) -> None:
    gen = tmp_path / "crux" / "global_step_100.json"
    sampling = external_benchmark("crux").sampling
    cmd = build_zeroeval_infer_command(
        "/ckpts/run/global_step_100/", gen, sampling, RunSettings(limit=10, options={"batch_size": 8})
    )
    assert cmd[1] == "src/unified_infer.py"
    flags = _pairs(cmd)
    assert flags["--data_name"] == "crux" and flags["--model_pretty_name"] == "global_step_100"
    assert (flags["--temperature"], flags["--top_p"], flags["--max_tokens"]) == ("0.8", "1.0", "3072")
    assert flags["--filepath"] == str(gen.resolve()) and flags["--end_index"] == "10"
    assert flags["--batch_size"] == "8" and "--use_hf_conv_template" in cmd


def test_parse_crux_row() -> None:
    # as src/evaluation/crux_eval.py eval_model returns it (Acc and No answer are percentage strings)
    row = {"Model": "Qwen2.5-7B-Instruct", "Mode": "sampling", "Acc": "51.25", "No answer": "0.50", "Total": 800}
    metrics, n = parse_crux_row({**row, "Reason Lens": "531.07"})
    assert metrics == {"pass@1": pytest.approx(0.5125), "no_answer": pytest.approx(0.005)} and n == 800
    with pytest.raises(ValueError, match="no 'Acc'"):
        parse_crux_row({"Model": "x", "Total": 800})


# ---------------------------------------------------------------- a real lm-eval run (CPU, hf backend, tiny model)

IFEVAL_DOCS = [  # google/IFEval's row format; instructions whose checkers need no downloaded nltk data
    {
        "key": 1,
        "prompt": "Write about apples. Do not use any commas.",
        "instruction_id_list": ["punctuation:no_comma"],
        "kwargs": [{}],
    },
    {
        "key": 2,
        "prompt": "Describe the sea in lowercase letters only and mention the word blue.",
        "instruction_id_list": ["change_case:english_lowercase", "keywords:existence"],
        "kwargs": [{}, {"keywords": ["blue"]}],
    },
    {
        "key": 3,
        "prompt": "Give a title in double angular brackets, like <<title>>.",
        "instruction_id_list": ["detectable_format:title"],
        "kwargs": [{}],
    },
]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_LM_EVAL, reason="needs lm-eval (pip install 'corewarding[eval]')")
def test_real_ifeval_run_on_the_tiny_model(tmp_path: Path, artifacts_dir: Path) -> None:
    from corewarding.tiny.model import build_tiny_model

    model_dir = build_tiny_model(artifacts_dir / "tiny-model-sft0")
    data = tmp_path / "ifeval.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in IFEVAL_DOCS))
    options = {"data_files": str(data), "device": "cpu", "dtype": "float32", "batch_size": 3, "bootstrap_iters": 100}
    sampling = replace(external_benchmark("ifeval").sampling, max_new_tokens=12)
    result = run_external(
        "ifeval", str(model_dir), tmp_path / "out", sampling, RunSettings(backend="hf", limit=3, options=options)
    )
    assert (result.benchmark, result.tool, result.num_problems) == ("ifeval", "lm_eval", 3)
    assert result.tool_version == "0.4.13"
    samples = json.loads((tmp_path / "out" / "lm_eval_ifeval_samples.json").read_text())["ifeval"]
    assert len(samples) == 3
    prompt, gen_kwargs = samples[0]["arguments"][0]
    assert prompt.startswith(f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n")  # chat template
    assert gen_kwargs["temperature"] == 0.8 and gen_kwargs["max_gen_toks"] == 12 and gen_kwargs["do_sample"] is True
    # the tool's per-sample verdicts agree with the parsed aggregates
    strict = [s["prompt_level_strict_acc"] for s in samples]
    assert result.metrics["prompt_level_strict_acc"] == pytest.approx(sum(strict) / 3)
    inst = [v for s in samples for v in s["inst_level_loose_acc"]]
    assert len(inst) == 4 and result.metrics["inst_level_loose_acc"] == pytest.approx(sum(inst) / 4)
    four = [result.metrics[k] for k in ("prompt_level_strict_acc", "inst_level_strict_acc")]
    four += [result.metrics[k] for k in ("prompt_level_loose_acc", "inst_level_loose_acc")]
    assert result.metrics["score"] == pytest.approx(sum(four) / 4)
    raw = json.loads(result.raw_path.read_text()) if result.raw_path else {}
    assert raw["config"]["model_args"]["pretrained"] == str(model_dir) and "samples" not in raw

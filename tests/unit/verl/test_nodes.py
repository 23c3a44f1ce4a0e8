"""Several nodes: a cell with ``verl.nnodes > 1`` joins a running Ray cluster (``verl.ray_address``, else
``$RAY_ADDRESS``), its resolved verl config records where, and without an address ``--dry-run`` and the launch
stop with an error that says how to start one. One node is unchanged (environment-independent snapshots).
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import ray
from omegaconf import OmegaConf

from corewarding.cli import main
from corewarding.config import ConfigError, compose_config
from corewarding.matrix import run_dir
from corewarding.training.common import cell_of
from corewarding.training.verl.launch import check_verl_config
from corewarding.training.verl.snapshot import HEADER, default_dir
from corewarding.training.verl.verl_config import to_verl_config, verl_yaml

CELL = ["method=gt_grpo", "base_model=qwen3-8b-base", "dataset=math"]
LIMITS = ["verl.host_memory_gb=512", "verl.disk_gb=4096"]  # a GPU node's: the dry run checks this machine's otherwise
HEAD = "10.0.0.1:6379"


def verl_of(*overrides: str, environ: dict[str, str]) -> OmegaConf:
    return to_verl_config(compose_config([*CELL, *overrides]), "runs/x", environ=environ)


def test_two_nodes_join_the_cluster_named_by_ray_address() -> None:
    v = verl_of("verl.nnodes=2", environ={"RAY_ADDRESS": HEAD})
    init = v.ray_kwargs.ray_init
    assert (init.address, v.trainer.nnodes, v.trainer.n_gpus_per_node) == (HEAD, 2, 4)
    assert init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES == "corewarding.training.verl.plugins"
    # what verl's run_ppo hands to ray.init(**ray_init) binds to ray.init's own parameters
    inspect.signature(ray.init).bind(**OmegaConf.to_container(init))
    assert "verl validate_config" in check_verl_config(v)  # 128 prompts x 8 rollouts over 2 x 4 GPUs


def test_the_config_key_wins_over_the_environment() -> None:
    v = verl_of("verl.nnodes=2", "verl.ray_address=head.internal:6379", environ={"RAY_ADDRESS": HEAD})
    assert v.ray_kwargs.ray_init.address == "head.internal:6379"
    one_node = verl_of("verl.ray_address=head.internal:6379", environ={})  # set explicitly, one node joins it too
    assert (one_node.ray_kwargs.ray_init.address, one_node.trainer.nnodes) == ("head.internal:6379", 1)


@pytest.mark.parametrize(
    ("overrides", "environ", "problem"),
    [
        ([], {}, "RAY_ADDRESS is unset"),
        ([], {"RAY_ADDRESS": " "}, "RAY_ADDRESS is unset"),
        ([], {"RAY_ADDRESS": "local"}, "its address is 'local'"),
        (["verl.ray_address=local"], {"RAY_ADDRESS": HEAD}, "its address is 'local'"),
    ],
)
def test_two_nodes_without_a_cluster_address_name_ray_address(
    overrides: list[str], environ: dict[str, str], problem: str
) -> None:
    with pytest.raises(ConfigError, match=rf"verl\.nnodes=2 joins a running Ray cluster, but {problem}") as err:
        verl_of("verl.nnodes=2", *overrides, environ=environ)
    message = str(err.value)
    assert "`ray start --head`" in message and "`ray start --address=HEAD:6379`" in message
    assert "set RAY_ADDRESS=HEAD:6379" in message and "\n" not in message


def test_one_node_ignores_ray_address_and_matches_its_snapshot() -> None:
    cfg = compose_config(CELL)
    where = run_dir(cell_of(cfg), cfg.paths.runs_dir).as_posix()
    v = to_verl_config(cfg, where, environ={"RAY_ADDRESS": HEAD}, flash_attn=True)  # the snapshots' GPU image
    assert "address" not in v.ray_kwargs.ray_init and v.trainer.nnodes == 1
    snapshot = (default_dir() / "gt_grpo__qwen3-8b-base__math.yaml").read_text()
    assert HEADER.format(cell_id=cell_of(cfg).cell_id) + verl_yaml(v) == snapshot


def test_joining_a_cluster_refuses_what_ray_refuses() -> None:
    with pytest.raises(ConfigError, match=r"ray_kwargs\.ray_init\.num_cpus=8: Ray refuses it when joining"):
        verl_of("verl.nnodes=2", 'verl.overrides=["ray_kwargs.ray_init.num_cpus=8"]', environ={"RAY_ADDRESS": HEAD})
    with pytest.raises(ConfigError, match=r"verl\.nnodes=0: must be >= 1"):
        compose_config([*CELL, "verl.nnodes=0"])


def test_dry_run_shows_nodes_and_address(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RAY_ADDRESS", HEAD)
    assert main(["train", *CELL, "backend=verl", "verl.nnodes=2", *LIMITS, "--dry-run"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["nnodes"], summary["ray_address"], summary["gpus"]) == (2, HEAD, 8)
    # vLLM at 0.6: on one node the default 0.8 leaves an 8B cell's plan over 80 GB (test_plan.py)
    assert main(["train", *CELL, "backend=verl", "verl.gpu_memory_utilization=0.6", *LIMITS, "--dry-run"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["nnodes"], summary["ray_address"], summary["gpus"]) == (1, None, 4)


def test_config_show_records_the_cluster(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("RAY_ADDRESS", HEAD)
    assert main(["config", "show", "gt_grpo__qwen3-8b-base__math", "verl.nnodes=2", "verl.n_gpus_per_node=8"]) == 0
    shown = OmegaConf.create(capsys.readouterr().out)
    assert (shown.ray_kwargs.ray_init.address, shown.trainer.nnodes, shown.trainer.n_gpus_per_node) == (HEAD, 2, 8)


@pytest.mark.parametrize("dry_run", [True, False])
def test_without_an_address_dry_run_and_launch_stop_first(
    dry_run: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    args = ["train", *CELL, "backend=verl", "verl.nnodes=2", f"paths.runs_dir={tmp_path}"]
    assert main([*args, "--dry-run"] if dry_run else args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: verl.nnodes=2 joins a running Ray cluster, but RAY_ADDRESS is unset")
    assert len(err.splitlines()) == 1 and list(tmp_path.iterdir()) == []

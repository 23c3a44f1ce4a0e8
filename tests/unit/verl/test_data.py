"""The verl run's inputs: rows filtered as the local backend filters them, verl reading them with its own
dataset class, and a data order equal to the local backend's (verl's sampler and the pair sampler), resumable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from torchdata.stateful_dataloader import StatefulDataLoader
from transformers import PreTrainedTokenizerBase
from verl.trainer.ppo.utils import create_rl_sampler
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

from corewarding.config import ConfigError, compose_config
from corewarding.training.local.trainer import batch_indices
from corewarding.training.verl.data import PairedRandomSampler
from corewarding.training.verl.launch import launch, prepare

N, B, SEED = 10, 3, 1234


def batches(loader: StatefulDataLoader, count: int) -> list[list[int]]:
    out: list[list[int]] = []
    while len(out) < count:
        out += [b.tolist() for b in loader][: count - len(out)]
    return out


def test_verls_sampler_draws_the_local_backends_order() -> None:
    sampler = create_rl_sampler(OmegaConf.create({"shuffle": True, "seed": SEED}), list(range(N)))
    loader = StatefulDataLoader(list(range(N)), batch_size=B, sampler=sampler, drop_last=True)
    assert batches(loader, 9) == [batch_indices(N, B, SEED, step) for step in range(9)]  # three epochs


def test_pair_sampler_keeps_both_views_together_in_the_local_order() -> None:
    sampler = PairedRandomSampler(2 * N, SEED)
    loader = StatefulDataLoader(list(range(2 * N)), batch_size=2 * B, sampler=sampler, drop_last=True)
    expected = [[r for p in batch_indices(N, B, SEED, step) for r in (2 * p, 2 * p + 1)] for step in range(6)]
    assert batches(loader, 6) == expected


@pytest.mark.parametrize("paired", [False, True])
def test_a_resumed_loader_continues_where_the_checkpoint_was(paired: bool) -> None:
    rows = list(range(2 * N if paired else N))
    size = 2 * B if paired else B

    def make() -> StatefulDataLoader:
        sampler = PairedRandomSampler(len(rows), SEED) if paired else create_rl_sampler(
            OmegaConf.create({"shuffle": True, "seed": SEED}), rows
        )  # fmt: skip
        return StatefulDataLoader(rows, batch_size=size, sampler=sampler, drop_last=True)

    uninterrupted = batches(make(), 7)
    first = make()
    seen = [b.tolist() for b in first][:3]  # epoch 0 done
    iterator = iter(first)
    seen.append(next(iterator).tolist())  # one step into epoch 1: verl saves here
    state = first.state_dict()
    resumed = make()
    resumed.load_state_dict(state)
    rest = [b.tolist() for b in resumed]
    assert seen + rest + batches(resumed, 1) == uninterrupted[:7]


@pytest.fixture()
def tiny_cfg(artifacts_dir: Path, tmp_path: Path):
    return compose_config([
        "experiment=tiny_cpu", "method=co_rewarding_1", f"paths.artifacts_dir={artifacts_dir}",
        f"paths.runs_dir={tmp_path / 'runs'}", "verl.n_gpus_per_node=1",
    ])  # fmt: skip


def test_prepare_writes_pairs_verl_reads_with_its_own_dataset(
    tiny_cfg, tmp_path: Path, tokenizer: PreTrainedTokenizerBase
) -> None:
    run = launch(tiny_cfg)
    report = prepare(tiny_cfg, run.verl_config, run.run_dir)
    assert report["train_rows"] == 64 and report["rephrased_rows"] == 64 and report["total_steps"] == 4
    assert json.loads((run.run_dir / "inputs.json").read_text()) == report
    assert (run.run_dir / "config_hash").read_text().strip()
    assert OmegaConf.load(run.run_dir / "verl_config.yaml").data.train_batch_size == 8  # 4 questions x 2 views
    data_cfg = OmegaConf.create({**OmegaConf.to_container(run.verl_config.data), "cache_dir": str(tmp_path / "c")})
    dataset = RLHFDataset(str(run.run_dir / "verl_data" / "train.parquet"), tokenizer, data_cfg)
    assert len(dataset) == 128
    first, second = dataset[0], dataset[1]
    assert (first["extra_info"]["cr_view"], second["extra_info"]["cr_view"]) == ("original", "rephrased")
    assert first["extra_info"]["cr_pair"] == second["extra_info"]["cr_pair"] == 0
    assert first["reward_model"]["ground_truth"] == second["reward_model"]["ground_truth"]
    assert first["raw_prompt"][-1]["content"] != second["raw_prompt"][-1]["content"]
    batch = collate_fn([dataset[i] for i in range(4)])
    assert [e["cr_pair"] for e in batch["extra_info"]] == [0, 0, 1, 1]


def test_prepare_refuses_to_mix_two_configurations_in_one_run(tiny_cfg, tmp_path: Path) -> None:
    run = launch(tiny_cfg)
    prepare(tiny_cfg, run.verl_config, run.run_dir)
    (run.run_dir / "checkpoints").mkdir()
    (run.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("2")
    prepare(tiny_cfg, run.verl_config, run.run_dir)  # the same configuration resumes
    other = compose_config([
        "experiment=tiny_cpu", "method=co_rewarding_1", f"paths.artifacts_dir={tiny_cfg.paths.artifacts_dir}",
        f"paths.runs_dir={tmp_path / 'runs'}", "verl.n_gpus_per_node=1", "optimizer.lr=0.5",
    ])  # fmt: skip
    with pytest.raises(ConfigError, match="holds checkpoints of another configuration"):
        prepare(other, launch(other).verl_config, run.run_dir)

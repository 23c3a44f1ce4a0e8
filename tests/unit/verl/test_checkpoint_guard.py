"""verl resumes with ``torch.load(weights_only=False)``; our worker and trainer first read the same files with torch's
restricted unpickler. Real verl checkpoints (verl's FSDPCheckpointManager, FSDP2 on two gloo ranks, as every cell
runs: DTensor shards, numpy RNG state) pass; a crafted pickle is refused before it can run, and would have run
under verl's load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from torchdata.stateful_dataloader import StatefulDataLoader

from corewarding.training.verl.checkpoint_guard import UnsafeCheckpointError, check_pickles, resume_folder
from tests.support.ranks import VERL_FSDP_CHECKPOINT_SETUP, run_ranks

RANK_SCRIPT = (
    VERL_FSDP_CHECKPOINT_SETUP
    + r"""
from corewarding.training.verl.checkpoint_guard import UnsafeCheckpointError, check_pickles, rank_shards

actor, evil = Path(sys.argv[1]), sys.argv[2]
manager.save_checkpoint(str(actor), global_step=1)
dist.barrier()
rank, world = dist.get_rank(), dist.get_world_size()
shards = rank_shards(actor, rank, world)
result = {"shards": [p.name for p in shards], "checked": check_pickles(shards)}
dist.barrier()
if rank == 0:  # rank 0's extra state replaced by a crafted pickle
    class Crafted:
        def __reduce__(self):
            return (os.system, (f"touch {evil}",))
    torch.save({"lr_scheduler": {}, "rng": Crafted()}, shards[-1])
try:
    check_pickles(rank_shards(actor, rank, world))
    result["refused"] = None
except UnsafeCheckpointError as error:
    result["refused"] = str(error)
print(json.dumps(result), flush=True)
dist.barrier()
os._exit(0)
"""
)


def test_real_verl_shards_pass_and_a_crafted_one_is_refused_before_it_runs(tmp_path: Path) -> None:
    actor, marker = tmp_path / "global_step_1" / "actor", tmp_path / "code-ran"
    results = run_ranks(RANK_SCRIPT, str(actor), str(marker))
    for rank, result in enumerate(results):
        kinds = [f"{kind}_world_size_2_rank_{rank}.pt" for kind in ("model", "optim", "extra_state")]
        assert result["shards"] == kinds and result["checked"] == 3  # DTensor shards and numpy RNG state pass
    assert results[1]["refused"] is None
    refused = results[0]["refused"]
    assert refused.startswith(f"{actor}/extra_state_world_size_2_rank_0.pt: refused: loading it needs posix.system")
    assert not marker.exists()
    # what verl's own load does with that file: the command runs
    torch.load(actor / "extra_state_world_size_2_rank_0.pt", weights_only=False)
    assert marker.exists()


def test_the_driver_finds_verls_resume_folder_and_checks_its_dataloader_state(tmp_path: Path) -> None:
    trainer = OmegaConf.create({"resume_mode": "auto", "resume_from_path": None, "default_local_dir": str(tmp_path)})
    assert resume_folder(trainer) is None  # nothing saved: verl trains from scratch
    step = tmp_path / "global_step_4"
    step.mkdir()
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("4")
    assert resume_folder(trainer) == step
    assert resume_folder(OmegaConf.merge(trainer, {"resume_mode": "disable"})) is None

    loader = StatefulDataLoader(list(range(10)), batch_size=2, shuffle=True)
    next(iter(loader))
    torch.save(loader.state_dict(), step / "data.pt")
    assert check_pickles([step / "data.pt"]) == 1

    class Crafted:
        def __reduce__(self) -> tuple:
            return (os.remove, (str(step / "data.pt"),))

    torch.save({"state": Crafted()}, step / "data.pt")
    with pytest.raises(UnsafeCheckpointError, match=r"data\.pt: refused: loading it needs posix\.remove"):
        check_pickles([step / "data.pt"])
    assert (step / "data.pt").exists()

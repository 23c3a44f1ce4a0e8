"""The checkpoints a verl run keeps: three saves by verl's real FSDPCheckpointManager on two gloo ranks, with
Co-rewarding-II's teacher shards and the driver's data.pt, at max_actor_ckpt_to_keep=2. verl alone removes only
global_step_1/actor (teacher shards and data.pt stay) and keeps every optimiser state; after our rotation step 1 is
gone, step 2 keeps its model but no optimiser state, step 3 is whole, and resuming from step 2 stops with one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from corewarding.training.errors import CheckpointError
from corewarding.training.verl.checkpoint_guard import check_optimizer_state, resume_folder
from corewarding.training.verl.rotation import rotate
from tests.support.ranks import VERL_FSDP_CHECKPOINT_SETUP, run_ranks

RANK_SCRIPT = (
    VERL_FSDP_CHECKPOINT_SETUP
    + r"""
from corewarding.training.verl.teacher import save_teacher_shards, teacher_file

root = Path(sys.argv[1])
teacher = wrap(LlamaForCausalLM(config))
for step in (1, 2, 3):  # as RayPPOTrainer._save_checkpoint: the workers' save, data.pt, then the record
    actor = root / f"global_step_{step}" / "actor"
    manager.save_checkpoint(str(actor), global_step=step, max_ckpt_to_keep=2)
    save_teacher_shards(teacher, teacher_file(actor, dist.get_rank()))  # what CorewardingWorker.save_checkpoint adds
    dist.barrier()
    if dist.get_rank() == 0:
        torch.save({"dataloader": step}, root / f"global_step_{step}" / "data.pt")
        (root / "latest_checkpointed_iteration.txt").write_text(str(step))
    dist.barrier()
print(json.dumps({"rank": dist.get_rank()}), flush=True)
dist.barrier()
os._exit(0)
"""
)


def _tree(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "huggingface" not in p.parts}


@pytest.fixture(scope="module")
def verl_saves(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    root = tmp_path_factory.mktemp("checkpoints")
    run_ranks(RANK_SCRIPT, str(root))
    return root, _tree(root)


def test_verl_alone_leaves_the_teacher_data_and_every_optimizer_state(verl_saves: tuple[Path, set[str]]) -> None:
    root, files = verl_saves
    assert not (root / "global_step_1" / "actor").exists()  # verl's own rotation took the actor folder only
    assert {"global_step_1/teacher/rank_0.pt", "global_step_1/teacher/rank_1.pt", "global_step_1/data.pt"} <= files
    assert "global_step_2/actor/optim_world_size_2_rank_0.pt" in files


def test_rotation_keeps_two_whole_saves_and_the_newest_optimizer_state(
    verl_saves: tuple[Path, set[str]], tmp_path: Path
) -> None:
    source, files = verl_saves
    root = tmp_path / "checkpoints"
    for name in files:  # a copy, so each test sees verl's own result
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes((source / name).read_bytes())
    removed = rotate(root, keep=2)
    after = _tree(root)
    assert not (root / "global_step_1").exists() and root / "global_step_1" in removed
    step2 = {f for f in after if f.startswith("global_step_2/")}
    step3 = {f for f in after if f.startswith("global_step_3/")}
    assert step3 == {f for f in files if f.startswith("global_step_3/")}  # the newest: untouched
    assert {f.replace("global_step_2", "global_step_3") for f in step2} == step3 - {
        f"global_step_3/actor/optim_world_size_2_rank_{r}.pt" for r in (0, 1)
    }
    assert "global_step_2/teacher/rank_1.pt" in step2 and "global_step_2/actor/model_world_size_2_rank_0.pt" in step2
    trainer = {"resume_mode": "auto", "resume_from_path": None, "default_local_dir": str(root)}
    assert resume_folder(OmegaConf.create(trainer)) == root / "global_step_3"
    assert rotate(root, keep=2) == []  # a second pass finds nothing more

    check_optimizer_state(root / "global_step_3" / "actor", 1, 2, ["model", "optimizer", "extra"])
    with pytest.raises(CheckpointError, match=r"global_step_2/actor: its optimizer state was removed"):
        check_optimizer_state(root / "global_step_2" / "actor", 1, 2, ["model", "optimizer", "extra"])
    check_optimizer_state(root / "global_step_2" / "actor", 1, 2, ["model", "extra"])  # afresh: allowed


def test_an_interrupted_save_and_a_missing_record_are_left_alone(tmp_path: Path) -> None:
    for step in (1, 2, 3, 4):
        (tmp_path / f"global_step_{step}" / "actor").mkdir(parents=True)
        (tmp_path / f"global_step_{step}" / "actor" / "optim_world_size_1_rank_0.pt").write_bytes(b"x")
    assert rotate(tmp_path, keep=1) == []  # no record: nothing is known complete
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("3")  # step 4's save did not finish
    rotate(tmp_path, keep=1)
    assert sorted(p.name for p in tmp_path.glob("global_step_*")) == ["global_step_3", "global_step_4"]
    assert (tmp_path / "global_step_3" / "actor" / "optim_world_size_1_rank_0.pt").exists()
    rotate(tmp_path, keep=None)  # every save kept: only older optimiser state goes
    assert (tmp_path / "global_step_4" / "actor" / "optim_world_size_1_rank_0.pt").exists()

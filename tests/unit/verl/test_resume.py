"""Which verl save a launch resumes from (``training/verl/resume.py``), on three real saves of verl's
FSDPCheckpointManager on two gloo ranks with Co-rewarding-II's teacher shards, ``data.pt``, verl's tracker, the
manifest the trainer writes last and the rotation after it. Each damage resumes from the newest complete save with
one line naming the step and the file, or stops in one line; none restarts from step 0."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from corewarding.checkpoint_manifest import MANIFEST, CheckpointError, manifest_problem
from corewarding.config import compose_config
from corewarding.run_folder import VERL_TRACKER
from corewarding.training.verl import resume
from corewarding.training.verl.checkpoint_guard import UnsafeCheckpointError, check_pickles
from corewarding.training.verl.launch import resume_point
from corewarding.training.verl.verl_config import to_verl_config
from tests.support.ranks import VERL_FSDP_CHECKPOINT_SETUP, run_ranks

RANK_SCRIPT = (
    VERL_FSDP_CHECKPOINT_SETUP
    + r"""
from corewarding.training.verl.resume import write_step_manifest
from corewarding.training.verl.rotation import rotate
from corewarding.training.verl.teacher import save_teacher_shards, teacher_file

root = Path(sys.argv[1])
teacher = wrap(LlamaForCausalLM(config))
for step in (1, 2, 3):  # as CorewardingTrainer._save_checkpoint: verl's save, the record, the manifest, the rotation
    actor = root / f"global_step_{step}" / "actor"
    manager.save_checkpoint(str(actor), global_step=step, max_ckpt_to_keep=None)
    save_teacher_shards(teacher, teacher_file(actor, dist.get_rank()))
    dist.barrier()
    if dist.get_rank() == 0:
        torch.save({"dataloader": step}, root / f"global_step_{step}" / "data.pt")
        (root / "latest_checkpointed_iteration.txt").write_text(str(step))
        write_step_manifest(root / f"global_step_{step}")
        rotate(root, None)
    dist.barrier()
print(json.dumps({"rank": dist.get_rank()}), flush=True)
dist.barrier()
os._exit(0)
"""
)
WORLD = 2


@pytest.fixture(scope="module")
def verl_saves(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkpoints")
    run_ranks(RANK_SCRIPT, str(root))
    return root


@pytest.fixture
def saves(verl_saves: Path, tmp_path: Path) -> Path:
    """A copy of the three saves, for one test to damage."""
    copy = tmp_path / "checkpoints"
    shutil.copytree(verl_saves, copy)
    return copy


def trainer_config(resume_mode: str = "auto") -> OmegaConf:
    return OmegaConf.create({"resume_mode": resume_mode, "resume_from_path": None})


def test_every_save_has_a_manifest_that_matches_and_older_ones_lost_only_their_optimizer_state(saves: Path) -> None:
    for step in (1, 2, 3):
        assert manifest_problem(saves / f"global_step_{step}", may_be_removed=("actor/optim_*",)) is None
    assert "teacher/rank_1.pt" in (saves / "global_step_3" / MANIFEST).read_text()
    assert not (saves / "global_step_2" / "actor" / "optim_world_size_2_rank_1.pt").exists()  # rotated away
    assert manifest_problem(saves / "global_step_2") == "actor/optim_world_size_2_rank_0.pt is missing"


def test_an_intact_run_resumes_from_its_newest_save(saves: Path) -> None:
    trainer = trainer_config()
    point = resume.apply(trainer, saves, WORLD, teacher=True)
    assert point is not None and point.step == 3 and point.passed_over == ()
    assert (trainer.resume_mode, trainer.resume_from_path) == ("resume_path", str(saves / "global_step_3"))


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("truncate", "teacher/rank_1.pt has {cut} bytes, its manifest says {size}"),
        ("remove", "teacher/rank_1.pt is missing"),
        ("flip", "teacher/rank_1.pt does not match its SHA-256 in manifest.json"),
    ],
)
def test_a_damaged_rank_1_teacher_shard_falls_back_to_the_save_before(
    saves: Path, damage: str, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    shard = saves / "global_step_3" / "teacher" / "rank_1.pt"
    data, size = shard.read_bytes(), shard.stat().st_size
    if damage == "truncate":
        shard.write_bytes(data[: size // 3])
    elif damage == "remove":
        shard.unlink()
    else:
        shard.write_bytes(data[:-7] + bytes([data[-7] ^ 1]) + data[-6:])
    trainer = trainer_config()
    with caplog.at_level(logging.WARNING, logger=resume.__name__):
        point = resume.apply(trainer, saves, WORLD, teacher=True)
    assert point is not None and point.step == 2
    expected = problem.format(cut=size // 3, size=size)
    assert point.passed_over == ((3, expected),)
    assert trainer.resume_from_path == str(saves / "global_step_2")
    assert not (saves / "global_step_3").exists() and (saves / "global_step_3.incomplete" / "actor").is_dir()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [f"step 3 incomplete ({expected}): set aside as global_step_3.incomplete; resuming from step 2"]


def test_a_crash_during_a_save_is_named_at_the_next_launch(saves: Path, caplog: pytest.LogCaptureFixture) -> None:
    (saves / "global_step_3" / MANIFEST).unlink()  # killed between verl's record and the manifest
    (saves / "global_step_3" / "data.pt").unlink()
    with caplog.at_level(logging.WARNING, logger=resume.__name__):
        point = resume.apply(trainer_config(), saves, WORLD, teacher=True)
    assert point is not None and point.step == 2
    assert [r.getMessage() for r in caplog.records] == [
        "step 3 incomplete (manifest.json is missing): set aside as global_step_3.incomplete; resuming from step 2"
    ]


def test_the_step_folder_named_by_the_tracker_removed_resumes_from_the_one_before(
    saves: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.rmtree(saves / "global_step_3")  # verl alone would print "Training from scratch" and start over
    assert (saves / VERL_TRACKER).read_text() == "3"
    trainer = trainer_config()
    with caplog.at_level(logging.WARNING, logger=resume.__name__):
        point = resume.apply(trainer, saves, WORLD, teacher=True)
    assert point is not None and point.step == 2 and trainer.resume_mode == "resume_path"
    assert [r.getMessage() for r in caplog.records] == [
        f"step 3 (named by {VERL_TRACKER}) is missing; resuming from step 2"
    ]


def test_another_world_size_stops_in_one_line_and_moves_nothing(saves: Path) -> None:
    before = sorted(p.name for p in saves.iterdir())
    with pytest.raises(CheckpointError) as caught:
        resume.apply(trainer_config(), saves, 4, teacher=True)
    message = str(caught.value)
    assert "\n" not in message and "no usable save to resume" in message
    for step in (3, 2, 1):
        assert f"step {step}: saved by 2 rank(s), this launch has 4" in message
    assert sorted(p.name for p in saves.iterdir()) == before


def test_a_missing_rank_shard_of_this_world_size_is_named(saves: Path) -> None:
    # the teacher flag matters: a run without the teacher ignores its shards, a teacher run needs every rank's
    for step in (1, 2, 3):
        (saves / f"global_step_{step}" / "teacher" / "rank_0.pt").unlink()
        (saves / f"global_step_{step}" / MANIFEST).unlink()  # as if the teacher had never been saved
    (saves / VERL_TRACKER).unlink()
    assert resume.choose(saves, WORLD, teacher=False).folder is None  # no manifest, no record: nothing completed
    assert resume.step_problem(saves / "global_step_3", WORLD, teacher=True, needs_manifest=False) == (
        "teacher/rank_0.pt is missing"
    )
    assert resume.step_problem(saves / "global_step_3", WORLD, teacher=False, needs_manifest=False) is None


def test_an_interrupted_first_save_is_set_aside_and_training_starts_at_step_0(
    saves: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for step in (2, 3):
        shutil.rmtree(saves / f"global_step_{step}")
    (saves / "global_step_1" / MANIFEST).unlink()
    (saves / VERL_TRACKER).unlink()
    trainer = trainer_config()
    with caplog.at_level(logging.WARNING, logger=resume.__name__):
        point = resume.apply(trainer, saves, WORLD, teacher=True)
    assert point is not None and point.folder is None and trainer.resume_mode == "auto"
    assert (saves / "global_step_1.incomplete").is_dir() and not (saves / "global_step_1").exists()
    assert "starting from step 0 (no save completed)" in caplog.records[0].getMessage()


def test_a_run_saved_before_manifests_resumes_from_its_record(saves: Path, caplog: pytest.LogCaptureFixture) -> None:
    for step in (1, 2, 3):
        (saves / f"global_step_{step}" / MANIFEST).unlink()
    point = resume.choose(saves, WORLD, teacher=True)
    assert point.step == 3 and point.passed_over == ()
    (saves / VERL_TRACKER).write_text("2")  # step 3 was never recorded complete: it is no legacy save
    point = resume.choose(saves, WORLD, teacher=True)
    assert point.step == 2 and point.passed_over == ((3, "manifest.json is missing"),)


def test_a_manifest_cannot_point_outside_its_folder_or_through_a_link(saves: Path, tmp_path: Path) -> None:
    folder = saves / "global_step_3"
    text = (folder / MANIFEST).read_text()
    (folder / MANIFEST).write_text(text.replace('"data.pt"', '"../global_step_2/data.pt"'))
    assert manifest_problem(folder) == "manifest.json names '../global_step_2/data.pt', outside its folder"
    (folder / MANIFEST).write_text(text)
    outside = tmp_path / "elsewhere.pt"
    shutil.move(folder / "data.pt", outside)
    (folder / "data.pt").symlink_to(outside)
    assert manifest_problem(folder) == "data.pt is a link (a checkpoint holds plain files only)"


def test_a_user_chosen_resume_mode_is_left_alone(saves: Path) -> None:
    shutil.rmtree(saves / "global_step_3")
    for mode in ("disable", "resume_path"):
        trainer = trainer_config(mode)
        assert resume.apply(trainer, saves, WORLD, teacher=True) is None
        assert (trainer.resume_mode, trainer.resume_from_path) == (mode, None)


def test_the_launch_reads_world_size_and_teacher_from_the_translated_config(saves: Path, tmp_path: Path) -> None:
    run_dir = tmp_path
    cfg = compose_config(
        ["base_model=qwen3-8b-base", "dataset=math", "method=co_rewarding_2", "verl.n_gpus_per_node=2"]
    )
    verl_cfg = to_verl_config(cfg, str(run_dir))
    (saves / "global_step_3" / "teacher" / "rank_1.pt").unlink()
    point = resume_point(verl_cfg, run_dir)  # run_dir/checkpoints is the copy of the saves
    assert point is not None and point.step == 2
    assert verl_cfg.trainer.resume_from_path == str(saves / "global_step_2")
    four = to_verl_config(cfg.copy(), str(run_dir))
    four.trainer.n_gpus_per_node = 4
    with pytest.raises(CheckpointError, match="this launch has 4"):
        resume_point(four, run_dir)


def test_a_truncated_shard_is_unreadable_for_the_pickle_guard_not_unsafe(saves: Path) -> None:
    shard = saves / "global_step_3" / "teacher" / "rank_1.pt"
    shard.write_bytes(shard.read_bytes()[:1000])
    with pytest.raises(CheckpointError) as caught:
        check_pickles([saves / "global_step_3" / "data.pt", shard])
    assert not isinstance(caught.value, UnsafeCheckpointError)  # a damaged file, not a file that would run code
    assert str(caught.value).startswith(f"{shard}: unreadable (")

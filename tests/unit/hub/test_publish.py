"""publish_run: every step on its own branch and the newest on main, checked by downloading with the real client;
calling it again pushes nothing; a change republishes with one commit per revision."""

from __future__ import annotations

import json
from pathlib import Path

from huggingface_hub import HfApi, hf_hub_download

from corewarding.hub.publish import PushOptions, publish_run

REPO = "TMLR-Group-HF/Co-rewarding-I-Tiny-Tiny"
FAST = PushOptions(backoff=0.01)


def test_every_step_to_its_branch_and_the_newest_to_main(run_copy: Path, hub, tmp_path: Path) -> None:
    results = publish_run(run_copy, push=True, steps="all", options=FAST)
    assert [r.folder.step for r in results] == [1, 2]
    assert [sorted(r.revisions()) for r in results] == [["global_step_1"], ["global_step_2", "main"]]
    assert all(r.created_commit and r.pushed for r in results)
    refs = HfApi(endpoint=hub.url).list_repo_refs(REPO)
    assert sorted(b.name for b in refs.branches) == ["global_step_1", "global_step_2", "main"]
    for branch, step in (("global_step_1", 1), ("global_step_2", 2), ("main", 2)):
        path = hf_hub_download(REPO, "model.safetensors", revision=branch, endpoint=hub.url, cache_dir=tmp_path)
        checkpoint = run_copy / "checkpoints" / f"global_step_{step}" / "model" / "model.safetensors"
        assert Path(path).read_bytes() == checkpoint.read_bytes()
        provenance = json.loads(hub.state.files(REPO, branch)["provenance.json"])
        assert provenance["step"] == step
    summary = results[1].summary()
    assert summary["commit"] == hub.state.repo(REPO).branches["main"] and summary["built"] == "built"
    assert summary["folder"] == str(run_copy / "publish" / "global_step_2")


def test_publishing_again_pushes_nothing(run_copy: Path, hub) -> None:
    first = publish_run(run_copy, push=True, steps="all", options=FAST)
    writes = len(hub.state.requests_to("/commit/|/preupload/|/repos/create|/branch/"))
    branches = dict(hub.state.repo(REPO).branches)
    again = publish_run(run_copy, push=True, steps="all", options=FAST)
    assert [r.folder.status for r in again] == ["unchanged", "unchanged"]
    assert [r.pushes for r in again] == [(), ()] and all(r.pushed and not r.created_commit for r in again)
    assert [r.revisions() for r in again] == [r.revisions() for r in first]
    assert len(hub.state.requests_to("/commit/|/preupload/|/repos/create|/branch/")) == writes  # only heads read
    assert hub.state.repo(REPO).branches == branches
    marker = json.loads((run_copy / "publish" / "global_step_2" / ".pushed.json").read_text())
    assert sorted(p["revision"] for p in marker["pushes"]) == ["global_step_2", "main"]
    assert not any(name.startswith(".") and name != ".gitattributes" for name in hub.state.files(REPO))


def test_a_new_evaluation_republishes_with_one_commit_per_revision(
    run_copy: Path, hub, set_eval, make_eval_rows
) -> None:
    publish_run(run_copy, push=True, options=FAST)
    heads = dict(hub.state.repo(REPO).branches)
    set_eval(run_copy, [{**r, "value": r["value"] / 2} for r in make_eval_rows(run_copy)])
    [result] = publish_run(run_copy, push=True, options=FAST)
    assert result.folder.status == "built" and result.created_commit
    for branch in ("global_step_2", "main"):
        history = hub.state.history(REPO, branch)
        assert history[1].oid == heads[branch] and history[0].changed == ("README.md",)


def test_a_revision_moved_by_someone_else_is_pushed_again(run_copy: Path, hub, token: str) -> None:
    publish_run(run_copy, push=True, options=FAST)
    api = HfApi(endpoint=hub.url, token=token)
    api.upload_file(path_or_fileobj=b"edited on the Hub\n", path_in_repo="README.md", repo_id=REPO)
    [result] = publish_run(run_copy, push=True, options=FAST)
    assert [p.revision for p in result.pushes] == ["main"] and [p.revision for p in result.skipped] == ["global_step_2"]
    readme = (run_copy / "publish" / "global_step_2" / "README.md").read_bytes()
    assert result.created_commit and hub.state.files(REPO)["README.md"] == readme


def test_building_only_touches_no_hub_and_one_branch_can_be_left_out(run_copy: Path, hub, tmp_path: Path) -> None:
    [built] = publish_run(run_copy, push=False, steps="1", out=tmp_path / "pub")
    assert built.folder.path == tmp_path / "pub" / "global_step_1" and not built.pushed and hub.state.requests == []
    [newest] = publish_run(run_copy, push=True, step_branches=False, options=FAST)
    assert sorted(newest.revisions()) == ["main"] and sorted(hub.state.repo(REPO).branches) == ["main"]

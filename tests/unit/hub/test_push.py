"""push_folder against the in-memory Hub: what arrives, idempotence, one commit per change, retries on transient
failures only, and the token kept out of every log, output and file."""

from __future__ import annotations

import logging
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub import HfApi

from corewarding.hub.errors import PushError
from corewarding.hub.model_folder import build_model_folder
from corewarding.hub.publish import PushOptions, publish_run
from corewarding.hub.push import push_folder

REPO = "TMLR-Group-HF/Co-rewarding-I-Tiny-Tiny"
FAST = {"retries": 3, "backoff": 0.01}


@pytest.fixture(scope="module")
def built(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_model_folder(trained_run, tmp_path_factory.mktemp("pub") / "global_step_2", repo_id=REPO).path


def local_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}


def test_push_uploads_the_folder_then_an_unchanged_push_makes_no_commit(built: Path, hub) -> None:
    first = push_folder(built, REPO, **FAST)
    remote = hub.state.files(REPO)
    assert remote.pop(".gitattributes") and remote == local_files(built)  # hidden bookkeeping is not uploaded
    assert first.created_commit and first.commit == hub.state.repo(REPO).branches["main"] and first.revision == "main"
    commits = len(hub.state.history(REPO))
    commit_posts = len(hub.state.requests_to("/commit/"))

    again = push_folder(built, REPO, **FAST)
    assert not again.created_commit and again.commit == first.commit
    assert len(hub.state.history(REPO)) == commits and len(hub.state.requests_to("/commit/")) == commit_posts


def test_a_changed_file_makes_exactly_one_commit_with_that_file(built: Path, hub, tmp_path: Path) -> None:
    import shutil

    folder = Path(shutil.copytree(built, tmp_path / "folder"))
    first = push_folder(folder, REPO, **FAST)
    (folder / "README.md").write_text((folder / "README.md").read_text() + "\nOne more line.\n")
    (folder / "provenance.json").unlink()  # a file the folder no longer has leaves the repo too
    second = push_folder(folder, REPO, **FAST)
    history = hub.state.history(REPO)
    assert second.created_commit and history[0].oid == second.commit and history[1].oid == first.commit
    assert history[0].changed == ("README.md", "provenance.json")
    assert "provenance.json" not in hub.state.files(REPO)


def test_a_branch_gets_the_folder_and_main_is_untouched(built: Path, hub) -> None:
    result = push_folder(built, REPO, revision="global_step_2", **FAST)
    assert result.revision == "global_step_2" and result.created_commit
    assert set(hub.state.repo(REPO).branches) == {"main", "global_step_2"}
    assert hub.state.files(REPO, "global_step_2")["model.safetensors"] == (built / "model.safetensors").read_bytes()
    assert set(hub.state.files(REPO)) == {".gitattributes"}


def test_server_errors_are_retried_until_the_push_succeeds(built: Path, hub, caplog: pytest.LogCaptureFixture) -> None:
    hub.state.fail_next("/api/repos/create", count=2, status=503)
    hub.state.fail_next("/revision/", count=1, status=429)
    with caplog.at_level(logging.WARNING, logger="corewarding.hub"):
        result = push_folder(built, REPO, **FAST)
    assert result.created_commit and hub.state.files(REPO)["README.md"] == (built / "README.md").read_bytes()
    assert [r.status for r in hub.state.requests_to("/api/repos/create")] == [503, 503, 200]
    assert [r.status for r in hub.state.requests_to("/revision/")] == [429, 200]
    assert "HTTP 503" in caplog.text and "retry 2 of 3" in caplog.text


def test_dropped_connections_are_retried(built: Path, hub) -> None:
    """Dropped before any answer: on create (retried here) and on the commit itself (retried by the client)."""
    hub.state.drop_next("/api/repos/create", count=1)
    hub.state.drop_next("/commit/main", count=1)
    result = push_folder(built, REPO, **FAST)
    assert result.created_commit and len(hub.state.history(REPO)) == 2  # one commit, not two
    assert [r.status for r in hub.state.requests_to("/api/repos/create")] == [None, 200]
    assert [r.status for r in hub.state.requests_to("/commit/main")] == [None, 200]


@pytest.mark.parametrize("reply", [None, 500], ids=["dropped", "bare-500"])
def test_a_commit_whose_reply_was_lost_is_not_made_again(built: Path, hub, token: str, reply: int | None) -> None:
    """The Hub applies the commit but the answer never arrives (dropped, or a bare 500): no second, empty commit."""
    hub.state.lose_reply_next("/commit/main", status=reply)
    result = push_folder(built, REPO, **FAST)
    commits = HfApi(endpoint=hub.url, token=token).list_repo_commits(REPO)
    assert [c.title for c in commits] == [f"Publish {built.name} with corewarding", "initial commit"]
    assert result.created_commit and result.commit == commits[0].commit_id
    remote = hub.state.files(REPO)
    assert remote.pop(".gitattributes") and remote == local_files(built)
    # the client re-sent the commit itself; naming its parent, the copy was refused; our retry saw the folder there
    assert [r.status for r in hub.state.requests_to("/commit/main")] == [reply, 412]


def test_a_refused_parent_that_does_not_hold_the_folder_is_committed_on(built: Path, hub) -> None:
    """A 412 with the folder not on the branch (another writer came first): the push goes again on the new head."""
    hub.state.fail_next("/commit/main", status=412)
    result = push_folder(built, REPO, **FAST)
    assert result.created_commit and len(hub.state.history(REPO)) == 2
    assert [r.status for r in hub.state.requests_to("/commit/main")] == [412, 200]
    assert hub.state.files(REPO)["README.md"] == (built / "README.md").read_bytes()


def test_retries_run_out_with_an_error_naming_the_repo(built: Path, hub) -> None:
    hub.state.fail_next("/api/repos/create", count=10, status=500)
    with pytest.raises(PushError, match=rf"create repo {REPO}@main: gave up after 3 tries; last error HTTP 500"):
        push_folder(built, REPO, retries=2, backoff=0.01)
    assert len(hub.state.requests_to("/api/repos/create")) == 3


def test_a_refused_token_fails_at_once(built: Path, hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_wrong_token_for_this_test")
    with pytest.raises(PushError, match=r"HTTP 401.*set HF_TOKEN or run `hf auth login`") as info:
        push_folder(built, REPO, **FAST)
    assert "hf_wrong_token_for_this_test" not in str(info.value)
    assert [r.status for r in hub.state.requests_to("/api/repos/create")] == [401]  # not retried
    assert not hub.state.repos


def test_not_found_fails_at_once(built: Path, hub) -> None:
    hub.state.fail_next("/preupload/", count=5, status=404)
    with pytest.raises(PushError, match=rf"upload to {REPO}@main: HTTP 404.*not found"):
        push_folder(built, REPO, **FAST)
    assert len(hub.state.requests_to("/preupload/")) == 1


def test_no_token_or_offline_mode_fail_before_any_request(built: Path, hub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(PushError, match="no Hugging Face token: set HF_TOKEN"):
        push_folder(built, REPO, **FAST)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PushError, match="HF_HUB_OFFLINE is set"):
        push_folder(built, REPO, **FAST)
    assert hub.state.requests == []


def test_the_token_appears_in_no_log_output_or_file(
    run_copy: Path,
    hub,
    token: str,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A whole publish, with retries and a refusal, logged at DEBUG by every logger (huggingface_hub's included)."""
    hub.state.fail_next("/api/repos/create", count=1, status=500)
    hub.state.drop_next("/branch/", count=1)
    for name in ("huggingface_hub", "httpx", "httpcore"):  # their own levels would hide their debug records
        monkeypatch.setattr(logging.getLogger(name), "level", logging.DEBUG)
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
    with caplog.at_level(logging.DEBUG):
        publish_run(run_copy, push=True, steps="all", options=PushOptions(backoff=0.01))
        publish_run(run_copy, push=True, steps="all", options=PushOptions(backoff=0.01))
        hub.state.fail_next("/revision/", count=1, status=403)
        with pytest.raises(PushError) as refused:
            publish_run(run_copy, push=True, options=PushOptions(backoff=0.01))
    out, err = capfd.readouterr()
    assert hub.state.requests and all(r.authenticated for r in hub.state.requests)
    assert {r.name.split(".")[0] for r in caplog.records} >= {"corewarding", "huggingface_hub", "httpx", "httpcore"}
    logged = caplog.text + "".join(repr(r.args) + str(r.msg) for r in caplog.records)
    assert token not in logged and token not in out + err and token not in str(refused.value)
    assert token not in repr(hub.state.requests)
    written = [p for p in run_copy.rglob("*") if p.is_file()]
    assert any(p.name == ".pushed.json" for p in written)
    assert all(token.encode() not in p.read_bytes() for p in written)

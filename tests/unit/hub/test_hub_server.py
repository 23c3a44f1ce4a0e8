"""The in-memory Hub itself, through huggingface_hub's own client: the calls the publishing tests rely on."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError


def git_blob_id(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def test_the_client_api_it_speaks(hub, token: str, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "sub" / "b.bin").write_bytes(bytes(range(256)))
    api = HfApi(endpoint=hub.url, token=token)
    assert api.whoami()["name"] == "tester"
    url = api.create_repo("org/repo", exist_ok=True)
    assert url == f"{hub.url}/org/repo" and api.create_repo("org/repo", exist_ok=True) == url
    first = api.upload_folder(repo_id="org/repo", folder_path=tmp_path, commit_message="first")
    api.create_branch("org/repo", branch="dev")
    api.create_branch("org/repo", branch="dev", exist_ok=True)
    with pytest.raises(HfHubHTTPError, match="409"):
        api.create_branch("org/repo", branch="dev")
    assert api.repo_info("org/repo", revision="dev").sha == first.oid
    assert sorted(api.list_repo_files("org/repo", revision="dev")) == [".gitattributes", "a.txt", "sub/b.bin"]
    [folder] = [e for e in api.list_repo_tree("org/repo") if e.path == "sub"]
    assert type(folder).__name__ == "RepoFolder"
    [info] = api.get_paths_info("org/repo", ["sub/b.bin"])
    assert info.size == 256 and info.blob_id == git_blob_id(bytes(range(256)))
    assert [c.title for c in api.list_repo_commits("org/repo")] == ["first", "initial commit"]
    with pytest.raises(RepositoryNotFoundError):
        api.repo_info("org/missing")
    with pytest.raises(RevisionNotFoundError):
        api.repo_info("org/repo", revision="nope")


def test_faults_and_authorisation(hub, token: str) -> None:
    hub.state.fail_next("/api/whoami", count=2, status=502)
    hub.state.drop_next("/api/whoami", count=1)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=hub.url, headers=headers) as client:
        assert [client.get("/api/whoami-v2").status_code for _ in range(2)] == [502, 502]
        with pytest.raises(httpx.RemoteProtocolError):
            client.get("/api/whoami-v2")
        assert client.get("/api/whoami-v2").status_code == 200
        assert client.get("/api/whoami-v2", headers={"Authorization": "Bearer other"}).status_code == 401
    assert [r.status for r in hub.state.requests_to("whoami")] == [502, 502, None, 200, 401]
    assert token not in repr(hub.state.requests) and "other" not in repr(hub.state.requests)

"""Build and (when asked) push: every chosen checkpoint step of a run, or a rephrased training set.

Safe to call again. A folder is rebuilt only when its content would change, and each successful push is recorded in
the folder's ``.pushed.json`` (endpoint, repo, revision, commit, content fingerprint; hidden, so never uploaded). A
revision whose record matches the folder's fingerprint and whose head on the Hub is still the recorded commit is
skipped without uploading anything.

Revisions: each published step goes to its own branch ``global_step_N`` (with ``step_branches``), and the run's
newest saved step also goes to ``main``; so ``main`` always holds the newest checkpoint and every step stays pinned.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corewarding.files import write_json_atomic
from corewarding.hub.folder import PublishFolder
from corewarding.hub.push import PushResult, push_folder, remote_head, resolve_endpoint
from corewarding.hub.run_source import choose_steps, load_run
from corewarding.matrix import hub_repo_id
from corewarding.run_folder import PUBLISH, PUSH_RECORD, step_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublishResult:
    """One published folder: what was built, and per revision the push made now or found already done."""

    folder: PublishFolder
    pushes: tuple[PushResult, ...] = ()
    skipped: tuple[PushResult, ...] = ()  # already on the Hub as recorded: nothing uploaded

    @property
    def pushed(self) -> bool:
        return bool(self.pushes or self.skipped)

    @property
    def created_commit(self) -> bool:
        return any(p.created_commit for p in self.pushes)

    def revisions(self) -> dict[str, str]:
        return {p.revision: p.commit for p in (*self.skipped, *self.pushes)}

    def summary(self) -> dict[str, Any]:
        """The JSON line the CLI prints: repo, folder, step, build status, pushed, head commit, new commit."""
        revisions = self.revisions()
        commit = revisions.get("main") or next(iter(revisions.values()), None)
        return {
            "repo_id": self.folder.repo_id,
            "repo_type": self.folder.repo_type,
            "folder": str(self.folder.path),
            "step": self.folder.step,
            "built": self.folder.status,
            "pushed": self.pushed,
            "commit": commit,
            "created_commit": self.created_commit,
            "revisions": revisions,
        }


@dataclass(frozen=True)
class PushOptions:
    """How to push: visibility, endpoint (None: ``$HF_ENDPOINT`` or the Hub), retries and backoff seconds."""

    private: bool = False
    endpoint: str | None = None
    retries: int = 4
    backoff: float = 2.0


def read_marker(folder: Path) -> list[dict[str, Any]]:
    """The pushes recorded in a folder (none when it has no readable record)."""
    try:
        pushes = json.loads((folder / PUSH_RECORD).read_text())["pushes"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [p for p in pushes if isinstance(p, dict)] if isinstance(pushes, list) else []


def _target(entry: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(entry.get(k) for k in ("endpoint", "repo_type", "repo_id", "revision"))


def record_push(folder: Path, result: PushResult, fingerprint: str) -> None:
    """Add (or replace) the record of a push to the folder's marker; the token is not part of it."""
    entry = {
        "endpoint": result.endpoint,
        "repo_type": result.repo_type,
        "repo_id": result.repo_id,
        "revision": result.revision,
        "commit": result.commit,
        "fingerprint": fingerprint,
    }
    kept = [e for e in read_marker(folder) if _target(e) != _target(entry)]
    write_json_atomic(
        {"pushes": sorted([*kept, entry], key=lambda e: [str(v) for v in _target(e)])}, folder / PUSH_RECORD
    )


def _already_pushed(folder: PublishFolder, revision: str, options: PushOptions) -> PushResult | None:
    """The recorded push of this content to ``revision``, if the Hub's head is still the recorded commit."""
    url = resolve_endpoint(options.endpoint)
    wanted = (url, folder.repo_type, folder.repo_id, revision)
    entry = next((e for e in read_marker(folder.path) if _target(e) == wanted), None)
    if entry is None or entry.get("fingerprint") != folder.fingerprint:
        return None
    head = remote_head(
        folder.repo_id,
        repo_type=folder.repo_type,
        revision=revision,
        endpoint=url,
        retries=options.retries,
        backoff=options.backoff,
    )
    if head != entry.get("commit"):
        log.info("%s@%s is at %s, not the recorded %s: pushing again", folder.repo_id, revision, head, entry["commit"])
        return None
    return PushResult(folder.repo_id, folder.repo_type, revision, str(head), False, url)


def push_revisions(folder: PublishFolder, revisions: list[str], options: PushOptions) -> PublishResult:
    """Push ``folder`` to each revision in turn, skipping those already holding this content as recorded."""
    pushes, skipped = [], []
    for revision in revisions:
        done = _already_pushed(folder, revision, options)
        if done is not None:
            log.info("%s@%s already holds %s (commit %s): skipped", folder.repo_id, revision, folder.path, done.commit)
            skipped.append(done)
            continue
        result = push_folder(
            folder.path,
            folder.repo_id,
            repo_type=folder.repo_type,
            revision=revision,
            private=options.private,
            endpoint=options.endpoint,
            retries=options.retries,
            backoff=options.backoff,
            commit_message=_message(folder, revision),
        )
        record_push(folder.path, result, folder.fingerprint)
        pushes.append(result)
    return PublishResult(folder, tuple(pushes), tuple(skipped))


def _message(folder: PublishFolder, revision: str) -> str:
    what = f"checkpoint step {folder.step}" if folder.step is not None else "dataset"
    return f"corewarding: publish {what} to {revision}"


def step_revisions(step: int, newest: int, step_branches: bool) -> list[str]:
    """``global_step_N`` (with step branches, or for any step but the newest) and ``main`` for the newest."""
    revisions = [step_name(step)] if step_branches or step != newest else []
    return revisions + (["main"] if step == newest else [])


def publish_run(
    run_dir: Path,
    *,
    org: str | None = None,
    push: bool = False,
    steps: str = "last",
    out: Path | None = None,
    step_branches: bool = True,
    options: PushOptions | None = None,
) -> list[PublishResult]:
    """Build the publish folder of each chosen step of a run (``out/global_step_N``) and push them when asked.

    ``steps``: ``last``, ``all`` or steps like ``10,20``; ``org`` defaults to the run's ``hub.org``; ``out`` to
    ``{run_dir}/publish``. Calling it again rebuilds nothing unchanged and pushes nothing already on the Hub.
    """
    from corewarding.hub.model_folder import build_step_folder  # pyarrow: imported when used

    source = load_run(Path(run_dir))
    repo_id = hub_repo_id(source.cell, org or source.org)
    out = Path(out) if out is not None else source.run_dir / PUBLISH
    results = []
    for step in choose_steps(source, steps):
        folder = build_step_folder(source, out / step_name(step), repo_id=repo_id, step=step)
        if push:
            revisions = step_revisions(step, source.newest, step_branches)
            results.append(push_revisions(folder, revisions, options or PushOptions()))
        else:
            results.append(PublishResult(folder))
    return results


def publish_dataset(
    set_name: str,
    *,
    org: str | None = None,
    push: bool = False,
    data_dir: Path = Path("data"),
    out: Path | None = None,
    options: PushOptions | None = None,
) -> PublishResult:
    """Build the publish folder of a rephrased training set (default ``{data_dir}/{set}/publish``); push to main."""
    from corewarding.hub.dataset_folder import (  # pyarrow: imported when used
        build_dataset_folder,
        dataset_repo_id,
        default_org,
    )

    repo_id = dataset_repo_id(set_name, org or default_org())
    set_dir = Path(data_dir) / set_name
    folder = build_dataset_folder(set_dir, Path(out) if out is not None else set_dir / "publish", repo_id=repo_id)
    return push_revisions(folder, ["main"], options or PushOptions()) if push else PublishResult(folder)

"""``corewarding publish`` and ``publish-data`` through their argparse registration (as cli.py will wire them)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from corewarding.cli.hub import add_subcommands


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="corewarding")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


def lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_publish_a_cell_by_id_builds_then_pushes(run_copy: Path, hub, capsys: pytest.CaptureFixture[str]) -> None:
    runs = str(run_copy.parent)
    assert run(["publish", run_copy.name, "--runs-dir", runs, "--all-steps", "--org", "my-lab"]) == 0
    built = lines(capsys.readouterr().out)
    assert [(b["step"], b["built"], b["pushed"]) for b in built] == [(1, "built", False), (2, "built", False)]
    assert built[0]["folder"] == str(run_copy / "publish" / "global_step_1") and hub.state.requests == []

    assert run(["publish", str(run_copy), "--push", "--org", "my-lab", "--retries", "1"]) == 0
    [pushed] = lines(capsys.readouterr().out)
    assert pushed["repo_id"] == "my-lab/Co-rewarding-I-Tiny-Tiny" and pushed["built"] == "unchanged"
    assert pushed["pushed"] and pushed["created_commit"]
    assert pushed["commit"] == hub.state.repo("my-lab/Co-rewarding-I-Tiny-Tiny").branches["main"]
    assert set(pushed["revisions"]) == {"global_step_2", "main"}

    assert run(["publish", str(run_copy), "--push", "--org", "my-lab"]) == 0
    [again] = lines(capsys.readouterr().out)
    assert again["pushed"] and not again["created_commit"] and again["commit"] == pushed["commit"]


def test_bad_input_exits_2_naming_the_path(run_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["publish", str(tmp_path / "missing")]) == 2
    assert f"error: {tmp_path / 'missing'}: no such run folder" in capsys.readouterr().err
    assert run(["publish", "gt_grpo__tiny__tiny", "--runs-dir", str(tmp_path)]) == 2
    assert f"error: {tmp_path / 'gt_grpo__tiny__tiny'}: no such run folder" in capsys.readouterr().err
    assert run(["publish", str(run_copy), "--step", "5"]) == 2
    err = capsys.readouterr().err
    assert f"error: {run_copy / 'checkpoints'}: no checkpoint for step(s) [5]; saved steps: [1, 2]" in err
    assert run(["publish-data", "tiny", "--data-dir", str(tmp_path)]) == 2
    assert str(tmp_path / "tiny") in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run(["publish", str(run_copy), "--step", "1", "--all-steps"])


def test_a_refused_push_exits_1(run_copy: Path, hub, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_not_the_right_one")
    assert run(["publish", str(run_copy), "--push"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: create repo") and "HTTP 401" in err and "hf_not_the_right_one" not in err

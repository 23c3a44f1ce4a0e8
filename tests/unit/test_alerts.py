"""Alerts through Prefect's notification blocks, end to end: the pipeline flow runs in this process on a Prefect test
server of its own (its home in a temporary folder, never ~/.prefect), with real CustomWebhookNotificationBlocks saved
on it that post to HTTP servers on 127.0.0.1 started here. A failed cell, a new collapse flag and a changed claim
verdict each send one message saying what happened; a rerun where nothing changed sends none; a message goes only to
the configured block (not to another block, nor to a URL in the claims' text), carries untrusted text as plain text
without secrets, and one that cannot be sent is a warning, never a failed run."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pytest

from corewarding.config import ConfigError
from corewarding.pipeline import alerts
from corewarding.pipeline.settings import load_settings
from tests.support.prefect_server import prefect_harness

BROKEN = "co_rewarding_2__tiny__tiny"  # no run folder: its evaluation fails at once (no checkpoint to evaluate)
GOOD = "majority_voting__tiny__tiny"
SECRET = "hf_alerts_test_secret_0123456789"  # in the environment as HF_TOKEN: never in a message
HOOK_SECRET = "hook-auth-secret-42"  # the webhook block's own secret, sent only where its config puts it


class Hook:
    """A webhook receiver on 127.0.0.1 that records every request (path, headers, JSON body); ``/fail`` answers
    500."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"null")
                headers = {k.lower(): v for k, v in self.headers.items()}
                hook.received.append({"path": self.path, "headers": headers, "json": body})
                self.send_response(500 if self.path == "/fail" else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def take(self) -> list[dict[str, Any]]:
        """The requests received since the last take. A send returns once its request was answered, so what a call
        sent is here when it returns: no waiting."""
        got, self.received[:] = list(self.received), []
        return got

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def hooks() -> Iterator[tuple[Hook, Hook]]:
    """The configured block's receiver, and another one that must never hear anything."""
    ours, other = Hook(), Hook()
    yield ours, other
    ours.close()
    other.close()


@pytest.fixture(scope="module")
def prefect(tmp_path_factory: pytest.TempPathFactory, hooks: tuple[Hook, Hook]) -> Iterator[None]:
    """A Prefect test server with its home in a temporary folder, holding the test's notification blocks."""
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    ours, other = hooks
    with prefect_harness(tmp_path_factory.mktemp("prefect")):
        template = {"subject": "{{subject}}", "body": "{{body}}"}
        for name, url in (("lab-alerts", f"{ours.url}/hook"), ("failing-hook", f"{ours.url}/fail"),
                          ("other-hook", f"{other.url}/hook")):  # fmt: skip
            CustomWebhookNotificationBlock(
                name="corewarding", url=url, json_data=template, headers={"X-Hook-Auth": "{{token}}"},
                secrets={"token": HOOK_SECRET},
            ).save(name)  # fmt: skip
        yield


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hooks: tuple[Hook, Hook]) -> Path:
    """A working folder (runs/ and the store under it) and a claims file whose text carries a URL, a placeholder and
    a secret: what untrusted text may hold."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    text = f"Majority-Voting stays stable (see {hooks[1].url}/steal?t={{{{token}}}} and {SECRET})"
    claim = {"id": "mv-stable", "text": text, "table": "Fig. 9", "kind": "stable", "method": "majority_voting",
             "by_step": 4, "rows": [{"base_model": "tiny", "dataset": "tiny"}]}  # fmt: skip
    (tmp_path / "claims.yaml").write_text(json.dumps({"claims": [claim]}))
    hooks[0].take()
    return tmp_path


def write_good_run(root: Path, val_accuracy: list[float]) -> None:
    """GOOD's run folder, trained to step 4, with validation accuracy at steps 0, 2 and 4."""
    run = root / "runs" / GOOD
    run.mkdir(parents=True, exist_ok=True)
    config = "backend: local\nmethod: {name: majority_voting}\nbase_model: {name: tiny}\ndataset: {name: tiny}\n"
    (run / "config.yaml").write_text(config + "grpo: {max_response_length: 64}\nschedule: {total_steps: 4}\n")
    val = dict(zip((0, 2, 4), val_accuracy, strict=True))
    lines = [{"step": 0, "val_accuracy": val[0]}]
    for step in (1, 2, 3, 4):
        lines.append({"step": step, "reward_mean": 0.5, "label_accuracy": 0.5, "response_length_mean": 10.0}
                     | ({"val_accuracy": val[step]} if step in val else {}))  # fmt: skip
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    latest = run / "checkpoints" / "global_step_4"
    latest.mkdir(parents=True, exist_ok=True)
    (latest / "trainer_state.json").write_text(json.dumps({"step": 4, "total_steps": 4}))
    (run / "checkpoints" / "latest").write_text("global_step_4")


@contextmanager
def alert_warnings() -> Iterator[list[str]]:
    """The warnings the alerts log meanwhile, read at their logger (a flow run resets the root logger's handlers)."""
    said: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger(alerts.__name__)
    logger.addHandler(handler)
    try:
        yield said
    finally:
        logger.removeHandler(handler)


def run_pipeline(root: Path, block: str, cells: list[str], steps: list[str]) -> Any:
    from flows.pipeline import pipeline

    config = [f"alerts.block={block}", f"alerts.claims_file={root / 'claims.yaml'}", f"results_db={root / 'r.duckdb'}"]
    return pipeline(cells=cells, steps=steps, config=config, return_state=True)


def messages(hook: Hook) -> list[dict[str, str]]:
    """The JSON bodies the hook received since the last look, each checked to come from the configured block."""
    got = hook.take()
    assert all(r["path"] == "/hook" and r["headers"]["x-hook-auth"] == HOOK_SECRET for r in got), got
    return [r["json"] for r in got]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect")
def test_each_event_sends_one_message_through_the_configured_block_and_nothing_else(
    project: Path, hooks: tuple[Hook, Hook]
) -> None:
    ours, other = hooks

    # A failed cell: one message naming the cell and its error; the claims' first check is stored, not news.
    state = run_pipeline(project, "custom-webhook/lab-alerts", [BROKEN], ["evaluate", "ingest"])
    assert state.is_failed()
    [failed] = messages(ours)
    assert failed["subject"] == f"corewarding: cell {BROKEN} failed"
    assert failed["body"].startswith(f"Cell {BROKEN} failed") and "evaluate: FileNotFoundError: " in failed["body"]
    assert "no saved checkpoint to evaluate" in failed["body"]
    with duckdb.connect(str(project / "r.duckdb"), read_only=True) as con:
        assert con.execute("SELECT claim_id, verdict FROM claim_verdicts").fetchall() == [("mv-stable", "undecided")]

    # The claim's cells ingested, stable to step 4: its verdict changes (the block named by its name alone).
    write_good_run(project, [0.5, 0.5, 0.5])
    assert run_pipeline(project, "lab-alerts", [GOOD], ["ingest"]).is_completed()
    [changed] = messages(ours)
    assert changed["subject"] == "corewarding: claim mv-stable now holds"
    body = changed["body"]
    assert body.startswith("Claim mv-stable (Fig. 9): Majority-Voting stays stable (see ")
    assert "\nVerdict: undecided -> holds (checker math_verify)" in body
    assert SECRET not in body and "[redacted]" in body and "{{" not in body and "{ {token} }" in body
    assert f"{other.url}/steal" in body  # a URL in the text is text: nothing is sent there (checked at the end)

    # Nothing changed: no message at all.
    assert run_pipeline(project, "lab-alerts", [GOOD], ["ingest"]).is_completed()
    assert messages(ours) == []

    # The run collapses (validation accuracy falls at step 4): one message for the flag, one for the claim.
    write_good_run(project, [0.5, 0.5, 0.1])
    assert run_pipeline(project, "lab-alerts", [GOOD], ["ingest"]).is_completed()
    collapse, verdict = messages(ours)
    assert collapse["subject"] == f"corewarding: {GOOD} collapsed (val_drop)"
    assert collapse["body"].startswith(f"Run {GOOD}@") and collapse["body"].endswith(
        f" of cell {GOOD}: collapse rule val_drop fired at step 4: val_accuracy 0.100 vs peak 0.500 at step 0"
    )
    assert verdict["subject"] == "corewarding: claim mv-stable now does not hold"
    assert "\nVerdict: holds -> does not hold (checker math_verify)" in verdict["body"]
    assert run_pipeline(project, "lab-alerts", [GOOD], ["ingest"]).is_completed()  # the same collapse: no news
    assert messages(ours) == []

    # A block that cannot deliver (HTTP 500): a warning without the block's URL, and the run still completes.
    write_good_run(project, [0.5, 0.5, 0.5])
    with alert_warnings() as warnings:
        assert run_pipeline(project, "failing-hook", [GOOD], ["ingest"]).is_completed()
    [tried] = ours.take()
    assert tried["path"] == "/fail" and tried["json"]["subject"] == "corewarding: claim mv-stable now holds"
    assert len(warnings) == 1 and "alert not sent through block failing-hook (claim_changed" in warnings[0]
    assert "HTTPStatusError" in warnings[0] and ours.url not in warnings[0]

    assert other.take() == []  # the other block, and the URL in the claims' text, never heard a thing


@pytest.mark.usefixtures("prefect")
def test_a_block_that_is_missing_ambiguous_or_not_a_notifier_is_a_warning_and_nothing_is_sent(
    hooks: tuple[Hook, Hook],
) -> None:
    from prefect.blocks.notifications import SlackWebhook
    from prefect.blocks.system import Secret

    Secret(value="not a notifier").save("plain-secret", overwrite=True)
    SlackWebhook(url=f"{hooks[1].url}/slack").save("other-hook", overwrite=True)  # a second block of that name
    alert = alerts.cell_failed(BROKEN, "train: boom")
    with alert_warnings() as said:
        for block in ("no-such-block", "secret/plain-secret", "other-hook"):
            assert alerts.Alerter(block).send(alert) is False
    assert "no notification block named no-such-block" in said[0]
    assert "is a Secret, not a notification block" in said[1]
    assert "2 notification blocks are named other-hook (custom-webhook, slack-webhook)" in said[2]
    assert hooks[0].take() == [] and hooks[1].take() == []
    assert alerts.Alerter(None).send(alert) is False  # off: nothing loaded, nothing said
    assert alerts.Alerter("lab-alerts", ("collapse",)).send(alert) is False  # cell_failed not chosen


def test_the_block_key_takes_a_block_name_never_a_url() -> None:
    assert load_settings(["alerts.block=custom-webhook/lab"]).alerts_block == "custom-webhook/lab"
    assert load_settings([]).alerts_block is None  # off by default
    for bad in ("http://127.0.0.1:9/hook", "Lab Alerts", "a/b/c"):
        with pytest.raises(ConfigError, match=r"^alerts\.block=.*: must be <block-type-slug>/<block-name> or a bl"):
            load_settings([f"alerts.block={bad}"])
    with pytest.raises(ConfigError, match=r"^alerts\.events=\['crash'\]: must be a list of cell_failed, collapse, "):
        load_settings(["alerts.events=[crash]"])


def test_untrusted_text_is_one_plain_line_without_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_AUTH_STRING", "corewarding:hunter2-long")
    error = (
        "train: boom {{token}} at postgresql://prefect:pw@db/x with corewarding:hunter2-long\n\x1b[2J\u202e"
        + "x" * 5000
    )
    alert = alerts.cell_failed(BROKEN, error, f"{BROKEN}#2")
    assert alert.subject == f"corewarding: cell {BROKEN} failed"
    assert alert.body.startswith(
        f"Cell {BROKEN} failed (attempt {BROKEN}#2): train: boom {{ {{token}} }} at postgresql://[redacted]@db/x with "
        "[redacted]  [2J "
    )
    assert "\n" not in alert.body and len(alert.body) < 1100 and alert.body.endswith("x…")

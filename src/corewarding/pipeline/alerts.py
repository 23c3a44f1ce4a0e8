"""Alerts through Prefect's own notification blocks: one message per failed cell, new collapse flag or changed claim
verdict, sent through the block that ``alerts.block`` (configs/pipeline.yaml) names (docs/orchestration.md#alerts).

The message goes to that block and nowhere else: the block is loaded by its name from the Prefect API, and nothing
read from the store, a run folder or a worker's report chooses where a message goes; such text (a run id, an error)
enters the message only as plain text (``plain``). A message that cannot be sent is a logged warning, never a failed
pipeline.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import prefect.blocks.notifications  # noqa: F401  (registers Prefect's notification block types, for Block.load)
from prefect.blocks.abstract import NotificationBlock
from prefect.blocks.core import Block
from prefect.client.orchestration import get_client
from prefect.utilities.asyncutils import run_coro_as_sync

from corewarding.pipeline.settings import PipelineSettings
from corewarding.schemas import ALERT_EVENTS

log = logging.getLogger(__name__)

CELL_FAILED, COLLAPSE, CLAIM_CHANGED = ALERT_EVENTS
FIELD_LIMIT = 1000  # characters of one untrusted field in a message
REDACTED = "[redacted]"
_SECRET_NAME = re.compile(r"TOKEN(?!IZERS)|SECRET|PASSW|AUTH|CREDENTIAL|PRIVATE|(^|_)KEY$|_KEY_", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(r"(?<=://)[^\s/@]+@")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


@dataclass(frozen=True)
class Alert:
    """One message: the event it reports (one of ``ALERT_EVENTS``), a one-line subject and a body."""

    event: str
    subject: str
    body: str


# ---- the message: what the store and the workers say, as plain text ------------------------------------------------
def _secret_values() -> list[str]:
    """Values of this process's secret-looking environment variables (tokens, auth strings, keys), longest first."""
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= 6}
    return sorted(values, key=len, reverse=True)


def plain(text: object, limit: int = FIELD_LIMIT) -> str:
    """Untrusted text (a cell's error, a run id, a claim's text) as one line of plain text: control and format
    characters become spaces, ``{{`` and ``}}`` are split so that no block fills a placeholder into it (a webhook
    template's ``{{token}}``), the credentials of a URL and the values of secret environment variables are
    redacted, and at most ``limit`` characters are kept.

    >>> plain("bad {{token}} at https://me:pw@host/x\\n\\x1b[31m")
    'bad { {token} } at https://[redacted]@host/x  [31m'
    """
    out = str(text)
    for value in _secret_values():
        out = out.replace(value, REDACTED)
    out = _URL_CREDENTIALS.sub(f"{REDACTED}@", out)
    out = "".join(" " if unicodedata.category(c).startswith("C") else c for c in out)
    while "{{" in out or "}}" in out:
        out = out.replace("{{", "{ {").replace("}}", "} }")
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _number(value: object) -> str:
    return f"{value:+.3f}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def cell_failed(cell_id: str, error: str | None, attempt: str | None = None) -> Alert:
    """A cell whose run failed: the cell, its attempt and the step's error."""
    cell = plain(cell_id, 200)
    tried = f" (attempt {plain(attempt, 200)})" if attempt and attempt != cell_id else ""
    return Alert(CELL_FAILED, f"corewarding: cell {cell} failed",
                 f"Cell {cell} failed{tried}: {plain(error or 'no error given')}")  # fmt: skip


def collapsed(flag: Mapping[str, Any]) -> Alert:
    """A collapse rule that fired on a run for the first time (a row of ``collapse_flags``)."""
    cell, run, rule = (plain(flag.get(k), 200) for k in ("cell_id", "run_id", "rule"))
    return Alert(COLLAPSE, f"corewarding: {cell} collapsed ({rule})",
                 f"Run {run} of cell {cell}: collapse rule {rule} fired at step {plain(flag.get('step'), 20)}: "
                 f"{plain(flag.get('detail'))}")  # fmt: skip


def claim_changed(change: Mapping[str, Any]) -> Alert:
    """A claim whose verdict changed (a ``claim_history.VerdictChange``)."""
    claim, after = plain(change.get("claim_id"), 200), plain(change.get("after"), 40)
    interval = f"{_number(change.get('effect'))} [{_number(change.get('low'))}, {_number(change.get('high'))}]"
    note = plain(change.get("note") or "")
    body = (f"Claim {claim} ({plain(change.get('table'), 200)}): {plain(change.get('text'))}\n"
            f"Verdict: {plain(change.get('before'), 40)} -> {after} (checker {plain(change.get('checker'), 40)}); "
            f"effect {interval}" + (f"; {note}" if note else ""))  # fmt: skip
    return Alert(CLAIM_CHANGED, f"corewarding: claim {claim} now {after}", body)


# ---- sending ---------------------------------------------------------------------------------------------------------
def _sync(value: Any) -> Any:
    """A Prefect call's result: awaited when the call ran in an event loop and returned a coroutine."""
    return run_coro_as_sync(value) if inspect.iscoroutine(value) else value


def _qualified(name: str) -> str:
    """``<block-type-slug>/<name>`` of the one notification block named ``name`` on the Prefect server."""
    query = {"block_documents": {"name": {"any_": [name]}}, "include_secrets": False, "limit": 20,
             "block_schemas": {"block_capabilities": {"all_": ["notify"]}}}  # fmt: skip
    with get_client(sync_client=True) as client:
        response = client.request("POST", "/block_documents/filter", json=query)
    response.raise_for_status()
    slugs = sorted({str(doc["block_type"]["slug"]) for doc in response.json()})
    if not slugs:
        raise LookupError(f"no notification block named {name} on the Prefect server")
    if len(slugs) > 1:
        raise LookupError(f"{len(slugs)} notification blocks are named {name} ({', '.join(slugs)}): set "
                          f"alerts.block to <block-type-slug>/{name}")  # fmt: skip
    return f"{slugs[0]}/{name}"


def load_notifier(reference: str) -> NotificationBlock:
    """The notification block ``reference`` names (``<block-type-slug>/<name>``, or a name that one notification
    block has), loaded from the Prefect API; LookupError or ValueError when there is none, or TypeError when the
    block is of a type that cannot notify."""
    block = _sync(Block.load(reference if "/" in reference else _qualified(reference)))
    if not isinstance(block, NotificationBlock):
        raise TypeError(f"block {reference} is a {type(block).__name__}, not a notification block")
    return block


def _why(exc: BaseException) -> str:
    """An error as a warning may say it: its first line, no URL (a webhook's URL is its secret)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return plain(f"{type(exc).__name__}: {_URL.sub('<url>', text)}" if text else type(exc).__name__, 300)


@dataclass(frozen=True)
class Alerter:
    """Where a pipeline run's alerts go (``alerts.block``; None: nowhere) and which events send one."""

    block: str | None
    events: tuple[str, ...] = ALERT_EVENTS

    @classmethod
    def from_settings(cls, settings: PipelineSettings) -> Alerter:
        return cls(settings.alerts_block, settings.alert_events)

    def wants(self, event: str) -> bool:
        """Whether ``event`` sends a message (a block is set and the event is chosen)."""
        return bool(self.block) and event in self.events

    def send(self, alert: Alert) -> bool:
        """Send one message through the block; False (and a warning) when it is not wanted or could not be sent."""
        if not self.block or not self.wants(alert.event):
            return False
        try:
            block = load_notifier(self.block)
            with block.raise_on_failure():  # Apprise blocks otherwise drop a failed send in silence
                _sync(block.notify(alert.body, alert.subject))
        except Exception as exc:  # an alert never fails the pipeline: it is a warning
            log.warning("alert not sent through block %s (%s: %s): %s", self.block, alert.event, alert.subject,
                        _why(exc))  # fmt: skip
            return False
        log.info("alert sent through block %s: %s", self.block, alert.subject)
        return True

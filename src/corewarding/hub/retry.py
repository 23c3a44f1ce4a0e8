"""Calls to the Hub retried with backoff on transient failures only, and errors said plainly with no secret in them.

Transient: HTTP 5xx, 429 and 408, and dropped, refused or timed-out connections (httpx's network, timeout and
protocol errors). Anything else (401, 403, 404, a bad request, offline mode, a repo id or model card the client
rejects with a ValueError) fails at once with a clear message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from typing import TypeVar

import httpx
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from corewarding.hub.errors import PushError

log = logging.getLogger(__name__)

T = TypeVar("T")
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
MAX_DELAY = 60.0


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a Hub error (None for a connection error)."""
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None) if isinstance(exc, HfHubHTTPError) else None


def is_transient(exc: BaseException) -> bool:
    """Worth another try: a server error, rate limit or timeout answer, or a connection that failed."""
    if isinstance(exc, OfflineModeIsEnabled):
        return False
    if isinstance(exc, HfHubHTTPError):
        status = status_of(exc)
        return status is not None and (status in TRANSIENT_STATUS or status >= 500)
    return isinstance(exc, TRANSIENT_ERRORS)


def redact(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced (errors never echo a token, but make sure)."""
    return text.replace(secret, "***") if secret else text


def describe(exc: BaseException, secret: str | None = None) -> str:
    """One line: the status or error type, the message's first line and the server's own message; no secret."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()][:1]
    server = getattr(exc, "server_message", None)
    if server and str(server).strip() not in lines:
        lines.append(str(server).strip().replace("\n", " "))
    status = status_of(exc)
    head = f"HTTP {status}" if status is not None else type(exc).__name__
    return redact(": ".join([head, *lines]), secret)


def refusal(what: str, exc: BaseException, secret: str | None) -> PushError:
    """The error for a failure that is not retried, with what to do about the common ones."""
    status = status_of(exc)
    if isinstance(exc, OfflineModeIsEnabled):
        hint = "HF_HUB_OFFLINE is set; unset it to push"
    elif status == 401:
        hint = "the token was refused: set HF_TOKEN or run `hf auth login` with a token that can write"
    elif status == 403:
        hint = "the token may not write there: check the organisation and the token's permissions"
    elif status == 404:
        hint = "not found: check the repo id, the organisation and the revision"
    else:
        hint = ""
    message = f"{what}: {describe(exc, secret)}" + (f" ({hint})" if hint else "")
    return PushError(redact(message, secret))


def with_retries(
    what: str,
    call: Callable[[], T],
    *,
    retries: int,
    backoff: float,
    secret: str | None = None,
    retry_status: Collection[int] = (),
) -> T:
    """``call()``, tried up to ``retries`` more times on a transient failure, waiting ``backoff * 2**k`` seconds.

    ``retry_status``: more HTTP statuses worth another try for this call (412 for a commit on a parent that moved).
    Raises PushError naming ``what`` when the failure is not transient or the tries run out.
    """
    attempt = 0
    while True:
        try:
            return call()
        except (HfHubHTTPError, httpx.HTTPError, OfflineModeIsEnabled, ValueError) as exc:  # ValueError: bad input
            if not (is_transient(exc) or status_of(exc) in retry_status):
                raise refusal(what, exc, secret) from None
            if attempt >= retries:
                message = f"{what}: gave up after {attempt + 1} tries; last error {describe(exc, secret)}"
                raise PushError(message) from None
            delay = min(MAX_DELAY, backoff * 2**attempt)
            attempt += 1
            log.warning("%s: %s; retry %d of %d in %.2g s", what, describe(exc, secret), attempt, retries, delay)
            time.sleep(delay)

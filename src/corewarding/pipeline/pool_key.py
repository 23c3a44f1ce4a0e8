"""The work pool's signing key: a parent signs each cell job with it, a worker runs only jobs it can verify.

Holding the Prefect API's auth string lets anyone create flow runs with any parameters; the pool key does not travel
through Prefect. It is made once (``corewarding pool-key create FILE``, a file of mode 0600) and copied to the
machines that submit cells and to every worker, which read it from ``$COREWARDING_POOL_KEY_FILE`` (or the key itself
from ``$COREWARDING_POOL_KEY``). A key file may hold several keys, one per line: jobs are signed with the first and
verified against each, so a new key can be given out before the old one is dropped (docs/work-pool.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

from corewarding.errors import ExpectedError

KEY_VARIABLE = "COREWARDING_POOL_KEY"
KEY_FILE_VARIABLE = "COREWARDING_POOL_KEY_FILE"
DEFAULT_KEY_FILE = "~/.config/corewarding/pool.key"
SIGNATURE_FIELD = "signature"
_DOMAIN = b"corewarding cell job v1\n"  # a signature of a cell job is never valid for anything else
_KEY = re.compile(r"[0-9a-f]{64}")
_HOW = (
    f"create one with `corewarding pool-key create {DEFAULT_KEY_FILE}`, copy that file (mode 0600) to every "
    f"worker and every machine that submits cells, and export {KEY_FILE_VARIABLE}=<its path> "
    "(docs/work-pool.md#the-pool-key)"
)


class PoolKeyError(ExpectedError, RuntimeError):
    """No usable pool key; the message says how to make one (never the key)."""


def create_key(path: Path) -> str:
    """Write a new random key to ``path`` (mode 0600, never over an existing file); returns its id."""
    path = path.expanduser()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise PoolKeyError(f"{path} exists; a pool key is never overwritten (remove it first to replace it)") from None
    with os.fdopen(fd, "w") as out:
        out.write(key + "\n")
    return key_id(bytes.fromhex(key))


def key_id(key: bytes) -> str:
    """A short name of a key that does not reveal it (shown in logs and errors)."""
    return hashlib.sha256(b"corewarding pool key id\n" + key).hexdigest()[:12]


def load_keys() -> list[bytes]:
    """The pool keys of this machine, the signing key first; PoolKeyError when there is none or it is not safe."""
    inline = os.environ.get(KEY_VARIABLE, "").strip()
    if inline:
        return [_parse(inline, f"${KEY_VARIABLE}")]
    configured = os.environ.get(KEY_FILE_VARIABLE, "").strip()
    if not configured:
        raise PoolKeyError(f"no pool key: neither {KEY_FILE_VARIABLE} nor {KEY_VARIABLE} is set; {_HOW}")
    return _read_key_file(Path(configured).expanduser())


def _read_key_file(path: Path) -> list[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise PoolKeyError(f"pool key file {path} does not exist; {_HOW}") from None
    except OSError as exc:  # a link (ELOOP) or no permission
        raise PoolKeyError(f"pool key file {path} cannot be opened ({exc.strerror}); it must be a plain file") from None
    with os.fdopen(fd) as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise PoolKeyError(f"pool key file {path} is not a regular file")
        if info.st_mode & 0o077:
            raise PoolKeyError(f"pool key file {path} can be read by others (mode {info.st_mode & 0o777:o}); "
                               f"chmod 600 {path}")  # fmt: skip
        if info.st_uid != os.getuid():
            raise PoolKeyError(f"pool key file {path} belongs to another user")
        lines = [line.strip() for line in handle.read(64 * 1024).splitlines() if line.strip()]
    if not lines:
        raise PoolKeyError(f"pool key file {path} is empty; {_HOW}")
    return [_parse(line, f"{path} line {n}") for n, line in enumerate(lines, 1)]


def _parse(text: str, where: str) -> bytes:
    if not _KEY.fullmatch(text):
        raise PoolKeyError(f"{where}: not a pool key (64 lowercase hex digits, as `corewarding pool-key create` "
                           "writes)")  # fmt: skip
    return bytes.fromhex(text)


def _message(job: dict[str, Any]) -> bytes:
    """The signed bytes: every field of the job but the signature, as canonical JSON."""
    fields = {k: v for k, v in job.items() if k != SIGNATURE_FIELD}
    return _DOMAIN + json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(job: dict[str, Any], key: bytes) -> str:
    """The HMAC-SHA256 of a job's fields (``CellJob.to_parameters()`` with its cell id) under ``key``."""
    return hmac.new(key, _message(job), hashlib.sha256).hexdigest()


def verify(job: dict[str, Any], keys: list[bytes]) -> bool:
    """Whether the job's ``signature`` field is its signature under one of ``keys``."""
    given = job.get(SIGNATURE_FIELD)
    if not isinstance(given, str) or not given or not given.isascii():
        return False
    return any(hmac.compare_digest(sign(job, key), given) for key in keys)

"""Atomic writes (temporary file + rename, so a crash never leaves half a file) and checked reads."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corewarding.errors import ExpectedError

if TYPE_CHECKING:  # pandas and pyarrow load on first parquet use: small commands (rewards score) never need them
    import pandas as pd
    import pyarrow as pa


class SourceError(ExpectedError, ValueError):
    """Input that cannot be used; the message names the file (and the line, row or column)."""


@contextmanager
def atomic_path(path: Path, durable: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on failure it is removed.

    ``durable``: the new content and the rename are flushed to disk (fsync) before returning, for small records
    that must survive a power cut or a kill right after (dvc.lock, params.yaml).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    umask = os.umask(0)
    os.umask(umask)
    try:
        yield tmp
        tmp.chmod(0o666 & ~umask)  # mkstemp makes 0600; give the file the mode a plain open() would
        if durable:
            _fsync(tmp)
        os.replace(tmp, path)
        if durable:
            _fsync(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    """Flush a file's (or a folder's: its entries) content to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
_FULL_DISK_TEXT = ("no space left", "file too large", "disk quota")  # as libraries word them (DuckDB, safetensors)


def disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised while handling, says the disk (or the file-size limit) is full."""
    while exc is not None:
        if getattr(exc, "errno", None) in FULL_DISK_ERRNOS or any(t in str(exc).lower() for t in _FULL_DISK_TEXT):
            return True
        exc = exc.__context__
    return False


def open_lock_file(path: Path, error: type[Exception]) -> int:
    """A read-write descriptor of the lock file ``path``, created 0600 if absent. A link there is never followed and
    the file is not truncated by the open: only a regular file with one name is returned (else ``error``, naming the
    path), so a link planted as the lock cannot make its holder truncate or write another file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise error(f"{path}: the lock file is a link; remove it (a lock is never opened through a link)") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(info.st_mode) else f"a hard link ({info.st_nlink} names)"
        raise error(f"{path}: the lock file is {what}; remove it (a lock is only ever a file of its own)")
    return fd


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def write_parquet_atomic(frame: pd.DataFrame | list[dict[str, Any]], path: Path) -> None:
    """Write a frame (or rows) to ``path`` as parquet, atomically.

    Text columns are written as ``string`` (not pandas 3's ``large_string``), the type of the reference files.
    """
    import pandas as pd  # pandas: imported when used
    import pyarrow as pa  # pyarrow: imported when used
    import pyarrow.parquet as pq  # pyarrow: imported when used

    frame = frame if isinstance(frame, pd.DataFrame) else pd.DataFrame(frame)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    fields = [pa.field(f.name, pa.string()) if f.type == pa.large_string() else f for f in table.schema]
    table = table.cast(pa.schema(fields, metadata=table.schema.metadata))
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def write_table_atomic(rows: list[dict[str, Any]], schema: pa.Schema, path: Path) -> None:
    """Write ``rows`` with ``schema`` to ``path`` as parquet, atomically (the columns and types are the schema's)."""
    import pyarrow as pa  # pyarrow: imported when used
    import pyarrow.parquet as pq  # pyarrow: imported when used

    table = pa.Table.from_pylist(rows, schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def write_json_atomic(obj: Any, path: Path) -> None:
    """Write ``obj`` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")


def write_jsonl_atomic(rows: list[dict[str, Any]], path: Path) -> None:
    """Write one JSON object per line, atomically."""
    with atomic_path(path) as tmp:
        text = "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in rows)
        tmp.write_text(text, encoding="utf-8")


def read_text(path: Path) -> str:
    """A file's UTF-8 text; an unreadable or non-UTF-8 file is an error naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from exc


_SURROGATE = re.compile("[\ud800-\udfff]")  # json.loads joins escaped pairs, so any left is a lone one
# A parsed value can hold a surrogate only if its text holds one or a \uD800-\uDFFF escape: no match, no walk needed.
_MAY_HOLD_SURROGATE = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F]")


class _NonFinite(Exception):
    """Raised by the finite decoder's number hook; the caller then walks the value to name the key."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # NaN, ±Infinity, or a literal too large for a float (1e999)
        raise _NonFinite(text)
    return value


_FINITE_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_constant=_finite_float)
_DECODER = json.JSONDecoder()


def _may_hold_surrogate(text: str) -> bool:
    """Cheap test first (a substring search, an ASCII check), the regex only when one of them fails."""
    return ("\\u" in text or not text.isascii()) and _MAY_HOLD_SURROGATE.search(text) is not None


def _unwritable(value: Any, finite: bool) -> str | None:
    """The first key path holding a lone surrogate (or, with ``finite``, NaN/±Infinity), and what is wrong there."""
    stack: list[tuple[str, Any]] = [("", value)]  # iterative: a value may nest as deep as the parser allowed
    while stack:
        where, item = stack.pop()
        if isinstance(item, str) and _SURROGATE.search(item):
            return f"key {where or '(top level)'!r}: a lone surrogate, which no UTF-8 file can hold"
        if finite and isinstance(item, float) and not math.isfinite(item):
            return f"key {where or '(top level)'!r}: {item} is not a finite number"
        if isinstance(item, dict):
            for key in item:
                if _SURROGATE.search(key):
                    return f"key {key!r}: a lone surrogate, which no UTF-8 file can hold"
            stack.extend((f"{where}.{k}" if where else k, v) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(item))))
    return None


def parse_json(text: str, path: Path | str, line: int | None = None, *, finite: bool = False) -> Any:
    """Parse the JSON of ``path`` (its line ``line``, when given); every problem is a SourceError naming file:line.

    Besides bad syntax: nesting deeper than the parser's recursion limit, an integer longer than Python's digit limit,
    a lone surrogate escape (no UTF-8 output can hold it) and, with ``finite``, NaN or ±Infinity (naming the key).
    """
    try:
        try:
            hooked = finite and text[:1] != "\ufeff"  # a BOM: json.loads names it
            value = _FINITE_DECODER.decode(text) if hooked else json.loads(text)
        except _NonFinite:  # parse again without the hook; the walk below names the key
            value, walk = json.loads(text), True
        else:  # the walk costs more than the parse: skip it when it cannot find anything
            walk = _may_hold_surrogate(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}:{line or exc.lineno}: not valid JSON ({exc.msg})") from exc
    except RecursionError:
        raise SourceError(f"{_where(path, line)}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:  # int(): more digits than sys.get_int_max_str_digits()
        limit = sys.get_int_max_str_digits()
        raise SourceError(f"{_where(path, line)}: not valid JSON (an integer longer than {limit} digits)") from exc
    problem = _unwritable(value, finite) if walk else None
    if problem:
        raise SourceError(f"{_where(path, line)}: {problem}")
    return value


def _where(path: Path | str, line: int | None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def iter_json_lines(
    path: Path, *, finite: bool = False, text: str | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; a line that is not a usable JSON object is an error naming it.

    ``text``, when given, is the file's content already read (``path`` then only names it in messages).
    """
    text = read_text(path) if text is None else text
    # split on "\n" only: JSON strings may hold U+2028 and the like, which str.splitlines() breaks on
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        value = parse_json(line, path, number, finite=finite)
        if not isinstance(value, dict):
            raise SourceError(f"{path}:{number}: expected a JSON object, got {type(value).__name__}")
        yield number, value


def plain_json_lines(text: str, *, finite: bool = False) -> list[dict[str, Any]] | None:
    """The objects of all non-blank lines of ``text`` when none needs a closer look; otherwise None.

    The bulk fast path of :func:`iter_json_lines` (which a caller then runs to name the line at fault): None when
    the text may hold a lone surrogate, or a line fails to parse as it would there (bad JSON, deep nesting, a huge
    integer, with ``finite`` NaN/±Infinity), or is not an object. The surrogate test runs once on the whole text.

    >>> plain_json_lines('{"a": 1}\\n\\n{"b": [2]}\\n')
    [{'a': 1}, {'b': [2]}]
    >>> [plain_json_lines(t, finite=True) for t in ('[1]', '{"a": NaN}', '{"a": "\\\\udc00"}', '{"a": 1')]
    [None, None, None, None]
    """
    if _may_hold_surrogate(text):
        return None
    decode = _FINITE_DECODER.decode if finite else _DECODER.decode
    try:  # split on "\n" only, as iter_json_lines
        values = [decode(line) for line in text.split("\n") if line.strip()]
    except (ValueError, RecursionError, _NonFinite):
        return None
    return values if set(map(type, values)) <= {dict} else None


def read_json_lines(path: Path, *, finite: bool = False) -> list[dict[str, Any]]:
    """Read JSON lines; a line that is not a JSON object is an error naming ``file:line``."""
    return [row for _, row in iter_json_lines(path, finite=finite)]

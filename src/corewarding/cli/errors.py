"""What the command line reports as one ``error: ...`` line and exit 2, instead of a traceback: a bad config value, a
malformed input file, a path that cannot be used, a busy run or store, credentials the Prefect server refuses."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from corewarding.errors import ExpectedError

# Our own one-line errors derive from ExpectedError (corewarding/errors.py, no imports), wherever they are defined.
# Hydra's and OmegaConf's are named by module and class: looked up among the loaded modules when an error arrives,
# never imported (an error whose class's module is not loaded cannot have been raised), so that the command line starts
# without Hydra (issue 45). FileNotFoundError is one line too.
THIRD_PARTY_NAMES = (
    ("hydra.errors", "HydraException"),
    ("omegaconf.errors", "OmegaConfBaseException"),
)
PATH_ERRNOS = (errno.ENAMETOOLONG, errno.EACCES, errno.EROFS, errno.ENOTDIR, errno.EISDIR)


def run_reporting_errors(command: Callable[[], int]) -> int:
    """``command()``'s exit code; a known error is one line on stderr and exit 2."""
    try:
        return int(command())
    except one_line_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyError as exc:  # an unknown matrix, cell or config option; the message lists the known ones
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`corewarding matrix list | head`): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit-time flush cannot fail again
        return 0
    except OSError as exc:  # a path the user gave that cannot be used: too long, read-only, a folder, no permission
        if exc.errno not in PATH_ERRNOS or exc.filename is None:
            raise
        print(f"error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except Exception as exc:  # only the Prefect API's refusal of the credentials; anything else goes on up
        line = refused_credentials(exc)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2


def one_line_errors() -> tuple[type[BaseException], ...]:
    """ExpectedError, FileNotFoundError and the classes of THIRD_PARTY_NAMES whose modules are loaded."""
    loaded = (getattr(sys.modules.get(module), name, None) for module, name in THIRD_PARTY_NAMES)
    third_party = (c for c in loaded if isinstance(c, type) and issubclass(c, BaseException))
    return (ExpectedError, FileNotFoundError, *third_party)


def refused_credentials(exc: BaseException) -> str | None:
    """One line for a 401 from the Prefect API (Prefect's client raises PrefectHTTPStatusError, an
    httpx.HTTPStatusError), naming the server and the setting to fix, never the credentials; None for anything else.

    Prefect is looked up among the loaded modules, not imported: an error of its client means it is loaded already.
    """
    exceptions = sys.modules.get("prefect.exceptions")
    if exceptions is None or not isinstance(exc, exceptions.PrefectHTTPStatusError):
        return None
    if exc.response.status_code != 401:
        return None
    settings = sys.modules.get("prefect.settings")
    url = str(settings.PREFECT_API_URL.value() or "") if settings is not None else ""
    if not url:  # the request's URL up to the API's root
        head, api, _ = str(exc.request.url).partition("/api/")
        url = head + "/api" if api else str(exc.request.url)
    parts = urlsplit(url)
    server = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))  # no user:password of a URL
    return (f"the Prefect server at {server} refused the credentials (HTTP 401): set PREFECT_API_AUTH_STRING to the "
            "server's PREFECT_SERVER_API_AUTH_STRING")  # fmt: skip

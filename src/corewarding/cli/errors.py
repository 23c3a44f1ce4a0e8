"""What the command line reports as one ``error: ...`` line and exit 2, instead of a traceback: a bad config value, a
malformed input file, a path that cannot be used, a busy run or store."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from corewarding.config import ConfigError
from corewarding.files import SourceError
from corewarding.pipeline.dvc import DvcError
from corewarding.pipeline.store.transport import StoreError
from corewarding.runtime.pool_checks import PoolError
from corewarding.training.errors import CheckpointError, RunInUseError, RunWriteError

ONE_LINE = (ConfigError, SourceError, HydraException, OmegaConfBaseException, FileNotFoundError, DvcError,
            CheckpointError, RunInUseError, RunWriteError, PoolError, StoreError)  # fmt: skip
PATH_ERRNOS = (errno.ENAMETOOLONG, errno.EACCES, errno.EROFS, errno.ENOTDIR, errno.EISDIR)


def run_reporting_errors(command: Callable[[], int]) -> int:
    """``command()``'s exit code; a known error is one line on stderr and exit 2."""
    try:
        return int(command())
    except ONE_LINE as exc:
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

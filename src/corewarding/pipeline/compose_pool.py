"""Compose many cells' configs at once: in forked worker processes when there are enough cells and cores, else one
after another. A Hydra composition costs about 0.06 s of CPU (``compose_config``); a 72-cell matrix spent most of the
dry run's CPU seconds composing, so the cells are shared among processes. Each config comes back as
``compose_config`` makes it (pickled: its values and flags); an error is raised from this process, where it reads as
one line.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from corewarding.config import compose_config

if TYPE_CHECKING:  # multiprocessing's modules: imported when a pool starts (the command line starts without them)
    from concurrent.futures import Executor

log = logging.getLogger(__name__)

CELLS_PER_WORKER = 8  # fewer cells per process than this: starting the process costs more than it saves


def available_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def workers_for(cells: int, cores: int | None = None) -> int:
    """Processes worth starting for ``cells`` compositions: one per CELLS_PER_WORKER cells, at most one per core.

    >>> workers_for(72, cores=2), workers_for(72, cores=16), workers_for(3, cores=16)
    (2, 9, 1)
    """
    return max(1, min(available_cores() if cores is None else cores, cells // CELLS_PER_WORKER))


def can_fork() -> bool:
    """Whether forking is safe here: the platform has it and this process runs one thread (a forked child would hold
    another thread's locks as they were)."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def _pool(workers: int) -> Executor:
    """``workers`` forked processes, each starting with this process's imports (Hydra's among them)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


def compose_all(overrides: Sequence[Sequence[str]], workers: int = 1) -> list[DictConfig]:
    """``compose_config(o)`` for each override list, in order, on up to ``workers`` processes. The first is composed
    here (a bad override common to every cell fails at once, as one line); if a worker fails, the rest are composed
    here again, so a cell's own error is raised as ``compose_config`` raises it."""
    lists = [list(o) for o in overrides]
    if workers < 2 or len(lists) < 3 or not can_fork():
        return [compose_config(o) for o in lists]
    first = compose_config(lists[0])
    rest = lists[1:]
    try:
        with _pool(workers) as pool:
            composed = list(pool.map(compose_config, rest, chunksize=math.ceil(len(rest) / workers)))
    except Exception as exc:  # a cell's own error, or a pool that could not start: again here, one at a time
        log.debug("composing in %d processes failed (%s); composing here", workers, exc)
        composed = [compose_config(o) for o in rest]
    return [first, *composed]

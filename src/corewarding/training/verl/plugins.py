"""Register corewarding's reward managers with verl. verl imports this module itself (entry point ``verl.plugins``,
or ``VERL_USE_EXTERNAL_MODULES``) at ``import verl``, so the names resolve in the driver and in every Ray worker.

Registered: the batch managers ``corewarding_<method>`` (``verl.workers.reward_manager``) and the per-sample
reward-loop manager ``corewarding_gt`` (``verl.experimental.reward_loop.reward_manager``). No advantage estimator is
registered: verl's own ``grpo`` groups by uid, and every method keeps its groups apart by uid (Co-rewarding-I's
two views carry different uids and vote across a shared pair key instead).

verl 0.9.1 (``verl/__init__.py``) loads each entry point under ``except Exception`` and logs a failure at DEBUG, so
a broken plug-in would surface only later, as an unknown reward manager. An import failure here is therefore
re-raised as ``PluginImportError``, a ``BaseException`` that verl's handler does not catch: ``import verl`` fails
at once, naming this module and the import that broke. Nothing here needs a GPU package (vllm, flash-attn).
"""

from __future__ import annotations

import logging


class PluginImportError(BaseException):
    """corewarding's verl plug-in could not be imported (a ``BaseException`` so verl's entry-point loop lets it
    through)."""


def _worker_logging() -> None:
    """In a Ray worker, logging is Ray's or verl's (a root handler at WARNING), so corewarding's INFO lines (a
    resume's fingerprints, a teacher restored) were dropped; Ray forwards a worker's stderr to the driver's log. The
    package's loggers speak at INFO there, unless this process chose INFO or DEBUG itself (``corewarding -v``)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    package = logging.getLogger("corewarding")
    if package.level == logging.NOTSET and root.getEffectiveLevel() > logging.INFO:
        package.setLevel(logging.INFO)


_worker_logging()
try:
    from corewarding.training.verl import cpu_platform

    if cpu_platform.is_cpu_run():  # make verl-e2e: every process of the run selects the CPU platform first
        cpu_platform.activate()

    from verl.experimental.reward_loop.reward_manager import register as register_loop_manager
    from verl.workers.reward_manager import register as register_batch_manager

    from corewarding.training.verl.rewards import GT_LOOP_MANAGER, GroundTruthRewardLoopManager, registered_managers

    BATCH_MANAGERS = registered_managers()
    for _name, _cls in BATCH_MANAGERS.items():
        register_batch_manager(_name)(_cls)
    register_loop_manager(GT_LOOP_MANAGER)(GroundTruthRewardLoopManager)
except Exception as exc:
    raise PluginImportError(f"{__name__}: corewarding's verl plug-in failed to import: {exc!r}") from exc

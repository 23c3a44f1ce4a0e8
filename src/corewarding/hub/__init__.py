"""Publishing to the Hugging Face Hub: a run's checkpoint (weights, model card with its evaluation, training config,
provenance) or a rephrased training set as a folder built byte for byte reproducibly, and an idempotent push.

Modules: ``folder`` (atomic, fingerprinted folders), ``run_source`` (reading a run folder), ``evals`` (the evaluated
metrics of a step), ``model_card`` / ``dataset_card`` (the cards), ``model_folder`` / ``dataset_folder`` (what is
uploaded), ``push`` (create repo/branch, upload, retries), ``publish`` (build + push + what was pushed), ``cli``.
The names below are importable from the package itself; they load on first use, so ``corewarding --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corewarding.hub.dataset_folder import build_dataset_folder, dataset_repo_id
    from corewarding.hub.errors import PublishError, PublishInputError, PushError
    from corewarding.hub.folder import PublishFolder
    from corewarding.hub.model_folder import build_model_folder
    from corewarding.hub.publish import PublishResult, publish_dataset, publish_run
    from corewarding.hub.push import PushResult, push_folder

_EXPORTS = {
    "build_dataset_folder": "dataset_folder",
    "dataset_repo_id": "dataset_folder",
    "PublishError": "errors",
    "PublishInputError": "errors",
    "PushError": "errors",
    "PublishFolder": "folder",
    "build_model_folder": "model_folder",
    "PublishResult": "publish",
    "publish_dataset": "publish",
    "publish_run": "publish",
    "PushResult": "push",
    "push_folder": "push",
}
__all__ = [
    "PublishError",
    "PublishFolder",
    "PublishInputError",
    "PublishResult",
    "PushError",
    "PushResult",
    "build_dataset_folder",
    "build_model_folder",
    "dataset_repo_id",
    "publish_dataset",
    "publish_run",
    "push_folder",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)

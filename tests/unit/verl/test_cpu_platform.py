"""The CPU run's plumbing that needs no verl process: the translated config's process counts, the fix run after a
module's import (vLLM's fixes cost nothing where vLLM is never imported), and the reserved rendezvous port."""

from __future__ import annotations

import importlib
import socket
import sys
from pathlib import Path

import pytest

from corewarding.config import compose_config
from corewarding.training.verl import cpu_platform
from corewarding.training.verl.verl_config import to_verl_config


def test_the_cpu_translation_starts_one_worker_per_role() -> None:
    cfg = compose_config(["backend=verl", "experiment=tiny_cpu", "base_model=tiny-qwen3", "verl.platform=cpu"])
    verl_cfg = to_verl_config(cfg, "runs/x")
    assert verl_cfg.reward.num_workers == 1  # verl's default starts 8 reward-loop processes
    assert verl_cfg.actor_rollout_ref.rollout.agent.num_workers == 1
    assert verl_cfg.data.dataloader_num_workers == 0
    gpu = to_verl_config(compose_config(["backend=verl", "base_model=qwen3-8b-base", "dataset=math"]), "runs/x")
    assert gpu.reward.num_workers == 8  # the GPU cells keep verl's default


def test_the_cpu_translation_takes_the_gpu_cells_model_branch() -> None:
    """Remove-padding (verl's packed branch, which the GPU image's flash_attention_2 cells take), gradient
    checkpointing and sdpa, the kernel that runs on CPU (issue 41): experiment=tiny_cpu asks for packed sdpa, so the CPU
    run exercises the packing the cells run (``test_packed_probe.py`` checks the packed outputs), whatever imports."""
    tiny = ["backend=verl", "experiment=tiny_cpu", "base_model=tiny-qwen3"]
    cpu = to_verl_config(compose_config([*tiny, "verl.platform=cpu"]), "runs/x").actor_rollout_ref.model
    gpu = to_verl_config(compose_config(tiny), "runs/x", flash_attn=True).actor_rollout_ref.model
    for model in (cpu, gpu):
        assert model.use_remove_padding is True and model.enable_gradient_checkpointing is True
        assert model.override_config == {"attn_implementation": "sdpa"}
    cell = compose_config(["backend=verl", "base_model=qwen3-8b-base", "dataset=math"])
    image = to_verl_config(cell, "runs/x", flash_attn=True).actor_rollout_ref.model
    assert image.use_remove_padding is True and image.override_config == {"attn_implementation": "flash_attention_2"}


def test_a_fix_runs_after_its_module_is_imported_and_only_then(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "late_module.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    seen: list[int] = []

    def fix() -> None:
        seen.append(sys.modules["late_module"].VALUE)  # the module's own code has run
        sys.modules["late_module"].VALUE = 2

    cpu_platform._after_import({"late_module": fix})
    assert seen == [] and "late_module" not in sys.modules  # nothing imported for the fix's sake
    try:
        module = importlib.import_module("late_module")
        assert (seen, module.VALUE) == ([1], 2)
        assert "VALUE = 1" in module.__loader__.get_source("late_module")  # the real loader still answers
        cpu_platform._after_import({"late_module": fix})  # imported already: the fix runs at once
        assert seen == [1, 2]
    finally:
        sys.modules.pop("late_module", None)


def test_a_reserved_port_is_not_free_for_others_but_takes_the_stores_listener() -> None:
    holder = cpu_platform.loopback_socket(0)  # the vLLM port's reservation
    port = holder.getsockname()[1]
    with holder, socket.socket() as other:
        with pytest.raises(OSError):  # a plain bind (vLLM's own probe, any other service) finds it taken
            other.bind(("127.0.0.1", port))
        with cpu_platform.loopback_socket(port) as store:  # as the loopback TCPStore patch binds it
            store.listen(1)
            with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
                peer, _ = store.accept()
                with peer:
                    client.sendall(b"ok")
                    assert peer.recv(2) == b"ok"

"""The GPU image pins CUDA, torch, vllm, verl and flash-attn consistently with pyproject.toml's extras and with
what verl 0.9.1 itself requires for them (read from the installed verl's package metadata)."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import requires
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]


def dockerfile_args() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text()
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.MULTILINE))


def extra_requirements(extra: str) -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {Requirement(r).name: Requirement(r) for r in project["optional-dependencies"][extra]}


def verl_pins(extra: str) -> dict[str, str]:
    """``name -> exact version`` verl declares for one of its extras."""
    pins = {}
    for text in requires("verl") or []:
        req = Requirement(text)
        if req.marker is not None and req.marker.evaluate({"extra": extra}):
            (spec,) = list(req.specifier) or [None]
            if spec is not None and spec.operator == "==":
                pins[req.name] = spec.version
    return pins


@pytest.fixture(scope="module")
def args() -> dict[str, str]:
    return dockerfile_args()


def test_verl_and_vllm_match_the_extras(args: dict[str, str]) -> None:
    rl, gpu = extra_requirements("rl"), extra_requirements("gpu")
    assert rl["verl"].specifier == SpecifierSet(f"=={args['VERL_VERSION']}")  # the CPU-side plug-ins' verl
    assert args["VERL_VERSION"] in gpu["verl"].specifier and gpu["verl"].extras == {"vllm"}
    assert args["VLLM_VERSION"] in gpu["vllm"].specifier


def test_torch_vllm_and_transformers_are_verls_own_pins(args: dict[str, str]) -> None:
    pins = verl_pins("vllm")
    assert pins["torch"] == args["TORCH_VERSION"]
    assert pins["torchvision"] == args["TORCHVISION_VERSION"]
    assert pins["torchaudio"] == args["TORCHAUDIO_VERSION"]
    assert pins["vllm"] == args["VLLM_VERSION"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    transformers = next(Requirement(r) for r in project["dependencies"] if r.startswith("transformers"))
    assert pins["transformers"] in transformers.specifier  # the image's transformers satisfies our own pin


def test_flash_attn_and_cuda_match_verls_build_for_this_torch(args: dict[str, str]) -> None:
    cuda = "".join(args["CUDA_VERSION"].split(".")[:2])  # 13.0.0 -> 130
    torch = "".join(args["TORCH_VERSION"].split(".")[:2])  # 2.11.0 -> 211
    extra = f"flash-attn-cu{cuda}torch{torch}"
    assert verl_pins(extra).get("flash-attn") == args["FLASH_ATTN_VERSION"], extra
    assert args["TORCH_CUDA"] == f"cu{cuda}"


def test_the_image_installs_the_project_and_defaults_to_help() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert 'pip install -e ".[gpu]"' in text
    assert re.search(r'^CMD \["corewarding", "--help"\]$', text, flags=re.MULTILINE)
    assert re.search(r"^FROM nvidia/cuda:\$\{CUDA_VERSION\}-devel-", text, flags=re.MULTILINE)


def test_the_gpu_flash_extra_pins_the_images_flash_attn(args: dict[str, str]) -> None:
    assert extra_requirements("gpu-flash")["flash-attn"].specifier == SpecifierSet(f"=={args['FLASH_ATTN_VERSION']}")


def test_no_instruction_carries_a_trailing_comment() -> None:
    """Docker has no inline comments: `COPY a b  # why` copies a file named '#' too (and fails the build)."""
    text = (ROOT / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if re.match(r"^(COPY|ADD|ENV|ARG|WORKDIR)\b", line)]
    assert lines and not [line for line in lines if " #" in line]

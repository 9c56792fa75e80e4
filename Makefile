# The two commands of the README. Both set up a virtualenv from the pinned constraints first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUNNER ?= local

# `make test` runs the suite on this many pytest-xdist workers (decision 48): more than the
# cores, as most of the slow tiers' time is waiting on clocks and child processes.
TEST_WORKERS ?= 4

# Python caches each module's bytecode beside it, unless PYTHONDONTWRITEBYTECODE is set, as it
# is on some machines of this kind: then every process (each `seqline` a test runs, each fork
# server and worker) compiled seqline's sources again, ~0.16 CPU-s a process and ~9 % of the
# suite's CPU. The commands here let Python cache it, as it does by default.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test check suite unit setup system-packages airflow-venv postgres chromium lint \
	typecheck docs docs-outputs screenshots

# 1. Set up and run the example pipeline end to end, then say how to use the CLI installed.
demo: setup
	$(BIN)/seqline run data/seattle_weather/pipeline.yaml --runner $(RUNNER)
	@echo
	@echo "seqline is installed in $(VENV). Put it on your PATH with:  . $(VENV)/bin/activate"
	@echo "then try:  seqline runs list   (or, without activating:  $(BIN)/seqline runs list)"

# 2. Set up and run the test suite (all tiers: unit, integration, e2e), as CI does. The
# install, the Debian packages and Airflow's virtualenv go side by side (their output held
# until each ends), then lint and types beside the suite: mypy is one process on one core for
# half a minute on a fresh clone, which the suite's start (pytest collecting, servers coming
# up) leaves room for; run before it, it added that half minute to the command. Both are
# quiet on success there, so that no line of theirs lands among the suite's dots. Any step
# that fails fails the command. The docs site is built, strict, by the suite's
# tests/docs/test_site.py (which also reads the pages it makes): building it here as well
# cost 30 CPU-seconds for nothing on a 2-core machine whose suite is bound by CPU.
test:
	$(MAKE) --no-print-directory -j3 --output-sync=target setup system-packages airflow-venv
	$(MAKE) --no-print-directory -j3 lint typecheck suite QUIET_CHECKS=1

# Every tier on TEST_WORKERS workers. Tests are handed out longest first, and the tests that
# share an expensive fixture go to one worker (tests/conftest.py: SHARED, the scheduler).
suite: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --junitxml=build/junit.xml
	@$(BIN)/python tests/tier_times.py build/junit.xml

# The inner loop, in well under 2 minutes: lint, types and the unit tests side by side.
check:
	$(MAKE) --no-print-directory setup
	$(MAKE) --no-print-directory -j3 --output-sync=target lint typecheck unit

unit: setup
	$(BIN)/python -m pytest -q tests/unit

# The Airflow export test's own virtualenv (build/airflow-venv), with the system's Python.
airflow-venv:
	$(PYTHON) tests/slow/airflow_venv.py

# QUIET_CHECKS=1: lint and typecheck print only what they find (as `make test` runs them).
lint: setup
	$(BIN)/ruff check $(if $(QUIET_CHECKS),--quiet) .

# mypy finds modules by folder, and the editable install's import hook is invisible to it:
# it reads the package through links named as installed, so imports between modules resolve.
# Its cache lives outside the links' folder, so that a second run takes seconds.
typecheck: setup
	rm -rf build/typecheck && mkdir -p build/typecheck/seqline
	ln -s $(CURDIR)/orchestration/public/__init__.py build/typecheck/seqline/__init__.py
	ln -s $(CURDIR)/pipeline $(CURDIR)/components $(CURDIR)/orchestration build/typecheck/seqline/
	cd build/typecheck && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml \
	  --cache-dir $(CURDIR)/build/mypy-cache $(if $(QUIET_CHECKS),--no-error-summary) -p seqline

# The docs site (mkdocs.yml, docs/) into build/site; its references are generated from the code.
docs: setup
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

# Rewrite the outputs the docs show (docs/snippets/) from a real run of every example; review the diff.
docs-outputs: setup
	SEQLINE_DOCS_OUTPUTS=write $(BIN)/python -m pytest -q -p no:cacheprovider tests/docs/test_examples.py -k sybil

# Renew the README's and the docs' dashboard pictures (docs/img/) from real runs of the demo,
# on purpose; review them before committing. Every page at 1400, 800 and 400 px, light and
# dark, lands in build/screenshots/ (SEQLINE_SCREENSHOTS: the suite renders and checks the
# same pages without writing them).
screenshots: setup chromium
	SEQLINE_DOCS_IMAGES=docs/img SEQLINE_SCREENSHOTS=1 $(BIN)/python -m pytest -q \
	  -p no:cacheprovider tests/dashboard/test_browser.py tests/dashboard/test_logs_browser.py \
	  -k "screenshots or images"

setup: $(VENV)/.installed

# The run store's tests start a real PostgreSQL server; the dashboard's browser tests drive
# Debian's Chromium through Playwright (whose own browser download is unreachable here).
# system-packages installs whichever is missing, with one `apt-get update`. Never fails the
# build: without them those tests skip, saying why.
INITDB := /usr/lib/postgresql/15/bin/initdb
CHROMIUM := /usr/lib/chromium/chromium
system-packages:
	@$(call apt_install,$(if $(wildcard $(INITDB)),,postgresql) \
	  $(if $(wildcard $(CHROMIUM)),,chromium) $(if $(wildcard /usr/bin/strace),,strace))

postgres:
	@$(call apt_install,$(if $(wildcard $(INITDB)),,postgresql))

chromium:
	@$(call apt_install,$(if $(wildcard $(CHROMIUM)),,chromium))

apt_install = test -z "$(strip $(1))" || (apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	$(strip $(1)) >/dev/null) || echo "note: $(strip $(1)) not installed; their tests will skip"

# constraints.txt pins every package (pip freeze of a resolved install): reproducible installs.
# uv installs the pinned set in half of pip's CPU and a fraction of its wall time (decision 48:
# 51 CPU-s and 34 s against pip's 114 CPU-s and minutes); uv itself is pinned in the same file.
# Then the bytecode of what seqline's processes import is compiled, by importing it once, in
# two processes side by side (WARM): where PYTHONDONTWRITEBYTECODE is set, as on some machines
# of this kind, no process would cache it and each would compile TensorFlow's modules again.
# uv's --compile-bytecode compiled all 24,619 modules of the virtualenv instead (60 CPU-s and
# half a minute; these ~6,600 take 20 CPU-s and 10 s).
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt uv
	$(BIN)/uv pip install --python $(BIN)/python -q -c constraints.txt \
	  -e '.[dashboard,docs,s3,test]'
	@echo "compiling the bytecode of what seqline imports (WARM_TF, WARM_REST)"
	@$(IMPORT) $(WARM_TF) & pid=$$!; $(IMPORT) $(WARM_REST) && wait $$pid
	touch $@

IMPORT := $(BIN)/python -c 'import importlib, sys; \
	from seqline.orchestration.environment import quiet_tensorflow as quiet; \
	"tensorflow" in sys.argv and quiet(); [importlib.import_module(m) for m in sys.argv[1:]]'
# What seqline's commands, its engines' processes and the tests import: the CLI and its run
# path, the workers' preload (runners/forked.py) and TensorFlow; Ray's and Beam's processes,
# the dashboard's server, the run store's and the object store's drivers, the test tools.
WARM_TF := seqline.orchestration.cli.main seqline.orchestration.api \
	seqline.components.train.keras_fit seqline.orchestration.runners.local_worker tensorflow \
	keras tfx_bsl.coders.example_coder pandas pyarrow.dataset
WARM_REST := seqline.orchestration.runners.ray seqline.orchestration.runners.ray_train \
	seqline.orchestration.runners.beam seqline.orchestration.runners.beam_transforms \
	seqline.orchestration.runners.beam_workers seqline.orchestration.dashboard.app ray.data \
	ray.train ray.dashboard.agent ray._private.runtime_env.agent.main ray._private.log_monitor \
	ray.autoscaler._private.monitor apache_beam.runners.worker.sdk_worker_main \
	apache_beam.runners.portability.fn_api_runner apache_beam.runners.direct.direct_runner \
	sqlalchemy alembic psycopg s3fs uvicorn pytest xdist playwright.sync_api moto.server \
	mkdocs.commands.build material

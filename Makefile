# The two commands of the README. Both set up a virtualenv from the pinned constraints first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUNNER ?= local

.PHONY: demo test setup postgres chromium lint typecheck docs docs-outputs

# 1. Set up and run the example pipeline end to end, then say how to use the CLI installed.
demo: setup
	$(BIN)/seqline run data/seattle_weather/pipeline.yaml --runner $(RUNNER)
	@echo
	@echo "seqline is installed in $(VENV). Put it on your PATH with:  . $(VENV)/bin/activate"
	@echo "then try:  seqline runs list   (or, without activating:  $(BIN)/seqline runs list)"

# 2. Set up and run the test suite (all tiers: unit, integration, e2e), as CI does.
test: setup postgres chromium lint typecheck docs
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check .

# mypy finds modules by folder, and the editable install's import hook is invisible to it:
# it reads the package through links named as installed, so imports between modules resolve.
typecheck: setup
	rm -rf build/typecheck && mkdir -p build/typecheck/seqline
	ln -s $(CURDIR)/orchestration/public/__init__.py build/typecheck/seqline/__init__.py
	ln -s $(CURDIR)/pipeline $(CURDIR)/components $(CURDIR)/orchestration build/typecheck/seqline/
	cd build/typecheck && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p seqline

# The docs site (mkdocs.yml, docs/) into build/site; its references are generated from the code.
docs: setup
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

# Rewrite the outputs the docs show (docs/snippets/) from a real run of every example; review the diff.
docs-outputs: setup
	SEQLINE_DOCS_OUTPUTS=write $(BIN)/python -m pytest -q -p no:cacheprovider tests/docs/test_examples.py -k sybil

setup: $(VENV)/.installed

# The run store's tests start a real PostgreSQL server: install Debian's package when it is
# missing. Never fails the build: without it those tests skip, saying why.
postgres:
	@command -v /usr/lib/postgresql/15/bin/initdb >/dev/null || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	  postgresql >/dev/null) || echo "note: postgresql not installed; its tests will skip"

# The dashboard's browser tests drive Debian's Chromium through Playwright (whose own browser
# download is unreachable here). Never fails the build: without it those tests skip, saying why.
chromium:
	@test -x /usr/lib/chromium/chromium || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	  chromium >/dev/null) || echo "note: chromium not installed; the browser tests will skip"

# constraints.txt pins every package (pip freeze of a resolved install): reproducible installs.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dashboard,docs,s3,test]'
	touch $@

# The two commands of the README. Both set up a virtualenv from the pinned constraints first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUNNER ?= local

.PHONY: demo test setup

# 1. Set up and run the example pipeline end to end.
demo: setup
	$(BIN)/seqline run data/seattle_weather/pipeline.yaml --runner $(RUNNER)

# 2. Set up and run the test suite (all tiers: unit, integration, e2e), as CI does.
test: setup
	$(BIN)/python -m pytest -q

setup: $(VENV)/.installed

# constraints.txt pins every package (pip freeze of a resolved install): reproducible installs.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	touch $@

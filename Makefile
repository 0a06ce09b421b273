# Two commands that work on a fresh clone: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
HASH := $(shell cat pyproject.toml | sha1sum | cut -c1-12)
# What `make run` needs (the service extra: ~0.5 GB) and what the tests need (the test
# extra: torch, pyspark, ...: ~3 GB); each stamp names the pyproject.toml it installed.
SERVICE_STAMP := $(VENV)/.installed-service-$(HASH)
STAMP := $(VENV)/.installed-test-$(HASH)
# Extra arguments of `dpsieve serve` for `make run`, e.g. SERVE_ARGS="--port 8001".
SERVE_ARGS ?=
# The core and service requirements, read from pyproject.toml (one place to change them).
SERVICE_REQS = import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	print("\n".join(p["dependencies"] + p["optional-dependencies"]["service"]))

.PHONY: run demo test test-slow lint typecheck bench venv clean

# The installer of `make run`: uv (its cache links a warm reinstall in seconds, where pip
# takes 10-90 s: benchmarks/RESULTS.md, "make run to a first answer"): the one on PATH, else
# one brought into the venv by pip (a 17 MiB wheel); `make run UV=no` installs with pip alone.
UV ?= $(or $(shell command -v uv 2>/dev/null),$(BIN)/uv)
PIP_INSTALL = $(PY) -m pip --python $(BIN)/python install -q --disable-pip-version-check \
	--no-compile

# `make run` installs the requirements only (no build of dpsieve: it runs from src/): with uv
# if it can be had and it succeeds; else with this Python's pip (a venv without its own pip is
# made in a second), or the venv's own pip when this Python has none; none compiles every
# installed module up front.
$(SERVICE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv --without-pip $(VENV)
	$(PY) -c '$(SERVICE_REQS)' > $(VENV)/requirements-service.txt
	(test "$(UV)" != no && { command -v "$(UV)" > /dev/null || $(PIP_INSTALL) uv; } \
	    && "$(UV)" pip install -q --python $(BIN)/python -r $(VENV)/requirements-service.txt) \
	  || $(PIP_INSTALL) -r $(VENV)/requirements-service.txt \
	  || ($(BIN)/python -m ensurepip > /dev/null && $(BIN)/python -m pip install -q --no-compile \
	    -r $(VENV)/requirements-service.txt)
	rm -f $(VENV)/.installed-service-* && touch $(SERVICE_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip --version > /dev/null 2>&1 || $(BIN)/python -m ensurepip > /dev/null
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $(STAMP) $(SERVICE_STAMP)

venv: $(STAMP)

## Set up and run the main job: the HTTP service on SQLite with the bundled example data set
## (prints how to query it; Ctrl-C stops it).
run: $(SERVICE_STAMP)
	PYTHONPATH=src $(BIN)/python -m dpsieve serve --example $(SERVE_ARGS)

## An adaptive analysis under a privacy filter on an offline data set, printing each decision.
demo: $(SERVICE_STAMP)
	PYTHONPATH=src $(BIN)/python -m dpsieve demo

## Set up and pass the tests (lint, types, default suite).
test: $(STAMP)
	$(BIN)/python -m ruff check src tests
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider -m slow --durations=40

lint: $(STAMP)
	$(BIN)/python -m ruff check src tests benchmarks experiments

typecheck: $(STAMP)
	$(BIN)/python -m mypy

bench: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) build dist src/*.egg-info

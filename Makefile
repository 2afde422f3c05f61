# Two commands on a fresh machine: `make run` and `make test`. Each creates
# the virtual environment on first use from pinned versions
# (constraints.txt) and reuses it afterwards.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.ftspec-installed
PROFILE ?= default
# make run: the three independent implementations (the library plugins are
# certified by `make bench` and, torch-nn, by `make test`); IMPLS= runs
# every installed plugin
IMPLS ?= numpy torch jax
PYTEST_ARGS ?= -n auto --dist worksteal

.PHONY: run test test-fast env fixtures fixtures-check bench clean help

# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on
# this project's machines): the harness starts its plugin workers with "spawn", and each would
# compile ftspec's modules again; measured on tests/conformance/running, fresh clone, 2 cores:
# 72 s without, 65 s with (2026-12-07).
unexport PYTHONDONTWRITEBYTECODE

help:
	@echo "make run    - the conformance suite on the bundled implementations"
	@echo "             (PROFILE=$(PROFILE), IMPLS=$(IMPLS))"
	@echo "make test   - run every test (quick profile): the complete check CI runs"
	@echo "make env    - create .venv only (then \`. .venv/bin/activate\` in each new shell)"
	@echo "make test-fast - the tests not marked slow (for development; not a verdict)"
	@echo "make fixtures / fixtures-check - regenerate golden fixtures / check drift"
	@echo "make bench  - mutation score and speed figures (docs/benchmarks.md),"
	@echo "             library table (docs/libraries.md)"

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ftspec needs Python 3.11 or newer (set PYTHON=...)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt setuptools wheel
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt --no-build-isolation -e '.[all]'
	@touch $(STAMP)

env: $(STAMP)

run: $(STAMP)
	$(BIN)/ftspec run --profile $(PROFILE) $(foreach i,$(IMPLS),--impl $(i)) --json-report reports/run.json \
		--junit-xml reports/run.xml --html reports/run.html

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Leaves out the tests marked slow (the full golden-fixture replays, fixture
# regeneration, installing a plugin): `make test` runs them.
test-fast: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS) -m "not slow"

fixtures: $(STAMP)
	$(BIN)/ftspec fixtures regenerate

fixtures-check: $(STAMP)
	$(BIN)/ftspec fixtures regenerate --check

bench: $(STAMP)
	$(BIN)/ftspec bench all --write docs/benchmarks.md --json reports/bench.json
	$(BIN)/ftspec bench libraries --write docs/libraries.md --json reports/libraries.json

clean:
	rm -rf $(VENV) .hypothesis reports certificates

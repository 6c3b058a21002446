# iodiag — two commands on a fresh machine:
#   make demo   install what the main job needs into .venv, then run + report an example end to end
#   make test   also install test-only system packages (Chromium, Slurm, strace) when missing, then run the tests
# make bench writes benchmark tables into benchmarks/README.md's result files.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
DEMO_OUT ?= demo-out
# tests marked slow (fuzzing, 10k-log archive) run with: make test-slow
PYTEST_ARGS ?=

.PHONY: demo test test-slow bench install-demo install-test system-test-deps clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.demo-installed: pyproject.toml | $(PY)
	$(PIP) install --quiet -e '.[demo]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(PY)
	$(PIP) install --quiet -e '.[test]'
	touch $@ $(VENV)/.demo-installed

install-demo: $(VENV)/.demo-installed
install-test: $(VENV)/.test-installed

demo: install-demo
	@bash scripts/demo.sh "$(PY)" "$(DEMO_OUT)"

system-test-deps:
	@bash scripts/install-test-system-deps.sh

test: install-test system-test-deps
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-slow: install-test system-test-deps
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

bench: install-test
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(DEMO_OUT) .pytest_cache

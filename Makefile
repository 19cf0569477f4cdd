# agenthost: the two commands a new user runs (see README.md).
#   make demo   - set up a runtime environment and run the offline demo
#   make test   - set up everything the tests need and run lint, type check and the suite
#   make soak   - the hostile-server floods at full size, with their figures
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: demo test lint typecheck pytest bench soak clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: $(BIN)/python pyproject.toml
	$(PIP) install -e '.[examples]'
	@touch $@

$(VENV)/.dev-installed: $(BIN)/python pyproject.toml
	$(PIP) install -e '.[dev]'
	@touch $@

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

DEMO_TASK := Tidy up my notes: list them, summarize the meeting note, and delete the scratch note.
# The demo is always offline: API keys are unset for it, so only the scripted replay is
# configured. Run the same config with your key to use a real model (see README).
DEMO := env -u ANTHROPIC_API_KEY -u OPENAI_API_KEY -u OPENAI_BASE_URL $(BIN)/agenthost --config examples/agenthost.toml

demo: $(VENV)/.demo-installed
	@rm -f examples/audit.jsonl
	$(DEMO) servers
	$(DEMO) run "$(DEMO_TASK)"
	$(DEMO) audit

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.dev-installed
	$(BIN)/mypy

# Two phases: the suite in PYTEST_WORKERS xdist worker processes (PYTEST_WORKERS=0: in
# one process), then the `serial` tests (wall-clock latency bounds, tests/hostile) alone.
# The tests mostly wait on real server processes and sockets, so more workers than cores
# pays (figures: README.md "Development"; 386 s serial vs 308 s with 4 workers for a
# subset, on a 2-core machine at load 24-32). --dist loadfile keeps each file's tests on one
# worker (the conformance batch, the packaging build; loadgroup stopped grouping with pytest
# 9.2, see tests/conformance/test_conformance.py). Exit status 5 is "no test selected" (PYTEST_ARGS may
# pick one phase's tests only). --durations: where the time goes, in every CI log.
PYTEST_WORKERS ?= 4
PYTEST_PHASE = status=0; $(BIN)/pytest $(1) $(PYTEST_ARGS) || status=$$?; [ $$status -eq 0 ] || [ $$status -eq 5 ]

# Where `serial` tests live: phase 2 collects only these unless PYTEST_ARGS picks tests
# (12 s less than collecting every file to deselect all but 22); tests/test_hygiene.py
# fails on a serial mark anywhere else.
SERIAL_PATHS = tests/hostile tests/durable

pytest: $(VENV)/.dev-installed node_modules/.package-lock.json
	@$(call PYTEST_PHASE,-n $(PYTEST_WORKERS) --dist loadfile -m "not serial" --durations=25)
	@$(call PYTEST_PHASE,-m serial $(if $(PYTEST_ARGS),,$(SERIAL_PATHS)))

test: lint typecheck pytest

# The hostile-server floods at full size (300k requests, 100k notifications, 16 MiB
# lines); prints the figures (tests/hostile/conftest.py).
soak: $(VENV)/.dev-installed
	$(BIN)/pytest tests/hostile --soak -s -q $(PYTEST_ARGS)

bench: $(VENV)/.dev-installed node_modules/.package-lock.json
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache

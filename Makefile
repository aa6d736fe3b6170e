# Two entry points (README quick start). Each sets up its own virtual environment on first use.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: demo test bench lint clean oracle-seed oracle-openhands

demo: $(VENV)/.installed
	$(BIN)/ctxsim demo

test: $(VENV)/.installed
	$(BIN)/ruff check sim tests scenarios
	$(BIN)/pytest -q

bench: $(VENV)/.installed
	$(BIN)/ctxsim bench

# The seed engine's differential oracle: effect-agent's own code (Node, `effect` pinned by the lock file)
# replays the goldens' corpora and settings; rewrites tests/golden/seed_engine_oracle/.
ORACLE := benchmarks/oracles/effect_agent
oracle-seed: $(VENV)/.installed $(ORACLE)/node_modules/.installed
	$(BIN)/python $(ORACLE)/feed.py --write

$(ORACLE)/node_modules/.installed: $(ORACLE)/package-lock.json
	cd $(ORACLE) && npm ci --no-audit --no-fund
	touch $@

# OpenHands' differential oracle: openhands-ai 0.62.0 (V0 condensers) and openhands-sdk 1.58.2 in their
# own Python 3.12 environment (pinned, gitignored); rewrites tests/golden/frameworks/openhands/.
OH_ORACLE := benchmarks/oracles/openhands
PY312 ?= python3.12
oracle-openhands: $(VENV)/.installed $(OH_ORACLE)/.venv/.installed
	$(BIN)/python $(OH_ORACLE)/feed.py --write --python $(OH_ORACLE)/.venv/bin/python

$(OH_ORACLE)/.venv/.installed: $(OH_ORACLE)/requirements.txt
	$(PY312) -m venv $(OH_ORACLE)/.venv
	$(OH_ORACLE)/.venv/bin/pip install -q --no-deps -r $(OH_ORACLE)/requirements.txt
	touch $@

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) reports/latest .pytest_cache .ruff_cache

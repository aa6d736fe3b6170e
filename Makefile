# Two entry points (README quick start). Each sets up its own virtual environment on first use.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
LINTED := sim tests scenarios benchmarks setup.py

.PHONY: demo test test-all ray bench lint clean constraints oracle-seed oracle-openhands oracle-adk oracle-letta oracle-inspect oracle-autogen oracle-langchain oracle-strands

demo: $(VENV)/.installed
	$(BIN)/ctxsim demo

lint: $(VENV)/.installed
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

# everyday: lint and every test but the slow ones (pyproject's `slow` marker: the fuzzer's bounded hunt,
# memory caps, concurrency stress, Ray, the wheel install)
test: lint
	$(BIN)/pytest -q -m "not slow"

# CI (.ci/run): `make test`, then the slow ones
test-all: test
	$(BIN)/pytest -q -m slow

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

# The framework policies' differential oracles: the real library (OpenHands, ADK, Letta, Inspect, AutoGen, LangChain,
# Strands), each in
# its own Python 3.12 environment pinned by benchmarks/oracles/<framework>/requirements.txt (gitignored),
# drives the goldens' traces; rewrites tests/golden/frameworks/<framework>/. OpenHands: openhands-ai
# 0.62.0 (V0 condensers) and openhands-sdk 1.58.2.
PY312 ?= $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12; do $$p -V >/dev/null 2>&1 && { echo $$p; break; }; done)
FW := benchmarks/oracles
oracle-adk oracle-letta oracle-inspect oracle-autogen oracle-langchain oracle-strands: oracle-%: $(VENV)/.installed $(FW)/%/.venv/.installed
	$(BIN)/python $(FW)/frameworks.py $* --write

oracle-openhands: $(VENV)/.installed $(FW)/openhands/.venv/.installed
	$(BIN)/python $(FW)/openhands/feed.py --write --python $(FW)/openhands/.venv/bin/python

$(FW)/%/.venv/.installed: $(FW)/%/requirements.txt
	$(PY312) -m venv $(FW)/$*/.venv
	$(FW)/$*/.venv/bin/pip install -q --no-deps -r $<
	touch $@

# every version pinned by constraints.txt (`make constraints` writes it, on purpose: README)
$(VENV)/.installed: pyproject.toml setup.py constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip -c constraints.txt
	@# without Ray: `make demo` and `make test` never need it (`make ray` adds it for executor=ray)
	$(BIN)/pip install -q -c constraints.txt -e '.[test]'
	touch $@

# the optional Ray extra (executor=ray, tests/test_sweep_ray.py; .ci/run installs it). Where no Ray wheel
# exists for this Python, pip refuses before installing anything: the Ray tests then skip saying why.
ray: $(VENV)/.ray

$(VENV)/.ray: $(VENV)/.installed
	$(BIN)/pip install -q -c constraints.txt -e '.[test,ray]' || echo "make: no Ray for $$($(BIN)/python -V): executor=ray tests will skip"
	touch $@

# Pin what $(VENV) holds now, Ray's packages included (`make ray` first), as constraints.txt: run on purpose
# after upgrading a package in $(VENV) (README, "Versions"), then run the tests and commit the file. pip,
# not setuptools or wheel: those come with the venv module, and builds take their own setuptools.
constraints: $(VENV)/.ray
	@{ echo "# Every package \`make\` and \`make ray\` install, pinned: written by \`make constraints\` from .venv"; \
	  echo "# (README, \"Versions\"); do not edit by hand."; \
	  $(BIN)/pip freeze --all --exclude-editable | grep -viE '^(setuptools|wheel)=='; } > constraints.txt.tmp
	@# unchanged pins leave the file (and so the installed venv) as it was
	cmp -s constraints.txt.tmp constraints.txt && rm constraints.txt.tmp || mv constraints.txt.tmp constraints.txt

clean:
	rm -rf $(VENV) reports/latest .pytest_cache .ruff_cache

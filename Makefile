# Two entry points (README quick start). Each sets up its own virtual environment on first use.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: demo test bench lint clean

demo: $(VENV)/.installed
	$(BIN)/ctxsim demo

test: $(VENV)/.installed
	$(BIN)/ruff check sim tests scenarios
	$(BIN)/pytest -q

bench: $(VENV)/.installed
	$(BIN)/ctxsim bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) reports/latest .pytest_cache .ruff_cache

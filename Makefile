# openvta — make demo | make test | make bench | make lint
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench lint typecheck clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[all]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m openvta.demo

test: $(STAMP)
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -n 2 -q

bench: $(STAMP)
	$(BIN)/python benchmarks/functional.py

typecheck: $(STAMP)
	$(BIN)/python -m mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .hypothesis

# Two entry points for a fresh clone (see README): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU machines get the CPU build of torch (a local file on the project's machines); GPU machines can
# set TORCH_SPEC to a CUDA build.
TORCH_SPEC ?= torch==2.13.0

.PHONY: demo test lint install

$(BIN)/ptxrag: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet '$(TORCH_SPEC)'
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/ptxrag

demo: $(BIN)/ptxrag
	$(BIN)/ptxrag demo

test: lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=20

lint: $(BIN)/ptxrag
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy ptxrag

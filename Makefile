# The two commands a fresh clone needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export GRADIO_ANALYTICS_ENABLED := False

.PHONY: install run test lint typecheck contracts unit clean

install: $(STAMP)

# llama-cpp-python compiles llama.cpp for this machine's CPU. On Intel Xeons with AMX (4th
# generation and later) that brings in llama.cpp's AMX kernels, which the packaged SmolLM2's
# Q4_1 weights then run on, and which crash in decode on some machines: build without them
# (explicit -mno-* flags win over -march=native; the AVX-512 kernels are used instead).
NO_AMX := $(if $(filter x86_64 amd64,$(shell uname -m)),-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)

$(STAMP): pyproject.toml setup.py memory_bank/_native.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	CFLAGS="$(NO_AMX) $$CFLAGS" CXXFLAGS="$(NO_AMX) $$CXXFLAGS" $(PY) -m pip install -e '.[all]'
	touch $(STAMP)

run: install
	$(VENV)/bin/silicon-friend web

lint: install
	$(VENV)/bin/ruff check memory_bank silicon_friend finetune scripts tests examples
	$(VENV)/bin/ruff format --check memory_bank

typecheck: install
	$(VENV)/bin/mypy

# The layering (pyproject's [tool.importlinter]): the library imports neither the app nor the
# training stack, fine-tuning never imports the app, and the library has no import cycles.
contracts: install
	$(VENV)/bin/lint-imports --no-cache

test: lint typecheck contracts
	$(PY) -m pytest

# Fast loop while developing: unit tests only.
unit: install
	$(PY) -m pytest -m "not integration and not browser" -q

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# dlx - the two commands that matter: `make demo` and `make test`.
PYTHON ?= /usr/bin/python3
BUILD  ?= build
PYPATH := $(CURDIR)/$(BUILD)/python:$(CURDIR)/$(BUILD)/fixtures

.PHONY: all build setup demo test test-c test-python test-install bench bench-ir bench-venv-dlx clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=$(PYTHON) >/dev/null
	@cmake --build $(BUILD) -j2

demo: build
	PYTHONPATH=$(PYPATH) $(PYTHON) examples/demo.py

test: build
	$(MAKE) --no-print-directory test-c test-python test-install

test-c:
	ctest --test-dir $(BUILD) --output-on-failure

test-python:
	PYTHONPATH=$(PYPATH) DLX_BUILD_DIR=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest tests/python -q -p no:cacheprovider

# The wheel, installed into a fresh venv, used from outside the tree (tests/install/run.sh).
test-install:
	bash tests/install/run.sh $(PYTHON) $(CURDIR)/$(BUILD)/install-test

bench: build
	PYTHONPATH=$(PYPATH) DLX_BENCH_PEERS=$(wildcard $(CURDIR)/$(BUILD)/bench-ir/$(notdir $(PYTHON_PREFIX))) $(PYTHON) -m dlx bench
	@if [ -n "$(BENCH_VENV)" ] && $(MAKE) --no-print-directory bench-venv-dlx; then \
	  PYTHONPATH=$(CURDIR)/$(BUILD)/venv/python DLX_BENCH_PEERS=$(CURDIR)/$(BUILD)/bench-ir/$(notdir $(abspath $(dir $(BENCH_VENV))/..)) \
	    $(BENCH_VENV) -m dlx bench; fi

# Instruction counts per call under callgrind, with the peers (bench/bench_ir.py), for
# this interpreter and, when a venv exists (torch 2.13, numpy 2, tvm-ffi), for it too:
# dlx is built for the venv's interpreter into $(BUILD)/venv.
BENCH_VENV ?= $(firstword $(wildcard .venv/bin/python .venv-bench/bin/python))
PYTHON_PREFIX = $(shell $(PYTHON) -c 'import sys; print(sys.prefix)')
bench-ir: build
	PYTHONPATH=$(PYPATH) $(PYTHON) bench/bench_ir.py --out $(BUILD)/bench-ir/$(notdir $(PYTHON_PREFIX))
	@if [ -z "$(BENCH_VENV)" ]; then \
	  echo "bench-ir: no .venv (torch 2.13, numpy 2, tvm-ffi): those rows are skipped"; \
	elif $(MAKE) --no-print-directory bench-venv-dlx; then \
	  PYTHONPATH=$(CURDIR)/$(BUILD)/venv/python $(BENCH_VENV) bench/bench_ir.py \
	    --out $(BUILD)/bench-ir/$(notdir $(abspath $(dir $(BENCH_VENV))/..)); \
	fi

# dlx built for the venv's interpreter, for the bench targets.
bench-venv-dlx:
	@cmake -S . -B $(BUILD)/venv -DPython3_EXECUTABLE=$(abspath $(BENCH_VENV)) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && \
	cmake --build $(BUILD)/venv -j2 --target dlx_ext dlx_package >/dev/null || \
	{ echo "bench: dlx does not build for $(BENCH_VENV) yet: its rows are pending"; exit 1; }

clean:
	rm -rf $(BUILD)

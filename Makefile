# dlx - the two commands that matter: `make demo` and `make test`.
PYTHON ?= /usr/bin/python3
BUILD  ?= build
PYPATH := $(CURDIR)/$(BUILD)/python:$(CURDIR)/$(BUILD)/fixtures
SAN_BUILD    ?= build-asan
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 300

.PHONY: all build setup demo test test-c test-python test-install bench bench-ir bench-venv-dlx clean \
        sanitize fuzz fuzz-build

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

# ASan+UBSan build of everything in $(SAN_BUILD): the C tests with leak detection, the
# Python tests in Debian's interpreter with the ASan runtime preloaded (it must come
# first; libstdc++ too, or ASan cannot intercept C++ throws from torch, dlopened later)
# and without leak detection (CPython leaves its own objects alive at exit).
# PYTHONMALLOC=malloc: ASan sees Python objects too, not pymalloc's arenas.
# --capture=sys: a sanitizer report (fd 2) reaches the log, not a dying test's capture.
# Deselected: a C++ kernel's std::bad_alloc, because ASan's operator new reports an
# impossible size and aborts instead of throwing (allocator_may_return_null cannot change it).
SAN_UBSAN := UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
SAN_DESELECT := --deselect "tests/python/test_cxx_kernels.py::test_exception_becomes_runtime_error[throws_bad_alloc-]"
sanitize: setup
	@cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=$(PYTHON) \
	  -DDLX_SANITIZE=address,undefined >/dev/null
	@cmake --build $(SAN_BUILD) -j2
	ASAN_OPTIONS=detect_leaks=1 $(SAN_UBSAN) ctest --test-dir $(SAN_BUILD) --output-on-failure
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libstdc++.so.6)" \
	  ASAN_OPTIONS=detect_leaks=0 $(SAN_UBSAN) PYTHONMALLOC=malloc \
	  PYTEST_ADDOPTS='--capture=sys $(SAN_DESELECT) '"$$PYTEST_ADDOPTS" \
	  $(MAKE) --no-print-directory test-python BUILD=$(SAN_BUILD)

# libFuzzer targets (tests/fuzz/fuzz_*.c, clang) in $(FUZZ_BUILD), FUZZ_SECONDS each.
fuzz-build: setup
	@cmake -S tests/fuzz -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang >/dev/null
	@cmake --build $(FUZZ_BUILD) -j2

fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(FUZZ_BUILD)

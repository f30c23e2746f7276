# dlx - the two commands that matter: `make demo` and `make test`.
PYTHON ?= /usr/bin/python3
BUILD  ?= build
PYPATH := $(CURDIR)/$(BUILD)/python:$(CURDIR)/$(BUILD)/fixtures
# The second environment: .venv (torch 2.13, numpy 2, JAX, tvm-ffi) from the default python3,
# with its own build of dlx and the fixtures (build-venv/, linked into the venv).
VENV        ?= .venv
VENV_BUILD  ?= build-venv
VENV_PYTHON := $(CURDIR)/$(VENV)/bin/python
VENV_PYPATH := $(CURDIR)/$(VENV_BUILD)/python:$(CURDIR)/$(VENV_BUILD)/fixtures

.PHONY: all build setup venv build-venv demo test test-c test-python test-python-venv \
        test-install bench clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE=$(PYTHON) >/dev/null
	@cmake --build $(BUILD) -j2

venv:
	@bash scripts/setup_venv.sh $(CURDIR)/$(VENV)

# dlx built for the venv's interpreter; a .pth file makes it importable from anywhere.
build-venv: setup venv
	@cmake -S . -B $(VENV_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	       -DPython3_EXECUTABLE=$(VENV_PYTHON) >/dev/null
	@cmake --build $(VENV_BUILD) -j2
	@$(VENV_PYTHON) scripts/venv_link.py $(CURDIR)/$(VENV_BUILD)/python

demo: build
	PYTHONPATH=$(PYPATH) $(PYTHON) examples/demo.py

# C tests once; Python tests under Debian's interpreter and under the venv's.
test: build build-venv
	$(MAKE) --no-print-directory test-c test-python test-python-venv test-install

test-c:
	ctest --test-dir $(BUILD) --output-on-failure

test-python:
	PYTHONPATH=$(PYPATH) DLX_BUILD_DIR=$(CURDIR)/$(BUILD) $(PYTHON) -m pytest tests/python -q -p no:cacheprovider

test-python-venv:
	PYTHONPATH=$(VENV_PYPATH) DLX_BUILD_DIR=$(CURDIR)/$(VENV_BUILD) $(VENV_PYTHON) -m pytest \
	  tests/python -q -p no:cacheprovider

# The wheel, installed into a fresh venv, used from outside the tree (tests/install/run.sh).
test-install:
	bash tests/install/run.sh $(PYTHON) $(CURDIR)/$(BUILD)/install-test

bench: build build-venv
	PYTHONPATH=$(PYPATH) $(PYTHON) -m dlx bench
	PYTHONPATH=$(VENV_PYPATH) $(VENV_PYTHON) -m dlx bench

clean:
	rm -rf $(BUILD) $(VENV_BUILD)

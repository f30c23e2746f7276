# dlx - the two commands that matter: `make demo` and `make test`.
PYTHON ?= /usr/bin/python3
BUILD  ?= build
PYPATH := $(CURDIR)/$(BUILD)/python:$(CURDIR)/$(BUILD)/fixtures

.PHONY: all build setup demo test test-c test-python test-install bench clean

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
	PYTHONPATH=$(PYPATH) $(PYTHON) -m dlx bench

clean:
	rm -rf $(BUILD)

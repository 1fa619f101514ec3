# One entry point for the two things a fresh machine needs (see README).
SHARED ?= $(abspath ../shared)
export GRAMMASK_SHARED ?= $(SHARED)
PYTHON ?= python3

.PHONY: demo test install test-rust test-python

# Build and install grammask (Rust extension via maturin), then run the offline demo.
demo:
	$(PYTHON) -m pip install -q .
	grammask demo

# Install the package with its test extras, then run every Rust and Python test.
test: install test-rust test-python

install:
	$(PYTHON) -m pip install -q -e ".[test]"

test-rust:
	cargo test --profile ci

test-python:
	$(PYTHON) -m pytest -q

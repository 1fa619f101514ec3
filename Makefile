# One entry point for everything a fresh machine needs (see README). Every target works in the
# project virtual environment .venv, created on first use with `uv` inside it; nothing is
# installed into, or read from, the machine's own Python packages.
SHARED ?= $(abspath ../shared)
export GRAMMASK_SHARED ?= $(SHARED)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
# uv installs into this venv only; its cache (~/.cache/uv) makes repeated installs fast.
UV_PIP := $(UV) pip install --quiet --python $(PY)
export PYO3_PYTHON := $(abspath $(PY))

.PHONY: demo test install install-test test-rust test-python lint wheel wheel-check docs \
	test-integrations clean-venv

# The project environment: a plain venv (no system site-packages) holding uv.
$(UV):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check uv

# Build and install grammask (release build of the Rust extension), then run the offline demo.
demo: $(UV)
	$(UV_PIP) ".[serve]"
	$(VENV)/bin/grammask demo

# Install the package with its test extras (peer engines included), then run every test.
test: install-test test-rust test-python

install: $(UV)
	$(UV_PIP) -e .

install-test: $(UV)
	$(UV_PIP) -e ".[test]"

test-rust:
	cargo test --profile ci

test-python:
	$(PY) -m pytest -q

# Formatting and clippy for both crates, ruff for the Python (CI gate).
lint: $(UV)
	$(UV_PIP) "ruff>=0.6"
	RUFF=$(VENV)/bin/ruff bash .ci/lint

# abi3 wheel (cp39-abi3), stripped release build, in target/wheels/.
wheel: $(UV)
	$(UV_PIP) "maturin>=1.5,<2"
	rm -rf target/wheels
	$(VENV)/bin/maturin build --release --strip --out target/wheels

# Install the built wheel into a fresh venv (no other packages) and import it.
wheel-check: wheel
	bash .ci/wheel-check target/wheels

# The documentation site in target/site/ (warnings are errors). Installs only the docs extra:
# mkdocstrings reads python/ statically, so no Rust build is needed.
docs: $(UV)
	$(UV_PIP) -r pyproject.toml --extra docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir target/site

test-integrations:
	bash .ci/integrations

clean-venv:
	rm -rf $(VENV)

# The two set-up commands of the README, both idempotent:
#   make reports   install into .venv (from the lock) and run the default pipeline -> reports/index.html
#   make test      install into .venv, with the tests' tools (the dev extra), and run the tests
# Variant for GPU machines: make reports VARIANT=cuda

PYTHON ?= python3
VARIANT ?= cpu
VENV := .venv
STAMP := $(VENV)/.installed-$(VARIANT)
DEV_STAMP := $(VENV)/.dev-installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: install install-dev reports test lock clean-results

install: $(STAMP)

$(STAMP): requirements/$(VARIANT).txt requirements/corpus.txt requirements/build.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(None if sys.version_info[:2] == (3, 11) else "Python 3.11 is required (the lock pins cp311 wheels); set PYTHON=python3.11")'
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements/$(VARIANT).txt \
	  -r requirements/corpus.txt -r requirements/build.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-* && touch $@

# pytest, pytest-xdist, import-linter and snakefmt (pyproject.toml's dev extra), on top of either variant's install.
install-dev: $(DEV_STAMP)

$(DEV_STAMP): requirements/dev.txt $(STAMP)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements/dev.txt
	touch $@

reports: install
	snakemake --cores all

test: install-dev
	python -m pytest

# Re-resolve the pinned versions (needs uv: pip install uv) and regenerate the conda files in envs/. The dev lock
# holds the dev extra at the runtime lock's versions, less what that lock pins already, so that the two install
# together.
lock:
	uv pip compile pyproject.toml --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --generate-hashes --no-header -q -o requirements/cpu.txt
	uv pip compile pyproject.toml --extra cuda --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --generate-hashes --no-header -q -o requirements/cuda.txt
	uv pip compile pyproject.toml --extra dev -c requirements/cpu.txt \
	  $$(sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/--no-emit-package \1/p' requirements/cpu.txt) \
	  --python-version 3.11 --python-platform x86_64-manylinux_2_28 --generate-hashes --no-header -q \
	  -o requirements/dev.txt
	uv pip compile requirements/corpus.in --no-deps --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --generate-hashes --no-header -q -o requirements/corpus.txt
	uv pip compile requirements/build.in --no-deps --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --generate-hashes --no-header -q -o requirements/build.txt
	$(PYTHON) requirements/make_envs.py

clean-results:
	rm -rf results reports .snakemake

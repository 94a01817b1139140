# The two set-up commands of the README, both idempotent:
#   make reports   install into .venv (from the lock) and run the default pipeline -> reports/index.html
#   make test      install into .venv and run the tests
# Variant for GPU machines: make reports VARIANT=cuda

PYTHON ?= python3
VARIANT ?= cpu
VENV := .venv
STAMP := $(VENV)/.installed-$(VARIANT)
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: install reports test lock clean-results

install: $(STAMP)

$(STAMP): requirements/$(VARIANT).txt requirements/corpus.txt requirements/build.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(None if sys.version_info[:2] == (3, 11) else "Python 3.11 is required (the lock pins cp311 wheels); set PYTHON=python3.11")'
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r requirements/$(VARIANT).txt \
	  -r requirements/corpus.txt -r requirements/build.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-* && touch $@

reports: install
	snakemake --cores all

test: install
	python -m pytest

# Re-resolve the pinned versions (needs uv: pip install uv) and regenerate the conda files in envs/.
lock:
	uv pip compile pyproject.toml --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --generate-hashes --no-header -q -o requirements/cpu.txt
	uv pip compile pyproject.toml --extra cuda --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --generate-hashes --no-header -q -o requirements/cuda.txt
	uv pip compile requirements/corpus.in --no-deps --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --generate-hashes --no-header -q -o requirements/corpus.txt
	uv pip compile requirements/build.in --no-deps --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --generate-hashes --no-header -q -o requirements/build.txt
	$(PYTHON) requirements/make_envs.py

clean-results:
	rm -rf results reports .snakemake

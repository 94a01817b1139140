import atexit
import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import REPO
from slurm_cluster import LocalSlurmCluster, slurm_available

# One XLA compilation cache for the whole session, in this process and every CLI, Snakemake job and subprocess it
# starts: the kill tests, the smoke DAG and the unit tests compile many of the same programs, and a program
# compiled once is loaded from disk after that. Set before anything imports JAX; a cache the caller chose is kept.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="parallel-experts-xla-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


def pytest_collection_modifyitems(items):
    """Two workers share the tests (pytest-xdist, `-n 2` in pyproject.toml): the whole pipelines start first, the
    SLURM harness's own short tests last, so that neither worker runs a six-minute test alone at the end and a
    SLURM test seldom waits for the other worker's cluster (`slurm_cluster`)."""
    items.sort(key=lambda item: (not item.get_closest_marker("pipeline"), bool(item.get_closest_marker("slurm"))))


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
    """Drop each module's compiled programs when it ends. A worker runs hundreds of tests, and XLA's CPU backend
    keeps every executable it compiled until the process ends; a worker crashed in CI inside a compile after
    twenty minutes of them (jax-ml/jax#27201 reports the same accumulation). The disk cache keeps them."""
    yield
    jax = sys.modules.get("jax")  # never import JAX here: the cache directory above must be set first
    if jax is not None:
        jax.clear_caches()


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def slurm_cluster(tmp_path):
    """A real single-node SLURM cluster for the test (tests/slurm_cluster.py); skips where none can run."""
    reason = slurm_available()
    if reason:
        pytest.skip(reason)
    # One cluster per machine (it links /run/slurm/conf): a test on the other worker waits for this one to stop.
    with open(Path(tempfile.gettempdir()) / "parallel-experts-slurm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with LocalSlurmCluster(tmp_path / "slurm") as cluster:
            yield cluster

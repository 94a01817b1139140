from pathlib import Path

import pytest
from helpers import REPO
from slurm_cluster import LocalSlurmCluster, slurm_available


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def slurm_cluster(tmp_path):
    """A real single-node SLURM cluster for the test (tests/slurm_cluster.py); skips where none can run."""
    reason = slurm_available()
    if reason:
        pytest.skip(reason)
    with LocalSlurmCluster(tmp_path / "slurm") as cluster:
        yield cluster

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurm_cluster import LocalSlurmCluster, slurm_available

REPO = Path(__file__).resolve().parent.parent


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


def snakemake(*args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run Snakemake as a user would, from the repository root, with this interpreter's environment first."""
    env = os.environ | {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)

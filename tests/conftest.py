import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_cluster import LocalSlurmCluster, slurm_available

REPO = Path(__file__).resolve().parent.parent
# The Boxoban files of the team's shared folder: beside the checkout (CI), else the developers' copy.
BOXOBAN = next((p for p in (REPO.parent / "shared/data/boxoban", Path("/work/shared/data/boxoban")) if p.exists()),
               REPO.parent / "shared/data/boxoban")


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
    """Run Snakemake from the repository root as `.venv/bin/snakemake` without an activated venv: jobs
    must still find this interpreter (workflow/rules/common.smk), locally and on SLURM nodes."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, env=os.environ | {"PATH": path},
                          capture_output=True, text=True, timeout=timeout)


def run_killed_and_resumed(start, whole: Path, killed: Path, output: str) -> None:
    """`start(run_dir)` launches a resumable training command (a Popen). Run it to the end in `whole`; in `killed`,
    SIGKILL it right after its first checkpoint (before `output` exists) and run it again to the end."""
    from parallel_experts.checkpoint import checkpoint_update

    process = start(whole)
    assert process.wait() == 0, process.stdout.read()
    process = start(killed)
    deadline = time.monotonic() + 300
    while checkpoint_update(killed) is None:  # wait for the first checkpoint, then kill -9
        assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert not (killed / output).exists()
    resumed = start(killed)
    assert resumed.wait() == 0, resumed.stdout.read()

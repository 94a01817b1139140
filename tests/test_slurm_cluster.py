"""The local SLURM harness really runs batch jobs (tests/slurm_cluster.py)."""

import subprocess
import time

import pytest
from slurm_cluster import submitted_job_ids

pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm")]  # one worker runs them (conftest.py)


def test_sbatch_job_runs_and_is_recorded(slurm_cluster, tmp_path):
    out = tmp_path / "out.txt"
    r = subprocess.run(
        ["sbatch", "--parsable", "--chdir", str(tmp_path), "--output", str(tmp_path / "job.log"),
         "--wrap", "hostname > out.txt"],
        capture_output=True, text=True, check=True,
    )
    job_id = int(r.stdout.strip().split(";")[0])

    # Poll until the job has left the pending/running states. MinJobAge=300 s
    # keeps it in squeue (as COMPLETED) long after it ends.
    deadline = time.monotonic() + 60
    while True:
        state = subprocess.run(
            ["squeue", "--noheader", "--states=all", "--format=%T", "--jobs", str(job_id)],
            capture_output=True, text=True,
        ).stdout.strip()
        if state and state not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            break
        assert time.monotonic() < deadline, f"job {job_id} still {state!r} after 60 s"
        time.sleep(0.5)

    assert state == "COMPLETED", (tmp_path / "job.log").read_text() if (tmp_path / "job.log").exists() else state
    assert out.read_text().strip() == slurm_cluster.node
    assert job_id in submitted_job_ids(slurm_cluster)

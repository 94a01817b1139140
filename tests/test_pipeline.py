"""The smoke DAG end to end: locally, through `snakemake --report`, and through a real SLURM cluster."""

import json

import pytest
from conftest import snakemake
from slurm_cluster import submitted_job_ids

from parallel_experts import reports, results

SMOKE = "config/smoke.yaml"


def check_outputs(workdir):
    index = (workdir / "reports/index.html").read_text()
    page = (workdir / "reports/allocations.html").read_text()
    assert 'href="allocations.html"' in index and "config/smoke.yaml" in index
    assert page.count('src="data:image/png;base64,') == 4  # ours and the authors', both domains
    assert reports.offline(page) == page  # nothing on the page loads from the network
    meta = json.loads((workdir / "results/reports/allocations.json").read_text())
    assert meta["scale"] == "smoke" and meta["config_files"] == [SMOKE]
    sokoban = results.open_dataset(workdir / "results/allocations/sokoban.nc")
    assert sokoban["work_ratio"].values.tolist() == [1.0, 0.75]  # [2, 1, 8] vs [1, 1, 16]: 768/1024
    assert json.loads(sokoban.attrs["config"])["scale"] == "smoke"


@pytest.mark.pipeline
def test_smoke_dag_runs_locally_and_is_idempotent(tmp_path):
    run = snakemake("--cores", "2", "--configfile", SMOKE, "--directory", str(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    check_outputs(tmp_path)
    logs = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "results/logs").rglob("*.log"))
    assert len(logs) == 5, logs  # every rule that runs has a log

    again = snakemake("--cores", "2", "--configfile", SMOKE, "--directory", str(tmp_path), "-n")
    assert "Nothing to be done" in again.stdout + again.stderr

    report = snakemake("--configfile", SMOKE, "--directory", str(tmp_path), "--report", "snakemake-report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    assert (tmp_path / "snakemake-report.html").stat().st_size > 10_000


@pytest.mark.slurm
def test_smoke_dag_runs_through_slurm(slurm_cluster, tmp_path):
    workdir = tmp_path / "run"
    run = snakemake("--cores", "all", "--profile", "slurm", "--profile", "tests/slurm-profile",
                    "--configfile", SMOKE, "--directory", str(workdir))
    assert run.returncode == 0, run.stderr[-3000:]
    check_outputs(workdir)
    # Two allocation grids and one report went through sbatch; the snapshot and index are local rules.
    assert len(submitted_job_ids(slurm_cluster)) == 3

"""The smoke DAG on a real SLURM cluster (tests/slurm_cluster.py): one run of each domain trained and evaluated,
and one report, through the executor plugin (every resources family: train, lm_train, default). The two training
jobs outlive their one-minute time limit: each attempt stops cleanly before it, Snakemake submits it again
(`resources.<family>.resubmissions`), and the finished run is byte for byte the uninterrupted one. And the sbatch
options of GPU jobs, as the pinned plugin builds them."""

import os
import subprocess
import sys

import pytest
import xarray as xr
import yaml
from helpers import REPO, planned_jobs, snakemake
from slurm_cluster import submitted_job_ids

from parallel_experts.config import files
from parallel_experts.core.run_folder import attempts
from parallel_experts.reporting import render as reports
from parallel_experts.results import paths, store

pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm")]  # one worker runs them (conftest.py)

SOKOBAN_RUN, LM_RUN = "convlstm/recurrent/small/L1-E1-d16", "recurrent/small/W16/L2-E1-d16"
TRAINED = (paths.curve("sokoban", SOKOBAN_RUN), paths.curve("lm", LM_RUN))
TARGETS = (paths.evaluation("sokoban", SOKOBAN_RUN), paths.evaluation("lm", LM_RUN), "reports/allocations.html")
LOCAL_RULES = {"all", "index", "config_snapshot"}  # run by Snakemake itself, never submitted


def long_smoke_config(tmp_path, **resources):
    """The smoke config with one Sokoban and one LM run that each train for over two minutes of one core: an attempt
    of a one-minute limit trains for 30-50 s (start-up, and compiling on the first, take the rest), and one that
    finds its programs in the compile cache trains 650 Sokoban or 1,650 LM updates, so each needs three or more."""
    config = files.load([REPO / "config/smoke.yaml"])
    config["resources"] |= resources
    config["sokoban"]["env_steps"] = 8 * 5 * 2400  # 2,400 updates, 48 log points
    config["sokoban"]["training"] |= {"log_interval": 50, "checkpoint_every": 1000}  # a checkpoint at each stop only
    config["lm"]["train_tokens"] = 1024 * 5000  # 5,000 updates, 100 log points
    config["lm"]["training"] |= {"log_every": 50, "checkpoint_every": 60000}
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.mark.pipeline
def test_smoke_jobs_run_through_slurm_and_outlive_their_time_limit(slurm_cluster, tmp_path, monkeypatch):
    # Minutes of training, not of compiling: XLA's optimised code, not the tests' quick compiles (conftest.py), which
    # ran these updates three times slower and the test 31 minutes instead of 9.
    monkeypatch.setenv("XLA_FLAGS", "")
    limited = {"cpus": 1, "mem_mb": 2000, "runtime": 1, "gpus": 0, "resubmissions": 20}
    config = long_smoke_config(tmp_path, train=limited, lm_train=limited)
    workdir = tmp_path / "run"  # tmp_path / "slurm" is the cluster's
    jobs = planned_jobs("--directory", str(workdir), *TARGETS, configfile=config)
    assert {"sokoban_train", "sokoban_evaluate", "lm_train", "lm_evaluate", "report_allocations"} <= set(jobs), jobs
    slurm = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "all", "--profile", "slurm", "--profile", "tests/slurm-profile",
         *TARGETS, "--configfile", str(config), "--directory", str(workdir)],
        cwd=REPO, env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Meanwhile, the same runs trained without a time limit (no SLURM, no deadline): the reference.
    whole = snakemake("--cores", "all", *TRAINED, "--configfile", str(config), "--directory", str(tmp_path / "whole"),
                      timeout=900)
    assert whole.returncode == 0, whole.stderr[-3000:]
    out, _ = slurm.communicate(timeout=1500)
    assert slurm.returncode == 0, out[-3000:]

    evaluation = store.open_dataset(workdir / TARGETS[0])  # every test level once per seed and mode
    assert evaluation["level"].values.tolist() == list(range(20)) and evaluation.sizes["mode"] == 2
    assert store.open_dataset(workdir / TARGETS[1])["scored_tokens"].item() == (78 - 1) * 4 * 64
    page = (workdir / TARGETS[2]).read_text()
    assert reports.offline(page) == page
    resubmitted = 0
    for domain, run, weights in (("sokoban", SOKOBAN_RUN, "agents.eqx"), ("lm", LM_RUN, "model.eqx")):
        folder = paths.run_dir(domain, run)
        a, b = tmp_path / "whole" / folder, workdir / folder
        stops = [entry["update"] for entry in attempts(b) if entry["event"] == "stop"]
        assert len(stops) >= 2 and stops == sorted(set(stops)), attempts(b)  # resubmitted twice, always further
        assert not attempts(a)  # no deadline there
        resubmitted += len(stops)
        assert (a / weights).read_bytes() == (b / weights).read_bytes()
        with xr.open_dataset(a / paths.CURVE) as one, xr.open_dataset(b / paths.CURVE) as other:
            xr.testing.assert_identical(one, other)
    # Every job went through sbatch except the local rules (the targets), the training jobs once per attempt.
    planned = sum(n for rule, n in jobs.items() if rule not in LOCAL_RULES)
    assert len(submitted_job_ids(slurm_cluster)) >= planned + resubmitted


def test_gpu_jobs_ask_sbatch_for_their_gpus_in_one_task(slurm_cluster, tmp_path):
    """The pinned plugin's sbatch call for a four-GPU LM job and a one-GPU Sokoban job: `--gpus=N` and the cores,
    no per-GPU task split (earlier plugin versions turned gpu=2 into two one-GPU tasks). The cluster has no GPU, so
    sbatch refuses each job, and Snakemake reports the call it made; nothing reads the inputs, which stand empty."""
    config = long_smoke_config(tmp_path, train={"cpus": 2, "mem_mb": 2000, "runtime": 5, "gpus": 1},
                               lm_train={"cpus": 2, "mem_mb": 2000, "runtime": 5, "gpus": 4})
    (tmp_path / "run" / paths.LM_TOKENS).mkdir(parents=True)
    (tmp_path / "run" / paths.levels("train")).parent.mkdir(parents=True)
    (tmp_path / "run" / paths.levels("train")).touch()
    for rule, target, gpus in (("sokoban_train", TRAINED[0], 1), ("lm_train", TRAINED[1], 4)):
        run = snakemake("--cores", "all", "--profile", "slurm", "--profile", "tests/slurm-profile", "--verbose",
                        target, "--configfile", str(config), "--directory", str(tmp_path / "run"), timeout=600)
        assert run.returncode != 0
        calls = [line for line in (run.stdout + run.stderr).splitlines()
                 if line.lstrip().startswith("sbatch ") and f"rule_{rule}" in line]
        assert calls, (run.stdout + run.stderr)[-3000:]
        options = calls[0].split(" --wrap=")[0]
        assert f"--gpus={gpus}" in options and "--cpus-per-task=2" in options and "-t 5" in options, options
        assert "--ntasks-per-gpu" not in options and "--gres" not in options, options

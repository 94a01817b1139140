"""Training jobs longer than their SLURM time limit: each attempt stops cleanly before the limit, Snakemake submits
it again (`resources.<family>.resubmissions`), and the finished run is byte for byte the uninterrupted one.
The sbatch options of GPU jobs, as the pinned executor plugin builds them, on the same live cluster."""

import os
import subprocess
import sys

import pytest
import xarray as xr
import yaml
from helpers import REPO, snakemake
from slurm_cluster import submitted_job_ids

from parallel_experts.config import files
from parallel_experts.core.run_folder import attempts
from parallel_experts.results import paths

pytestmark = pytest.mark.slurm

SOKOBAN_RUN, LM_RUN = "convlstm/recurrent/small/L1-E1-d16", "recurrent/small/W16/L2-E1-d16"
TARGETS = (paths.curve("sokoban", SOKOBAN_RUN), paths.curve("lm", LM_RUN))


def long_smoke_config(tmp_path, **resources):
    """The smoke config with one Sokoban and one LM run that each train for about a minute of one core, past a
    one-minute time limit once start-up and compiling are counted."""
    config = files.load([REPO / "config/smoke.yaml"])
    config["resources"] |= resources
    config["sokoban"]["env_steps"] = 8 * 5 * 1500  # 1,500 updates, 30 log points
    config["sokoban"]["training"] |= {"log_interval": 50, "checkpoint_every": 1000}  # a checkpoint at each stop only
    config["lm"]["train_tokens"] = 1024 * 6000  # 6,000 updates, 120 log points
    config["lm"]["training"] |= {"log_every": 50, "checkpoint_every": 60000}
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_jobs_past_their_time_limit_are_resubmitted_and_end_as_if_uninterrupted(slurm_cluster, tmp_path):
    limited = {"cpus": 1, "mem_mb": 2000, "runtime": 1, "gpus": 0, "resubmissions": 5}
    config = long_smoke_config(tmp_path, train=limited, lm_train=limited)
    slurm = subprocess.Popen(
        [sys.executable, "-m", "snakemake", "--cores", "all", "--profile", "slurm", "--profile", "tests/slurm-profile",
         *TARGETS, "--configfile", str(config), "--directory", str(tmp_path / "slurm")],
        cwd=REPO, env=os.environ.copy(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Meanwhile, the same config without a time limit (no SLURM, no deadline): the reference.
    whole = snakemake("--cores", "all", *TARGETS, "--configfile", str(config), "--directory", str(tmp_path / "whole"),
                      timeout=900)
    assert whole.returncode == 0, whole.stderr[-3000:]
    out, _ = slurm.communicate(timeout=1200)
    assert slurm.returncode == 0, out[-3000:]

    for domain, run, weights in (("sokoban", SOKOBAN_RUN, "agents.eqx"), ("lm", LM_RUN, "model.eqx")):
        folder = paths.run_dir(domain, run)
        a, b = (tmp_path / where / folder for where in ("whole", "slurm"))
        history = attempts(b)
        stops = [entry["update"] for entry in history if entry["event"] == "stop"]
        assert len(stops) >= 2 and stops == sorted(set(stops)), history  # resubmitted twice, always further
        assert not attempts(a)  # no deadline there
        assert (a / weights).read_bytes() == (b / weights).read_bytes()
        with xr.open_dataset(a / paths.CURVE) as one, xr.open_dataset(b / paths.CURVE) as other:
            xr.testing.assert_identical(one, other)
    assert len(submitted_job_ids(slurm_cluster)) >= 2 + 2 * 3  # levels, tokens; each training job 3 times or more


def test_gpu_jobs_ask_sbatch_for_their_gpus_in_one_task(slurm_cluster, tmp_path):
    """The pinned plugin's sbatch call for a four-GPU LM job and a one-GPU Sokoban job: `--gpus=N` and the cores,
    no per-GPU task split (earlier plugin versions turned gpu=2 into two one-GPU tasks). The cluster has no GPU, so
    sbatch refuses each job, and Snakemake reports the call it made; nothing reads the inputs, which stand empty."""
    config = long_smoke_config(tmp_path, train={"cpus": 2, "mem_mb": 2000, "runtime": 5, "gpus": 1},
                               lm_train={"cpus": 2, "mem_mb": 2000, "runtime": 5, "gpus": 4})
    (tmp_path / "run" / paths.LM_TOKENS).mkdir(parents=True)
    (tmp_path / "run" / paths.levels("train")).parent.mkdir(parents=True)
    (tmp_path / "run" / paths.levels("train")).touch()
    for rule, target, gpus in (("sokoban_train", TARGETS[0], 1), ("lm_train", TARGETS[1], 4)):
        run = snakemake("--cores", "all", "--profile", "slurm", "--profile", "tests/slurm-profile", "--verbose",
                        target, "--configfile", str(config), "--directory", str(tmp_path / "run"), timeout=600)
        assert run.returncode != 0
        calls = [line for line in (run.stdout + run.stderr).splitlines()
                 if line.lstrip().startswith("sbatch ") and f"rule_{rule}" in line]
        assert calls, (run.stdout + run.stderr)[-3000:]
        options = calls[0].split(" --wrap=")[0]
        assert f"--gpus={gpus}" in options and "--cpus-per-task=2" in options and "-t 5" in options, options
        assert "--ntasks-per-gpu" not in options and "--gres" not in options, options

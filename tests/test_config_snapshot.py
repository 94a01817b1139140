"""results/config.json, which every job reads: a dry run writes nothing, a second workflow with another config is
refused while the first runs, and a job whose snapshot changed under its workflow fails naming both configs."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml
from helpers import REPO, snakemake

from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.results import snapshot

SMOKE = str(REPO / "config/smoke.yaml")
GRIDS = ["results/allocations/sokoban.nc", "results/allocations/lm.nc"]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working folder as cwd, and this process's claims and digest variable undone afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(snapshot.DIGEST_VARIABLE, raising=False)
    yield tmp_path
    while snapshot._held:
        snapshot._held.pop().close()


def claim_in_subprocess(config: dict, files_named: str) -> subprocess.CompletedProcess:
    code = ("import json, sys\nfrom parallel_experts.results import snapshot\n"
            "try:\n    snapshot.claim(json.loads(sys.argv[1]), 'results/config.json', [sys.argv[2]])\n"
            "except snapshot.FolderBusy as error:\n    sys.exit(str(error))\n")
    return subprocess.run([sys.executable, "-c", code, json.dumps(config), files_named], capture_output=True,
                          text=True, timeout=60)


def test_a_claim_is_shared_by_the_same_config_and_refused_to_another_until_it_ends(folder):
    config, other = {"scale": "demo"}, {"scale": "paper"}
    snapshot.claim(config, "results/config.json", ["a.yaml"])
    assert json.loads((folder / "results/config.json").read_text()) == config
    assert os.environ[snapshot.DIGEST_VARIABLE] == files.digest(config)
    assert claim_in_subprocess(config, "b.yaml").returncode == 0  # the same config joins
    refused = claim_in_subprocess(other, "c.yaml")
    assert refused.returncode == 1
    assert (f"results/config.json: a workflow with config {files.digest(config)} (a.yaml; the snapshot was written by pid "
            f"{os.getpid()} on ") in refused.stderr
    assert f"this one's config {files.digest(other)} differs" in refused.stderr
    assert json.loads((folder / "results/config.json").read_text()) == config  # untouched
    snapshot._held.pop().close()  # the first workflow ends
    assert claim_in_subprocess(other, "c.yaml").returncode == 0
    assert json.loads((folder / "results/config.json").read_text()) == other


def test_a_job_refuses_a_snapshot_that_is_not_its_workflows(folder, monkeypatch):
    config, other = {"scale": "demo"}, {"scale": "paper"}
    (folder / "results").mkdir()
    (folder / "results/config.json").write_text(json.dumps(other))
    snapshot.verify(other, "results/config.json")  # outside a workflow: nothing to compare
    monkeypatch.setenv(snapshot.DIGEST_VARIABLE, files.digest(config))
    with pytest.raises(ConfigError, match=rf"^results/config.json: holds config {files.digest(other)}, but this "
                                          rf"job's workflow started with config {files.digest(config)}: "):
        snapshot.verify(other, "results/config.json")
    snapshot.verify(other, "config/paper.yaml")  # another file a job reads (the planner's paper plan): not checked
    snapshot.verify(config, "results/config.json")


def checksums(folder) -> dict[str, str]:
    """The snapshot and its lock (the running workflow writes its logs and results beside them)."""
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
            for name in ("results/config.json", "results/config.lock")}


def test_a_second_invocation_cannot_change_what_a_running_workflow_reads(tmp_path):
    """Two real Snakemake invocations in one folder. While the first (the smoke config) holds it (stopped right
    after its claim): a dry run of another config leaves the snapshot as it was (and in a new folder writes nothing
    under results/), a real run of it is refused naming the first, and a snapshot rewritten behind the lock's back
    makes the first workflow's jobs fail naming both configs, not compute with it."""
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"description": "another config"}))  # merged over the smoke config
    fresh = tmp_path / "fresh"
    assert snakemake("-n", "--configfile", SMOKE, "--directory", str(fresh)).returncode == 0
    assert not (fresh / "results").exists()  # a dry run writes nothing there
    # An older snapshot: the first rewrites it and names itself in the lock (no config_snapshot job to run).
    (tmp_path / "results").mkdir()
    (tmp_path / "results/config.json").write_text("{}")
    first = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", SMOKE,
                              "--directory", str(tmp_path), GRIDS[0]], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    lock, deadline = tmp_path / "results/config.lock", time.monotonic() + 120
    while f'"pid": {first.pid},' not in (lock.read_text() if lock.exists() else ""):  # the first has claimed
        assert time.monotonic() < deadline and first.poll() is None, first.stdout.read() if first.poll() else ""
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGSTOP)  # the first holds the folder for as long as the checks below take
    try:
        # A hostile rewrite (no claim): the first's jobs, which start after it, must refuse it.
        theirs = json.loads((tmp_path / "results/config.json").read_text())
        rewritten = theirs | {"description": "rewritten"}
        (tmp_path / "results/config.json").write_text(json.dumps(rewritten))
        before = checksums(tmp_path)
        # Another target: Snakemake's own lock refuses a run whose outputs overlap the first's, not this one.
        dry = snakemake("-n", "--configfile", SMOKE, str(other), "--directory", str(tmp_path), GRIDS[1])
        assert dry.returncode == 0, dry.stderr
        assert checksums(tmp_path) == before
        second = snakemake("--cores", "1", "--configfile", SMOKE, str(other), "--directory", str(tmp_path), GRIDS[1])
        assert second.returncode != 0
        assert f"written by pid {first.pid} on " in second.stderr and "still running in this folder" in second.stderr
        assert checksums(tmp_path) == before
    finally:
        os.kill(first.pid, signal.SIGCONT)
    log, _ = first.communicate(timeout=600)
    assert first.returncode != 0, log
    failed = (tmp_path / "results/logs/allocations/sokoban.log").read_text()
    assert (f"config error: results/config.json: holds config {files.digest(rewritten)}, but this job's workflow "
            f"started with config {files.digest(theirs)}") in failed
    assert not (tmp_path / GRIDS[0]).exists() and not (tmp_path / GRIDS[1]).exists()

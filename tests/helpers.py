"""Shared builders of the tests: where the repository and the Boxoban files are, and how to run the workflow
and a killed-and-resumed training command."""

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The Boxoban files of the team's shared folder, which lies beside the checkout (CI gets a copy there too);
# tests that need them skip where it is missing.
BOXOBAN = REPO.parent / "shared/data/boxoban"


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


def independent_shard_bytes(tokens, magic=20240520, version=1, count=None):
    """A modded-nanogpt token shard written with `struct`, independently of the library's writer."""
    count = len(tokens) if count is None else count
    header = struct.pack("<256i", magic, version, count, *([0] * 253))
    return header + struct.pack(f"<{len(tokens)}H", *tokens)

"""Shared builders of the tests: where the repository and the Boxoban files are, and how to run the workflow
and a killed-and-resumed training command."""

import os
import signal
import struct
import subprocess
import sys
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


# Runs the CLI with `save_checkpoint` wrapped so that the process SIGKILLs itself as soon as its first checkpoint
# is on disk: the kill lands at the same point every time, however fast the rest of the run would be (a test that
# polled for the checkpoint from outside once lost that race on a loaded machine and saw the run finish).
DIE_AFTER_FIRST_CHECKPOINT = """
import os, signal, sys
from parallel_experts import checkpoint
save = checkpoint.save_checkpoint
def save_and_die(*args, **kwargs):
    save(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
checkpoint.save_checkpoint = save_and_die
from parallel_experts.cli import main
sys.exit(main())
"""


def run_killed_and_resumed(args: list[str], whole: Path, killed: Path, output: str) -> None:
    """Run `python -m parallel_experts *args --run-dir DIR`, a resumable training command, to the end in `whole`;
    in `killed`, SIGKILL it right after its first checkpoint (before `output` exists) and run it again to the
    end."""
    def run(prefix: list[str], run_dir: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, *prefix, *args, "--run-dir", str(run_dir)], capture_output=True,
                              text=True, timeout=600)

    done = run(["-m", "parallel_experts"], whole)
    assert done.returncode == 0, done.stdout + done.stderr
    died = run(["-c", DIE_AFTER_FIRST_CHECKPOINT], killed)
    assert died.returncode == -signal.SIGKILL, died.stdout + died.stderr
    assert not (killed / output).exists()
    resumed = run(["-m", "parallel_experts"], killed)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr


def demo_with_every_rule(domain: str) -> dict:
    """The demo config whose `domain` ("sokoban" or "lm") aggregation ablation runs all four rules (the demo itself
    runs two, for time)."""
    from parallel_experts import config
    from parallel_experts.experts import AGGREGATIONS

    demo = config.load([REPO / "config/config.yaml"])
    demo[domain]["ablations"]["aggregation"]["values"] = list(AGGREGATIONS)
    return demo


def independent_shard_bytes(tokens, magic=20240520, version=1, count=None):
    """A modded-nanogpt token shard written with `struct`, independently of the library's writer."""
    count = len(tokens) if count is None else count
    header = struct.pack("<256i", magic, version, count, *([0] * 253))
    return header + struct.pack(f"<{len(tokens)}H", *tokens)

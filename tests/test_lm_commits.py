"""workflow/scripts/lm_commits.py, the LM's speed at two commits side by side (issue 42 §3): it times both rows at
every commit named, in worktrees it removes after, and refuses a name that is no commit. Its figures are a benchmark's,
not asserted here."""

import subprocess
import sys

import pytest
from helpers import REPO

SCRIPT = REPO / "workflow/scripts/lm_commits.py"


def git_checkout() -> bool:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not git_checkout(), reason="needs the project as a git checkout")


def worktrees() -> str:
    return subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout


def test_two_commits_are_timed_side_by_side_and_their_worktrees_removed():
    before = worktrees()
    run = subprocess.run([sys.executable, SCRIPT, "HEAD", "HEAD~0", "--width", "64", "--context", "8",
                          "--batch-tokens", "64", "--rounds", "1", "--updates", "1"], cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert lines[0] == "d = 64, C = 8, 64 tokens per update, 1 rounds of 1 timed updates per commit and row"
    assert [line.split(":")[0] for line in lines[1:]] == ["HEAD", "HEAD~0"]
    assert all("Transformer L16 E1 best" in line and "recurrent L1 E16 / Transformer L16 E1 per round" in line
               for line in lines[1:])
    assert worktrees() == before


def test_a_name_that_is_no_commit_is_refused_in_one_line():
    run = subprocess.run([sys.executable, SCRIPT, "HEAD", "no-such-commit"], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.strip() == "no-such-commit: not a commit of this repository"

"""A run's folder: which definition it holds (`run.json`), which checkpoint is its latest, and the lock that keeps
a second trainer out. No JAX here: the planner reads `run.json` to know which timed jobs are current."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import re
import socket
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from parallel_experts.config import locations
from parallel_experts.config.errors import PipelineError, quote, reason
from parallel_experts.core import atomic
from parallel_experts.core.records import fields_of, read_bytes


class CheckpointError(PipelineError, ValueError):
    """A checkpoint or saved model that cannot be read."""


CHECKPOINT_NAME = re.compile(r"checkpoint-(\d{9})")  # what `latest` may hold: a name inside the run folder
ATTEMPTS = "attempts.jsonl"  # each training attempt with a deadline: its start and its clean stop (core/walltime.py)
ATTEMPT = "each line is {\"event\": \"start\" or \"stop\", \"update\": N, \"seconds\": S}"


def member(run_dir: str | Path, name: str) -> Path:
    """The file `name` of a run folder, to be read: refused where it is a symbolic link out of the folder (a run's
    checkpoint is its own; config/locations.py)."""
    path = Path(run_dir) / name
    if not locations.inside(path, run_dir):
        raise CheckpointError(f"{path}: a link to {path.resolve()}, outside its run folder; a run reads its "
                              f"checkpoints and weights only from inside {run_dir}")
    return path


def latest(run_dir: Path) -> tuple[str, int] | None:
    """(name, update) of the checkpoint that `latest` points to; None when there is no pointer."""
    latest = member(run_dir, "latest")
    if not latest.exists():
        return None
    try:
        text = latest.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{latest}: unreadable checkpoint pointer ({reason(error)}); delete {run_dir} to "
                              "start over") from None
    match = CHECKPOINT_NAME.fullmatch(text)
    if match is None:  # also refuses any path, so a pointer never leads outside its run folder
        raise CheckpointError(f"{latest}: expected a checkpoint name such as checkpoint-000000200, got "
                              f"{quote(text)}; delete {run_dir} to start over")
    return text, int(match.group(1))


@contextlib.contextmanager
def run_lock(run_dir: str | Path, definition: Mapping) -> Iterator[None]:
    """Hold an exclusive lock on a run folder while training `definition` in it.

    A second trainer in the same folder (an orphan of a killed workflow, a duplicate submission) stops at once,
    naming the holder. Creating the lock file is also the check that the folder is writable, before anything
    compiles. The lock (POSIX, so it works on NFS) dies with its process, so a killed trainer never leaves a
    stale one. The folder's `run.json` names the definition its checkpoint belongs to: a checkpoint of another
    definition (the config changed) is discarded instead of resumed, so a changed run really retrains."""
    run_dir = atomic.writable(run_dir)
    path = run_dir / ".lock"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise atomic.WriteError(f"{run_dir}: cannot write the run folder ({error.strerror})") from None
    descriptor = open_no_link(path, os.O_RDWR | os.O_CREAT)
    with os.fdopen(descriptor, "r+") as file:
        try:
            fcntl.lockf(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = file.read().strip() or "another process"
            raise PipelineError(f"{run_dir}: another trainer ({holder}) is training in this run folder; stop it "
                                "or wait for it") from None
        file.truncate()
        file.write(f"pid {os.getpid()} on {socket.gethostname()}")
        file.flush()
        _claim(run_dir, definition)
        yield


def open_no_link(path: Path, flags: int) -> int:
    """`os.open` of a run folder's own file (its lock, its attempts), refused where the name is a symbolic link:
    these are never links, and writing through one would change a file elsewhere."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW, 0o666)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise atomic.WriteError(f"{path}: a symbolic link (to {os.readlink(path)}), where the run folder keeps "
                                    "its own file; nothing is written through it: delete the link") from None
        raise atomic.WriteError(f"{path}: cannot write the run folder's own file ({error.strerror})") from None


def attempts(run_dir: str | Path) -> list[dict]:
    """The run's training attempts with a deadline, in order (`ATTEMPTS`): each start (update, seconds left) and
    clean stop (update, seconds it ran). Kept here, because Snakemake empties a job's log before each attempt."""
    path = member(run_dir, ATTEMPTS)
    if not path.exists():
        return []
    found = []
    text = read_bytes(path, "the run's attempts").decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict) or entry.get("event") not in ("start", "stop"):
            raise PipelineError(f"{path}, line {number}: expected a JSON object with an 'event' (start or stop), got "
                                f"{quote(line)}; delete the line to go on")
        where, fix = f"{path}, line {number}: not an attempt's {entry['event']}", f"delete the line to go on ({ATTEMPT})"
        fields_of(entry, {"update": int, "seconds": (int, float)}, where, fix)
        if entry["update"] < 0 or not 0 <= entry["seconds"] < math.inf:  # a negative duration would cut the plan
            raise PipelineError(f"{where}: update {entry['update']}, {entry['seconds']} s; expected both at least 0 "
                                f"and finite; {fix}")
        found.append(entry)
    return found


def records(run_dir: str | Path, definition: Mapping) -> bool:
    """Whether a run folder's `run.json` names `definition` (what it trained, and its benchmark file timed)."""
    recorded = Path(run_dir) / "run.json"
    return recorded.is_file() and recorded.read_text(encoding="utf-8", errors="replace") == _text(definition)


def _text(definition: Mapping) -> str:
    return json.dumps(definition, indent=1, sort_keys=True) + "\n"


def _claim(run_dir: Path, definition: Mapping) -> None:
    """Make `run.json` name `definition`: a checkpoint of another definition is discarded; one whose definition
    was never recorded is refused (it may be anything), as is a damaged pointer."""
    text = _text(definition)
    recorded = run_dir / "run.json"
    checkpoint = latest(run_dir)
    if recorded.is_file():
        if recorded.read_text(encoding="utf-8", errors="replace") == text:
            return
        if checkpoint:
            print(f"{run_dir}: its checkpoint belongs to another definition of the run; starting over",
                  file=sys.stderr)
        for path in [*run_dir.glob("checkpoint-*"), run_dir / "latest", run_dir / ATTEMPTS]:
            path.unlink(missing_ok=True)
    elif checkpoint:
        raise CheckpointError(f"{run_dir}: a checkpoint without the run.json that names its run; delete {run_dir} "
                              "to train it again")
    atomic.write_text(recorded, text)

"""The workflow's config snapshot, results/config.json, which every job reads its runs from: nothing may change it
while a workflow that reads it runs.

* Reading the Snakefile writes nothing, so a dry run, a lint or `--report` leaves results/ as it was.
* `claim`, called where a real run starts (the Snakefile's onstart hook, in the process that schedules the jobs),
  writes the snapshot where the config changed, then holds a shared lock on results/config.lock for the rest of
  the workflow's life. The snapshot is rewritten only under the exclusive lock, which no other running workflow's
  shared lock allows: a second workflow with the same config joins, one with another config is refused, with the
  workflow that wrote the snapshot named.
* `claim` also puts the snapshot's digest in every job's environment (DIGEST_VARIABLE); `verify`, wherever a job
  loads the snapshot, fails naming both digests if the file is not the one its workflow started with (changed
  behind the lock's back, or by a version of this code without it).

The lock is an `flock`: it dies with its process, so a killed workflow never leaves a stale one.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.core import atomic, records
from parallel_experts.results import paths

DIGEST_VARIABLE = "PARALLEL_EXPERTS_CONFIG_DIGEST"
_held: list[IO] = []  # the claimed lock, open until the process exits


class FolderBusy(Exception):
    """Another running workflow's config is the snapshot of this folder."""


def text(config: Mapping) -> str:
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def write(config: Mapping, path: str | Path) -> str:
    """Write the snapshot where it differs (its modification time is when the config last changed); what it holds,
    in a line."""
    if _current(path) != text(config):
        atomic.write_text(path, text(config))
    return f"{path}: config {files.digest(config)}\n"


def claim(config: Mapping, path: str | Path, config_files: Sequence[str]) -> None:
    """Make `path` the snapshot of `config` until this process exits; raise FolderBusy where a running workflow
    reads another config from it."""
    path, wanted = Path(path), text(config)
    lock = _open_lock(path.with_suffix(".lock"))
    fcntl.flock(lock, fcntl.LOCK_SH)  # waits only while another workflow writes
    if _current(path) != wanted:
        try:  # a conversion, not atomic: the snapshot is read again under the shared lock below
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            atomic.write_text(path, wanted)
            lock.truncate(0)
            lock.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "digest": files.digest(config),
                                   "since": time.strftime("%Y-%m-%d %H:%M:%S"), "config": list(config_files)}))
            lock.flush()
            fcntl.flock(lock, fcntl.LOCK_SH)
        except BlockingIOError:
            pass  # another workflow holds the folder: refused below
        if _current(path) != wanted:  # refused, or another workflow wrote between the two locks
            message = _busy(path, lock, config)
            lock.close()
            raise FolderBusy(message)
    os.environ[DIGEST_VARIABLE] = files.digest(config)
    _held.append(lock)


def verify(config: Mapping, path: str | Path) -> None:
    """Inside a workflow's job: fail if `config`, read from the snapshot at `path`, is not the one the workflow
    started with. Elsewhere (no digest in the environment, or another file) there is nothing to compare."""
    expected = os.environ.get(DIGEST_VARIABLE)
    if not expected or Path(path).resolve() != Path(paths.CONFIG_JSON).resolve():
        return
    found = files.digest(config)
    if found != expected:
        raise ConfigError(f"{path}: holds config {found}, but this job's workflow started with config {expected}: "
                          f"something changed it while the workflow ran (nothing here has been computed with it); "
                          f"rerun the workflow")


def _open_lock(path: Path) -> IO:
    """The workflows' lock file, opened to read and append: never through a link, and a folder or a read-only
    results/ in its place is named in one line."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.fdopen(os.open(atomic.writable(path), os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o666),
                         "a+", encoding="utf-8")
    except OSError as error:
        if isinstance(error, atomic.WriteError):
            raise
        found = "a symbolic link" if error.errno == errno.ELOOP else error.strerror
        raise atomic.WriteError(f"{path}: cannot open the workflows' lock ({found}): it must be a file this user may "
                                "write, in a writable folder") from None


def _current(path: str | Path) -> str | None:
    """The snapshot's text; None where there is none yet (a folder or a named pipe in its place is named)."""
    if not os.path.lexists(path):
        return None
    return records.read_bytes(path, "the config snapshot").decode("utf-8", errors="replace")


def _busy(path: Path, lock: IO, config: Mapping) -> str:
    lock.seek(0)
    try:
        owner = json.loads(lock.read())
        who = (f"config {owner['digest']} ({', '.join(owner['config']) or 'no file'}; the snapshot was written "
               f"by pid {owner['pid']} on {owner['host']} at {owner['since']}, which may have finished since, while "
               "another workflow of that config joined it)")
    except (ValueError, KeyError, TypeError):
        who = "another config"
    return (f"{path}: a workflow with {who} is still running in this folder, and this one's config "
            f"{files.digest(config)} differs; wait for it to finish, or run this config in a folder of its own "
            f"(snakemake --directory DIR)")

"""Leaving a training job before its time limit, checkpointed, so that its resubmission continues it.

At paper scale one Sokoban run outlives a cluster's time limit (App. G.1: up to a day; limits are often 48 h or
less). SLURM ends a job at its limit with SIGTERM and, KillWait (30 s by default) later, SIGKILL: less time than
one compiled call of a paper-scale update takes, and the signal may reach the wrappers around the trainer
(sbatch --wrap, Snakemake's job step, srun) before or instead of it. So the trainer does not wait for a signal:
it knows its deadline (SLURM's end time for the job, or one given on the command line), and at each log point it
stops when the next log interval and a checkpoint would not finish before it, with exit status RESUBMIT. A
signal (SIGTERM, SIGUSR1) only asks for the same stop at the next log point. Snakemake's `retries` resubmit the
job, which resumes from the checkpoint. An attempt that a hard kill ended before its first checkpoint (one log
interval longer than the whole limit) makes the next one fail at once instead of resubmitting forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from parallel_experts.config.errors import PipelineError
from parallel_experts.core import atomic

RESUBMIT = 75  # the trainer's exit status after a clean stop before its deadline (EX_TEMPFAIL: try again later)
SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
SAFETY = 1.5  # the next log interval and checkpoint may take this many times the slowest seen so far
RECORD = "attempt.json"  # in the run folder: the update the last attempt with a deadline started from


class StoppedEarly(PipelineError):
    """Training stopped cleanly at a log point, checkpointed, before its time limit or on a signal."""

    exit_status = RESUBMIT


class NoProgress(PipelineError):
    """The previous attempt with a deadline ended before its first checkpoint: resubmitting would not get further."""


def slurm_seconds_left() -> float | None:
    """Seconds until SLURM ends the job this process runs in (None outside SLURM, or without a limit)."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    end = os.environ.get("SLURM_JOB_END_TIME")  # set by SLURM 23.02 and later: a Unix time
    if end:
        return float(end) - time.time()
    try:  # older SLURM: ask the controller once, at start (%L: time left, [days-]hours:minutes:seconds)
        left = subprocess.run(["squeue", "--noheader", "--format=%L", "--jobs", job], capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_time_left(left)


def parse_time_left(text: str) -> float | None:
    """squeue's %L ("2-03:04:05", "03:04:05", "04:05", "UNLIMITED", "NOT_SET", "INVALID") in seconds."""
    days, _, clock = text.rpartition("-")
    parts = clock.split(":")
    if not all(part.isdigit() for part in parts) or not 1 <= len(parts) <= 3 or (days and not days.isdigit()):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds + int(days or 0) * 86400


class Deadline:
    """When a training job must have stopped, and whether a signal asked it to stop now.

    `seconds`: the time it may run from now (the CLI's --time-limit), else SLURM's time left for the job, else
    none. `should_stop()` is asked at each log point; it times the intervals between calls itself."""

    def __init__(self, seconds: float | None = None):
        left = seconds if seconds is not None else slurm_seconds_left()
        self.end = None if left is None else time.monotonic() + left
        self.signal: str | None = None
        self.last = time.monotonic()
        self.slowest = 0.0  # the longest log interval plus checkpoint seen so far (the first includes compiling)

    @contextlib.contextmanager
    def listening(self) -> Iterator[Deadline]:
        """Within the block, SIGTERM and SIGUSR1 ask for a stop at the next log point instead of killing."""
        def ask(number, _frame):
            self.signal = signal.Signals(number).name

        previous = {number: signal.signal(number, ask) for number in SIGNALS}
        try:
            yield self
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def should_stop(self) -> str | None:
        """Why training must stop at this log point (a signal, or the deadline before the next one ends), or None."""
        now = time.monotonic()
        self.slowest, self.last = max(self.slowest, now - self.last), now
        if self.signal:
            return f"{self.signal} received"
        if self.end is not None and now + SAFETY * self.slowest > self.end:
            return f"{self.end - now:.0f} s left before the time limit, the next log interval takes up to " \
                   f"{self.slowest:.0f} s"
        return None


def begin(run_dir: Path, update: int, deadline: Deadline | None) -> None:
    """Record that an attempt with a deadline starts from the checkpoint at `update`; refuse to start when the
    previous attempt with a deadline started from the same one (it made no progress: resubmitting will not)."""
    if deadline is None or deadline.end is None:
        return
    path = Path(run_dir) / RECORD
    previous = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    if previous.get("update") == update:
        raise NoProgress(f"{run_dir}: the previous attempt ({previous['seconds']:.0f} s) also started from update "
                         f"{update} and ended before its first checkpoint; give the rule a longer runtime or "
                         f"checkpoint more often, or delete {path} to try again as it is")
    atomic.write_text(path, json.dumps({"update": update, "seconds": deadline.end - time.monotonic()}))


def stopped(run_dir: Path, update: int, why: str) -> StoppedEarly:
    """The error that ends an attempt which stopped cleanly, checkpointed at `update`."""
    return StoppedEarly(f"{run_dir}: stopped at update {update} ({why}); checkpointed, resubmit to continue")

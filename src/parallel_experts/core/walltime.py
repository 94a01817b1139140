"""Leaving a training job before its time limit, checkpointed, so that its resubmission continues it.

At paper scale one Sokoban run outlives a cluster's time limit (App. G.1: up to a day; limits are often 48 h or
less). SLURM ends a job at its limit with SIGTERM and, KillWait (30 s by default) later, SIGKILL: less time than
one compiled call of a paper-scale update takes, and the signal may reach the wrappers around the trainer
(sbatch --wrap, Snakemake's job step, srun) before or instead of it. So the trainer does not wait for a signal:
it knows its deadline (SLURM's end time for the job, or one given on the command line), and at each log point it
stops when the next log interval and a checkpoint would not finish before it, with exit status RESUBMIT. A
signal (SIGTERM, SIGUSR1) only asks for the same stop at the next log point. Snakemake's `retries` resubmit the
job, which resumes from the checkpoint. An attempt that a hard kill ended before its first checkpoint (one log
interval longer than the whole limit) makes the next one with no more time fail at once, instead of resubmitting
forever.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from parallel_experts.config.errors import PipelineError
from parallel_experts.core import atomic, compiling, signals
from parallel_experts.core.run_folder import ATTEMPTS, attempts, open_no_link

RESUBMIT = 75  # the trainer's exit status after a clean stop before its deadline (EX_TEMPFAIL: try again later)
SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
SAFETY = 1.5  # the next log interval and checkpoint may take this many times the slowest seen so far


class StoppedEarly(PipelineError):
    """Training stopped cleanly at a log point, checkpointed, before its time limit or on a signal."""

    exit_status = RESUBMIT


class NoProgress(PipelineError):
    """The previous attempt reached no checkpoint with as much time: resubmitting would not get further."""


def slurm_time_left() -> tuple[float | None, str | None]:
    """Seconds until SLURM ends the job this process runs in (None outside SLURM, or without a limit), and where
    that comes from, for the job's log (None outside SLURM)."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None, None
    end, ignored = os.environ.get("SLURM_JOB_END_TIME"), ""  # set by SLURM 23.02 and later: a Unix time
    if end:
        try:
            left = float(end) - time.time()
        except ValueError:
            left = math.nan
        if math.isfinite(left) and left > 0:
            return left, f"SLURM_JOB_END_TIME of job {job}"
        if math.isfinite(left):  # the limit has passed: SLURM may end the job any moment
            return 0.0, f"SLURM_JOB_END_TIME of job {job} has passed ({end}): stop at the first log point"
        ignored = f"SLURM_JOB_END_TIME={end[:40]!r} of job {job} is not a Unix time, so squeue is asked instead; "
    try:  # older SLURM: ask the controller once, at start (%L: time left, [days-]hours:minutes:seconds)
        run = subprocess.run(["squeue", "--noheader", "--format=%L", "--jobs", job], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"{ignored}squeue failed for job {job} ({error}): no deadline, the job runs until SLURM ends it"
    left = run.stdout.strip()
    return parse_time_left(left), f"{ignored}squeue --format=%L for job {job}: {left or run.stderr.strip()[:200]!r}"


def parse_time_left(text: str) -> float | None:
    """squeue's %L in seconds: "2-03:04:05", "03:04:05", "04:05"; "INVALID" once the job has run past its limit
    (SLURM checks limits only every half minute or so): 0; "UNLIMITED", "NOT_SET" or anything else: None."""
    if text == "INVALID":
        return 0.0
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
    none. `should_stop()` is asked at each log point. It times the log intervals itself, less the seconds JAX
    spent compiling in them (`core.compiling`, JAX's monitoring events): compiling happens once,
    in the first interval of an attempt, and would otherwise make every attempt of a short limit stop after one."""

    def __init__(self, seconds: float | None = None):
        left, self.source = (seconds, "--time-limit") if seconds is not None else slurm_time_left()
        self.allowed = left  # the attempt's whole time, setting up included
        self.end = None if left is None else time.monotonic() + left
        self.signal: str | None = None
        self.started = self.last = time.monotonic()
        self.compiled = compiling.seconds()  # the process's compile seconds at the last log point
        self.slowest = 0.0  # the longest log interval so far, compiling excluded (with its checkpoint, if any)

    def __str__(self) -> str:
        left = "no deadline" if self.end is None else f"{self.end - time.monotonic():.0f} s left"
        return f"{left} ({self.source or 'not in a SLURM job'})"

    @contextlib.contextmanager
    def listening(self) -> Iterator[Deadline]:
        """Within the block, SIGTERM and SIGUSR1 ask for a stop at the next log point instead of killing."""
        def ask(number, _frame):
            self.signal = signal.Signals(number).name

        previous = {number: signal.signal(number, ask) for number in SIGNALS}
        self.signal = self.signal or next(iter(signals.ASKED), None)  # one that came while the process started
        try:
            yield self
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def restart(self) -> None:
        """Time the first log interval from here: the loop starts (setting up and restoring are not an interval)."""
        self.last, self.compiled = time.monotonic(), compiling.seconds()

    def should_stop(self) -> str | None:
        """Why training must stop at this log point (a signal, or the deadline before the next one ends), or None."""
        now, compiled = time.monotonic(), compiling.seconds()
        interval = now - self.last - (compiled - self.compiled)
        self.last, self.compiled, self.slowest = now, compiled, max(self.slowest, interval)
        if self.signal:
            return f"{self.signal} received"
        if self.end is not None and now + SAFETY * self.slowest > self.end:
            return (f"{self.end - now:.0f} s left before the time limit, a log interval takes up to "
                    f"{self.slowest:.0f} s")
        return None


def begin(run_dir: Path, update: int, deadline: Deadline | None) -> None:
    """Note in the run folder's history that an attempt with a deadline starts from the checkpoint at `update`.
    Refuse to start when the previous attempt started from the same checkpoint with at least about as much time
    (it reached no checkpoint: neither will this one). Attempts compare their whole time, not what setting up left
    of it, which varies with what the process had compiled before."""
    if deadline is None or deadline.allowed is None:
        return
    starts = [entry for entry in attempts(run_dir) if entry["event"] == "start"]
    if starts and starts[-1]["update"] == update and starts[-1]["seconds"] >= 0.9 * deadline.allowed:
        raise NoProgress(f"{run_dir}: the previous attempt also started from update {update}, with "
                         f"{starts[-1]['seconds']:.0f} s, and ended before its next checkpoint; give the rule a longer "
                         f"runtime or checkpoint more often, or delete {Path(run_dir) / ATTEMPTS} to try again")
    _note(run_dir, {"event": "start", "update": update, "seconds": round(deadline.allowed, 1)})
    deadline.restart()


def stopped(run_dir: Path, update: int, why: str, deadline: Deadline) -> StoppedEarly:
    """The error that ends an attempt which stopped cleanly, checkpointed at `update`; noted in the run's attempts
    with the seconds it ran (a job's benchmark file times only its last attempt)."""
    _note(run_dir, {"event": "stop", "update": update, "why": why,
                    "seconds": round(time.monotonic() - deadline.started, 1)})
    return StoppedEarly(f"{run_dir}: stopped at update {update} ({why}); checkpointed, resubmit to continue")


def _note(run_dir: Path, entry: dict) -> None:
    atomic.writable(run_dir).mkdir(parents=True, exist_ok=True)
    descriptor = open_no_link(Path(run_dir) / ATTEMPTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    with open(descriptor, "a", encoding="utf-8") as file:
        file.write(json.dumps(entry) + "\n")

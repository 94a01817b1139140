"""Live training curves: TensorBoard event files beside a run, so that a job of days can be watched while it runs.

    tensorboard --logdir results      # every run of both domains, results/{domain}/runs/{run id}

The run's `curve.nc` stays the record; the event files show the same numbers at the same updates (the step of
every TensorBoard point is the update), plus two that no result keeps because they measure the machine: the
throughput since the previous log point (environment steps of all seeds together, or tokens, per second, compile
time excluded) and the seconds the job has spent compiling so far (tracing, lowering and XLA, or reading programs
from the persistent compilation cache; JAX's own monitoring events). A Sokoban run trains its seeds together, so
each seed is a TensorBoard run of its own (`seed{k}/` in the run folder); the run folder's own event file holds the
job's numbers, and the LM's whole curve.

A kill loses no point that a checkpoint holds: each log point is written and flushed to disk (tensorboardX's
`RecordWriter` fsyncs) before the trainer can checkpoint it. The file is written synchronously, not through
tensorboardX's `SummaryWriter`, whose `flush` does not wait for the events still queued for its writer thread. A
resumed job starts new event files whose first event purges every step after its checkpoint (TensorBoard's
`SessionLog.START` at that step, what `SummaryWriter(purge_step=...)` writes), so the updates that it trains again
appear once; a fresh start purges the curves of an earlier definition of the run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tensorboardX.event_file_writer import EventsWriter
from tensorboardX.proto.event_pb2 import Event, SessionLog
from tensorboardX.summary import scalar

from parallel_experts.core import atomic, compiling
from parallel_experts.core.run_folder import latest

# Compile seconds (`core.compiling`) include a persistent-cache hit's read. A program's first run costs a little
# more than they show (about 0.5 s for a small program on two cores), which counts as training.
AXES = ("update", "tokens")  # what a log point counts along: the curves' x-axes, not curves


class EventFile:
    """A new event file in `folder` (one TensorBoard run) that hides every earlier event from `purge_step` on. A
    write the file system refuses (a full disk) names the folder: tensorboardX's own error names no file."""

    def __init__(self, folder: Path, purge_step: int):
        self.folder = folder
        with self.refused():
            atomic.writable(folder).mkdir(parents=True, exist_ok=True)
            # TensorBoard reads a folder's files in name order; the nanoseconds keep two files of one second in order.
            self.writer = EventsWriter(str(folder / "events"), f".{time.time_ns()}")
            self.writer.write_event(Event(wall_time=time.time(), step=purge_step,
                                          session_log=SessionLog(status=SessionLog.START)))

    def write(self, step: int, values: Mapping[str, float]) -> None:
        with self.refused():
            for tag, value in values.items():
                self.writer.write_event(Event(wall_time=time.time(), step=step, summary=scalar(tag, value)))
            self.writer.flush()

    def close(self) -> None:
        with self.refused():
            self.writer.close()

    @contextlib.contextmanager
    def refused(self) -> Iterator[None]:
        try:
            yield
        except atomic.WriteError:
            raise
        except OSError as error:
            raise atomic.WriteError(f"{self.folder}: cannot write the run's TensorBoard events "
                                    f"({os.strerror(error.errno) if error.errno else error}); what the run "
                                    "checkpointed is kept") from None


class TrainingCurves:
    """The event files of one training job in `run_dir`, written at each of the trainer's log points (`log`, the
    trainer's `on_log`). Enter it after the run lock (which may discard a checkpoint) and before training starts.

    `work` names what one update does `work_per_update` times ("env_steps", "tokens"); `seeds` are the seeds that
    a Sokoban run trains together, whose per-seed lists in a log point go to `seed{k}/`."""

    def __init__(self, run_dir: str | Path, work: str, work_per_update: int, seeds: Sequence[int] = ()):
        run_dir = Path(run_dir)
        found = latest(run_dir)
        self.update = found[1] if found else 0  # where the trainer resumes
        self.work, self.work_per_update = work, work_per_update
        self.job = EventFile(run_dir, self.update + 1)
        self.seeds = [EventFile(run_dir / f"seed{seed}", self.update + 1) for seed in seeds]
        self.started = compiling.seconds()  # the process's compile seconds when this job's curves began
        self.since = (time.perf_counter(), self.started)  # the clock and compile seconds at the previous log point

    def __enter__(self) -> TrainingCurves:
        return self

    def __exit__(self, *exc_info) -> None:
        for file in [self.job, *self.seeds]:
            file.close()

    def log(self, point: Mapping) -> None:
        """One log point of either trainer: its `update`, numbers (the job's) and per-seed lists (each seed's)."""
        update, now, compiled = point["update"], time.perf_counter(), compiling.seconds()
        clock, before = self.since
        training = now - clock - (compiled - before)
        job = {f"speed/{self.work}_per_second": (update - self.update) * self.work_per_update / training,
               "speed/compile_seconds": compiled - self.started}
        per_seed = [{} for _ in self.seeds]
        for name, value in point.items():
            if name in AXES:
                continue
            if isinstance(value, list):
                for values, v in zip(per_seed, value, strict=True):
                    values[f"train/{name}"] = v
            else:
                job[f"train/{name}"] = value
        self.job.write(update, job)
        for file, values in zip(self.seeds, per_seed):
            file.write(update, values)
        self.update, self.since = update, (now, compiled)

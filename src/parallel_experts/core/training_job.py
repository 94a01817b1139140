"""The frame of one training job, the same for both domains: the run folder's lock, the deadline (said on stderr
when it has one), and the live curves around the training itself.

    with training_job(run_dir, run.to_dict(), time_limit) as job:
        trainer = ...                                   # the domain's: built once the folder is the job's
        carry, log = job.train(partial(train, trainer, ...), "env_steps", per_update, seeds)
        save_outputs(...)

A job whose deadline comes stops cleanly at a log point and leaves with exit status 75 (`core.walltime`), so that
it is resubmitted and resumes from its checkpoint.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from parallel_experts.core.run_folder import run_lock
from parallel_experts.core.tensorboard import TrainingCurves
from parallel_experts.core.walltime import Deadline

Trained = TypeVar("Trained")


@dataclass(frozen=True)
class Job:
    run_dir: Path
    deadline: Deadline

    def train(self, train: Callable[..., Trained], work: str, work_per_update: int,
              seeds: Sequence[int] = ()) -> Trained:
        """`train(on_log=..., deadline=...)`, its log points written as TensorBoard curves beside the run
        (`core.tensorboard`: `work` done `work_per_update` times an update, per seed of `seeds`)."""
        with TrainingCurves(self.run_dir, work, work_per_update, seeds) as curves:
            return train(on_log=curves.log, deadline=self.deadline)


@contextlib.contextmanager
def training_job(run_dir: str | Path, definition: Mapping, time_limit: float | None) -> Iterator[Job]:
    """Hold `run_dir` for training `definition` (`core.run_folder.run_lock`) until `time_limit` seconds from now,
    else the time SLURM leaves the job, else no limit; SIGTERM and SIGUSR1 ask for a stop at the next log point."""
    with run_lock(run_dir, definition), Deadline(time_limit).listening() as deadline:
        if deadline.source:  # a SLURM job, or --time-limit: say when it must stop (a local run stays as it was)
            print(f"{run_dir}: {deadline}", file=sys.stderr)
        yield Job(Path(run_dir), deadline)

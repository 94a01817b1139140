"""The rehearsal's real part: Sokoban training updates run at a config's exact shapes, where they fit this machine.

For every Sokoban budget but the largest, and every expert kind, the run whose training update the rehearsal
predicts the most memory for trains `updates` updates for real (the paper: two); of the largest budget, the run
predicted the least memory trains one. Each checks a finite loss and a checkpoint written and read back at that
shape (`sokoban.train.train(..., stop_after=1)`, `core.checkpoint`). The training levels are the config's; a
table with fewer levels than the config's source holds (a partial local copy) is tiled to the source's count, so
that the table has its exact shape. A run whose predicted peak would not leave this machine a margin trains as many
of its seeds as fit (`seeds_that_fit`; the per-seed shapes unchanged, under the same vmap), and says so; `seeds`
sets that number for every run instead.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jax
import numpy as np

from parallel_experts.core.benchmarking import host_memory
from parallel_experts.core.checkpoint import load_checkpoint
from parallel_experts.core.budget import sokoban_work
from parallel_experts.sokoban import experiment, train


HOST_SHARE = 0.6  # of this machine's memory, what one rehearsed update may plan: the OS, the workflow and XLA's
# own allocations beside the plan take the rest (a medium update planned at 23.5 GB was killed on a 24 GB machine)


def predicted_peaks(records: Sequence[Mapping]) -> dict[str, int]:
    """Each Sokoban run's largest predicted training peak (bytes) in the rehearsal's records."""
    peak: dict[str, int] = {}
    for record in records:
        if record["rule"] == "sokoban_train" and "peak_bytes" in record:
            for _, wildcards in record["jobs"]:
                run_id = wildcards.removeprefix("run=")
                peak[run_id] = max(peak.get(run_id, 0), record["peak_bytes"])
    return peak


def seeds_that_fit(peak: float, seeds: int, memory: float) -> int:
    """How many of a run's `seeds` one update can train in `memory` bytes when all of them plan `peak` bytes: the
    whole run where it fits, else the seeds' share of it (the vmapped seeds hold almost all of the peak), at least
    one."""
    return seeds if peak <= memory else max(1, min(seeds, math.floor(seeds * memory / peak)))


def chosen_runs(sokoban: experiment.Families, records: Sequence[Mapping], updates: int = 2
                ) -> list[tuple[experiment.Run, int]]:
    """(run, updates to train) of every budget and expert kind as the module says, from the rehearsal's records."""
    peak = predicted_peaks(records)
    sweep = [run for run in sokoban.sweeps if run.id in peak]
    channels = sokoban.settings.encoder_channels
    names = [b.name for b in sorted(sokoban.budgets, key=lambda b: sokoban_work(b.anchor, channels))]
    found = []
    for name in names[:-1]:
        for kind in sorted({run.agent.expert for run in sweep}):
            members = [run for run in sweep if run.budget == name and run.agent.expert == kind]
            if members:
                found.append((max(members, key=lambda run: peak[run.id]), updates))
    largest = [run for run in sweep if run.budget == names[-1]]
    if largest:
        found.append((min(largest, key=lambda run: peak[run.id]), 1))
    return found


def train_for_real(run, levels: np.ndarray, count: int, updates: int, run_dir: str | Path,
                   seeds: int | None = None) -> dict:
    """`updates` updates of `run` in one compiled call at the config's shapes (a table of `count` levels), a
    checkpoint written and read back; what happened, in numbers."""
    table = np.resize(levels, (count, *levels.shape[1:]))  # a partial copy of the split, tiled to its size
    chosen = run.seeds[:seeds] if seeds else run.seeds
    group = run.train.seeds_at_once and math.gcd(run.train.seeds_at_once, len(chosen))  # groups that split them
    config = dataclasses.replace(run.train, log_interval=updates, checkpoint_every=1, seeds_at_once=group)
    shutil.rmtree(run_dir, ignore_errors=True)  # a scratch folder: the updates run from the start every time
    start = time.perf_counter()
    trainer = train.Trainer(run.agent, config, table)
    carry, log = train.train(trainer, chosen, run_dir, stop_after=1)
    seconds = time.perf_counter() - start
    restored, host = load_checkpoint(Path(run_dir), carry)
    same = all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(carry), jax.tree.leaves(restored)))
    losses = np.asarray(log.curve[-1]["loss"])
    return {"run": run.id, "seeds": len(chosen), "updates": updates, "levels": count, "seconds": seconds,
            "loss": losses.tolist(), "finite": bool(np.isfinite(losses).all()), "checkpoint_update": host["update"],
            "resumed_equal": same}


def run_all(sokoban: experiment.Families, records: Sequence[Mapping], levels: np.ndarray, folder: str | Path,
            seeds: int | None = None, progress: Callable[[str], None] = print) -> list[dict]:
    """`train_for_real` for every run `chosen_runs` picks, each in its own folder under `folder`."""
    count = experiment.level_count(sokoban.settings.levels["train"])
    peak, memory = predicted_peaks(records), HOST_SHARE * host_memory()
    found = []
    for run, updates in chosen_runs(sokoban, records):
        fit = seeds or seeds_that_fit(peak[run.id], len(run.seeds), memory)
        if fit < len(run.seeds):
            progress(f"{run.id}: {fit} of its {len(run.seeds)} seeds (the whole update plans "
                     f"{peak[run.id] / 1e9:.1f} GB, this machine holds {memory / 1e9:.1f} GB for it)")
        result = train_for_real(run, levels, count, updates, Path(folder) / run.id, fit)
        found.append(result)
        progress(f"{run.id}: {updates} updates of {result['seeds']} seeds in {result['seconds']:.0f} s, loss "
                 f"{result['loss']}, checkpoint at update {result['checkpoint_update']} read back "
                 f"{'equal' if result['resumed_equal'] else 'DIFFERENT'}")
    return found

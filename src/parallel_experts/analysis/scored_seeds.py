"""Which scores of a results dataset may be a verdict's evidence.

A run dataset holds every run at every seed any of its runs has, so a run trained with fewer seeds is padded with
NaN there: missing by design. Every seed the config trains a run with must have a finite score; one that is missing,
NaN or infinite is not a result, and no claim that reads the dataset is decided from it (findings.judge). The timing
tables must time every cell that is not out of memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import xarray as xr

from parallel_experts.study import Study

SCORES = {"final_five": "final-five return", "validation_loss": "validation loss"}  # Sokoban's, the LM's
TIMES = ("decode_seconds", "round_seconds")  # Table 5's, Table 6's


def trained_seeds(study: Study) -> dict[str, dict[str, set[int]]]:
    """Each run dataset of the study (by path, Study.dataset_runs) -> each of its runs (by its id there) -> the
    seeds the config trains it with."""
    seeds = {path: {run.id: set(run.seeds) for run in runs} for path, runs in study.sokoban_datasets.items()}
    for path, runs in study.lm_datasets.items():  # an LM run is one seed; the dataset's `run`, its configuration
        for run in runs:
            seeds.setdefault(path, {}).setdefault(run.configuration, set()).add(run.seed)
    return seeds


def faults(ds: xr.Dataset, trained: Mapping[str, set[int]] | None) -> list[str]:
    """What in `ds` is no evidence, in words: each seed of `trained` (run id -> seeds; None for a dataset that is no
    run dataset of the config) without a finite score, every infinite score, and every timing that is not finite
    where its cell is not out of memory."""
    found = []
    for name in (name for name in SCORES if name in ds):
        scores = ds[name] if "seed" in ds[name].dims else ds[name].expand_dims(seed=[0])  # LM results before seeds
        table = scores.transpose("run", "seed").to_pandas()
        found += [f"run {table.index[i]}, seed {table.columns[j]}: {SCORES[name]} {table.iat[i, j]}"
                  for i, j in np.argwhere(np.isinf(table.to_numpy(float)))]
        for run, seeds in (trained or {}).items():
            for seed in sorted(seeds):
                there = run in table.index and seed in table.columns
                if not there or np.isnan(table.at[run, seed]):
                    found.append(f"run {run}, seed {seed}: no {SCORES[name]} "
                                 f"({'NaN' if there else 'not in the dataset'})")
    for name in (name for name in TIMES if name in ds):
        timed = ds[name].where(~ds["oom"], 0.0) if "oom" in ds else ds[name]  # out of memory: no time, by design
        found += [f"{name} not finite at " + ", ".join(f"{dim} {timed[dim].values[i]}"
                                                       for dim, i in zip(timed.dims, at))
                  for at in np.argwhere(~np.isfinite(timed.values))]
    return found


def of_results(study: Study, paths: Mapping[str, str | Path], data: Mapping[str, xr.Dataset]
               ) -> dict[str, list[str]]:
    """`faults` of each result in `data` (by name; read from `paths[name]`), against the seeds the config trains the
    runs of that file with (none where it is not one of the config's run datasets)."""
    trained = {Path(path).resolve(): seeds for path, seeds in trained_seeds(study).items()}
    return {name: faults(ds, trained.get(Path(paths[name]).resolve())) for name, ds in data.items()}


def of_result(study: Study, path: str | Path, ds: xr.Dataset) -> list[str]:
    """`faults` of one result, as a report page reads it (see `of_results`)."""
    return of_results(study, {path: path}, {path: ds})[path]

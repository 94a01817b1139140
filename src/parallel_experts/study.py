"""The study a configuration defines: both domains' runs, checked together, and which result dataset collects which
of them, and which of its settings is the paper's Fig. 5.

`check` is the whole validation of a config: its schema, every budget's allocation grid, and every run that the
domains build from it, so that what a run's settings reject (fewer updates than one log interval, a window that
does not divide a batch, an evaluation that does not fit the validation shard) fails before anything trains. The
workflow calls it once when it starts; `load` calls it for every command that reads a config.
"""

from __future__ import annotations

import copy

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from parallel_experts.config import files, locations, schema
from parallel_experts.config.errors import ConfigError
from parallel_experts.config.options import option
from parallel_experts.core import atomic, budget, compile_cache, precision
from parallel_experts.core.definitions import by_id
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.lm.shards import DataError, check_fit
from parallel_experts.results import paths, snapshot
from parallel_experts.sokoban import experiment as sokoban_experiment


def check(config: Mapping) -> None:
    """Validate `config` completely; raise ConfigError naming the first problem."""
    schema.validate(config)
    for domain in budget.DOMAINS:
        budget.budgets(config, domain)
    schema.check_references(config)
    locations.check(config)
    sokoban_experiment.families(config)
    _check_lm(config)


def load(config_files: Sequence[str], domain: str | None = None) -> dict:
    """The validated config of `config_files` (merged in order), as a command reads it: checked whole (`check`), the
    snapshot a workflow's job started with verified, the compile cache set up before anything imports JAX, and,
    for a command that computes one domain's jobs (`sokoban`, `lm`), that family's matmul precision."""
    loaded = files.load(config_files)
    try:
        check(loaded)
    except ConfigError as error:
        raise ConfigError(f"{' + '.join(config_files)}: {error}") from None
    for path in config_files:  # a job of a workflow: the snapshot it started with
        snapshot.verify(loaded, path)
    locations.allow(loaded)
    cache = loaded.get("compile_cache", paths.XLA_CACHE)
    compile_cache.use(atomic.writable(cache) if cache else None)
    if domain is not None:
        precision.use(precision.of(loaded, domain))
    return loaded


@dataclass(frozen=True)
class CheckConfig:
    """validate config files (merged in order) and exit"""

    config: tuple[str, ...] = option(None, "config", nargs="+", metavar="files")


def check_config(options: CheckConfig, config: Mapping) -> int:
    print(f"{' + '.join(options.config)}: valid (scale {config['scale']}, digest {files.digest(config)})")
    return 0


def given(paths: Sequence[str], overrides: Mapping) -> dict:
    """The workflow's config as this project reads it, checked: the files `paths` read strictly, as check-config
    reads them (files.read: YAML 1.2's numbers, no duplicate key; Snakemake reads them leniently, as YAML 1.1, so
    `4e-4` would be a string), with the command line's `overrides` (Snakemake's --config) on top. A problem is named
    by the files where they alone have it, else by `--config`."""
    loaded = files.load(paths)
    found = copy.deepcopy(loaded)
    files.merge(found, overrides)
    named = " + ".join(map(str, paths)) or "config"
    try:
        check(found)
    except ConfigError as error:
        if overrides and _problem(loaded) != str(error):
            raise ConfigError(f"--config: {error}") from None
        raise ConfigError(f"{named}: {error}") from None
    locations.allow(found)
    return found


def _problem(config: Mapping) -> str | None:
    try:
        check(config)
    except ConfigError as error:
        return str(error)
    return None


def _check_lm(config: Mapping) -> None:
    """Build the LM runs (their TrainConfig refuses a window or segment that does not divide batch_tokens, and
    so on) and check that the evaluation fits the validation shard, so that neither fails after training."""
    lm_experiment.runs_by_id(config)  # the sweep and the ablations
    if "pretokenized" in config["lm"]["corpus"]:  # the published validation shard: 100M tokens, fits any setting
        return
    spec = lm_experiment.evaluation(config)
    for window in config["lm"]["windows"]:
        try:  # shard 0 (validation) holds lm.shard_tokens tokens wherever training shards follow it
            check_fit(config["lm"]["shard_tokens"], window, spec["streams"], spec["lanes"])
        except DataError as error:
            raise ConfigError(f"lm.evaluation: {error}") from None


@dataclass(frozen=True)
class Runs:
    """Both domains' runs of a config, each domain's families built once, and the run datasets that collect them."""

    sokoban: sokoban_experiment.Families
    lm: lm_experiment.Families

    @property
    def sokoban_datasets(self) -> dict[str, list[sokoban_experiment.Run]]:
        """The Sokoban run datasets (`dataset_runs`): the budget sweeps, the expert-count sweep, the ablations."""
        found = {paths.SOKOBAN_SWEEP: self.sokoban.sweeps, paths.EXPERT_COUNT: self.sokoban.expert_count,
                 paths.ablations("sokoban"): list(by_id(self.sokoban.ablations.values()).values())}
        return {path: members for path, members in found.items() if members}

    @property
    def lm_datasets(self) -> dict[str, list[lm_experiment.Run]]:
        """The LM run datasets (`dataset_runs`): the sweep and the ablations."""
        found = {paths.LM_SWEEP: self.lm.sweeps,
                 paths.ablations("lm"): list(by_id(self.lm.ablations.values()).values())}
        return {path: members for path, members in found.items() if members}


def runs(config: Mapping) -> Runs:
    """Every run of a validated config, by domain and family."""
    return Runs(sokoban_experiment.families(config), lm_experiment.families(config))


def dataset_runs(config: Mapping) -> dict[str, list]:
    """Each run dataset a report reads -> the runs whose results it collects (the workflow's dataset rules read
    this; the planner reads `runs`, by domain): the Sokoban sweeps, the expert-count sweep, the ablations (a run
    two ablations share once), the LM sweep and its ablations. A family the config lacks has no entry."""
    found = runs(config)
    return found.sokoban_datasets | found.lm_datasets


def fig5_setting(config: Mapping) -> tuple[str, int]:
    """Fig. 5's LM sweep: the small budget at the config's first window (128 tokens in the paper). Its page, the
    expert-count page's LM panel and the claims that quote Fig. 5 all read this one setting."""
    return "small", config["lm"]["windows"][0]

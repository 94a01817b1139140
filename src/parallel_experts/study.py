"""The study a configuration defines (`Study`): its settings as typed values and both domains' runs, built once and
checked together; which result dataset collects which runs, and which of its settings is the paper's Fig. 5.

Building it is the whole validation of a config (`check`): its schema, every budget's allocation grid, and every run
that the domains build from it, so that what a run's settings reject (fewer updates than one log interval, a window
that does not divide a batch, an evaluation that does not fit the validation shard) fails before anything trains.
The workflow builds it once when it starts (`given`); `load` builds it for every command that reads a config, and
the command's function takes it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from parallel_experts.config import files, locations, schema, settings
from parallel_experts.config.errors import ConfigError
from parallel_experts.config.options import option
from parallel_experts.core import atomic, budget, compile_cache, precision
from parallel_experts.core.definitions import by_id
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.lm import settings as lm_settings
from parallel_experts.lm.shards import DataError, check_fit
from parallel_experts.results import paths, snapshot
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.sokoban import settings as sokoban_settings


@dataclass(frozen=True)
class Study:
    """A validated config as typed values, each built once: the study-wide settings (`config.settings`), and both
    domains' runs with the section they were built from (`sokoban.settings.SokobanSettings`,
    `lm.settings.LmSettings`), the budgets they spend and what their jobs cost besides them
    (`sokoban.experiment.Families`, `lm.experiment.Families`). Below the command line every function takes the part
    it needs.

    `config` is the validated mapping it was built from, kept whole for what records or copies a config (a result's
    provenance, its digest, a written design); nothing reads a setting from it."""

    config: Mapping
    scale: str
    description: str
    accelerator: str
    resources: settings.Resources
    plan: settings.PlanAssumptions
    power: settings.PowerAssumptions
    margins: settings.Margins
    sokoban: sokoban_experiment.Families
    lm: lm_experiment.Families

    @classmethod
    def of(cls, config: Mapping, validated: bool = False) -> Study:
        """The study of `config`, validated completely: ConfigError naming the first problem. A config `validated`
        already (the snapshot a workflow's results record) skips the schema and the paths, which depend on where it
        is read."""
        if not validated:
            schema.validate(config)
        sokoban_section, lm_section = sokoban_settings.SokobanSettings.of(config), lm_settings.LmSettings.of(config)
        sokoban_budgets = budget.budgets(sokoban_section.budgets, sokoban_section.proxy)
        lm_budgets = budget.budgets(lm_section.budgets, lm_section.proxy)
        if not validated:
            schema.check_references(config)
            locations.check(config)
        resources = settings.Resources.of(config)
        sokoban = sokoban_experiment.families(sokoban_section, sokoban_budgets)
        lm = lm_experiment.families(lm_section, lm_budgets, resources)  # the sweep and the ablations
        _check_evaluation(lm_section)
        return cls(config, config["scale"], config["description"], config["accelerator"], resources,
                   settings.PlanAssumptions.of(config), settings.PowerAssumptions.of(config),
                   settings.Margins.of(config), sokoban, lm)

    @property
    def fig5(self) -> tuple[str, int]:
        """Fig. 5's LM sweep: the small budget at the config's first window (128 tokens in the paper). Its page, the
        expert-count page's LM panel and the claims that quote Fig. 5 all read this one setting."""
        return "small", self.lm.settings.windows[0]

    def families(self, domain: str) -> sokoban_experiment.Families | lm_experiment.Families:
        """The runs of `domain` (`sokoban` or `lm`), with the settings and budgets they were built from."""
        return self.sokoban if domain == "sokoban" else self.lm

    def matmul_precision(self, domain: str) -> str:
        """The precision of `domain`'s float32 matmuls in every job of it (`<domain>.training.matmul_precision`)."""
        if domain == "sokoban":
            return self.sokoban.settings.train.matmul_precision
        return self.lm.settings.training.matmul_precision

    @property
    def digest(self) -> str:
        return files.digest(self.config)

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

    @property
    def dataset_runs(self) -> dict[str, list]:
        """Each run dataset a report reads -> the runs whose results it collects (the workflow's dataset rules read
        this; the planner reads each domain's): the Sokoban sweeps, the expert-count sweep, the ablations (a run two
        ablations share once), the LM sweep and its ablations. A family the config lacks has no entry."""
        return self.sokoban_datasets | self.lm_datasets


def check(config: Mapping) -> None:
    """Validate `config` completely; raise ConfigError naming the first problem."""
    Study.of(config)


def load(config_files: Sequence[str], domain: str | None = None) -> Study:
    """The study of `config_files` (merged in order), as a command reads it: checked whole (`Study.of`), the
    snapshot a workflow's job started with verified, the compile cache set up before anything imports JAX, and,
    for a command that computes one domain's jobs (`sokoban`, `lm`), that family's matmul precision."""
    loaded = files.load(config_files)
    try:
        found = Study.of(loaded)
    except ConfigError as error:
        raise ConfigError(f"{' + '.join(config_files)}: {error}") from None
    for path in config_files:  # a job of a workflow: the snapshot it started with
        snapshot.verify(loaded, path)
    locations.allow(loaded)
    cache = loaded.get("compile_cache", paths.XLA_CACHE)
    compile_cache.use(atomic.writable(cache) if cache else None)
    if domain is not None:
        precision.use(found.matmul_precision(domain))
    return found


@dataclass(frozen=True)
class CheckConfig:
    """validate config files (merged in order) and exit"""

    config: tuple[str, ...] = option(None, "config", nargs="+", metavar="files")


def check_config(options: CheckConfig, study: Study) -> int:
    print(f"{' + '.join(options.config)}: valid (scale {study.scale}, digest {study.digest})")
    return 0


def given(paths: Sequence[str], overrides: Mapping) -> Study:
    """The workflow's config as this project reads it, checked: the files `paths` read strictly, as check-config
    reads them (files.read: YAML 1.2's numbers, no duplicate key; Snakemake reads them leniently, as YAML 1.1, so
    `4e-4` would be a string), with the command line's `overrides` (Snakemake's --config) on top. A problem is named
    by the files where they alone have it, else by `--config`."""
    loaded = files.load(paths)
    found = copy.deepcopy(loaded)
    files.merge(found, overrides)
    named = " + ".join(map(str, paths)) or "config"
    try:
        study = Study.of(found)
    except ConfigError as error:
        if overrides and _problem(loaded) != str(error):
            raise ConfigError(f"--config: {error}") from None
        raise ConfigError(f"{named}: {error}") from None
    locations.allow(found)
    return study


def _problem(config: Mapping) -> str | None:
    try:
        check(config)
    except ConfigError as error:
        return str(error)
    return None


def _check_evaluation(lm: lm_settings.LmSettings) -> None:
    """That the evaluation fits the validation shard at every window, so that it does not fail after training (the
    published validation shard, 100M tokens, fits any setting)."""
    if "pretokenized" in lm.corpus:
        return
    for window in lm.windows:
        try:  # shard 0 (validation) holds lm.shard_tokens tokens wherever training shards follow it
            check_fit(lm.shard_tokens, window, lm.evaluation.streams, lm.evaluation.lanes)
        except DataError as error:
            raise ConfigError(f"lm.evaluation: {error}") from None

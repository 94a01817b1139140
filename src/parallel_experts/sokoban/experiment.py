"""The Sokoban runs a config asks for: every sweep × budget × allocation × recurrence, each with its seeds, and
the optional expert-count sweep (fixed depth and width, E varied; no budget, so its work grows with E) and every
ablation (`sokoban.ablations`: one recurrent ConvLSTM allocation of a budget, one agent setting varied).

A run is named by what defines it (`convlstm/recurrent/small/L2-E2-d64`; `expert_count/recurrent/L2-E4-d8` for
the expert-count sweep, which has no budget; an ablation's run with the settings that ablations vary where they
are not the default: `ablation/recurrent/medium/L2-E7-d64-r1`), so its files sit in a readable folder and
rerunning the same config recomputes nothing; its full definition travels as JSON in the rule's params, so a
changed setting retrains it. An agent trains once, whichever families ask for it: an ablation's or the expert-count
sweep's agent that a budget sweep trains the same way, with every seed asked for, is that sweep's run (`shared`),
and two ablations of one allocation share their default run.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import xarray as xr
from tqdm import tqdm  # not tqdm.auto, which warns on the report pages that import this module (no ipywidgets)

from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.core import aggregation, budget
from parallel_experts.core.definitions import Definition, by_id, family_id
from parallel_experts.results import paths, store
from parallel_experts.results.store import run_results, with_ablations
from parallel_experts.sokoban import boxoban, generator, jobs, solver
from parallel_experts.sokoban.levels import LevelError, LevelSet
from parallel_experts.sokoban.settings import (AgentConfig, ExpertCount, Probes, SokobanSettings, Sweep, TrainConfig,
                                                agent_options)

EXPERT_COUNT = "expert_count"  # the config key (sokoban.expert_count) and the sweep name of its runs
ABLATION = "ablation"  # the sweep name of every ablation's runs
ABLATIONS = ("aggregation", "radius")  # the agent settings an ablation varies (Fig. 10 left; Fig. 11)
# Sweep names that other run families use (sweep name -> the config block whose runs carry it).
RESERVED = {EXPERT_COUNT: f"sokoban.{EXPERT_COUNT}", ABLATION: "sokoban.ablations"}
FULL = "full"  # how a config writes the radius that reaches every expert (AgentConfig.radius None)


@dataclass(frozen=True)
class Run(Definition):
    sweep: str
    budget: str | None  # None: the expert-count sweep, whose allocations spend no common budget
    agent: AgentConfig
    train: TrainConfig
    seeds: tuple[int, ...]

    @property
    def id(self) -> str:
        where = [family_id(self.agent.recurrent)] + ([self.budget] if self.budget is not None else [])
        variant = variant_id(self.agent) if self.sweep == ABLATION else ""  # a sweep's runs keep the ids they had
        return "/".join([self.sweep, *where, budget.allocation_id(self.agent)]) + variant

    def to_dict(self) -> dict:
        d = super().to_dict()
        # Runs defined before these settings existed keep their params where they take the default: not retrained.
        if self.agent.radius is None:
            del d["agent"]["radius"]
        for name, default in (("remat", False), ("seeds_at_once", None), ("matmul_precision", "default")):
            if d["train"][name] == default:
                del d["train"][name]
        return d


def variant_id(agent: AgentConfig) -> str:
    """The settings an ablation varies, in a run id where they are not AgentConfig's defaults: `-mean`, `-r1`."""
    rule = "" if agent.aggregation == AgentConfig.aggregation else f"-{agent.aggregation}"
    return rule + ("" if agent.radius is None else f"-r{agent.radius}")


def shared(run: Run, sweep_runs: list[Run]) -> Run:
    """The budget sweeps' run that trains `run`'s agent the same way with every seed of `run`, else `run` itself.
    Such a run has more seeds than `run` asks for where the families' seeds differ: an ablation scores it at
    its own seeds (sokoban.ablations.runs), Fig. 6 at all of them."""
    for other in sweep_runs:
        # How many seeds train at once is not a way of training: it depends on the seed count, as the vmap does.
        same = replace(other.train, seeds_at_once=None) == replace(run.train, seeds_at_once=None)
        if other.agent == run.agent and same and set(run.seeds) <= set(other.seeds):
            return other
    return run


def runs(settings: SokobanSettings, budgets: Sequence[budget.Budget]) -> list[Run]:
    """Every run of every Sokoban budget sweep (`sokoban.sweeps`), in a stable order: each budget (`budgets`: the
    config's, parsed), each recurrence, each allocation the family trains there (`Budget.allocations_of`), with the
    seeds the sweep gives the family at that budget (`sweep_seeds`). The expert-count sweep and the ablations have
    their own lists (expert_count_runs, ablation_runs); ids never collide, as each begins with its sweep's name."""
    by_name = {b.name: b for b in budgets}
    found = []
    for name, sweep in settings.sweeps.items():
        if name in RESERVED:  # run ids begin with the sweep name, so these would collide
            raise ConfigError(f"sokoban.sweeps.{name}: the name is taken by the runs of {RESERVED[name]}; "
                              "rename this sweep")
        _check_sweep_seeds(name, sweep)
        for budget_name in sweep.budgets:
            for recurrent in sweep.recurrent:
                seeds = sweep_seeds(settings, name, recurrent, budget_name)
                train = budget_train_config(settings, budget_name, seeds, f"sokoban.sweeps.{name}")
                for a in by_name[budget_name].allocations_of(recurrent):
                    found.append(Run(name, budget_name, _agent(settings, sweep, a, recurrent), train, seeds))
    return found


def sweep_seeds(settings: SokobanSettings, sweep_name: str, recurrent: bool, budget_name: str) -> tuple[int, ...]:
    """The seeds of one family's runs of a sweep at one budget: `sokoban.sweeps.<name>.seeds` where it gives them
    (one list for the whole sweep, or by family: a list, or by budget), else the budget's (`_seeds`)."""
    given = settings.sweeps[sweep_name].seeds
    if isinstance(given, Mapping):
        by_family = given.get(family_id(recurrent))
        given = by_family.get(budget_name) if isinstance(by_family, Mapping) else by_family
    return _seeds(settings, budget_name) if given is None else given


def _seeds(settings: SokobanSettings, budget_name: str) -> tuple[int, ...]:
    """The seeds of a budget's runs: `sokoban.budgets.<name>.seeds`, else the top-level `seeds`."""
    return settings.budgets[budget_name].seeds or settings.seeds


def _check_sweep_seeds(name: str, sweep: Sweep) -> None:
    """Refuse a sweep's seeds by family or budget that name a family or budget the sweep does not train."""
    given, where = sweep.seeds, f"sokoban.sweeps.{name}.seeds"
    if not isinstance(given, Mapping):
        return
    families = [family_id(recurrent) for recurrent in sweep.recurrent]
    for family, per_budget in given.items():
        if family not in families:
            raise ConfigError(f"{where}.{family}: the sweep trains no {family} runs (its families: "
                              f"{', '.join(families)})")
        for budget_name in per_budget if isinstance(per_budget, Mapping) else ():
            if budget_name not in sweep.budgets:
                raise ConfigError(f"{where}.{family}.{budget_name}: not a budget of the sweep (its budgets: "
                                  f"{', '.join(sweep.budgets)})")


def ablation_runs(settings: SokobanSettings, budgets: Sequence[budget.Budget], sweep_runs: list[Run]
                  ) -> dict[str, list[Run]]:
    """Each ablation's runs (`sokoban.ablations.<setting>`), in the order of its values: the recurrent ConvLSTM
    agent at one allocation of one budget, with agent.<setting> set to each value and the ablation's seeds
    (default: the budget's). Two ablations' runs of the same agent are one run (results.by_id), and so are an
    ablation's and a budget sweep's (`shared`; `sweep_runs`: `runs`)."""
    by_name = {b.name: b for b in budgets}
    found: dict[str, list[Run]] = {}
    named: dict[str, tuple[str, Run]] = {}
    for setting, spec in settings.ablations.items():
        where = f"sokoban.ablations.{setting}"
        if spec.budget not in by_name:
            raise ConfigError(f"{where}.budget: unknown budget {spec.budget!r} (defined: {', '.join(by_name)})")
        allocation = budget.Allocation(*spec.allocation)
        if allocation not in by_name[spec.budget].allocations:
            listed = ", ".join(str(a.as_list()) for a in by_name[spec.budget].allocations)
            raise ConfigError(f"{where}.allocation: {list(spec.allocation)} is not an allocation of budget "
                              f"{spec.budget!r} (its allocations: {listed})")
        seeds = spec.seeds or _seeds(settings, spec.budget)
        train = budget_train_config(settings, spec.budget, seeds, where)
        found[setting] = []
        for index, value in enumerate(spec.values):
            varied: dict[str, Any] = {setting: None if value == FULL else value}
            run = shared(Run(ABLATION, spec.budget,
                             AgentConfig(allocation.depth, allocation.experts, allocation.width,
                                         encoder_channels=settings.encoder_channels, **varied),
                             train, seeds), sweep_runs)
            if run in found[setting]:
                hint = (f" (every radius >= E//2 = {allocation.experts // 2} is {FULL})" if setting == "radius" else "")
                raise ConfigError(f"{where}.values[{index}]: {value!r} is the same agent as "
                                  f"{spec.values[found[setting].index(run)]!r}{hint}")
            other, other_run = named.setdefault(run.id, (f"{where}.values[{index}]", run))
            if other_run != run:
                raise ConfigError(f"{where}.values[{index}]: {value!r} is the agent of {other}, with other seeds "
                                  f"({list(run.seeds)} against {list(other_run.seeds)}); give both ablations "
                                  "the same seeds")
            found[setting].append(run)
    return found


# Probe data per split, and the level set each split plays: probe training, threshold calibration, scores.
PROBE_SPLITS = {"train": "train", "calibration": "valid", "test": "test"}


def probed_runs(settings: SokobanSettings, sweep_runs: list[Run]) -> list[Run]:
    """The runs `sokoban.probes.runs` names, in its order, checked against the sweeps (`sweep_runs`: `runs`) and the
    probed seeds (each a seed that every probed run trains)."""
    probes = settings.probes
    if probes is None:
        return []
    if "valid" not in settings.levels:
        raise ConfigError("sokoban.levels.valid: the probes calibrate on these levels; give a level source")
    by_id = {run.id: run for run in sweep_runs}

    def check(where: str, name: str, allowed: Collection[str], what: str) -> None:
        if name not in allowed:
            raise ConfigError(f"sokoban.probes.{where}: {name!r} is not {what} (expected one of: {', '.join(allowed)})")

    for index, name in enumerate(probes.runs):
        check(f"runs[{index}]", name, by_id, "a run of the sweeps")
    for index, name in enumerate(probes.compare):
        check(f"compare[{index}]", name, probes.runs, "a probed run")
    if probes.picture is not None:
        check("picture.run", probes.picture.run, probes.runs, "a probed run")
    found = [by_id[name] for name in probes.runs]
    for index, seed in enumerate(probes.seeds or ()):
        for run in found:
            if seed not in run.seeds:
                raise ConfigError(f"sokoban.probes.seeds[{index}]: {seed} is not a seed of {run.id} (it trains seeds "
                                  f"{list(run.seeds)}); probe seeds that every probed run trains")
    return found


def probe_episodes(probes: Probes) -> dict[str, int | None]:
    """How many levels each probe split plays: a prefix of the training and calibration sets
    (`sokoban.probes.episodes`, `.calibration`), and every test level (None)."""
    return {"train": probes.episodes, "calibration": probes.calibration, "test": None}


def probe_levels(settings: SokobanSettings, probes: Probes) -> dict[str, int]:
    """How many levels each probe split plays (`probe_episodes`; every level of its set where it plays all)."""
    return {split: level_count(settings.levels[PROBE_SPLITS[split]]) if count is None else count
            for split, count in probe_episodes(probes).items()}


def expert_count_runs(settings: SokobanSettings, sweep_runs: list[Run]) -> list[Run]:
    """The runs of `sokoban.expert_count` (Fig. 6 where the budgets' grids hold no fixed-width family): every
    depth × width × expert count × recurrence, with the top-level seeds, a budget sweep's run where one trains the
    same agent (`shared`; `sweep_runs`: `runs`); empty where the config has none."""
    sweep = settings.expert_count
    if sweep is None:
        return []
    return [shared(Run(EXPERT_COUNT, None, _agent(settings, sweep, budget.Allocation(depth, experts, width), recurrent),
                       settings.train, settings.seeds), sweep_runs)
            for recurrent in sweep.recurrent for depth in sweep.depths for width in sweep.widths
            for experts in sweep.experts]


@dataclass(frozen=True)
class Families:
    """Every family of Sokoban runs of a config: the budget sweeps' (`runs`), the expert-count sweep's, each
    ablation's and the probed runs (the sweeps' runs that `sokoban.probes` names); the settings they were built from
    and the budgets they spend; and what their jobs cost besides the runs (the planner): the levels they play."""

    settings: SokobanSettings
    budgets: tuple[budget.Budget, ...]  # in the config's order
    sweeps: list[Run]
    expert_count: list[Run]
    ablations: dict[str, list[Run]]
    probed: list[Run]
    test_levels: int  # every run is evaluated on every test level
    probe_levels: dict[str, int]  # the levels each probe split plays (`probe_levels`); empty without probes
    probe_seeds: dict[str, tuple[int, ...]]  # each probed run's probed seeds, by run id (default: its first)

    @property
    def by_id(self) -> dict[str, Run]:
        """Every run, of every family (sweeps, ablations, expert-count), by id."""
        return by_id([self.sweeps, *self.ablations.values(), self.expert_count])


def families(settings: SokobanSettings, budgets: Sequence[budget.Budget]) -> Families:
    """Every family of Sokoban runs of the settings, the budget sweeps built once for all of them."""
    sweeps = runs(settings, budgets)
    probed = probed_runs(settings, sweeps)  # checked in this order, so the first problem named is the same
    expert_count = expert_count_runs(settings, sweeps)
    probes = settings.probes
    return Families(settings, tuple(budgets), sweeps, expert_count, ablation_runs(settings, budgets, sweeps), probed,
                    level_count(settings.levels["test"]), {} if probes is None else probe_levels(settings, probes),
                    {run.id: (probes.seeds or run.seeds[:1]) for run in probed} if probes is not None else {})


def budget_train_config(settings: SokobanSettings, budget_name: str, seeds: tuple[int, ...], where: str
                        ) -> TrainConfig:
    """The training settings of a budget's runs of `seeds` (trained by `where`): the section's, with the budget's
    `seeds_at_once` where it is fewer than the seeds."""
    train = settings.train
    group = settings.budgets[budget_name].seeds_at_once
    if group is None or group >= len(seeds):
        return train  # all seeds at once anyway: the same program as without the key
    if len(seeds) % group:
        raise ConfigError(f"sokoban.budgets.{budget_name}.seeds_at_once: {group} does not divide the {len(seeds)} "
                          f"seeds {list(seeds)} of {where}; give a divisor of every seed count the budget trains")
    return replace(train, seeds_at_once=group)


def _agent(settings: SokobanSettings, sweep: Sweep | ExpertCount, a: budget.Allocation, recurrent: bool
           ) -> AgentConfig:
    return AgentConfig(depth=a.depth, experts=a.experts, width=a.width, expert=sweep.expert, recurrent=recurrent,
                       encoder_channels=settings.encoder_channels, **agent_options(sweep))


def level_count(source: Mapping) -> int:
    """How many levels a `sokoban.levels.<set>` source holds, without reading them."""
    return source["generate"]["count"] if "generate" in source else boxoban.SPLIT_LEVELS[source["boxoban"]]


def level_set(source: Mapping, boxoban_source: Mapping) -> LevelSet:
    """The levels a config's `sokoban.levels.train` or `.test` names: generated offline, or a Boxoban split
    from `boxoban_source` (`sokoban.boxoban`: a local copy or a download); with `pushes: N`, the push-optimal
    push counts of its first N levels (all, where it has fewer)."""
    if "generate" in source:
        g = source["generate"]
        found = generator.generated_set(g["count"], room_size=g["room_size"], num_boxes=g["boxes"], seed=g["seed"])
    else:
        found = boxoban.load_split(source["boxoban"], boxoban_source.get("root"),
                                   cache_dir=boxoban_source.get("cache", paths.BOXOBAN_CACHE),
                                   download=boxoban_source.get("download", False))
    if "pushes" not in source:
        return found
    try:
        return found.with_pushes(solver.push_counts(tqdm(found.levels[:source["pushes"]], desc="push-optimal solutions",
                                                         unit="level", mininterval=5)))
    except PipelineError as error:
        raise LevelError(f"{found.source}: {error}; give fewer levels in pushes") from None


def levels_job(options: jobs.Levels) -> int:
    """`sokoban-levels`: write the level set of a source (.npz)."""
    found = level_set(json.loads(options.source), json.loads(options.boxoban))
    found.save(options.out)
    print(f"{options.out}: {found.source}")
    return 0


CURVE_VARIABLES, EVAL_VARIABLES = ("final_five", "episodic_return"), ("solved", "episode_return", "episode_length")


def collect(curve_paths: Sequence[str], eval_paths: Sequence[str], ablations: Mapping[str, list[str]] | None = None,
            family: str | None = None) -> xr.Dataset:
    """One dataset over all runs: final-five scores and learning curves (training), solve rates (test levels).

    Runs are indexed by id with their sweep, recurrence, budget ("" for the expert-count sweep) and allocation
    as coordinates; budgets with fewer seeds are padded with NaN. With `ablations` ({setting: run ids in the
    order of its values}), the dataset is the ablations' and names each one's runs (results.with_ablations).
    With `family` (EXPERT_COUNT), every run is labelled a run of that sweep without a budget, as the family's
    dataset is read, though some of its runs are the budget sweeps' (`shared`)."""
    per_run = []
    for run, curve, evaluation in run_results(Run, curve_paths, eval_paths, CURVE_VARIABLES, EVAL_VARIABLES):
        per_level = evaluation[list(EVAL_VARIABLES)].astype(float).mean("level")
        ds = xr.Dataset({
            "final_five": curve["final_five"],
            "episodic_return": curve["episodic_return"],
            "solve_rate": per_level["solved"].assign_attrs(long_name="fraction of test levels solved"),
            "test_return": per_level["episode_return"].assign_attrs(long_name="mean return on the test levels"),
            "test_length": per_level["episode_length"].assign_attrs(long_name="mean episode length on the test levels"),
        })
        a = run.agent
        radius = aggregation.full_radius(a.experts) if a.radius is None else a.radius
        per_run.append(ds.expand_dims(run=[run.id]).assign_coords(
            sweep=("run", [family or run.sweep]), expert=("run", [a.expert]), recurrent=("run", [a.recurrent]),
            aggregation=("run", [a.aggregation]),
            radius=("run", [radius], {"long_name": "communication radius on the ring of experts (E//2: full)"}),
            budget=("run", ["" if family else run.budget or ""]), depth=("run", [a.depth]), experts=("run", [a.experts]),
            width=("run", [a.width]), env_steps=("run", [run.train.env_steps]),
            steps_per_update=("run", [run.train.num_envs * run.train.num_steps])))
    # Every run plays the same test set, so the last one read names it and carries its push counts and chance level.
    pushes = {f"test_{key}": evaluation.attrs[key]
              for key in ("mean_optimal_pushes", "optimal_pushes_levels", "random_solve_rate", "time_limit")
              if key in evaluation.attrs}
    ds = xr.concat(per_run, dim="run", join="outer").assign_attrs(test_levels=evaluation.attrs.get("levels", ""),
                                                                  **pushes)
    return ds if ablations is None else with_ablations(ds, ablations)


def sweep_job(options: jobs.Sweep) -> int:
    """`sokoban-sweep`: every Sokoban run given, in one dataset."""
    ds = collect(options.curves, options.evals, options.ablations, family=options.family)
    store.write_netcdf(ds, options.out)
    print(f"{options.out}: {ds.sizes['run']} runs")
    return 0

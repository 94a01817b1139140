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
from collections.abc import Mapping
from types import MappingProxyType
from dataclasses import dataclass, replace

import xarray as xr
from tqdm import tqdm  # not tqdm.auto, which warns on the report pages that import this module (no ipywidgets)

from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.core import aggregation, budget
from parallel_experts.core.definitions import Definition, by_id, family_id
from parallel_experts.results import paths, store
from parallel_experts.results.store import run_results, with_ablations
from parallel_experts.sokoban import boxoban, generator, jobs, solver
from parallel_experts.sokoban.levels import LevelError, LevelSet
from parallel_experts.sokoban.settings import AgentConfig, ProbeConfig, TrainConfig

AGENT_KEYS = ("chaining", "aggregation")  # a sweep's optional agent settings; omitted: AgentConfig's defaults
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


def runs(config: Mapping) -> list[Run]:
    """Every run of every Sokoban budget sweep (`sokoban.sweeps`) in a validated config, in a stable order: each
    budget, each recurrence, each allocation the family trains there (`Budget.allocations_of`), with the seeds the
    sweep gives the family at that budget (`sweep_seeds`). The expert-count sweep and the ablations have their own
    lists (expert_count_runs, ablation_runs); ids never collide, as each begins with its sweep's name."""
    sokoban = config["sokoban"]
    by_name = {b.name: b for b in budget.budgets(config, "sokoban")}
    found = []
    for name, sweep in sokoban.get("sweeps", {}).items():
        if name in RESERVED:  # run ids begin with the sweep name, so these would collide
            raise ConfigError(f"sokoban.sweeps.{name}: the name is taken by the runs of {RESERVED[name]}; "
                              "rename this sweep")
        _check_sweep_seeds(name, sweep)
        for budget_name in sweep["budgets"]:
            for recurrent in sweep["recurrent"]:
                seeds = sweep_seeds(config, name, recurrent, budget_name)
                train = budget_train_config(config, budget_name, seeds, f"sokoban.sweeps.{name}")
                for a in by_name[budget_name].allocations_of(recurrent):
                    found.append(Run(name, budget_name, _agent(sokoban, sweep, a, recurrent), train, seeds))
    return found


def sweep_seeds(config: Mapping, sweep_name: str, recurrent: bool, budget_name: str) -> tuple[int, ...]:
    """The seeds of one family's runs of a sweep at one budget: `sokoban.sweeps.<name>.seeds` where it gives them
    (one list for the whole sweep, or by family: a list, or by budget), else the budget's (`_seeds`)."""
    given = config["sokoban"]["sweeps"][sweep_name].get("seeds")
    if isinstance(given, Mapping):
        given = given.get(family_id(recurrent))
    if isinstance(given, Mapping):
        given = given.get(budget_name)
    return _seeds(config, budget_name) if given is None else tuple(given)


def _seeds(config: Mapping, budget_name: str) -> tuple[int, ...]:
    """The seeds of a budget's runs: `sokoban.budgets.<name>.seeds`, else the top-level `seeds`."""
    return tuple(config["sokoban"]["budgets"][budget_name].get("seeds", config["seeds"]))


def _check_sweep_seeds(name: str, sweep: Mapping) -> None:
    """Refuse a sweep's seeds by family or budget that name a family or budget the sweep does not train."""
    given, where = sweep.get("seeds"), f"sokoban.sweeps.{name}.seeds"
    if not isinstance(given, Mapping):
        return
    families = [family_id(recurrent) for recurrent in sweep["recurrent"]]
    for family, per_budget in given.items():
        if family not in families:
            raise ConfigError(f"{where}.{family}: the sweep trains no {family} runs (its families: "
                              f"{', '.join(families)})")
        for budget_name in per_budget if isinstance(per_budget, Mapping) else ():
            if budget_name not in sweep["budgets"]:
                raise ConfigError(f"{where}.{family}.{budget_name}: not a budget of the sweep (its budgets: "
                                  f"{', '.join(sweep['budgets'])})")


def ablation_runs(config: Mapping, sweep_runs: list[Run] | None = None) -> dict[str, list[Run]]:
    """Each ablation's runs (`sokoban.ablations.<setting>`), in the order of its values: the recurrent ConvLSTM
    agent at one allocation of one budget, with agent.<setting> set to each value and the ablation's seeds
    (default: the budget's). Two ablations' runs of the same agent are one run (results.by_id), and so are an
    ablation's and a budget sweep's (`shared`; `sweep_runs`: `runs`, where the caller has them)."""
    sokoban = config["sokoban"]
    by_name = {b.name: b for b in budget.budgets(config, "sokoban")}
    sweep_runs = runs(config) if sweep_runs is None else sweep_runs
    found, named = {}, {}
    for setting, spec in sokoban.get("ablations", {}).items():
        where = f"sokoban.ablations.{setting}"
        if spec["budget"] not in by_name:
            raise ConfigError(f"{where}.budget: unknown budget {spec['budget']!r} (defined: {', '.join(by_name)})")
        allocation = budget.Allocation(*spec["allocation"])
        if allocation not in by_name[spec["budget"]].allocations:
            listed = ", ".join(str(a.as_list()) for a in by_name[spec["budget"]].allocations)
            raise ConfigError(f"{where}.allocation: {spec['allocation']} is not an allocation of budget "
                              f"{spec['budget']!r} (its allocations: {listed})")
        seeds = tuple(spec.get("seeds", _seeds(config, spec["budget"])))
        train = budget_train_config(config, spec["budget"], seeds, where)
        found[setting] = []
        for index, value in enumerate(spec["values"]):
            run = shared(Run(ABLATION, spec["budget"],
                             AgentConfig(allocation.depth, allocation.experts, allocation.width,
                                         encoder_channels=sokoban["encoder_channels"],
                                         **{setting: None if value == FULL else value}),
                             train, seeds), sweep_runs)
            if run in found[setting]:
                hint = (f" (every radius >= E//2 = {allocation.experts // 2} is {FULL})" if setting == "radius" else "")
                raise ConfigError(f"{where}.values[{index}]: {value!r} is the same agent as "
                                  f"{spec['values'][found[setting].index(run)]!r}{hint}")
            other, other_run = named.setdefault(run.id, (f"{where}.values[{index}]", run))
            if other_run != run:
                raise ConfigError(f"{where}.values[{index}]: {value!r} is the agent of {other}, with other seeds "
                                  f"({list(run.seeds)} against {list(other_run.seeds)}); give both ablations "
                                  "the same seeds")
            found[setting].append(run)
    return found


# Probe data per split, and the level set each split plays: probe training, threshold calibration, scores.
PROBE_SPLITS = {"train": "train", "calibration": "valid", "test": "test"}


def probed_runs(config: Mapping, sweep_runs: list[Run] | None = None) -> list[Run]:
    """The runs `sokoban.probes.runs` names, in its order, checked against the sweeps (`sweep_runs`: `runs`, where
    the caller has them) and the probed seeds (each a seed that every probed run trains)."""
    probes = config["sokoban"].get("probes")
    if not probes:
        return []
    if "valid" not in config["sokoban"]["levels"]:
        raise ConfigError("sokoban.levels.valid: the probes calibrate on these levels; give a level source")
    sweep_runs = {run.id: run for run in (runs(config) if sweep_runs is None else sweep_runs)}

    def check(where: str, name: str, allowed, what: str) -> None:
        if name not in allowed:
            raise ConfigError(f"sokoban.probes.{where}: {name!r} is not {what} (expected one of: {', '.join(allowed)})")

    for index, name in enumerate(probes["runs"]):
        check(f"runs[{index}]", name, sweep_runs, "a run of the sweeps")
    for index, name in enumerate(probes.get("compare", [])):
        check(f"compare[{index}]", name, probes["runs"], "a probed run")
    if "picture" in probes:
        check("picture.run", probes["picture"]["run"], probes["runs"], "a probed run")
    found = [sweep_runs[name] for name in probes["runs"]]
    for index, seed in enumerate(probes.get("seeds", [])):
        for run in found:
            if seed not in run.seeds:
                raise ConfigError(f"sokoban.probes.seeds[{index}]: {seed} is not a seed of {run.id} (it trains seeds "
                                  f"{list(run.seeds)}); probe seeds that every probed run trains")
    return found


def probe_episodes(config: Mapping) -> dict[str, int | None]:
    """How many levels each probe split plays: a prefix of the training and calibration sets
    (`sokoban.probes.episodes`, `.calibration`), and every test level (None)."""
    probes = config["sokoban"]["probes"]
    return {"train": probes["episodes"], "calibration": probes["calibration"], "test": None}


def probe_levels(config: Mapping) -> dict[str, int]:
    """How many levels each probe split plays (`probe_episodes`; every level of its set where it plays all)."""
    levels = config["sokoban"]["levels"]
    return {split: level_count(levels[PROBE_SPLITS[split]]) if count is None else count
            for split, count in probe_episodes(config).items()}


def probe_seeds(config: Mapping, run: Run) -> tuple[int, ...]:
    """The training seeds whose agents the probes read (one probe data and fit per agent): `sokoban.probes.seeds`,
    or the run's first seed."""
    return tuple(config["sokoban"]["probes"].get("seeds", run.seeds[:1]))


def expert_count_runs(config: Mapping, sweep_runs: list[Run] | None = None) -> list[Run]:
    """The runs of `sokoban.expert_count` (Fig. 6 where the budgets' grids hold no fixed-width family): every
    depth × width × expert count × recurrence, with the top-level seeds, a budget sweep's run where one trains the
    same agent (`shared`; `sweep_runs`: `runs`, where the caller has them); empty where the config has none."""
    sokoban = config["sokoban"]
    sweep = sokoban.get(EXPERT_COUNT)
    if sweep is None:
        return []
    train, sweep_runs = train_config(sokoban), runs(config) if sweep_runs is None else sweep_runs
    return [shared(Run(EXPERT_COUNT, None, _agent(sokoban, sweep, budget.Allocation(depth, experts, width), recurrent),
                       train, tuple(config["seeds"])), sweep_runs)
            for recurrent in sweep["recurrent"] for depth in sweep["depths"] for width in sweep["widths"]
            for experts in sweep["experts"]]


@dataclass(frozen=True)
class Sweep:
    """A budget sweep as the config names it (`sokoban.sweeps.<name>`): its experts, the families it trains and at
    which budgets."""

    expert: str
    recurrent: tuple[bool, ...]
    budgets: tuple[str, ...]


@dataclass(frozen=True)
class Families:
    """Every family of Sokoban runs of a config: the budget sweeps' (`runs`), the expert-count sweep's, each
    ablation's and the probed runs (the sweeps' runs that `sokoban.probes` names); and the levels their jobs play,
    with the probes' fit, which is what their jobs cost besides the runs (the planner)."""

    sweeps: list[Run]
    sweep_plans: dict[str, Sweep]  # each budget sweep's, by name, in the config's order
    expert_count: list[Run]
    ablations: dict[str, list[Run]]
    ablation_values: dict[str, tuple]  # each ablation's values, as the config gives them (a run each, in this order)
    probed: list[Run]
    test_levels: int  # every run is evaluated on every test level
    test_source: Mapping  # where they come from (`sokoban.levels.test`)
    env_steps: int  # every run's training steps (`sokoban.env_steps`)
    probe_levels: dict[str, int]  # the levels each probe split plays (`probe_levels`); empty without probes
    probe_fit: ProbeConfig | None  # `sokoban.probes.fit`; None without probes
    probe_seeds: dict[str, tuple[int, ...]]  # each probed run's probed seeds (`probe_seeds`), by run id
    probe_compare: tuple[str, ...]  # the probed runs whose plan recall Fig. 4 compares (`sokoban.probes.compare`)
    probe_picture: str | None  # the probed run Fig. 13 pictures (`sokoban.probes.picture.run`)

    @property
    def by_id(self) -> dict[str, Run]:
        """Every run, of every family (sweeps, ablations, expert-count), by id."""
        return by_id([self.sweeps, *self.ablations.values(), self.expert_count])


def families(config: Mapping) -> Families:
    """Every family of Sokoban runs of a validated config, the budget sweeps built once for all of them."""
    sweeps = runs(config)
    probed = probed_runs(config, sweeps)  # checked in this order, so the first problem named is the same
    expert_count = expert_count_runs(config, sweeps)
    probes = config["sokoban"].get("probes")
    sokoban = config["sokoban"]
    plans = {name: Sweep(spec["expert"], tuple(spec["recurrent"]), tuple(spec["budgets"]))
             for name, spec in sokoban.get("sweeps", {}).items()}
    values = {setting: tuple(spec["values"]) for setting, spec in sokoban.get("ablations", {}).items()}
    return Families(sweeps, plans, expert_count, ablation_runs(config, sweeps), values, probed,
                    level_count(sokoban["levels"]["test"]), MappingProxyType(sokoban["levels"]["test"]),
                    sokoban["env_steps"], probe_levels(config) if probes else {},
                    ProbeConfig(**probes.get("fit", {})) if probes else None,
                    {run.id: probe_seeds(config, run) for run in probed}, tuple((probes or {}).get("compare", ())),
                    (probes or {}).get("picture", {}).get("run"))


def runs_by_id(config: Mapping) -> dict[str, Run]:
    """Every Sokoban run of a validated config, of every family (sweeps, ablations, expert-count), by id."""
    return families(config).by_id


def train_config(sokoban: Mapping) -> TrainConfig:
    """The training settings of every Sokoban run of a config (`sokoban`: its Sokoban section)."""
    return TrainConfig(env_steps=sokoban["env_steps"], **sokoban.get("training", {}))


def budget_train_config(config: Mapping, budget_name: str, seeds: tuple[int, ...], where: str) -> TrainConfig:
    """The training settings of a budget's runs of `seeds` (trained by `where`): `train_config`, with the budget's
    `seeds_at_once` where it is fewer than the seeds."""
    train = train_config(config["sokoban"])
    group = config["sokoban"]["budgets"][budget_name].get("seeds_at_once")
    if group is None or group >= len(seeds):
        return train  # all seeds at once anyway: the same program as without the key
    if len(seeds) % group:
        raise ConfigError(f"sokoban.budgets.{budget_name}.seeds_at_once: {group} does not divide the {len(seeds)} "
                          f"seeds {list(seeds)} of {where}; give a divisor of every seed count the budget trains")
    return replace(train, seeds_at_once=group)


def _agent(sokoban: Mapping, sweep: Mapping, a: budget.Allocation, recurrent: bool) -> AgentConfig:
    return AgentConfig(depth=a.depth, experts=a.experts, width=a.width, expert=sweep["expert"], recurrent=recurrent,
                       encoder_channels=sokoban["encoder_channels"],
                       **{key: sweep[key] for key in AGENT_KEYS if key in sweep})


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


def collect(curve_paths: list[str], eval_paths: list[str], ablations: Mapping[str, list[str]] | None = None,
            family: str | None = None):
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

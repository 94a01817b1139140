"""The Sokoban runs a config asks for: every sweep × budget × allocation × recurrence, each with its seeds, and
every ablation (`sokoban.ablations`: one recurrent ConvLSTM allocation of a budget, one agent setting varied).

A run is named by what defines it (`convlstm/recurrent/small/L2-E2-d64`; an ablation's setting where it is not
the default: `radius_ablation/recurrent/medium/L2-E7-d64-r1`), so its files sit in a readable folder and
rerunning the same config recomputes nothing; its full definition travels as JSON in the rule's params, so a
changed setting retrains it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from parallel_experts import budget
from parallel_experts import experts as px
from parallel_experts.errors import ConfigError
from parallel_experts.results import Definition, family_id, run_results
from parallel_experts.sokoban import boxoban, generator
from parallel_experts.sokoban.agent import AgentConfig
from parallel_experts.sokoban.levels import LevelSet
from parallel_experts.sokoban.train import TrainConfig


AGENT_KEYS = ("chaining", "aggregation")  # a sweep's optional agent settings; omitted: AgentConfig's defaults
# sokoban.ablations.<setting> -> the sweep name of its runs (Fig. 10 left: aggregation rules; Fig. 11: radius).
ABLATIONS = {"aggregation": "aggregation_ablation", "radius": "radius_ablation"}
FULL = "full"  # how a config writes the radius that reaches every expert (AgentConfig.radius None)


@dataclass(frozen=True)
class Run(Definition):
    sweep: str
    budget: str
    agent: AgentConfig
    train: TrainConfig
    seeds: tuple[int, ...]

    @property
    def id(self) -> str:
        return (f"{self.sweep}/{family_id(self.agent.recurrent)}/{self.budget}/{budget.allocation_id(self.agent)}"
                f"{variant_id(self.agent)}")

    @property
    def ablation(self) -> str | None:
        """The agent setting this run's ablation varies (`aggregation`, `radius`); None for a sweep's run."""
        return next((key for key, sweep in ABLATIONS.items() if sweep == self.sweep), None)

    def to_dict(self) -> dict:
        d = super().to_dict()
        if self.agent.radius is None:  # runs defined before the radius existed keep their params: not retrained
            del d["agent"]["radius"]
        return d


def variant_id(agent: AgentConfig) -> str:
    """The settings an ablation varies, in a run id where they are not AgentConfig's defaults: `-mean`, `-r1`."""
    rule = "" if agent.aggregation == AgentConfig.aggregation else f"-{agent.aggregation}"
    return rule + ("" if agent.radius is None else f"-r{agent.radius}")


def runs(config: Mapping) -> list[Run]:
    """Every run of every Sokoban sweep, then of every ablation, in a validated config, in a stable order."""
    # Ids are unique: each begins with its sweep's name, and an ablation's values give different agents.
    return sweep_runs(config) + ablation_runs(config)


def _train(config: Mapping) -> TrainConfig:
    sokoban = config["sokoban"]
    return TrainConfig(env_steps=sokoban["env_steps"], **sokoban.get("training", {}))


def _seeds(config: Mapping, budget_name: str) -> tuple[int, ...]:
    return tuple(config["sokoban"]["budgets"][budget_name].get("seeds", config["seeds"]))


def sweep_runs(config: Mapping) -> list[Run]:
    """Every run of every Sokoban sweep (`sokoban.sweeps`): each allocation of each budget, each recurrence."""
    sokoban, train = config["sokoban"], _train(config)
    by_name = {b.name: b for b in budget.budgets(config, "sokoban")}
    found = []
    for name, sweep in sokoban.get("sweeps", {}).items():
        if name in ABLATIONS.values():
            raise ConfigError(f"sokoban.sweeps.{name}: the name is kept for the runs of sokoban.ablations")
        for budget_name in sweep["budgets"]:
            b = by_name[budget_name]
            seeds = _seeds(config, budget_name)
            for recurrent in sweep["recurrent"]:
                for a in b.allocations:
                    agent = AgentConfig(depth=a.depth, experts=a.experts, width=a.width, expert=sweep["expert"],
                                        recurrent=recurrent, encoder_channels=sokoban["encoder_channels"],
                                        **{key: sweep[key] for key in AGENT_KEYS if key in sweep})
                    found.append(Run(name, budget_name, agent, train, seeds))
    return found


def ablation_runs(config: Mapping) -> list[Run]:
    """Every run of every ablation (`sokoban.ablations.<setting>`): the recurrent ConvLSTM agent at one allocation
    of one budget, once per listed value of agent.<setting>, with the ablation's seeds (default: the budget's)."""
    sokoban, train = config["sokoban"], _train(config)
    by_name = {b.name: b for b in budget.budgets(config, "sokoban")}
    found = []
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
        agents: dict[AgentConfig, object] = {}
        for index, value in enumerate(spec["values"]):
            agent = AgentConfig(allocation.depth, allocation.experts, allocation.width,
                                encoder_channels=sokoban["encoder_channels"],
                                **{setting: None if value == FULL else value})
            if agent in agents:
                hint = (f" (every radius >= E//2 = {allocation.experts // 2} is {FULL})" if setting == "radius" else "")
                raise ConfigError(f"{where}.values[{index}]: {value!r} is the same agent as {agents[agent]!r}{hint}")
            agents[agent] = value
            found.append(Run(ABLATIONS[setting], spec["budget"], agent, train, seeds))
    return found


def step_flops(config: Mapping) -> Callable[[budget.Allocation], float]:
    """XLA-counted FLOPs of one step of the recurrent ConvLSTM agent (the one that defines the Sokoban budgets)
    at an allocation, for the allocations report."""
    from parallel_experts.sokoban.agent import agent_step_flops

    def flops(a: budget.Allocation) -> float:
        return agent_step_flops(AgentConfig(a.depth, a.experts, a.width,
                                            encoder_channels=config["sokoban"]["encoder_channels"]))
    return flops


def level_set(source: Mapping, boxoban_source: Mapping) -> LevelSet:
    """The levels a config's `sokoban.levels.train` or `.test` names: generated offline, or a Boxoban split
    from `boxoban_source` (`sokoban.boxoban`: a local copy or a download)."""
    if "generate" in source:
        g = source["generate"]
        return generator.generated_set(g["count"], room_size=g["room_size"], num_boxes=g["boxes"], seed=g["seed"])
    return boxoban.load_split(source["boxoban"], boxoban_source.get("root"), cache_dir=boxoban_source.get("cache"),
                              download=boxoban_source.get("download", False))


def collect(curve_paths: list[str], eval_paths: list[str]):
    """One dataset over all runs: final-five scores and learning curves (training), solve rates (test levels).

    Runs are indexed by id with their sweep, recurrence, budget and allocation as coordinates; budgets with
    fewer seeds are padded with NaN."""
    import xarray as xr

    per_run = []
    for run, curve, evaluation in run_results(Run, curve_paths, eval_paths):
        per_level = evaluation[["solved", "episode_return", "episode_length"]].astype(float).mean("level")
        ds = xr.Dataset({
            "final_five": curve["final_five"],
            "episodic_return": curve["episodic_return"],
            "solve_rate": per_level["solved"].assign_attrs(long_name="fraction of test levels solved"),
            "test_return": per_level["episode_return"].assign_attrs(long_name="mean return on the test levels"),
            "test_length": per_level["episode_length"].assign_attrs(long_name="mean episode length on the test levels"),
        })
        a = run.agent
        radius = px.full_radius(a.experts) if a.radius is None else a.radius
        per_run.append(ds.expand_dims(run=[run.id]).assign_coords(
            sweep=("run", [run.sweep]), expert=("run", [a.expert]), recurrent=("run", [a.recurrent]),
            ablation=("run", [run.ablation or ""], {"long_name": "the agent setting the run's ablation varies"}),
            aggregation=("run", [a.aggregation]),
            radius=("run", [radius], {"long_name": "communication radius on the ring of experts (E//2: full)"}),
            budget=("run", [run.budget]), depth=("run", [a.depth]), experts=("run", [a.experts]),
            width=("run", [a.width]), env_steps=("run", [run.train.env_steps]),
            steps_per_update=("run", [run.train.num_envs * run.train.num_steps])))
    # Every run plays the same test set, so the last one read names it.
    return xr.concat(per_run, dim="run", join="outer").assign_attrs(test_levels=evaluation.attrs.get("levels", ""))

"""The Sokoban runs a config asks for: every sweep × budget × allocation × recurrence, each with its seeds.

A run is named by what defines it (`convlstm-recurrent/small/L2-E2-d64`), so its files sit in a readable
folder and rerunning the same config recomputes nothing; its full definition travels as JSON in the rule's
params, so a changed setting retrains it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from parallel_experts import budget
from parallel_experts.sokoban import levels as boxoban
from parallel_experts.sokoban.agent import AgentConfig
from parallel_experts.sokoban.train import TrainConfig


@dataclass(frozen=True)
class Run:
    sweep: str
    budget: str
    agent: AgentConfig
    train: TrainConfig
    seeds: tuple[int, ...]

    @property
    def id(self) -> str:
        a = self.agent
        family = f"{a.expert}-{'recurrent' if a.recurrent else 'nonrecurrent'}"
        return f"{self.sweep}/{family}/{self.budget}/L{a.depth}-E{a.experts}-d{a.width}"

    def to_dict(self) -> dict:
        return {"sweep": self.sweep, "budget": self.budget, "agent": dataclasses.asdict(self.agent),
                "train": dataclasses.asdict(self.train), "seeds": list(self.seeds)}

    @classmethod
    def from_dict(cls, d: Mapping) -> Run:
        return cls(d["sweep"], d["budget"], AgentConfig(**d["agent"]), TrainConfig(**d["train"]), tuple(d["seeds"]))


def runs(config: Mapping) -> list[Run]:
    """Every run of every Sokoban sweep in a validated config, in a stable order."""
    sokoban = config["sokoban"]
    train = TrainConfig(env_steps=sokoban["env_steps"], **sokoban.get("training", {}))
    by_name = {b.name: b for b in budget.budgets(config, "sokoban")}
    found = []
    for name, sweep in sokoban.get("sweeps", {}).items():
        for budget_name in sweep["budgets"]:
            b = by_name[budget_name]
            seeds = tuple(sokoban["budgets"][budget_name].get("seeds", config["seeds"]))
            for recurrent in sweep["recurrent"]:
                for a in b.allocations:
                    agent = AgentConfig(depth=a.depth, experts=a.experts, width=a.width, expert=sweep["expert"],
                                        recurrent=recurrent, chaining=sweep.get("chaining", "paper"),
                                        aggregation=sweep.get("aggregation", "sqrt_sum"),
                                        encoder_channels=sokoban["encoder_channels"])
                    found.append(Run(name, budget_name, agent, train, seeds))
    return found


def run_by_id(config: Mapping, run_id: str) -> Run:
    for run in runs(config):
        if run.id == run_id:
            return run
    raise KeyError(f"no Sokoban run {run_id!r} in this config")


def level_set(config: Mapping, which: str) -> boxoban.LevelSet:
    """The training or test levels the config names: generated offline, or a Boxoban split."""
    spec = config["sokoban"]["levels"][which]
    if "generate" in spec:
        g = spec["generate"]
        return boxoban.generated_set(g["count"], room_size=g["room_size"], num_boxes=g["boxes"], seed=g["seed"])
    source = config["sokoban"]["boxoban"]
    return boxoban.load_split(spec["boxoban"], source.get("root"), cache_dir=source.get("cache"),
                              download=source.get("download", False))


def levels_array(level_set: boxoban.LevelSet) -> np.ndarray:
    return np.asarray(level_set.levels, np.uint8)

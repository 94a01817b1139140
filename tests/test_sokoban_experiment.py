"""The Sokoban runs a config defines: every sweep × budget × recurrence × allocation, and their level sources."""

import json

import numpy as np

from helpers import REPO
from parallel_experts import budget, config
from parallel_experts.sokoban import experiment, generator
from parallel_experts.sokoban.agent import AgentConfig, agent_step_flops


def test_demo_runs_cover_every_sweep_budget_recurrence_and_allocation():
    demo = config.load([REPO / "config/config.yaml"])
    runs = experiment.sweep_runs(demo)
    allocations = {b.name: b.allocations for b in budget.budgets(demo, "sokoban")}
    expected = sum(len(sweep["recurrent"]) * sum(len(allocations[name]) for name in sweep["budgets"])
                   for sweep in demo["sokoban"]["sweeps"].values())
    assert len(runs) == expected == 12 and len({run.id for run in runs}) == len(runs)
    assert {run.train.env_steps for run in runs} == {demo["sokoban"]["env_steps"]}
    for run in runs:
        assert run.seeds == tuple(demo["seeds"])
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run


def test_step_flops_are_the_recurrent_agents():
    smoke = config.load([REPO / "config/smoke.yaml"])
    a = budget.budgets(smoke, "sokoban")[0].anchor
    channels = smoke["sokoban"]["encoder_channels"]
    assert experiment.step_flops(smoke)(a) == agent_step_flops(AgentConfig(a.depth, a.experts, a.width,
                                                                           encoder_channels=channels))


def test_a_generated_source_is_the_generators_level_set():
    source = {"generate": {"count": 6, "room_size": 6, "boxes": 1, "seed": 5}}
    made = experiment.level_set(source, {})
    np.testing.assert_array_equal(made.levels, generator.generated_set(6, room_size=6, num_boxes=1, seed=5).levels)

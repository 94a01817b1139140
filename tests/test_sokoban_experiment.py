"""The Sokoban runs a config defines: every sweep × budget × recurrence × allocation, and their level sources."""

import json

import numpy as np
import pytest
from helpers import REPO

from parallel_experts import study
from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.sokoban import experiment, generator, solver
from parallel_experts.study import Study


def test_demo_runs_cover_every_sweep_budget_recurrence_and_allocation():
    demo = files.load([REPO / "config/config.yaml"])
    runs = Study.of(demo).sokoban.sweeps
    allocations = {b.name: b.allocations for b in Study.of(demo).sokoban.budgets}
    expected = sum(len(sweep["recurrent"]) * sum(len(allocations[name]) for name in sweep["budgets"])
                   for sweep in demo["sokoban"]["sweeps"].values())
    assert len(runs) == expected == 6 and len({run.id for run in runs}) == len(runs)  # 3 allocations × 2 recurrences
    assert sorted({run.agent.depth for run in runs}) == [1, 2, 4]  # the depths of the authors' L=4 > L=2 > L=1 tests
    assert {run.train.view for run in runs} == {demo["sokoban"]["levels"]["train"]["generate"]["room_size"]}
    assert {run.train.env_steps for run in runs} == {demo["sokoban"]["env_steps"]}
    for run in runs:
        assert run.seeds == tuple(demo["seeds"])
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run


def test_a_generated_source_is_the_generators_level_set():
    source = {"generate": {"count": 6, "room_size": 6, "boxes": 1, "seed": 5}}
    made = experiment.level_set(source, {})
    np.testing.assert_array_equal(made.levels, generator.generated_set(6, room_size=6, num_boxes=1, seed=5).levels)
    assert made.pushes is None


def test_a_source_with_pushes_solves_its_first_levels():
    source = {"generate": {"count": 6, "room_size": 6, "boxes": 2, "seed": 5}, "pushes": 4}
    made = experiment.level_set(source, {})
    assert len(made) == 6 and len(made.pushes) == 4
    np.testing.assert_array_equal(made.pushes, solver.push_counts(made.levels[:4]))
    assert (made.pushes >= 2).all()  # no box starts on a target, so each of the two is pushed at least once


def probing(edit):
    cfg = files.load([REPO / "config/smoke.yaml"])
    edit(cfg["sokoban"])
    return cfg


def test_probed_runs_are_the_named_runs_in_order():
    cfg = probing(lambda s: s["probes"].update(runs=list(reversed(s["probes"]["runs"]))))
    assert [run.id for run in Study.of(cfg).sokoban.probed] == cfg["sokoban"]["probes"]["runs"]
    probed = Study.of(cfg).sokoban
    assert probed.probe_seeds[probed.probed[0].id] == (0,)  # the run's first seed by default
    assert Study.of(probing(lambda s: s.pop("probes"))).sokoban.probed == []


@pytest.mark.parametrize("edit, message", [
    (lambda s: s["probes"]["runs"].append("convlstm/recurrent/small/L9-E1-d1"),
     r"sokoban\.probes\.runs\[2\]: 'convlstm/recurrent/small/L9-E1-d1' is not a run of the sweeps \(expected one of: "
     r"convlstm/recurrent/small/L1-E1-d16, "),
    (lambda s: s["probes"]["compare"].__setitem__(1, "convlstm/nonrecurrent/small/L1-E1-d16"),
     r"sokoban\.probes\.compare\[1\]: 'convlstm/nonrecurrent/small/L1-E1-d16' is not a probed run"),
    (lambda s: s["probes"]["picture"].update(run="convlstm/nonrecurrent/small/L1-E1-d16"),
     r"sokoban\.probes\.picture\.run: 'convlstm/nonrecurrent/small/L1-E1-d16' is not a probed run"),
    (lambda s: s["levels"].pop("valid"), r"sokoban\.levels\.valid: the probes calibrate on these levels"),
    (lambda s: s["probes"].update(seeds=[0, 7]),
     r"sokoban\.probes\.seeds\[1\]: 7 is not a seed of convlstm/recurrent/small/L1-E1-d16 \(it trains seeds \[0\]\)"),
])


def test_probes_must_name_runs_of_the_sweeps(edit, message):
    with pytest.raises(ConfigError, match=message):
        study.check(probing(edit))


def test_the_memory_settings_define_a_run_only_where_they_apply():
    """`sokoban.training.remat` and a budget's `seeds_at_once` change a seed's numbers in the last bits, so a run's
    definition shows them; at their defaults it is the definition it was before they existed (not retrained)."""
    paper = files.load([REPO / "config/paper.yaml"])
    runs = {run.id: run for run in Study.of(paper).sokoban.by_id.values()}
    large, small = runs["convlstm/recurrent/large/L1-E208-d64"], runs["convlstm/recurrent/small/L1-E1-d128"]
    assert large.train.remat and small.train.remat
    assert (large.train.seeds_at_once, small.train.seeds_at_once) == (1, None)
    assert large.to_dict()["train"]["seeds_at_once"] == 1 and "seeds_at_once" not in small.to_dict()["train"]
    for run in (large, small):
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    demo = files.load([REPO / "config/config.yaml"])
    for run in Study.of(demo).sokoban.by_id.values():
        assert not {"remat", "seeds_at_once"} & set(run.to_dict()["train"])
    # A group as large as the seeds is all of them at once: the same program as without the key.
    demo["sokoban"]["budgets"]["small"]["seeds_at_once"] = 2
    assert all(run.train.seeds_at_once is None for run in Study.of(demo).sokoban.sweeps)


def test_seeds_at_once_must_divide_the_seeds_of_every_run_of_its_budget():
    demo = files.load([REPO / "config/config.yaml"])
    demo["seeds"] = [0, 1, 2]
    demo["sokoban"]["budgets"]["small"]["seeds_at_once"] = 2
    with pytest.raises(ConfigError, match=r"sokoban\.budgets\.small\.seeds_at_once: 2 does not divide the 3 seeds "
                                          r"\[0, 1, 2\] of sokoban\.sweeps\.convlstm"):
        Study.of(demo).sokoban.sweeps


@pytest.mark.parametrize("seeds, recurrent, nonrecurrent", [
    ([5], (5,), (5,)),  # the whole sweep
    ({"nonrecurrent": [3]}, (0, 1), (3,)),  # one family; the other takes the budget's (here the top-level) seeds
    ({"recurrent": {"small": [2, 4]}, "nonrecurrent": [3]}, (2, 4), (3,)),  # by family and budget
])
def test_a_sweep_gives_its_seeds_by_family_and_budget_and_keeps_its_run_ids(seeds, recurrent, nonrecurrent):
    demo = files.load([REPO / "config/config.yaml"])
    before = [run.id for run in Study.of(demo).sokoban.sweeps]
    demo["sokoban"]["sweeps"]["convlstm"]["seeds"] = seeds
    demo["sokoban"]["probes"].pop("seeds")  # the demo probes seeds 0 and 1, which these sweeps may not train
    study.check(demo)
    runs = Study.of(demo).sokoban.sweeps
    assert [run.id for run in runs] == before
    assert {run.seeds for run in runs if run.agent.recurrent} == {recurrent}
    assert {run.seeds for run in runs if not run.agent.recurrent} == {nonrecurrent}


@pytest.mark.parametrize("sweep, message", [
    ({"recurrent": [True], "seeds": {"nonrecurrent": [3]}},
     r"sokoban\.sweeps\.convlstm\.seeds\.nonrecurrent: the sweep trains no nonrecurrent runs"),
    ({"seeds": {"recurrent": {"large": [3]}}},
     r"sokoban\.sweeps\.convlstm\.seeds\.recurrent\.large: not a budget of the sweep \(its budgets: small\)"),
    ({"seeds": {"recurrent": [3, 3]}}, r"sokoban\.sweeps\.convlstm\.seeds"),
])
def test_a_sweeps_seeds_name_only_its_families_and_budgets(sweep, message):
    demo = files.load([REPO / "config/config.yaml"])
    demo["sokoban"]["sweeps"]["convlstm"] |= sweep
    with pytest.raises(ConfigError, match=message):
        study.check(demo)


def test_seeds_at_once_must_divide_a_sweeps_own_seeds():
    demo = files.load([REPO / "config/config.yaml"])
    demo["sokoban"]["budgets"]["small"]["seeds_at_once"] = 2
    demo["sokoban"]["sweeps"]["convlstm"]["seeds"] = {"nonrecurrent": [0, 1, 2]}
    with pytest.raises(ConfigError, match=r"seeds_at_once: 2 does not divide the 3 seeds \[0, 1, 2\] of "
                                          r"sokoban\.sweeps\.convlstm"):
        Study.of(demo).sokoban.sweeps

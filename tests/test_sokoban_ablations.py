"""The Sokoban ablations (Figs. 10 left, 11): the runs `sokoban.ablations` defines, its errors, their reports, and
the scores, verdicts and plots against hand computations."""

import copy
import json
import math

import matplotlib.pyplot
import numpy as np
import pytest
from helpers import REPO, ablation_data, demo_with_every_rule, study_of, write_sokoban_results

from parallel_experts import study
from parallel_experts.analysis import sokoban_ablations as ablations
from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.core import definitions
from parallel_experts.reporting import plots
from parallel_experts.reporting.figure_check import defects
from parallel_experts.sokoban import experiment
from parallel_experts.sokoban.settings import AgentConfig
from parallel_experts.targets import catalogue, items
from parallel_experts.study import Study


def load(name):
    return files.load([REPO / "config" / name])


# ---------------------------------------------------------------------------------------------- runs


def test_paper_ablations_are_the_papers_settings():
    by_setting = Study.of(load("paper.yaml")).sokoban.ablations
    runs = [run for group in by_setting.values() for run in group]
    rules = [r.agent.aggregation for r in by_setting["aggregation"]]
    assert rules == ["sqrt_sum", "mean", "routed_mean", "routed_sqrt_sum"]
    assert [r.agent.radius for r in by_setting["radius"]] == [0, 1, 2, None]  # None: full
    for run in runs:
        a = run.agent
        assert run.budget == "medium" and run.train.env_steps == 50_000_000
        assert (a.expert, a.recurrent, a.chaining) == ("convlstm", True, "paper")
    assert {(r.agent.depth, r.agent.experts, r.agent.width) for r in by_setting["aggregation"]} == {(1, 4, 128)}
    assert {(r.agent.depth, r.agent.experts, r.agent.width) for r in by_setting["radius"]} == {(2, 7, 64)}
    # The sqrt-sum and the full radius are the medium sweep's agents: its runs, with its 9 seeds; the others 3.
    assert [r.id for r in by_setting["radius"]] == [
        "ablation/recurrent/medium/L2-E7-d64-r0", "ablation/recurrent/medium/L2-E7-d64-r1",
        "ablation/recurrent/medium/L2-E7-d64-r2", "convlstm/recurrent/medium/L2-E7-d64"]
    assert [r.id for r in by_setting["aggregation"][:2]] == [
        "convlstm/recurrent/medium/L1-E4-d128", "ablation/recurrent/medium/L1-E4-d128-mean"]
    sweep_runs = Study.of(load("paper.yaml")).sokoban.sweeps
    assert [run.seeds for run in runs] == [tuple(range(9)) if run in sweep_runs else (0, 1, 2) for run in runs]
    assert sum(run in sweep_runs for run in runs) == 2


def test_run_ids_and_params_of_the_sweeps_do_not_change():
    # A run without a radius has the id and the JSON definition (Snakemake params) it had before radii existed.
    paper = load("paper.yaml")
    run = Study.of(paper).sokoban.sweeps[0]
    assert run.id == "convlstm/recurrent/small/L1-E1-d128"
    assert "radius" not in run.to_dict()["agent"]
    for run in Study.of(paper).sokoban.by_id.values():
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run


def test_demo_ablations_are_one_seed_at_the_allocation_with_the_most_experts():
    by_setting = Study.of(load("config.yaml")).sokoban.ablations
    runs = [run for group in by_setting.values() for run in group]
    assert {(r.budget, r.agent.depth, r.agent.experts, r.agent.width) for r in runs} == {("small", 1, 4, 8)}
    assert [r.agent.radius for r in by_setting["radius"]] == [0, None]  # E = 4: r = 2 is already full
    # The full radius is the grid's recurrent L1 E4 d8 run (seeds 0 and 1), which the ablation scores at seed 0.
    assert [(r.id, r.seeds) for r in by_setting["radius"]] == [
        ("ablation/recurrent/small/L1-E4-d8-r0", (0,)), ("convlstm/recurrent/small/L1-E4-d8", (0, 1))]


def test_an_agent_that_a_budget_sweep_trains_is_trained_once():
    demo = demo_with_every_rule("sokoban")
    sokoban = Study.of(demo).sokoban
    by_setting = sokoban.ablations
    [sweep_run] = [run for run in sokoban.sweeps if run.id == "convlstm/recurrent/small/L1-E4-d8"]
    assert by_setting["aggregation"][0] == by_setting["radius"][1] == sweep_run  # sqrt-sum, full radius
    assert sokoban.expert_count[1] == sweep_run  # L1 E4 d8 of Fig. 6's family
    own = {run.id for run in sokoban.by_id.values() if run.sweep == experiment.ABLATION}
    assert own == {f"ablation/recurrent/small/L1-E4-d8-{variant}" for variant in
                   ("mean", "routed_mean", "routed_sqrt_sum", "r0")}
    # A seed the sweep does not train makes the family's own run.
    del demo["sokoban"]["probes"]  # which probe seeds that the changed budget no longer trains
    demo["sokoban"]["ablations"]["radius"]["seeds"] = [0, 2]
    assert Study.of(demo).sokoban.ablations["radius"][1].id == "ablation/recurrent/small/L1-E4-d8"
    demo["sokoban"]["budgets"]["small"]["seeds"] = [0]
    assert Study.of(demo).sokoban.expert_count[1].id == "expert_count/recurrent/L1-E4-d8"


def test_two_ablations_of_one_allocation_train_their_default_agent_once():
    demo = demo_with_every_rule("sokoban")
    demo["sokoban"]["ablations"]["aggregation"]["seeds"] = [2]  # a seed the sweep lacks: the ablations' own run
    default = "ablation/recurrent/small/L1-E4-d8"  # the sqrt-sum rule and the full radius: the same agent
    demo["sokoban"]["ablations"]["radius"]["seeds"] = [2]
    by_setting = Study.of(demo).sokoban.ablations
    assert by_setting["aggregation"][0].id == by_setting["radius"][1].id == default
    assert by_setting["aggregation"][0] == by_setting["radius"][1]
    demo["sokoban"]["ablations"]["radius"]["seeds"] = [2, 3]  # then the two are different runs under one id
    with pytest.raises(ConfigError, match=r"sokoban.ablations.radius.values\[1\]: 'full' is the agent of "
                       r"sokoban.ablations.aggregation.values\[0\], with other seeds \(\[2, 3\] against \[2\]\)"):
        study.check(demo)


def test_an_ablation_takes_the_budgets_seeds_unless_it_lists_its_own():
    demo = load("config.yaml")
    del demo["sokoban"]["probes"]  # which probe seeds that the changed budget no longer trains
    for spec in demo["sokoban"]["ablations"].values():
        del spec["seeds"]
    assert {r.seeds for runs in Study.of(demo).sokoban.ablations.values() for r in runs} == {tuple(demo["seeds"])}
    demo["sokoban"]["budgets"]["small"]["seeds"] = [4]
    demo["sokoban"]["ablations"]["radius"].update(seeds=[7, 8, 9], values=[0])  # full would be the sqrt-sum run
    seeds = {setting: {r.seeds for r in runs} for setting, runs in Study.of(demo).sokoban.ablations.items()}
    assert seeds == {"aggregation": {(4,)}, "radius": {(7, 8, 9)}}


def with_ablation(**changes):
    demo = load("config.yaml")
    demo["sokoban"]["ablations"]["radius"].update(changes)
    return demo


@pytest.mark.parametrize("changes, message", [
    ({"allocation": [1, 1, 8]},
     "sokoban.ablations.radius.allocation: [1, 1, 8] is not an allocation of budget 'small'"),
    ({"budget": "huge"}, "sokoban.ablations.radius.budget: unknown budget 'huge' (defined: small)"),
    ({"values": [0, 2, "full"]}, "sokoban.ablations.radius.values[2]: 'full' is the same agent as 2 (every radius "
                                 ">= E//2 = 2 is full)"),
])


def test_ablation_errors_name_the_key(changes, message):
    with pytest.raises(ConfigError) as error:
        study.check(with_ablation(**changes))
    assert message in str(error.value)


@pytest.mark.parametrize("edit, message", [
    (lambda a: a["radius"].update(values=[-1]), "sokoban.ablations.radius.values[0]"),
    (lambda a: a["radius"].update(values=["half"]), "sokoban.ablations.radius.values[0]"),
    (lambda a: a["aggregation"].update(values=["max"]), "sokoban.ablations.aggregation.values[0]"),
    (lambda a: a["radius"].update(allocation=[1, 4, 8, 2]), "sokoban.ablations.radius.allocation"),
    (lambda a: a["radius"].update(experts=3), "sokoban.ablations.radius: unknown key 'experts'"),
    (lambda a: a.update(chaining={}), "sokoban.ablations: unknown key 'chaining' (expected one of: aggregation, "
                                      "radius)"),
])


def test_the_schema_keeps_ablations_closed(edit, message):
    demo = load("config.yaml")
    edit(demo["sokoban"]["ablations"])
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        study.check(demo)


def test_a_sweep_cannot_take_an_ablations_name():
    demo = load("config.yaml")
    demo["sokoban"]["sweeps"]["ablation"] = demo["sokoban"]["sweeps"]["convlstm"]
    with pytest.raises(ConfigError, match="sokoban.sweeps.ablation: the name is taken by the runs of sokoban.ablations"):
        study.check(demo)


# ---------------------------------------------------------------------------------------------- reports


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "smoke.yaml"])
def test_ablation_reports_exist_exactly_where_the_config_trains_the_ablation(name):
    cfg = load(name)
    reports = {r.name: r for r in catalogue.reports(Study.of(cfg)) if r.inputs == catalogue.SOKOBAN_ABLATIONS}
    trained = set(Study.of(cfg).sokoban.ablations)
    assert {f"sokoban_{s}" for s in trained} == set(reports)
    targets = catalogue.targets(reports.values())
    assert targets == {items.page("sokoban_ablation", s)[1]: [f"sokoban_{s}"] for s in trained}
    for setting in experiment.ABLATIONS:  # and each one goes when its ablation does
        fewer = copy.deepcopy(cfg)
        fewer["sokoban"].get("ablations", {}).pop(setting, None)
        assert f"sokoban_{setting}" not in {r.name for r in catalogue.reports(Study.of(fewer))}


# ---------------------------------------------------------------------------------------------- scores


def test_scores_are_the_mean_and_standard_error_over_seeds_by_hand():
    finals = [[13.0, 14.0, 15.0], [12.0, 12.5], [11.0, 13.0, 12.0]]
    table = ablations.scores(ablation_data("radius", [3, 0, 1], finals, other_runs=2), "radius")
    assert list(table["radius"]) == [0, 1, 3] and list(table["full"]) == [False, False, True]
    assert list(table["seeds"]) == [2, 3, 3]
    np.testing.assert_allclose(table["mean"], [12.25, 12.0, 14.0])
    # s.e. = sample standard deviation / √n: [12, 12.5] → 0.3536/√2 = 0.25; [11, 13, 12] → 1/√3
    np.testing.assert_allclose(table["stderr"], [0.25, 1 / math.sqrt(3), 1 / math.sqrt(3)])


def test_a_sweeps_run_is_scored_at_the_ablations_seeds_only():
    finals = [[13.0, 15.0, 17.0], [12.0, np.nan, np.nan], [11.0, np.nan, np.nan]]  # full: the sweep's 3 seeds
    data = ablation_data("radius", [3, 0, 1], finals)
    assert ablations.OWN_RUNS == experiment.ABLATION
    data = data.assign_coords(sweep=("run", ["convlstm", experiment.ABLATION, experiment.ABLATION]))
    table = ablations.scores(data, "radius")
    assert list(table["radius"]) == [0, 1, 3] and list(table["seeds"]) == [1, 1, 1]
    assert list(table["mean"]) == [12.0, 11.0, 13.0]  # not 15.0, the full radius over the sweep's seeds
    only_sweeps = data.assign_coords(sweep=("run", ["convlstm"] * 3))  # no run of its own: every seed counts
    assert list(ablations.scores(only_sweeps, "radius")["mean"]) == [12.0, 11.0, 15.0]


def test_paper_values_are_the_authors_scores_of_the_papers_runs():
    assert round(ablations.paper_value("aggregation"), 3) == 13.738
    assert round(ablations.paper_value("radius"), 3) == 13.866


def rows(setting, means, stderr=0.01, seeds=3):
    return ablations.scores(ablation_data(setting, list(means), [[m - stderr * math.sqrt(seeds), m,
                                                                  m + stderr * math.sqrt(seeds)][:seeds]
                                                                 for m in means.values()]), setting)


def test_aggregation_verdict_says_whether_the_sqrt_sum_is_best():
    best = rows("aggregation", {"sqrt_sum": 13.7, "mean": 13.5, "routed_mean": 13.2, "routed_sqrt_sum": 13.6})
    assert list(best["aggregation"]) == ["sqrt_sum", "mean", "routed_mean", "routed_sqrt_sum"]
    assert ablations.aggregation_verdict(best).startswith(
        "the paper's pattern shows: the sqrt-sum has the best mean (13.700), ahead of routed_sqrt_sum by +0.100")
    worse = rows("aggregation", {"sqrt_sum": 13.7, "mean": 13.71}, stderr=0.05)
    verdict = ablations.aggregation_verdict(worse)
    assert verdict.startswith("the paper's pattern does not show: mean has the best mean (13.710)")
    assert verdict.endswith("within two standard errors.")
    one_seed = rows("aggregation", {"sqrt_sum": 13.7, "mean": 13.5}, seeds=1)
    assert one_seed["stderr"].isna().all()
    assert ablations.aggregation_verdict(one_seed).endswith("by +0.200 (no standard error from one seed).")


def test_radius_verdict_says_whether_the_return_rises_with_r():
    rising = rows("radius", {0: 13.1, 1: 13.4, 2: 13.5, 3: 13.9})
    assert ablations.radius_verdict(rising).startswith("the paper's pattern shows: the mean return rises with r")
    assert "full (r = 3): 13.900" in ablations.radius_verdict(rising)
    # The weakest rise, r = 1 to r = 2 (+0.100), is the one the verdict qualifies.
    assert "the smallest rise, r = 1 to r = 2, is +0.100" in ablations.radius_verdict(rising)
    dip = rows("radius", {0: 13.1, 1: 13.6, 2: 13.5, 3: 13.9})
    assert ablations.radius_verdict(dip).startswith(
        "the paper's pattern does not show: the mean return does not rise from r = 1 to r = 2 (-0.100")


def test_summary_compares_with_the_paper_only_on_its_run_and_warns_of_few_seeds():
    paper_cfg, demo_cfg = study_of("paper.yaml"), study_of("config.yaml")
    at_paper = rows("radius", {0: 13.1, 1: 13.4, 2: 13.5, 3: 13.9})
    assert ablations.is_paper_run(paper_cfg, "radius", at_paper)
    lines = ablations.summary(paper_cfg, "radius", at_paper)
    assert len(lines) == 3 and "13.866" in lines[1] and "the same configuration" in lines[1]
    few = rows("radius", {0: 13.1, 3: 13.9}, seeds=2)
    assert not ablations.is_paper_run(demo_cfg, "radius", few)
    lines = ablations.summary(demo_cfg, "radius", few)
    assert "not comparable" in lines[1] and lines[-1].startswith("seeds are few: 2 per setting (the paper: 3)")
    chance = ablations.summary(demo_cfg, "radius", few, at_chance=True)[0]
    assert chance == ("this run: every agent here solves no more test levels than a random policy, so this ordering "
                      "says nothing about the paper's pattern: " + ablations.radius_verdict(few))


def test_the_plots_draw_each_setting_at_its_mean_and_standard_error():
    table = rows("aggregation", {"sqrt_sum": 13.7, "mean": 13.5, "routed_mean": 13.2}, stderr=0.02)
    fig = plots.aggregation_ablation(table, 13.738, "test")
    points = [c for c in fig.axes[0].collections if not hasattr(c, "get_segments")]
    np.testing.assert_allclose([y for c in points for _, y in c.get_offsets()], [13.7, 13.5, 13.2, 13.738])
    assert not fig.axes[0].patches  # points, not bars: the y-axis does not start at 0
    [errors] = [c for c in fig.axes[0].collections if hasattr(c, "get_segments") and len(c.get_segments())]
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in errors.get_segments()], 2 * table["stderr"])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][-1] == "paper:\nsqrt_sum"

    table = rows("radius", {0: 13.1, 1: 13.4, 3: 13.9}, stderr=0.03)
    fig = plots.radius_ablation(table, 13.866, "test")
    ax = fig.axes[0]
    [line] = [line for line in ax.lines if line.get_linestyle() != "None"]  # not the caps: 0-1 joined, not 1-3
    np.testing.assert_allclose(np.asarray(line.get_xdata(), float), [0, 1])
    np.testing.assert_allclose(np.asarray(line.get_ydata(), float), [13.1, 13.4])
    [errors] = [c for c in ax.collections if hasattr(c, "get_segments") and len(c.get_segments())]
    np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in errors.get_segments()], 2 * table["stderr"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "full\n(r=3)"]
    ours, paper = [c for c in ax.collections if not hasattr(c, "get_segments")]
    np.testing.assert_allclose(ours.get_offsets(), [[0, 13.1], [1, 13.4], [3, 13.9]])
    np.testing.assert_allclose(paper.get_offsets(), [[3, 13.866]])
    assert defects(fig) == []
    fig = plots.radius_ablation(table.assign(stderr=np.nan, seeds=1), None, "one seed")
    assert not fig.axes[0].containers and defects(fig) == []  # no error bars, and none keyed
    matplotlib.pyplot.close("all")


def test_run_ids_name_an_ablations_setting_only_where_it_is_not_the_default():
    run = Study.of(load("paper.yaml")).sokoban.ablations["radius"][-1]
    assert run.agent == AgentConfig(2, 7, 64) and experiment.variant_id(run.agent) == ""
    assert experiment.variant_id(AgentConfig(2, 7, 64, aggregation="routed_mean")) == "-routed_mean"
    assert experiment.variant_id(AgentConfig(2, 7, 64, radius=1)) == "-r1"


def test_the_report_module_does_not_load_jumanji():
    # Jumanji switches an IPython kernel's matplotlib backend on import, which fails under papermill.
    import subprocess
    import sys

    check = "import sys, parallel_experts.analysis.sokoban_ablations; assert 'jumanji' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", check]).returncode == 0


def test_the_ablations_dataset_names_each_ablations_runs_and_holds_the_shared_run_once(tmp_path):
    by_setting = Study.of(demo_with_every_rule("sokoban")).sokoban.ablations
    runs = list(definitions.by_id(by_setting.values()).values())
    score = {run.id: 10.0 + i for i, run in enumerate(runs)}  # hand-made final-five returns, one per run
    curves, evals = write_sokoban_results(tmp_path, runs, score)
    members = {setting: [run.id for run in group] for setting, group in by_setting.items()}
    data = experiment.collect(curves, evals, members)
    assert data.sizes["run"] == 5  # 4 rules + 2 radii, the sqrt-sum at full radius once
    shared = "convlstm/recurrent/small/L1-E4-d8"  # the sweep's run, seeds 0 and 1; the ablations train seed 0
    assert data["final_five"].sel(run=shared).values.tolist() == [score[shared], score[shared] + 1]
    aggregation, radius = ablations.scores(data, "aggregation"), ablations.scores(data, "radius")
    assert aggregation["aggregation"].tolist() == ["sqrt_sum", "mean", "routed_mean", "routed_sqrt_sum"]
    assert radius["radius"].tolist() == [0, 2] and radius["full"].tolist() == [False, True]
    assert aggregation["mean"].iloc[0] == radius["mean"].iloc[1] == score[shared]
    assert radius["mean"].iloc[0] == score["ablation/recurrent/small/L1-E4-d8-r0"]

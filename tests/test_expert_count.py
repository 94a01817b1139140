"""Fig. 6 (number of experts): which families the data hold, their points, standard errors and verdicts, and the
figure's panels; Table 2's choice of each budget's best agents and its comparison with earlier agents."""

import copy
import math

import matplotlib
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from helpers import REPO, study_of, write_sokoban_results

from parallel_experts import cli, study
from parallel_experts.analysis import expert_count
from parallel_experts.analysis import sokoban_scores
from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.reporting import plots
from parallel_experts.results import paper, store
from parallel_experts.sokoban import experiment
from parallel_experts.targets import catalogue
from parallel_experts.study import Study

matplotlib.use("Agg")


def sokoban_sweep(runs, sweep="convlstm") -> xr.Dataset:
    """The layout of `sokoban.experiment.collect`: runs are (recurrent, budget, L, E, d, per-seed final-five,
    greedy solve rate)."""
    n = len(runs)
    seeds = max(len(r[5]) for r in runs)
    final = np.array([list(r[5]) + [np.nan] * (seeds - len(r[5])) for r in runs])
    rates = np.stack([np.stack([np.full(seeds, r[6]), np.full(seeds, r[6] / 2)], axis=-1) for r in runs])
    return xr.Dataset(
        {"final_five": (("run", "seed"), final), "solve_rate": (("run", "seed", "mode"), rates)},
        coords={"run": [f"{sweep}/{i}" for i in range(n)], "sweep": ("run", [sweep] * n),
                "recurrent": ("run", [r[0] for r in runs]), "budget": ("run", [r[1] for r in runs]),
                "depth": ("run", [r[2] for r in runs]), "experts": ("run", [r[3] for r in runs]),
                "width": ("run", [r[4] for r in runs]), "seed": list(range(seeds)), "mode": ["greedy", "sampled"]})


# Two budgets at d = 64 (the small and medium Sokoban grids' d = 64 rows) and one d = 32 point per budget.
RUNS = [
    (True, "small", 1, 4, 64, [1.0, 2.0, 3.0], 0.5),
    (True, "small", 2, 2, 64, [4.0, 6.0, 8.0], 0.4),
    (True, "small", 4, 1, 64, [5.0, 5.0, 5.0], 0.3),
    (True, "small", 1, 12, 32, [2.0, 2.0], 0.2),
    (True, "medium", 1, 14, 64, [3.0, 5.0, 7.0], 0.6),
    (True, "medium", 2, 7, 64, [6.0, 6.0, 9.0], 0.7),
    (True, "medium", 8, 2, 64, [1.0, 1.0, 1.0], 0.1),
    (True, "medium", 1, 45, 32, [2.0, 4.0], 0.9),
    (False, "small", 1, 4, 64, [0.0, 1.0, 2.0], 0.8),
    (False, "small", 4, 1, 64, [2.0, 3.0, 4.0], 0.9),
]


def test_families_are_every_depth_and_width_with_two_expert_counts_and_their_standard_errors():
    points = expert_count.sokoban_points(sokoban_sweep(RUNS))
    found = expert_count.families(points)
    members = {(r, d, w): list(rows["experts"]) for (r, d, w), rows in found.groupby(["recurrent", "depth", "width"])}
    # L=4 and L=8 at d=64 have one E each; the non-recurrent runs are at one budget only.
    assert members == {(True, 1, 32): [12, 45], (True, 1, 64): [4, 14], (True, 2, 64): [2, 7]}
    row = found.set_index(["depth", "experts", "width"]).loc[(2, 7, 64)]
    assert row["score"] == pytest.approx(7.0) and row["budget"] == "medium"
    assert row["stderr"] == pytest.approx(math.sqrt(3.0 / 3))  # seeds 6, 6, 9: variance 3, three seeds
    assert found.set_index(["depth", "experts", "width"]).loc[(1, 45, 32), "stderr"] == pytest.approx(1.0)
    assert set(found["panel"]) == {"Sokoban, convlstm sweep"}
    drawn = expert_count.figure_width(found)  # d=64 holds four family points, d=32 two
    assert set(drawn["width"]) == {64} and len(drawn) == 4


def test_more_experts_help_only_beyond_two_standard_errors():
    trends = expert_count.expert_trends(expert_count.families(expert_count.sokoban_points(sokoban_sweep(RUNS))))
    by = trends.set_index(["depth", "width"])
    # L=1, d=64: mean 2 (s.e. 1/√3) -> 5 (s.e. 2/√3); the gain 3 exceeds the noise 2·√(5/3) = 2.582.
    assert by.loc[(1, 64), "gain"] == pytest.approx(3.0)
    assert by.loc[(1, 64), "noise"] == pytest.approx(2 * math.sqrt(1 / 3 + 4 / 3))
    assert by.loc[(1, 64), "verdict"] == "more experts help" and by.loc[(1, 64), "experts"] == "4, 14"
    # L=2, d=64: 6 (s.e. 2/√3) -> 7 (s.e. 1); the gain 1 is within 2·√(4/3 + 1) = 3.055.
    assert by.loc[(2, 64), "verdict"] == "no clear change (within 2 standard errors)"
    # L=1, d=32: 2 (s.e. 0) -> 3 (s.e. 1); noise 2 > 1.
    assert by.loc[(1, 32), "noise"] == pytest.approx(2.0) and by.loc[(1, 32), "verdict"].startswith("no clear")


def lm_sweep() -> xr.Dataset:
    runs = [(True, "small", 64, 1, 4, 64, 4.0), (True, "medium", 64, 1, 8, 64, 3.8), (True, "small", 64, 2, 2, 64, 3.9),
            (False, "small", 64, 1, 4, 64, 4.2), (False, "medium", 64, 1, 8, 64, 4.3),
            (True, "small", 128, 1, 4, 64, 3.0), (True, "medium", 128, 1, 8, 64, 2.0)]
    names = ["recurrent", "budget", "window", "depth", "experts", "width", "validation_loss"]
    columns = dict(zip(names, zip(*runs)))
    return xr.Dataset({"validation_loss": ("run", list(columns.pop("validation_loss")))},
                      coords={"run": [f"r{i}" for i in range(len(runs))]} | {k: ("run", list(v)) for k, v in columns.items()})


def test_lm_families_are_read_at_one_window_and_lower_loss_is_better():
    points = expert_count.lm_points(lm_sweep(), 64)
    found = expert_count.families(points)
    assert len(points) == 5 and set(found["panel"]) == {"FineWeb, 64-token window"}
    assert sorted(map(tuple, found[["recurrent", "depth"]].drop_duplicates().values.tolist())) == [(False, 1), (True, 1)]
    trends = expert_count.expert_trends(found).set_index("recurrent")
    assert trends.loc[True, "gain"] == pytest.approx(0.2) and trends.loc[True, "verdict"] == "more experts help"
    assert trends.loc[False, "gain"] == pytest.approx(-0.1) and trends.loc[False, "verdict"] == "more experts hurt"
    assert trends.loc[True, "noise"] == 0  # one run per allocation: no standard error
    at_chance = expert_count.expert_trends(found, {"FineWeb, 64-token window"})  # a panel at chance: no verdict
    assert set(at_chance["verdict"]) == {expert_count.AT_CHANCE} and at_chance["gain"].tolist() == trends["gain"].tolist()


def test_saturation_depth_is_the_shallowest_within_noise_of_the_best():
    points = expert_count.sokoban_points(sokoban_sweep(RUNS))
    saturation = expert_count.saturation_depths(points).set_index(["comparison", "width"])
    # small, d=64, recurrent: L1 2 (s.e. 0.577), L2 6 (s.e. 1.155), L4 5 (s.e. 0): best L2; L4 is 1 below,
    # within 2·1.155; L1 is 4 below, beyond 2·√(1/3 + 4/3). Saturation at L=2. Non-recurrent: L1 1, L4 3 (s.e.
    # 0.577 each): 2 > 2·0.816, so L=4.
    row = saturation.loc[("small budget", 64)]
    assert (row["recurrent_depth"], row["nonrecurrent_depth"]) == (2, 4)
    assert row["verdict"] == "recurrent saturates at shallower depth"
    assert list(saturation.index) == [("small budget", 64)]  # medium has no non-recurrent runs
    lines = expert_count.summary(expert_count.expert_trends(expert_count.families(points)), saturation.reset_index())
    assert lines[0] == "FineWeb: no (L, d) with two or more values of E in this config's runs"
    assert ("Sokoban, convlstm sweep, recurrent: more experts help beyond 2 standard errors in 1 of 3 families (L, d); "
            "the score improves at every step of E in 3") in lines
    assert "Sokoban, convlstm sweep: recurrent saturates at shallower depth in 1 of 1 budget and width comparisons" in lines
    assert lines[-1] == expert_count.PAPER_FINDING


def test_the_papers_sokoban_grid_holds_the_families_of_analyses_section_2():
    grid = paper.allocations("sokoban").assign(panel="paper", recurrent=True)
    found = expert_count.families(grid)
    at_64 = {d: list(rows["experts"]) for d, rows in found[found["width"] == 64].groupby("depth")}
    assert at_64 == {1: [4, 14, 208], 2: [2, 7, 104], 3: [5, 69], 4: [1, 3, 52]}  # (8, 2, 64) has one E


def test_the_figure_puts_sokoban_left_and_draws_one_line_per_recurrence_and_depth():
    sokoban = expert_count.families(expert_count.sokoban_points(sokoban_sweep(RUNS)))
    lm = expert_count.families(expert_count.lm_points(lm_sweep(), 64))
    fig = plots.expert_count(expert_count.figure_width(pd.concat([lm, sokoban])), "t")
    left, right = fig.axes
    assert left.get_title() == "Sokoban, convlstm sweep, d=64" and right.get_title() == "FineWeb, 64-token window, d=64"
    # Sokoban: (recurrent, L=1), (recurrent, L=2) at d=64; FineWeb: both recurrences at L=1.
    assert len(left.containers) == 2 and len(right.containers) == 2
    assert [bars.lines[0].get_linestyle() for bars in right.containers] == ["-", "--"]
    matplotlib.pyplot.close("all")


def test_table2_takes_each_budgets_best_by_final_five_return_not_by_solve_rate():
    data = xr.concat([sokoban_sweep(RUNS), sokoban_sweep([(True, "small", 1, 1, 128, [9.0, 9.0], 0.1)], "convglu")],
                     dim="run", join="outer")
    best = sokoban_scores.best_agents(data)
    got = [(r["budget"], r["family"], r["sweep"], r["depth"], r["experts"], r["width"]) for _, r in best.iterrows()]
    # small, recurrent: the ConvGLU (1,1,128) scores 9 with a solve rate of 0.1, above every ConvLSTM run.
    assert got == [("small", "recurrent", "convglu", 1, 1, 128), ("small", "non-recurrent", "convlstm", 4, 1, 64),
                   ("medium", "recurrent", "convlstm", 2, 7, 64)]
    assert best["greedy"].tolist() == pytest.approx([0.1, 0.9, 0.7])
    assert best["sampled"].tolist() == pytest.approx([0.05, 0.45, 0.35])
    assert best["final-five mean"].tolist() == pytest.approx([9.0, 3.0, 7.0])


def test_prior_work_compares_like_for_like_only_on_boxoban_unfiltered_test():
    demo = study_of("config.yaml").sokoban
    paper = study_of("paper.yaml").sokoban
    assert sokoban_scores.prior_work_comparison(demo).startswith("Not like for like: the published solve rates are on "
                                                           "Boxoban unfiltered/test, this config's test levels are "
                                                           "200 generated 6×6 rooms with 2 boxes")
    assert sokoban_scores.prior_work_comparison(paper) == (
        "Like for like in levels: ours are also Boxoban unfiltered/test; trained as long as ours (50M environment "
        "steps): DRC(3,3) at 50M, ResNet at 50M.")
    table = sokoban_scores.prior_work()
    # The published numbers: Taufeeque et al. (2024); camail-official/LoopedActor's sokoban/README.md (81.5 ± 5.7 %,
    # 42.8 ± 6.2 %, 0.2 ± 0.3 % on unfiltered_test, mean ± std over seeds 1-3)
    assert table[["agent", "trained", "solve rate"]].values.tolist() == [
        ["DRC(3,3)", "50M", 0.934], ["DRC(3,3)", "2B", 0.993], ["ResNet", "50M", 0.775],
        ["LoopedActor, weight-tied looped core", "100M", 0.815], ["LoopedActor, 16 untied cores", "100M", 0.428],
        ["LoopedActor, one core", "100M", 0.002]]
    assert table["± (seeds)"].tolist()[3:] == [0.057, 0.062, 0.003] and table["± (seeds)"][:3].isna().all()
    assert (table["protocol"][3:].str.startswith("PPO for 100M environment steps")).all()


def pages(cfg):
    return {r.name: r for r in catalogue.reports(Study.of(cfg))}


def test_fig6_exists_exactly_where_a_family_can_and_reads_only_the_files_that_hold_one():
    demo = files.load([REPO / "config/config.yaml"])
    fig6 = pages(demo)["expert_count"]
    assert fig6.target == "fig6" and fig6.inputs == {"expert_count": "results/sokoban/expert_count.nc"}
    assert fig6.params == {"window": 64}
    without = copy.deepcopy(demo)
    del without["sokoban"]["expert_count"]
    assert "expert_count" not in pages(without)  # one budget per domain: no (L, d) with two E
    lm_family = copy.deepcopy(without)
    lm_family["lm"]["budgets"]["medium"] = {"anchor": [8, 1, 64], "tolerance": 0.01, "allocations": [[2, 4, 64]]}
    study.check(lm_family)
    assert pages(lm_family)["expert_count"].inputs == {"lm_sweep": "results/lm/sweep.nc"}  # L=2: E=2 and E=4
    paper = pages(files.load([REPO / "config/paper.yaml"]))
    assert paper["expert_count"].inputs == {"sweep": "results/sokoban/sweep.nc", "lm_sweep": "results/lm/sweep.nc"}
    assert paper["expert_count"].params == {"window": 128}
    assert "expert_count" not in pages(files.load([REPO / "config/smoke.yaml"]))


def test_table2_exists_exactly_where_sokoban_sweeps_train():
    demo = files.load([REPO / "config/config.yaml"])
    assert pages(demo)["sokoban_table2"].target == "table2"
    no_sweeps = copy.deepcopy(demo)
    del no_sweeps["sokoban"]["sweeps"], no_sweeps["sokoban"]["probes"]  # the probes read runs of the sweeps
    assert "sokoban_table2" not in pages(no_sweeps) and "expert_count" in pages(no_sweeps)


def test_expert_count_runs_have_readable_ids_and_are_the_grids_runs_where_it_trains_them(tmp_path):
    demo = files.load([REPO / "config/config.yaml"])
    demo["sokoban"]["expert_count"].update(recurrent=[True, False], experts=[1, 2, 4])
    runs = Study.of(demo).sokoban.expert_count
    assert [run.id for run in runs] == [f"expert_count/{family}/L1-E{e}-d8" if e < 4 else
                                        f"convlstm/{family}/small/L1-E4-d8"  # the grid's run, trained once
                                        for family in ("recurrent", "nonrecurrent") for e in (1, 2, 4)]
    assert [run.budget for run in runs] == [None, None, "small"] * 2 and {run.seeds for run in runs} == {(0, 1)}
    assert Study.of(files.load([REPO / "config/paper.yaml"])).sokoban.expert_count == []
    # Its dataset is one family whatever the runs' origin: the sweep's run is labelled a run of expert_count.
    curves, evals = write_sokoban_results(tmp_path, runs, {run.id: run.agent.experts for run in runs})
    out = tmp_path / "expert_count.nc"  # through the command that rule sokoban_dataset runs
    assert cli.main(["sokoban-sweep", "--out", str(out), "--curves", *curves, "--evals", *evals,
                     "--family", experiment.EXPERT_COUNT]) == 0
    data = store.open_dataset(out)
    assert set(data["sweep"].values) == {"expert_count"} and set(data["budget"].values) == {""}
    found = expert_count.families(expert_count.sokoban_points(data))
    assert found.groupby("recurrent")["experts"].apply(list).to_dict() == {False: [1, 2, 4], True: [1, 2, 4]}
    assert found["score"].tolist() == [1.5, 2.5, 4.5] * 2  # mean over seeds 0, 1 of E + seed


def test_expert_count_sweep_needs_two_expert_counts_and_its_own_name():
    demo = files.load([REPO / "config/config.yaml"])
    one = copy.deepcopy(demo)
    one["sokoban"]["expert_count"]["experts"] = [4]
    with pytest.raises(ConfigError, match=r"sokoban\.expert_count\.experts"):
        study.check(one)
    clash = copy.deepcopy(demo)
    clash["sokoban"]["sweeps"]["expert_count"] = clash["sokoban"]["sweeps"]["convlstm"]
    with pytest.raises(ConfigError, match=r"sokoban\.sweeps\.expert_count: the name is taken"):
        study.check(clash)


def test_a_family_across_budgets_gives_the_figure_and_sweeps_train_whole_grids():
    cfg = files.load([REPO / "config/config.yaml"])
    del cfg["sokoban"]["expert_count"]
    cfg["sokoban"]["budgets"]["medium"] = {"anchor": [1, 2, 16], "tolerance": 0.01, "allocations": [[1, 2, 16], [1, 6, 8]]}
    cfg["sokoban"]["sweeps"]["convlstm"]["budgets"] = ["small", "medium"]
    assert pages(cfg)["expert_count"].inputs == {"sweep": "results/sokoban/sweep.nc"}  # L=1, d=8: E=4 and E=6
    # A sweep always trains its budgets' whole grids: no key restricts it to some allocations.
    cfg["sokoban"]["sweeps"]["convlstm"]["allocations"] = [[1, 4, 8]]
    with pytest.raises(ConfigError, match=r"sokoban\.sweeps\.convlstm: unknown key 'allocations'"):
        study.check(cfg)


def test_a_sokoban_panel_at_chance_says_so_instead_of_a_finding():
    # Two sweeps in one dataset: convlstm's agents solve 0.05 of the levels, below the random policy's 0.08.
    solve = xr.DataArray([[[0.05, 0.05]], [[0.05, 0.08]], [[0.2, 0.3]]], dims=("run", "seed", "mode"))
    data = xr.Dataset({"solve_rate": solve}, coords={"sweep": ("run", ["convlstm", "convlstm", "convglu"])},
                      attrs={"test_random_solve_rate": 0.08})
    assert expert_count.chance_panels([data]) == {"Sokoban, convlstm sweep"}
    assert expert_count.chance_panels([data.drop_attrs()]) == set()  # no chance level known: no claim of chance
    points = expert_count.sokoban_points(sokoban_sweep(RUNS))
    trends = expert_count.expert_trends(expert_count.families(points))
    lines = expert_count.summary(trends, expert_count.saturation_depths(points), {"Sokoban, convlstm sweep"})
    assert lines[1] == ("Sokoban, convlstm sweep: every agent solves no more test levels than a random policy, so "
                        "these scores cannot show an effect of the number of experts or of depth")
    assert not any("more experts help" in line for line in lines)

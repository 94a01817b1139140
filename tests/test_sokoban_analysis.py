"""The paper's Sokoban statistics reproduce the authors' published summaries from their per-seed returns."""

import matplotlib
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from helpers import study_of

from parallel_experts.analysis import comparison
from parallel_experts.analysis import sokoban_scores
from parallel_experts.reporting import plots
from parallel_experts.study import Study

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def paper():
    return sokoban_scores.paper_per_seed_scores()


def test_configuration_means_match_the_published_table(paper):
    scores = sokoban_scores.configuration_scores(paper).set_index(["budget", "depth", "experts", "width"])
    # The authors' latest rebuttal/openreview_p_tests_and_seed_tables.md: mean ± SD over seeds
    assert scores.loc[("small", 4, 1, 64), "mean"] == pytest.approx(13.665, abs=5e-4)
    assert scores.loc[("small", 4, 1, 64), "variance"] ** 0.5 == pytest.approx(0.086, abs=5e-4)
    assert scores.loc[("small", 1, 1, 128), "mean"] == pytest.approx(13.097, abs=5e-4)
    assert scores.loc[("medium", 4, 1, 128), "mean"] == pytest.approx(14.017, abs=5e-4)
    assert scores.loc[("large", 8, 7, 128), "mean"] == pytest.approx(14.228, abs=5e-4)
    assert scores.loc[("large", 8, 7, 128), "seeds"] == 3 and scores.loc[("small", 2, 2, 64), "seeds"] == 9


def test_welch_tests_reproduce_the_published_p_values(paper):
    tests = sokoban_scores.welch_depth_tests(paper).set_index(["budget", "test"])["p"]
    # The same tables: L4 vs L2 p = 0.0150 / 0.0060 / 0.1005; L2 vs L1 p < 0.0001 / < 0.0001 / 0.0745. The
    # per-seed scores are published rounded to three decimals, which moves p by a few 1e-4.
    assert tests[("small", "L=4 > L=2")] == pytest.approx(0.0150, abs=1e-3)
    assert tests[("medium", "L=4 > L=2")] == pytest.approx(0.0060, abs=1e-3)
    assert tests[("large", "L=4 > L=2")] == pytest.approx(0.1005, abs=1e-3)
    assert tests[("small", "L=2 > L=1")] < 1e-4 and tests[("medium", "L=2 > L=1")] < 1e-4
    assert tests[("large", "L=2 > L=1")] == pytest.approx(0.0745, abs=1e-3)


def test_best_up_to_depth_is_monotone_and_finds_the_published_best(paper):
    best = sokoban_scores.best_up_to_depth(sokoban_scores.configuration_scores(paper))
    for _, group in best.groupby("budget"):
        assert group.sort_values("max_depth")["best_mean"].is_monotonic_increasing
    small = best[best["budget"] == "small"].set_index("max_depth")
    assert small.loc[8, "at"] == "L4 E1 d64" and small.loc[1, "at"] == "L1 E4 d64"


def scores(rows) -> pd.DataFrame:
    """A hand-made score table (the layout of `configuration_scores`): (recurrent, L, E, d, mean, stderr, seeds)."""
    table = pd.DataFrame(rows, columns=["recurrent", *sokoban_scores.ALLOCATION, "mean", "stderr", "seeds"])
    return table.assign(sweep="convlstm", budget="small")


# best recurrent 10.0 ± 0.06, best non-recurrent ± 0.08: the difference has a standard error of 0.1
NOISE = 0.1


def two_families(gap: float) -> pd.DataFrame:
    return scores([(True, 2, 2, 64, 10.0, 0.06, 3), (True, 1, 4, 64, 9.0, 0.01, 3),
                   (False, 4, 1, 64, 10.0 - gap, 0.08, 4), (False, 1, 4, 64, 8.0, 0.01, 4)])


def test_recurrence_effect_needs_more_than_two_standard_errors():
    effect = sokoban_scores.recurrence_effect(two_families(3 * NOISE))
    assert effect == ("this run shows the paper's effect (recurrent better): best recurrent minus best "
                      "non-recurrent = +0.300 (± 0.100 standard error; 3 and 4 seeds)")
    assert "shows the opposite of the paper's effect (non-recurrent better)" in sokoban_scores.recurrence_effect(
        two_families(-3 * NOISE))
    within = sokoban_scores.recurrence_effect(two_families(NOISE))
    assert "does not separate recurrent from non-recurrent (difference within two standard errors)" in within
    assert "+0.100" in within
    assert "does not separate" in sokoban_scores.recurrence_effect(two_families(-1.9 * NOISE))
    assert sokoban_scores.recurrence_effect(two_families(3 * NOISE).query("recurrent")) is None
    assert sokoban_scores.recurrence_verdict(2.1, 1.0).startswith("shows the paper's effect")
    assert sokoban_scores.recurrence_verdict(-2.1, 1.0).startswith("shows the opposite")
    assert sokoban_scores.recurrence_verdict(2.0, 1.0).startswith("does not separate")


def test_sweep_summary_names_each_best_allocation_and_ends_with_the_papers_finding():
    lines = sokoban_scores.sweep_summary(two_families(3 * NOISE), None)
    assert lines[:2] == ["best recurrent allocation: L=2 (E=2, d=64) with 10.000",
                         "best non-recurrent allocation: L=4 (E=1, d=64) with 9.700"]
    assert lines[2].startswith("this run shows the paper's effect") and lines[3] == sokoban_scores.PAPER_FINDING
    paper = scores([(True, 4, 1, 64, 13.665, 0.03, 9)])
    with_paper = sokoban_scores.sweep_summary(two_families(0), paper)
    assert with_paper[2] == "paper, recurrent: L=4 (E=1, d=64) with 13.665" and len(with_paper) == 5
    one = sokoban_scores.sweep_summary(two_families(0).query("not recurrent"), None)
    assert one == ["best non-recurrent allocation: L=4 (E=1, d=64) with 10.000", sokoban_scores.PAPER_FINDING]


def sokoban_config(**anchors) -> Study:
    """The paper's study with Sokoban budgets each of only its anchor, the ConvLSTM sweep over them: the paper's small
    budget unless changed."""
    anchors = {"small": [1, 1, 128]} | anchors
    return study_of(sokoban={
        "budgets": {name: {"anchor": anchor, "tolerance": 0.1, "allocations": [anchor]}
                    for name, anchor in anchors.items()},
        "sweeps": {"convlstm": {"expert": "convlstm", "recurrent": [True, False], "budgets": list(anchors)}}})


def sweep(expert="convlstm", budget="small") -> xr.Dataset:
    """The layout of `sokoban.experiment.collect`: two recurrent and one non-recurrent run of two seeds."""
    runs = [(True, 1, 4, 64, [5.0, 6.0]), (True, 4, 1, 64, [8.0, 9.0]), (False, 2, 2, 64, [4.0, 4.5])]
    n = len(runs)
    returns = np.array([[[1.0, 2.0, final[0]], [1.5, 2.5, final[1]]] for *_, final in runs])
    return xr.Dataset(
        {"final_five": (("run", "seed"), [final for *_, final in runs]),
         "episodic_return": (("run", "seed", "update"), returns),
         "solve_rate": (("run", "seed", "mode"), np.full((n, 2, 2), 0.5))},
        coords={"run": [f"{expert}/r{i}" for i in range(n)], "sweep": ("run", [expert] * n),
                "expert": ("run", [expert] * n), "recurrent": ("run", [r for r, *_ in runs]),
                "budget": ("run", [budget] * n), "depth": ("run", [d for _, d, *_ in runs]),
                "experts": ("run", [e for _, _, e, *_ in runs]), "width": ("run", [w for _, _, _, w, _ in runs]),
                "env_steps": ("run", [192_000] * n), "steps_per_update": ("run", [640] * n), "seed": [0, 1],
                "update": [10, 20, 30], "mode": ["greedy", "sampled"]},
        attrs={"test_levels": "200 generated levels"})


def test_paper_scores_only_for_the_papers_budgets_and_experts():
    config = sokoban_config(medium=[1, 1, 64])  # medium is not the paper's (anchored at width 256)
    ours = config.sokoban.budgets
    assert comparison.same_budget_as_paper(ours, "sokoban", "small")
    assert not comparison.same_budget_as_paper(ours, "sokoban", "medium")
    assert not comparison.same_budget_as_paper(ours, "sokoban", "large")  # not in this config
    assert "anchored at L1 E1 d64, the paper's at L1 E1 d256" in comparison.budget_differences(
        ours, "sokoban", "medium")[0]
    assert set(sokoban_scores.paper_scores(config)["budget"]) == {"small"}
    assert sokoban_scores.paper_scores(config, "medium").empty
    beside = sokoban_scores.paper_scores_beside(config, sweep(), "small")
    assert set(beside["budget"]) == {"small"} and len(beside) == len(sokoban_scores.paper_scores(config, "small"))
    assert sokoban_scores.paper_scores_beside(config, sweep(), "medium") is None
    assert sokoban_scores.paper_scores_beside(config, sweep(expert="convglu"), "small") is None  # no published scores
    assert set(sokoban_scores.paper_best_up_to_depth(config, sweep())["budget"]) == {"small"}
    assert sokoban_scores.paper_best_up_to_depth(sokoban_config(small=[1, 1, 64]), sweep()) is None


def test_tables_of_a_sweep_set_the_papers_numbers_beside_ours():
    data = sweep()
    ours = sokoban_scores.configuration_scores(sokoban_scores.per_seed_scores(data))
    paper = scores([(True, 4, 1, 64, 13.665, 0.03, 9)]).assign(variance=0.0074)
    table = sokoban_scores.sweep_table(data, ours, paper)
    assert list(zip(table["recurrent"], table["depth"])) == [(True, 1), (True, 4), (False, 2)]
    assert table["paper mean"].tolist()[1] == pytest.approx(13.665) and table["paper mean"].isna().sum() == 2
    assert {"greedy", "sampled", "mean", "stderr"} <= set(table.columns) and "sweep" not in table
    assert "paper mean" not in sokoban_scores.sweep_table(data, ours, None)
    table7 = sokoban_scores.scores_beside_paper(ours, paper).set_index("depth")
    assert table7.loc[4, "paper seeds"] == 9 and table7.loc[4, "paper variance"] == pytest.approx(0.0074)
    assert np.isnan(table7.loc[1, "paper mean"])
    assert sokoban_scores.training_note(data) == (
        "Training: 192,000 environment steps per run; test levels: 200 generated levels.")
    solved = data.assign_attrs(test_mean_optimal_pushes=10 / 3, test_optimal_pushes_levels=3)
    assert sokoban_scores.training_note(solved) == (
        "Training: 192,000 environment steps per run; test levels: 200 generated levels. A push-optimal solution "
        "of a test level takes 3.33 pushes on average (3 levels solved).")
    chance = data.assign_attrs(test_random_solve_rate=0.06, test_time_limit=60)
    assert sokoban_scores.training_note(chance).endswith(
        "A uniformly random policy solves 0.060 of the test levels within the 60-step time limit; the best "
        "allocation here solves 0.500 greedily and 0.500 with sampled actions (mean over seeds).")
    curves = sokoban_scores.training_returns(data)
    assert len(curves) == 3 * 2 * 3 and curves["env_steps"].max() == 30 * 640
    assert set(curves["allocation"]) == {"L1 E4 d64", "L4 E1 d64", "L2 E2 d64"}


def test_the_plots_draw_our_runs_and_the_papers_scores(paper):
    data = sweep()
    ours = sokoban_scores.configuration_scores(sokoban_scores.per_seed_scores(data))
    published = sokoban_scores.configuration_scores(paper).query("budget == 'small'")
    legend = [t.get_text() for t in plots.sokoban_sweep(ours, published, "test").legends[0].get_texts()]
    assert "recurrent (best: L4 E1 d64, 8.50)" in legend and "non-recurrent (best: L2 E2 d64, 4.25)" in legend
    assert "paper, recurrent (authors' per-seed scores)" in legend
    best = sokoban_scores.best_up_to_depth
    fig = plots.sokoban_best_up_to_depth(best(ours), best(published), "t")
    assert {t.get_text() for t in fig.axes[0].get_legend().get_texts()} == {
        "recurrent", "non-recurrent", "paper, recurrent"}
    fig = plots.sokoban_learning_curves(sokoban_scores.training_returns(data), "test")
    assert [ax.get_title() for ax in fig.axes[:2]] == ["recurrent", "non-recurrent"]
    matplotlib.pyplot.close("all")


def test_depth_findings_state_each_test_and_whether_the_papers_pattern_shows(paper):
    lines = sokoban_scores.depth_findings(paper)  # the authors' own scores: 4 of their 6 tests are significant
    assert len(lines) == 7
    small = [line for line in lines if "small budget: L=4 > L=2" in line]
    assert small[0].startswith("convlstm, recurrent, small budget: L=4 > L=2 holds: best L4 E1 d64 minus best L2 ")
    assert "p = 0.01" in small[0]
    assert sum("is not shown (p ≥ 0.05)" in line for line in lines) == 2  # the large budget's two tests
    assert lines[-1].startswith("this run shows the paper's depth pattern only in part: 4 of 6 depth tests")
    assert lines[-1].endswith(sokoban_scores.PAPER_DEPTH)

    def seeds(depth_scores, recurrent=True):
        rows = [("convlstm", recurrent, "small", depth, 4 // depth, 8, seed, score)
                for depth, values in depth_scores.items() for seed, score in enumerate(values)]
        return pd.DataFrame(rows, columns=["sweep", "recurrent", "budget", *sokoban_scores.ALLOCATION, "seed", "score"])

    deeper_better = sokoban_scores.depth_findings(seeds({1: [1.0, 1.1], 2: [2.0, 2.1], 4: [3.0, 3.1]}))
    assert deeper_better[-1].startswith("this run shows the paper's depth pattern: every deeper recurrent")
    assert "best L4 E1 d8 minus best L2 E2 d8 = +1.000" in deeper_better[0]
    flat = sokoban_scores.depth_findings(seeds({1: [2.0, 2.1], 2: [2.0, 2.1], 4: [1.0, 1.1]}))
    assert flat[-1].startswith("this run does not show the paper's depth pattern")
    non_recurrent = sokoban_scores.depth_findings(seeds({1: [1.0, 1.1], 2: [2.0, 2.1], 4: [3.0, 3.1]}, recurrent=False))
    assert len(non_recurrent) == 3 and non_recurrent[-1].startswith("this run cannot test")  # the pattern is recurrent
    assert sokoban_scores.depth_findings(seeds({1: [1.0], 2: [2.0], 4: [3.0]}))[-1].startswith(
        "this run cannot test the paper's depth pattern")

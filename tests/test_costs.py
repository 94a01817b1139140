"""The planner's prices: its arithmetic on jobs of known cost, its DAG against Snakemake's own dry run, and the
paper config's plan (the FLOP counts it reads are tested in test_flops.py)."""

import json
import re

import pytest
from helpers import REPO, snakemake

from parallel_experts.study import Study
from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.core.run_folder import ATTEMPTS, run_lock
from parallel_experts.lm import flops as lm_flops
from parallel_experts.planning import costs, resources
from parallel_experts.planning import tables as plan
from parallel_experts.targets import catalogue
from parallel_experts.results import paths
from parallel_experts.sokoban import flops as sokoban_flops

SMOKE = REPO / "config/smoke.yaml"
COUNTERS = costs.Counters(sokoban_flops, lm_flops)


def load(path):
    """The study of one config file (its mapping: `.config`, to derive others from)."""
    return Study.of(files.load([path]))


def job(rule="sokoban_train", flops=3.6e15, name="a", kind="recurrent"):
    return costs.Job(rule, f"run={name}", flops, f"results/benchmarks/{name}.tsv", kind)


def with_plan(config, **spec):
    return config | {"plan": {"default": {"device": "a test GPU", "peak_tflops": 1.0, "efficiency": 0.5} | spec}}


def test_an_assumed_job_costs_its_flops_over_the_stated_fraction_of_the_peak():
    config = with_plan(load(SMOKE).config)
    config["resources"] = config["resources"] | {"train": {"cpus": 4, "mem_mb": 1000, "runtime": 60, "gpus": 2}}
    config = Study.of(config)
    rate = costs.assumed_rate(config, job())
    # 0.5 × 1 TFLOP/s × 2 GPUs = 1e12 FLOP/s: 3.6e15 FLOPs take one hour, i.e. 2 GPU-hours.
    assert rate.flops_per_s == pytest.approx(1e12) and "50.0% of a test GPU's 1 TFLOP/s × 2 GPUs" in rate.source
    assert resources.devices(config.resources, "sokoban_train") == 2 and plan.unit(config.resources) == "GPU-hours"
    assert resources.devices(config.resources, "lm_train") == 1  # smoke's lm_train family: one CPU, no GPU
    per_family = Study.of(with_plan(config.config, efficiency={"recurrent": 0.25, "non-recurrent": 0.5}))
    assert costs.assumed_rate(per_family, job()).flops_per_s == pytest.approx(5e11)
    assert costs.assumed_rate(per_family, job(kind="non-recurrent")).flops_per_s == pytest.approx(1e12)


def test_a_rule_without_an_assumption_or_a_timed_job_is_refused_by_name():
    config = dict(load(SMOKE).config)
    del config["plan"]
    config = Study.of(config)
    with pytest.raises(ConfigError, match=r"plan\.train: no assumed throughput for sokoban_train"):
        costs.assumed_rate(config, job())
    with pytest.raises(ConfigError, match="unknown target 'fig99'"):
        costs.jobs_by_target(load(SMOKE), COUNTERS, ["fig99"])


def test_timed_jobs_give_the_median_rate_of_their_group_and_a_held_out_prediction(tmp_path):
    config = Study.of(with_plan(load(SMOKE).config))
    (tmp_path / "results").mkdir()
    (tmp_path / "results/config.json").write_text(json.dumps({"accelerator": config.accelerator}))
    jobs = [job(flops=f, name=n) for f, n in ((1e12, "a"), (3e12, "b"), (2e12, "c"))] + [job("lm_train", name="d")]
    for one, seconds in zip(jobs[:3], (100, 100, 50)):
        path = tmp_path / one.benchmark
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"s\th:m:s\n{seconds}\t0:01:40\n")
    timed = costs.measured(jobs, tmp_path / "results", config.accelerator)
    assert timed == {jobs[0]: 100.0, jobs[1]: 100.0, jobs[2]: 50.0}  # d was never timed
    assert costs.measured(jobs, tmp_path / "results", "cuda") == {}  # timed on another accelerator: not used
    rates = costs.rates(config, jobs, timed)
    assert rates[jobs[0]].flops_per_s == pytest.approx(3e10)  # median of 1e10, 3e10, 4e10
    assert rates[jobs[3]].source.startswith("assumed")
    check = costs.held_out(config, timed).set_index("wildcards")
    # a from b and c: median(3e10, 4e10) = 3.5e10 FLOP/s; assumed: 0.5 × 1 TFLOP/s (one CPU, no GPU)
    assert check.loc["run=a", "held_out_seconds"] == pytest.approx(1e12 / 3.5e10)
    assert check.loc["run=a", "assumed_seconds"] == pytest.approx(2.0)
    assert check["measured_seconds"].tolist() == [100, 100, 50]


def dry_run_jobs(*targets):
    """(rule, wildcards) -> (benchmark, gpu) of every timed job in Snakemake's own dry run of the smoke DAG."""
    run = snakemake("-n", "-F", "--configfile", str(SMOKE), "--directory", "/tmp/plan-dry-run", *targets)
    assert run.returncode == 0, run.stderr[-2000:]
    found = {}
    for block in run.stdout.split("\nrule ")[1:]:
        rule = block.split(":", 1)[0]
        if rule in resources.FAMILY:
            fields = dict(re.findall(r"^    (\w+): (.*)$", block, re.M))
            gpu = int(re.search(r"\bgpu=(\d+)", fields["resources"]).group(1))
            found[(rule, fields.get("wildcards", ""))] = (fields["benchmark"], gpu)
    return found


@pytest.mark.parametrize("targets", [(), ("fig4", "table6")])
def test_the_planned_jobs_are_the_ones_snakemake_runs(targets):
    config = load(SMOKE)
    planned = {job: None for jobs in costs.jobs_by_target(config, COUNTERS, targets).values() for job in jobs}
    mine = {(j.rule, j.wildcards): (j.benchmark, resources.spec(config.resources, j.rule).gpus) for j in planned}
    assert mine == dry_run_jobs(*targets)


def test_the_paper_plan_prices_every_figure_and_what_it_shows():
    paper = load(REPO / "config/paper.yaml")
    table = costs.plan(paper, COUNTERS, {})  # nothing timed
    sums = plan.per_target(table)
    targets = catalogue.targets(catalogue.reports(paper))
    assert list(sums.index) == [*targets, plan.TOTAL]
    # the allocation grids and the power analysis train nothing; every other target does
    without_runs = ["allocations", "power"]
    assert (sums.loc[without_runs, "jobs"] == 0).all() and (sums.drop(without_runs)["device_hours"] > 0).all()
    assert set(table["source"].str.split(":").str[0]) == {"assumed", "modelled (plan.lm_train)", "modelled (plan.bench)"}
    # Fig. 2 shows the small ConvLSTM sweep, train and evaluate per run; its target builds every Sokoban sweep run.
    small = [r for r in Study.of(paper.config).sokoban.sweeps if (r.sweep, r.budget) == ("convlstm", "small")]
    assert sums.loc["fig2", "shown_jobs"] == 2 * len(small)
    assert sums.loc["fig2", "jobs"] == 2 * len(Study.of(paper.config).sokoban.sweeps)
    # A job two targets share is counted once in the total; every GPU-hour is a job's seconds × its GPUs.
    distinct = table.drop_duplicates(["rule", "wildcards"])
    assert sums.loc[plan.TOTAL, "device_hours"] == pytest.approx(distinct["device_hours"].sum())
    lm = distinct[distinct["rule"] == "lm_train"]
    assert lm["device_hours"].tolist() == pytest.approx((lm["seconds"] * 4 / 3600).tolist())  # 4 GPUs per LM run
    # The recurrent L16 E1 at W = 1,024 took 15.28 s per update on one H200 (docs/benchmarks.md): 42 h for its run
    deep = lm.set_index("wildcards").loc["run=recurrent/small/W1024/L16-E1-d768", "seconds"] / 3600
    assert 42 / 2 < deep < 42 * 2
    # every LM training job finishes within its attempts (the longest needs four)
    assert lm["finishes"].all() and lm["attempts"].max() == 4


def timed_training_job(tmp_path):
    """A smoke Sokoban training job whose benchmark file says 42 s, in a results folder of this accelerator, its run
    folder recording its present definition (as the trainer does): (config, job, results folder, run folder)."""
    config = load(SMOKE)
    sweep = costs.jobs_by_result(config, COUNTERS, [paths.SOKOBAN_SWEEP])[paths.SOKOBAN_SWEEP]
    train = next(job for job in sweep if job.rule == "sokoban_train")
    results = tmp_path / "results"
    results.mkdir()
    (results / "config.json").write_text(json.dumps({"accelerator": config.accelerator}))
    (tmp_path / train.benchmark).parent.mkdir(parents=True)
    (tmp_path / train.benchmark).write_text("s\n42.0\n")
    folder = tmp_path / paths.run_dir("sokoban", train.run.id)
    with run_lock(folder, train.run.to_dict()):
        pass
    return config, train, results, folder


def test_earlier_attempts_add_to_the_training_job_only(tmp_path):
    """Two attempts stopped at their time limit (1,000 s and 500 s) before the last one: the run's training takes all
    three; its evaluation, its three probe-data jobs and its probe fit take only their own benchmark's seconds."""
    config = load(SMOKE)
    probed = costs.jobs_by_result(config, COUNTERS, [paths.SOKOBAN_PROBES])[paths.SOKOBAN_PROBES]
    run = probed[0].run
    jobs = [job for job in probed if job.run == run]
    assert sorted(job.rule for job in jobs) == ["sokoban_evaluate", "sokoban_probe_data", "sokoban_probe_data",
                                                "sokoban_probe_data", "sokoban_probe_fit", "sokoban_train"]
    results = tmp_path / "results"
    results.mkdir()
    (results / "config.json").write_text(json.dumps({"accelerator": config.accelerator}))
    own = {job: 10.0 + i for i, job in enumerate(jobs)}  # each job's benchmark: 10 s, 11 s, ...
    for job, seconds in own.items():
        (tmp_path / job.benchmark).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / job.benchmark).write_text(f"s\n{seconds}\n")
    folder = tmp_path / paths.run_dir("sokoban", run.id)
    with run_lock(folder, run.to_dict()):
        pass
    history = [{"event": "start", "update": 0, "seconds": 60}, {"event": "stop", "update": 2, "seconds": 1000.0},
               {"event": "start", "update": 2, "seconds": 60}, {"event": "stop", "update": 4, "seconds": 500.0},
               {"event": "start", "update": 4, "seconds": 60}]
    (folder / ATTEMPTS).write_text("".join(json.dumps(entry) + "\n" for entry in history))
    found = costs.measured(jobs, results, config.accelerator)
    assert found == {job: seconds + (1500.0 if job.rule == "sokoban_train" else 0.0) for job, seconds in own.items()}


def test_a_time_measured_for_another_definition_of_the_run_is_not_used(tmp_path):
    config, train, results, folder = timed_training_job(tmp_path)
    assert costs.measured([train], results, config.accelerator) == {train: 42.0}
    with run_lock(folder, train.run.to_dict() | {"seeds": [7]}):  # the config changed since: another run
        pass
    assert costs.measured([train], results, config.accelerator) == {}


def test_a_negative_attempt_is_refused_not_priced(tmp_path):
    """An attempt of -1e9 s would cut the plan's measured hours: it is named, with its line, instead."""
    config, train, results, folder = timed_training_job(tmp_path)
    (folder / ATTEMPTS).write_text('{"event": "stop", "update": 2, "seconds": -1e9}\n')
    with pytest.raises(PipelineError, match=re.escape(f"{folder / ATTEMPTS}, line 1: not an attempt's stop: update 2, "
                                                      "-1000000000.0 s; expected both at least 0 and finite")):
        costs.measured([train], results, config.accelerator)


def test_a_resubmitted_job_is_timed_over_all_its_attempts(tmp_path):
    """Snakemake's benchmark file times the last attempt; the attempts that stopped at their time limit noted
    the seconds they ran in the run folder."""
    config, train, results, folder = timed_training_job(tmp_path)
    history = [{"event": "start", "update": 0, "seconds": 60}, {"event": "stop", "update": 2, "seconds": 50.0},
               {"event": "start", "update": 2, "seconds": 60}, {"event": "stop", "update": 4, "seconds": 50.0},
               {"event": "start", "update": 4, "seconds": 60}]  # the last attempt finished: its benchmark's 42 s
    (folder / ATTEMPTS).write_text("".join(json.dumps(entry) + "\n" for entry in history))
    assert costs.measured([train], results, config.accelerator) == {train: 142.0}
    with run_lock(folder, train.run.to_dict() | {"seeds": [7]}):  # another definition: its attempts are gone
        pass
    assert not (folder / ATTEMPTS).exists()

"""The smoke DAG end to end: locally, through `snakemake --report`, and through a real SLURM cluster."""

import json
import subprocess
import sys

import pytest
import yaml
from helpers import REPO, live_markup, planned_jobs, snakemake, with_markup_in_every_string

from parallel_experts.config import files
from parallel_experts.reporting import render as reports
from parallel_experts.results import paths, store
from parallel_experts.targets import catalogue
from parallel_experts.sokoban.levels import LevelSet
from parallel_experts.study import Study

SMOKE = "config/smoke.yaml"


def check_outputs(workdir, config_file):
    index = (workdir / "reports/index.html").read_text()
    page = (workdir / "reports/allocations.html").read_text()
    assert 'href="allocations.html"' in index and config_file.name in index
    assert page.count('src="data:image/png;base64,') == 4  # ours and the authors', both domains
    assert reports.offline(page) == page  # nothing on the page loads from the network
    meta = json.loads((workdir / "results/reports/allocations.json").read_text())
    assert meta["scale"] == "smoke" and meta["config_files"] == [str(config_file)]
    sokoban = store.open_dataset(workdir / "results/allocations/sokoban.nc")
    assert sokoban["work_ratio"].values.tolist() == [1.0, 0.75]  # [2, 1, 8] vs [1, 1, 16]: 768/1024
    assert json.loads(sokoban.attrs["config"])["scale"] == "smoke"
    sweep = store.open_dataset(workdir / "results/sokoban/sweep.nc")
    assert sweep.sizes["run"] == 4 and set(sweep["recurrent"].values) == {True, False}
    for run in sweep["run"].values:  # every test level played exactly once per seed and mode
        evaluation = store.open_dataset(workdir / f"results/sokoban/runs/{run}/eval.nc")
        assert evaluation["level"].values.tolist() == list(range(20)) and evaluation.sizes["mode"] == 2
    test_levels = LevelSet.load(workdir / "results/sokoban/levels/test.npz")  # `pushes: 20`: every test level solved
    assert len(test_levels.pushes) == 20 and sweep.attrs["test_optimal_pushes_levels"] == 20
    assert sweep.attrs["test_mean_optimal_pushes"] == pytest.approx(test_levels.pushes.mean())
    assert "A push-optimal solution of a test level takes" in (workdir / "reports/sokoban_tables.html").read_text()
    probes = store.open_dataset(workdir / "results/sokoban/probes.nc")
    assert probes.sizes["run"] == 2 and probes.sizes["agent"] == 1 and probes.attrs["test_levels"] == 20
    assert probes["agent_seed"].values.tolist() == [[0], [0]]  # no sokoban.probes.seeds: each run's first seed
    solved = True
    for run in probes["run"].values:  # the probe data plays every test level; the scores count those all agents solve
        test = store.open_dataset(workdir / f"results/sokoban/probes/{run}/seed-0/test.nc")
        assert sorted(set(test["level"].values)) == list(range(20))
        evaluation = store.open_dataset(workdir / f"results/sokoban/runs/{run}/eval.nc")
        solved = solved & evaluation["solved"].sel(mode="greedy", seed=0).values  # the probed agent: seed 0
    assert probes["scored"].values.tolist() == solved.tolist() and probes.attrs["scored_levels"] == solved.sum()
    for name in ("sokoban_convlstm_small", "sokoban_depth", "sokoban_tables", "sokoban_table2", "sokoban_probe_recall",
                 "sokoban_probe_depth", "sokoban_plans", "lm_small_W16", "lm_depth", "lm_ablations"):
        assert f'href="{name}.html"' in index
    lm = store.open_dataset(workdir / "results/lm/sweep.nc")
    assert lm.sizes["run"] == 4 and set(lm["recurrent"].values) == {True, False}
    # Both families are scored on the same validation tokens: 20,000 tokens in 4 streams of 5,000, chunks of 64,
    # ⌊4,999/64⌋ = 78 chunks per stream, the first ⌈16/64⌉ = 1 of them unscored.
    assert lm["scored_tokens"].sel(seed=0).values.tolist() == [(78 - 1) * 4 * 64] * 4  # one seed, 0
    # The smoke ablation is the sweep's own run (its default rule): read from the sweep's files, not retrained.
    ablations = store.open_dataset(workdir / "results/lm/ablations.nc")
    shared = "recurrent/small/W16/L1-E2-d16"
    assert json.loads(ablations.attrs["ablations"]) == {"aggregation": [shared],
                                                        "kv_cache": [shared, f"{shared}-kv_expert"]}
    assert ablations["validation_loss"].sel(run=shared).item() == lm["validation_loss"].sel(run=shared).item()
    assert ablations["kv_cache"].values.tolist() == ["level", "expert"]  # the per-expert run trained and scored
    # Tables 5 and 6: the smoke config keeps the Transformer and recurrent L1 E16 (lm.latency.rows, .throughput.rows).
    decode = store.open_dataset(workdir / "results/lm/latency.nc")
    assert decode["allocation"].values.tolist() == ["Transformer L16 E1", "recurrent L1 E16"]
    assert decode["decode_seconds"].sizes["round"] == 3 and float(decode["ratio"][0, 0, 0]) == 1.0
    assert sorted(decode["position"].isel(context=0, batch=0).values[:, 0]) == [0, 1]  # each round: both, in turn
    training = store.open_dataset(workdir / "results/lm/throughput.nc")
    assert training["batch"].values.tolist() == [4] and not training["oom"].any()  # 64 tokens = 4 streams of 16
    assert training["round_seconds"].notnull().all() and training.sizes["round"] == 3
    for name in ("lm_latency", "lm_throughput"):
        assert f'href="{name}.html"' in index
    # The config's power draws hold for both analyses, the paper's included (workflow/rules/reports.smk).
    assert {json.loads((workdir / path).read_text())["draws"] for path in (paths.POWER, paths.PAPER_POWER)} == {500}


def with_markup(workdir):
    """The smoke config with markup in every string that its checks accept it in (the description, the plan's device,
    the power analysis's reasons, the corpus's file names, `external`), on the smoke corpus: the workflow's file, and
    the whole config (markup corpus included) as JSON for the report command."""
    smoke = files.load([REPO / SMOKE])
    config, strings = with_markup_in_every_string(smoke, workdir)
    assert strings == 11, strings
    # Other corpus files would retrain every LM run (their tokens change): the workflow runs on the smoke corpus,
    # and the LM depth page, which lists the files, is rendered by the report command from the same results.
    (workdir / "markup.json").write_text(json.dumps(config))
    on_smoke_corpus = config | {"lm": config["lm"] | {"corpus": smoke["lm"]["corpus"]}}
    (workdir / "markup.yaml").write_text(yaml.safe_dump(on_smoke_corpus))
    return workdir / "markup.yaml"


def check_figures(workdir):
    """Every figure every page showed passed the figure check (reporting.figure_check), as its sidecar says."""
    sidecars = {path.name: json.loads(path.read_text()) for path in (workdir / "results/reports").glob("*.json")}
    assert len(sidecars) >= 16 and all("figure_defects" in meta for meta in sidecars.values())
    assert {name: meta["figure_defects"] for name, meta in sidecars.items() if meta["figure_defects"]} == {}


def check_no_markup_from_config_strings(workdir):
    """Every page shows the markup of the config's strings as typed, none runs it."""
    config = json.loads((workdir / "markup.json").read_text())
    depth = next(report for report in catalogue.reports(Study.of(config)) if report.name == "lm_depth")
    page = workdir / "corpus_files.html"
    parameters = [f"{name}={value}" for name, value in {**depth.inputs, **depth.params}.items()]
    rendered = subprocess.run(
        [sys.executable, "-m", "parallel_experts", "report", "--config", "markup.json", "--html", page,
         "--notebook", REPO / f"workflow/notebooks/{depth.notebook}.ipynb", "--executed", workdir / "depth.ipynb",
         "--meta", workdir / "depth.json", "--param", *parameters], cwd=workdir, capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr[-3000:]
    pages = {page.name: live_markup(page.read_text()) for page in [*(workdir / "reports").glob("*.html"), page]}
    assert {name: live for name, (live, _) in pages.items() if live} == {}
    shown = {name: count for name, (_, count) in pages.items()}
    assert min(shown.values()) >= 1, shown  # the description, on every page and the index
    # The reasons of the four families the smoke config models (it models no ablation decision); the corpus files.
    assert shown["power.html"] >= 1 + 4 and shown[page.name] >= 1 + 2, shown


@pytest.mark.pipeline
def test_smoke_dag_runs_locally_and_is_idempotent(tmp_path):
    """The smoke DAG, with markup in every config string (one run: a second, for the markup, re-rendered every page
    for two minutes), then nothing to do, Snakemake's report, and what a config edit replans."""
    config = with_markup(tmp_path)
    jobs = planned_jobs("--directory", str(tmp_path), configfile=config)
    run = snakemake("--cores", "2", "--configfile", str(config), "--directory", str(tmp_path), timeout=1200)
    assert run.returncode == 0, run.stderr[-3000:]
    check_outputs(tmp_path, config)
    check_no_markup_from_config_strings(tmp_path)
    check_figures(tmp_path)
    logs = list((tmp_path / "results/logs").rglob("*.log"))
    assert len(logs) == sum(jobs.values()) - jobs["all"], jobs  # every job that runs a command has a log
    benchmarks = list((tmp_path / "results/benchmarks").rglob("*.tsv"))
    timed = ("sokoban_train", "sokoban_evaluate", "sokoban_probe_data", "sokoban_probe_fit", "lm_train",
             "lm_evaluate", "lm_latency", "lm_throughput")
    assert len(benchmarks) == sum(jobs[rule] for rule in timed)  # training, evaluation and probe jobs are timed

    again = snakemake("--cores", "2", "--configfile", str(config), "--directory", str(tmp_path), "-n")
    assert "Nothing to be done" in again.stdout + again.stderr

    report = snakemake("--configfile", str(config), "--directory", str(tmp_path), "--report", "snakemake-report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    assert (tmp_path / "snakemake-report.html").stat().st_size > 10_000

    # A config edit retrains exactly the runs whose definition it changes, in the same invocation; the smoke config
    # itself (no markup) trains the same runs.
    edited = tmp_path / "edited.yaml"
    edited.write_text((REPO / SMOKE).read_text().replace("time_limit: 20}", "time_limit: 21}"))
    assert planned_jobs("--directory", str(tmp_path), configfile=edited)["sokoban_train"] == jobs["sokoban_train"]
    replanned = set(planned_jobs("--directory", str(tmp_path), configfile=REPO / SMOKE))
    assert not {"sokoban_train", "lm_train"} & replanned  # but every page shows the description, and the digest:
    report_rules = {rule for rule in jobs if rule.startswith("report_")}
    assert {"index", "plan_costs", "power_analysis"} | report_rules <= replanned
